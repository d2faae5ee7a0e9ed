"""Which preprocessing steps a stream may pass through: those that learn nothing from the rows, or are frozen.

An online evidence is ``log p(y_1..y_n | features)`` with the features fixed
for the whole stream. A preprocessing step that learned from the rows (a
scaler's means, a spline's quantile knots) would either be refitted on each
chunk, changing the features the earlier chunks were scored on, or be fitted
on all rows first, letting the data choose its own features; neither gives the
evidence of one fixed model. A step may therefore be streamed through when

- it is frozen (:class:`sklearn.frozen.FrozenEstimator` around a fitted
  transformer): its features are fixed before the stream starts;
- its scikit-learn tags say it needs no fit (``requires_fit=False``:
  ``FunctionTransformer``, ``Normalizer``, ``Binarizer``, ...);
- its fit learns only the input's width: scikit-learn's own
  ``PolynomialFeatures``, ``SplineTransformer`` with explicit knots (an array),
  and the compositions ``ColumnTransformer``, ``FeatureUnion`` and ``Pipeline``
  whose parts all qualify. These are fitted on the stream's first chunk.

Everything else is refused with the cure: freeze it after fitting it on a first
batch, or apply it to the data beforehand. The shape-only list names exact
types, since a subclass may learn more in its ``fit``; a transformer of one's
own that learns nothing declares ``requires_fit=False`` in its
``__sklearn_tags__``.
"""

from sklearn.compose import ColumnTransformer
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import PolynomialFeatures, SplineTransformer
from sklearn.utils import get_tags

from ..utils._validation import check_is_fitted

__all__ = ["check_streamable_steps", "stream_refusal"]

#: Transformers whose ``fit`` learns only the input's width (exact types: a subclass may learn more).
SHAPE_ONLY = (PolynomialFeatures,)

_CURE = ("freeze it after fitting it on a first batch, `FrozenEstimator(step.fit(X_first))` (sklearn.frozen), or "
         "transform the data with it before the stream")


def _is_passthrough(step):
    return step is None or (isinstance(step, str) and step in ("passthrough", "drop"))


def _parts(step):
    """The sub-transformers of a composition (None for a plain transformer)."""
    if type(step) is ColumnTransformer:
        return [transformer for _, transformer, _ in step.transformers] + [step.remainder]
    if type(step) is FeatureUnion:
        return [transformer for _, transformer in step.transformer_list]
    if type(step) is Pipeline:
        return [transformer for _, transformer in step.steps]
    return None


def stream_refusal(step):
    """Why a stream cannot pass through ``step``, or None when it can.

    Parameters
    ----------
    step : transformer, "passthrough", "drop" or None
        One preprocessing step (or a part of a composition).

    Returns
    -------
    reason : str or None
        A sentence naming the problem and its cure; None for a step that is
        frozen, declares ``requires_fit=False``, or learns only the input's
        width (see the module's docstring).

    Examples
    --------
    >>> from sklearn.preprocessing import PolynomialFeatures, StandardScaler
    >>> stream_refusal(PolynomialFeatures(2)) is None
    True
    >>> print(stream_refusal(StandardScaler()))  # doctest: +ELLIPSIS
    StandardScaler learns from the rows it is fitted on; freeze it after fitting it on a first batch, ...
    """
    if _is_passthrough(step):
        return None
    name = type(step).__name__
    if isinstance(step, FrozenEstimator):
        try:
            check_is_fitted(step.estimator)
        except (NotFittedError, TypeError):
            return (f"FrozenEstimator({type(step.estimator).__name__}) wraps an unfitted estimator; fit it before "
                    "freezing it: FrozenEstimator(step.fit(X_first))")
        return None
    parts = _parts(step)
    if parts is not None:
        reasons = [reason for reason in map(stream_refusal, parts) if reason is not None]
        return f"{name} has a part that cannot be streamed through: {reasons[0]}" if reasons else None
    if type(step) is SplineTransformer:
        if isinstance(step.knots, str):
            return (f"SplineTransformer(knots={step.knots!r}) places its knots from the rows it is fitted on; give "
                    "the knots explicitly (knots=an array of shape (n_knots, n_features)) or "
                    + _CURE)
        return None
    if type(step) in SHAPE_ONLY:
        return None
    try:
        requires_fit = get_tags(step).requires_fit
    except (AttributeError, TypeError, ValueError):
        requires_fit = True
    if not requires_fit:
        return None
    return f"{name} learns from the rows it is fitted on; {_CURE}"


def check_streamable_steps(pipeline, name=None):
    """Raise a TypeError naming the step and the cure when a stream cannot pass through ``pipeline[:-1]``.

    Parameters
    ----------
    pipeline : Pipeline
    name : str, default=None
        The candidate's name, for the message.

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from evidence_select import BayesianLinearRegressor
    >>> check_streamable_steps(make_pipeline(StandardScaler(), BayesianLinearRegressor()))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: pipeline step 'standardscaler': StandardScaler learns from the rows it is fitted on; ...
    """
    where = "pipeline" if name is None else f"candidate {name!r}: pipeline"
    for step_name, step in pipeline.steps[:-1]:
        reason = stream_refusal(step)
        if reason is not None:
            raise TypeError(f"{where} step {step_name!r}: {reason}. The evidence is that of one fixed feature map, "
                            "so no step may learn from the streamed rows")
    if getattr(pipeline, "transform_input", None) is not None or getattr(pipeline, "memory", None) is not None:
        raise ValueError(f"{where}: memory and transform_input must be None (the preprocessing is fitted once, "
                         "on the first chunk, so there is nothing to cache or route)")
