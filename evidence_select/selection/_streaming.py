"""Streaming through preprocessing (scikit-learn pipelines have no ``partial_fit``).

:func:`partial_fit_pipeline` continues the stream of any pipeline whose
preprocessing was fitted beforehand; :class:`EvidencePipeline` is a pipeline
that streams by itself through preprocessing that learns nothing from the rows
(checked), and exposes its last step's evidence, as the selector's candidates do.
"""

import copy

from sklearn.exceptions import NotFittedError
from sklearn.pipeline import Pipeline

from ..utils._validation import check_is_fitted
from ._stateless import check_streamable_steps

__all__ = ["EvidencePipeline", "check_evidence_step", "evidence_step_rows", "partial_fit_pipeline"]


def partial_fit_pipeline(pipeline, X, y=None, **partial_fit_params):
    """Continue the stream of a pipeline's last step through its fitted preprocessing.

    Transforms ``X`` with every step but the last, which must already be fitted
    (on an initial chunk, say) and stays frozen, then calls the last step's
    ``partial_fit``. Refitting the preprocessing mid-stream would change the
    features the online evidences were computed on, so it is never done here.

    Parameters
    ----------
    pipeline : Pipeline
        A pipeline whose last step has ``partial_fit`` (e.g. an
        :class:`EvidenceModelSelector` or an online estimator).
    X : array-like of shape (n_samples, n_features)
        The next chunk, in the pipeline's input space.
    y : array-like of shape (n_samples,), default=None
        Targets of the chunk; None for density estimators.
    **partial_fit_params : dict
        Passed to the last step's ``partial_fit`` (e.g. ``classes=`` on its
        first call).

    Returns
    -------
    pipeline : Pipeline
        The same pipeline, its last step advanced.

    See Also
    --------
    EvidencePipeline : A pipeline that streams by itself through preprocessing that learns nothing from the rows.

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from evidence_select import BayesianLinearRegressor, partial_fit_pipeline
    >>> from evidence_select.datasets import make_linear_regression
    >>> data = make_linear_regression(1500, random_state=0)
    >>> pipe = make_pipeline(StandardScaler(), BayesianLinearRegressor(random_state=0))
    >>> pipe = pipe.fit(data.X[:500], data.y[:500])  # fits the scaler once, then streams
    >>> pipe = partial_fit_pipeline(pipe, data.X[500:], data.y[500:])
    >>> pipe[-1].n_samples_seen_
    1500
    """
    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"partial_fit_pipeline needs a sklearn Pipeline; got {type(pipeline).__name__}")
    last = pipeline.steps[-1][1]
    if not hasattr(last, "partial_fit"):
        raise TypeError(f"the last step of the pipeline, {type(last).__name__}, has no partial_fit")
    Xt = pipeline[:-1].transform(X) if len(pipeline) > 1 else X
    last.partial_fit(Xt, *(() if y is None else (y,)), **partial_fit_params)
    return pipeline


def _is_fitted(estimator):
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


def check_evidence_step(pipeline, name=None):
    """Raise a TypeError unless ``pipeline``'s last step streams an evidence and its other steps may be streamed
    through (:func:`~evidence_select.selection._stateless.check_streamable_steps`).

    Parameters
    ----------
    pipeline : Pipeline
    name : str, default=None
        The candidate's name, for the messages.
    """
    where = "pipeline" if name is None else f"candidate {name!r} (Pipeline)"
    last = pipeline.steps[-1][1]
    missing = [attr for attr in ("partial_fit", "log_evidence_", "log_evidence_std_") if not hasattr(type(last), attr)]
    if missing:
        raise TypeError(f"{where}: its last step, {type(last).__name__}, does not define {' or '.join(missing)}; the "
                        "last step must be an online evidence estimator such as BayesianLinearRegressor")
    check_streamable_steps(pipeline, name)


def evidence_step_rows(estimator, X):
    """``(evidence estimator, its rows)``: a fitted pipeline's last step and ``X`` through its preprocessing,
    or ``(estimator, X)`` for any other estimator (what a reference backend recomputes the evidence on)."""
    if isinstance(estimator, Pipeline):
        return estimator.steps[-1][1], (estimator[:-1].transform(X) if len(estimator) > 1 else X)
    return estimator, X


class EvidencePipeline(Pipeline):
    """A :class:`~sklearn.pipeline.Pipeline` that streams: ``partial_fit`` through fixed preprocessing.

    The last step is an online evidence estimator (such as
    :class:`~evidence_select.BayesianLinearRegressor`); the others must be
    stateless or frozen (see Notes), so that every chunk passes through the
    same feature map and the evidence is that of one fixed model of the
    transformed features. The pipeline exposes its last step's evidence
    (``log_evidence_``, ``log_evidence_std_``, ``evidence_history_``,
    ``evidence_checks_``, ``n_samples_seen_``); predictions go through the
    whole pipeline. :class:`~evidence_select.EvidenceModelSelector` streams any
    ``Pipeline`` candidate as one of these, which is how it compares feature
    subsets and feature maps (see :func:`feature_subset_candidates`).

    Parameters
    ----------
    steps : list of (str, estimator) tuples
        As for :class:`~sklearn.pipeline.Pipeline`.
    transform_input : None
        Must be None (nothing to route: the preprocessing is fitted once).
    memory : None
        Must be None (nothing to cache).
    verbose : bool, default=False
        Unused; kept for :class:`~sklearn.pipeline.Pipeline`'s signature.

    Attributes
    ----------
    log_evidence_ : float
        The last step's log evidence of all rows streamed.
    log_evidence_std_ : float
        Its standard error.
    evidence_history_ : list of ChunkRecord
        The last step's per-chunk records.
    evidence_checks_ : tuple of str
        The last step's failed evidence checks.
    n_samples_seen_ : int
        Rows streamed.

    See Also
    --------
    partial_fit_pipeline : Stream a pipeline whose preprocessing was fitted beforehand.
    EvidenceModelSelector : Select and average candidates, pipelines included.

    Notes
    -----
    A step that learned from the rows would change the features mid-stream (if
    refitted per chunk) or choose them with the data (if fitted on all of it),
    so the evidence would not be that of one model. Accepted steps: frozen ones
    (:class:`sklearn.frozen.FrozenEstimator`), those whose tags say they need no
    fit (``FunctionTransformer``, ``Normalizer``, ...), and those whose fit
    learns only the input's width (``PolynomialFeatures``, ``SplineTransformer``
    with explicit ``knots``, and ``ColumnTransformer``, ``FeatureUnion`` or
    ``Pipeline`` made of such parts), which are fitted on the first chunk.
    Anything else (a ``StandardScaler``, a ``SplineTransformer`` placing its
    knots at quantiles) raises a TypeError naming the cure: fit it on a first
    batch and freeze it, or transform the data before the stream.

    The evidence is that of the rows *after* the preprocessing: for a
    regressor or classifier, ``p(y | features)``, comparable between
    candidates with different features (the same ``y``); for a density
    estimator, the density of the transformed rows, comparable only between
    candidates that see the same transformed rows (the selector refuses
    density candidates that use different input columns).

    ``fit`` forgets the past and gives the last step's ``fit`` of the
    transformed rows (which streams them in its own seeded order when its
    ``shuffle`` is on); ``partial_fit`` gives the last step's ``partial_fit``
    of the transformed rows, bit for bit for the same seed. A failed call
    leaves the pipeline as it was.

    Examples
    --------
    >>> from sklearn.compose import ColumnTransformer
    >>> from evidence_select import BayesianLinearRegressor
    >>> from evidence_select.datasets import make_linear_regression
    >>> from evidence_select.selection import EvidencePipeline
    >>> data = make_linear_regression(1000, random_state=0)
    >>> pipe = EvidencePipeline([("columns", ColumnTransformer([("keep", "passthrough", [0, 1, 2])])),
    ...                          ("model", BayesianLinearRegressor(random_state=0))])
    >>> pipe = pipe.partial_fit(data.X[:500], data.y[:500]).partial_fit(data.X[500:], data.y[500:])
    >>> pipe.n_samples_seen_, pipe[-1].n_features_in_
    (1000, 3)
    >>> direct = BayesianLinearRegressor(random_state=0)
    >>> direct = direct.partial_fit(data.X[:500, :3], data.y[:500]).partial_fit(data.X[500:, :3], data.y[500:])
    >>> bool(pipe.log_evidence_ == direct.log_evidence_)
    True
    """

    def fit(self, X, y=None, **fit_params):
        """Forget any past rows and stream ``(X, y)`` through the preprocessing into the last step's ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Targets; None for density estimators.
        **fit_params : dict
            Passed to the last step's ``fit``.

        Returns
        -------
        self : EvidencePipeline
        """
        return self._stream(X, y, fit_params, reset=True)

    def partial_fit(self, X, y=None, **partial_fit_params):
        """Continue the stream with ``(X, y)``; the first call fits the shape-only steps on ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Targets; None for density estimators.
        **partial_fit_params : dict
            Passed to the last step's ``partial_fit`` (e.g. ``classes=`` on the
            first call of a classifier).

        Returns
        -------
        self : EvidencePipeline
        """
        return self._stream(X, y, partial_fit_params, reset=False)

    def _stream(self, X, y, params, *, reset):
        """Advance the last step by the transformed rows; on a first call fit copies of the preprocessing first
        and commit them only once the last step has succeeded (so a failure leaves the pipeline as it was)."""
        check_evidence_step(self)
        last_name, last = self.steps[-1]
        if not (reset or not _is_fitted(last)):
            return partial_fit_pipeline(self, X, y, **params)
        # A plain Pipeline of copies (a slice of self would be an EvidencePipeline, whose fit streams).
        head = Pipeline(copy.deepcopy(self.steps[:-1])).fit(X) if len(self) > 1 else None
        if reset:
            last.fit(head.transform(X) if head is not None else X, *(() if y is None else (y,)), **params)
        else:
            partial_fit_pipeline(Pipeline([*([] if head is None else head.steps), (last_name, last)]), X, y,
                                 **params)
        if head is not None:
            self.steps[:-1] = head.steps
        return self

    def __copy__(self):
        """A shallow copy whose last step is a shallow copy too: setting an evidence attribute on the copy
        (``evidence_history_``) leaves the original's last step alone."""
        duplicate = type(self).__new__(type(self))
        duplicate.__dict__.update(self.__dict__)
        duplicate.steps = [*self.steps[:-1], (self.steps[-1][0], copy.copy(self.steps[-1][1]))]
        return duplicate

    # -- the last step's evidence ---------------------------------------------------------
    @property
    def log_evidence_(self):
        """The last step's log evidence of all rows streamed (float)."""
        return self._final_estimator.log_evidence_

    @property
    def log_evidence_std_(self):
        """Standard error of ``log_evidence_`` (float)."""
        return self._final_estimator.log_evidence_std_

    @property
    def evidence_checks_(self):
        """The last step's failed evidence checks (tuple of str)."""
        return self._final_estimator.evidence_checks_

    @property
    def n_samples_seen_(self):
        """Rows streamed (int)."""
        return self._final_estimator.n_samples_seen_

    @property
    def evidence_history_(self):
        """The last step's per-chunk records (list of ChunkRecord)."""
        return self._final_estimator.evidence_history_

    @evidence_history_.setter
    def evidence_history_(self, history):
        self._final_estimator.evidence_history_ = history
