"""``log_evidence``: one entry point and one result type for every evidence method."""

import time

import numpy as np
from sklearn.base import clone

from ..models import Model
from ..backends._exact import exact_log_evidence_and_error
from ..utils._threads import single_threaded_blas
from .._result import EvidenceResult, failed_checks
from ..sgais._engine import SGAISConfig, sgais_stream
from ..sgais._checks import evidence_diagnostics, raise_notices, reported_estimate

__all__ = ["log_evidence", "METHODS", "no_data"]

METHODS = ("exact", "ais", "ns", "bridge", "sgais")


def no_data():
    """The data a model without data is evaluated on: one row with no features, ``(1, 0)``.

    The no-data rule: a :class:`~evidence_select.models.Model` whose likelihood
    is a function of ``theta`` alone receives this ``X`` (and ``y=None``) from
    every evidence method; its ``log_likelihood`` returns ``log L(theta)`` as
    the single column, so one likelihood call is one row.

    Returns
    -------
    X : ndarray of shape (1, 0)

    Examples
    --------
    >>> no_data().shape
    (1, 0)
    """
    return np.empty((1, 0))


def _model_data(X, y):
    """A model's data as the backends take it: ``X=None`` is the no-data row (see :func:`no_data`)."""
    if X is None:
        if y is not None:
            raise ValueError("y was given without X; a model without data takes X=None and y=None")
        return no_data(), None
    return np.asarray(X, dtype=float), y


def _reference_backend(method):
    # Imported lazily: the reference backends are heavier and only needed on request.
    if method == "ais":
        from ..backends._ais import ais_log_evidence

        return ais_log_evidence
    if method == "ns":
        from ..backends._ns import nested_sampling_log_evidence

        return nested_sampling_log_evidence
    from ..backends._bridge import bridge_log_evidence

    return bridge_log_evidence


def _model_and_data(estimator, X, y):
    """The estimator's model and its validated, encoded data, without fitting anything."""
    shell = clone(estimator)
    X, y = shell._validate_stream(X, y, None, reset=True)
    return shell._make_model(X.shape[1]), X, y


def _sgais_on_model(model, X, y, random_state, **settings):
    """The engine's stream over the rows, as the estimators run it (the same chunk updates and checks, the last
    chunk checked): ``(state, config, history)``."""
    X = np.asarray(X, dtype=float)
    config = SGAISConfig(**settings)
    history = []
    with single_threaded_blas():
        state = sgais_stream(np.random.default_rng(random_state), model, config, X, y, history=history)
    raise_notices(history)
    return state, config, history


def log_evidence(estimator_or_model, X=None, y=None, *, method, random_state=None, verbose=0, **method_kwargs):
    """Log marginal likelihood of ``(X, y)`` under a model, by any method.

    Parameters
    ----------
    estimator_or_model : estimator or Model
        A :class:`BayesianLinearRegressor`, :class:`BayesianLogisticClassifier`,
        :class:`BayesianMixture` (its hyperparameters define the model; it is not
        modified), or any :class:`~evidence_select.models.Model`.
    X : array-like of shape (n_samples, n_features) or None, default=None
        The data. None only for a Model without data, whose likelihood is a
        function of the parameters alone: it is then evaluated on one row with
        no features (``np.empty((1, 0))``), so its
        ``log_likelihood`` returns ``log L(theta)`` as one column.
    y : array-like of shape (n_samples,), default=None
        Targets (class labels for the classifier); None for density models.
    method : {"exact", "ais", "ns", "bridge", "sgais"}
        ``"exact"`` where analytic (the linear model, a one-component mixture, the
        conjugate and calibration models); ``"ais"``, ``"ns"`` and
        ``"bridge"`` are the full-data reference backends; ``"sgais"`` streams the
        data through the online estimator (same result as its ``log_evidence_``
        for the same seed).
    random_state : int or None, default=None
        Seed. For ``"sgais"`` with an estimator, None keeps the estimator's own.
    verbose : int, default=0
        Progress output of the backend.
    **method_kwargs
        Settings of the method (e.g. ``n_live`` for NS, ``n_chains`` for AIS,
        estimator parameters for SGAIS).

    Returns
    -------
    result : EvidenceResult

    Raises
    ------
    ValueError
        For an unknown method or one that does not apply to the model.

    Examples
    --------
    >>> from evidence_select import BayesianLinearRegressor, log_evidence
    >>> from evidence_select.datasets import make_linear_regression
    >>> data = make_linear_regression(500, random_state=0)
    >>> exact = log_evidence(BayesianLinearRegressor(), data.X, data.y, method="exact")
    >>> online = log_evidence(BayesianLinearRegressor(), data.X, data.y, method="sgais", random_state=0)
    >>> bool(abs(online.log_evidence - exact.log_evidence) < 5 * online.log_evidence_std + 0.5)
    True

    A model without data (here Neal's funnel as a likelihood of the parameters) takes no ``X``:

    >>> from evidence_select.testing import FunnelTarget
    >>> funnel = FunnelTarget(4)
    >>> result = log_evidence(funnel, method="ns", n_live=200, random_state=0)
    >>> bool(abs(result.log_evidence - funnel.exact_log_evidence()) < 4 * result.log_evidence_std + 0.5)
    True
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    is_model = isinstance(estimator_or_model, Model)
    if not is_model and not hasattr(estimator_or_model, "_make_model"):
        raise TypeError("log_evidence needs an evidence_select estimator or a Model (the model protocol); "
                        f"got {type(estimator_or_model).__name__}")
    if X is None and method == "sgais":
        # SGAIS anneals data in row by row with mini-batch gradients; a likelihood of the parameters alone is
        # one row it cannot split, and its SGHMC step sizes assume many of them.
        raise ValueError('method="sgais" streams data and needs X; for a model without data use "ns", "ais" '
                         'or "bridge"')
    if X is None and not is_model:
        raise ValueError(f"X is required for the estimator {type(estimator_or_model).__name__}; only a Model "
                         "without data takes X=None")
    tic = time.perf_counter()
    if method == "sgais" and not is_model:
        settings = {} if random_state is None else {"random_state": random_state}
        est = clone(estimator_or_model).set_params(**settings, **method_kwargs)
        est.fit(X, y) if y is not None else est.fit(X)
        state = est.sgais_state_
        n_rows = est.n_samples_seen_
        diagnostics = evidence_diagnostics(state, est.evidence_history_, est.sgais_config_)
        return EvidenceResult(est.log_evidence_, est.log_evidence_std_, "sgais",
                              state.n_datum_evaluations / max(n_rows, 1), state.n_datum_evaluations,
                              time.perf_counter() - tic, settings=est.get_params(), samples=est.particles_,
                              log_weights=est.log_weights_, info={"evidence_history": est.evidence_history_},
                              diagnostics=diagnostics, converged=not failed_checks(diagnostics))
    model, X, y = (estimator_or_model, *_model_data(X, y)) if is_model \
        else _model_and_data(estimator_or_model, X, y)
    if method == "exact":
        value, error = exact_log_evidence_and_error(model, X, y)  # error: a quadrature's bound, else 0
        return EvidenceResult(value, error, "exact", 1.0, len(X), time.perf_counter() - tic)
    if method == "sgais":
        state, config, history = _sgais_on_model(model, X, y, random_state, **method_kwargs)
        log_z, std = reported_estimate(state, history)
        diagnostics = evidence_diagnostics(state, history, config)
        return EvidenceResult(log_z, std, "sgais", state.n_datum_evaluations / max(len(X), 1),
                              state.n_datum_evaluations, time.perf_counter() - tic, settings=config._asdict(),
                              samples=state.particles, log_weights=state.log_weights.ravel(),
                              info={"evidence_history": history}, diagnostics=diagnostics,
                              converged=not failed_checks(diagnostics))
    return _reference_backend(method)(model, X, y, random_state=random_state, verbose=verbose, **method_kwargs)
