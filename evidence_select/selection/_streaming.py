"""Streaming through a fitted preprocessing pipeline (scikit-learn pipelines have no ``partial_fit``)."""

from sklearn.pipeline import Pipeline

__all__ = ["partial_fit_pipeline"]


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
