"""Exact (analytic) evidence, where the model admits one."""

from ..models import LinearEvidenceStats

__all__ = ["exact_log_evidence", "exact_log_evidence_and_error", "has_exact_evidence"]


def has_exact_evidence(model):
    """True when ``model`` provides an analytic ``exact_log_evidence(X, y)``.

    A model whose analytic evidence holds only for some settings (the Gaussian
    mixture: one component) says so with an ``exact_evidence_available`` attribute.

    Parameters
    ----------
    model : Model
        Any object of the model protocol.

    Returns
    -------
    available : bool

    Examples
    --------
    >>> from evidence_select.evidence import has_exact_evidence
    >>> from evidence_select.models import GaussianMixtureModel, LinearGaussianModel
    >>> has_exact_evidence(LinearGaussianModel(n_features=2))
    True
    >>> has_exact_evidence(GaussianMixtureModel(n_components=2, n_features=2))
    False
    >>> has_exact_evidence(GaussianMixtureModel(n_components=1, n_features=2))
    True
    """
    return callable(getattr(model, "exact_log_evidence", None)) and bool(getattr(model, "exact_evidence_available",
                                                                                   True))


def exact_log_evidence(model, X, y=None):
    """Analytic ``log p(y | X)`` (or ``log p(X)``) of ``model``.

    The same number as ``log_evidence(model, X, y, method="exact").log_evidence``,
    without the result object; the reference that every estimator is checked
    against on the linear-Gaussian model.

    Parameters
    ----------
    model : Model
        A model with an ``exact_log_evidence(X, y)`` method, such as
        :class:`~evidence_select.models.LinearGaussianModel`.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,), default=None
        Targets; None for density models.

    Returns
    -------
    log_evidence : float

    Raises
    ------
    ValueError
        If the model has no analytic evidence (e.g. the Gaussian mixture with more than one
        component).

    See Also
    --------
    log_evidence : The same by any method, with an error and a cost.

    Examples
    --------
    >>> from evidence_select import exact_log_evidence
    >>> from evidence_select.datasets import make_linear_regression
    >>> from evidence_select.models import LinearGaussianModel
    >>> data = make_linear_regression(100, random_state=0)
    >>> round(exact_log_evidence(LinearGaussianModel(n_features=5), data.X, data.y), 2)
    -155.53
    """
    if not has_exact_evidence(model):
        settings = " with these settings" if callable(getattr(model, "exact_log_evidence", None)) else ""
        raise ValueError(f"method='exact' is not available for {type(model).__name__}: it has no analytic "
                         f"evidence{settings}; use method='ais', 'ns', 'bridge' or 'sgais'")
    return float(model.exact_log_evidence(X, y))


def exact_log_evidence_and_error(model, X, y=None):
    """:func:`exact_log_evidence` and a bound on its numerical error (nats).

    Closed forms have no error beyond rounding (0 is returned); a model whose
    evidence needs a quadrature (the linear model with a learned weights' scale)
    bounds its error with ``exact_log_evidence_and_error(X, y)``.

    Parameters
    ----------
    model : Model
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,), default=None

    Returns
    -------
    log_evidence : float
    error : float

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.evidence import exact_log_evidence_and_error
    >>> from evidence_select.models import LinearHyperModel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)); y = X @ [0.5, -1.0] + rng.normal(size=100)
    >>> value, error = exact_log_evidence_and_error(LinearHyperModel(n_features=2), X, y)
    >>> error < 1e-9
    True
    """
    if callable(getattr(model, "exact_log_evidence_and_error", None)):
        value, error = model.exact_log_evidence_and_error(X, y)
        return float(value), float(error)
    return exact_log_evidence(model, X, y), 0.0


__all__ += ["LinearEvidenceStats"]
