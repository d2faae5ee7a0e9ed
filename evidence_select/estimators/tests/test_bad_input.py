"""Bad-input catalogue: every case raises a clear error naming the problem, and leaves
an already fitted estimator bit-identical (particles, weights, reservoir, generator, history)."""

import numpy as np
import pytest
import scipy.sparse

from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture, log_evidence
from evidence_select.datasets import make_linear_regression, make_mixture, make_softmax_classification

from ._state import fingerprint as _fingerprint

FAST = dict(n_particles=4, n_replicates=2, batch_size=100, n_mcmc_steps=2, random_state=0)
LIN = make_linear_regression(200, random_state=0)
SOFT = make_softmax_classification(200, random_state=0)
SOFT_X = SOFT.X[:, :3]
MIX = make_mixture(200, random_state=0)


def _fitted(kind):
    if kind == "linear":
        return BayesianLinearRegressor(**FAST).fit(LIN.X, LIN.y), LIN.X, LIN.y
    if kind == "logistic":
        return BayesianLogisticClassifier(**FAST).partial_fit(SOFT_X, SOFT.y, classes=[0, 1, 2, 3]), SOFT_X, SOFT.y
    return BayesianMixture(2, **FAST).fit(MIX.X), MIX.X, None


def _with(X, row, col, value):
    X = X.astype(object if isinstance(value, str) else (complex if isinstance(value, complex) else float))
    X[row, col] = value
    return X


# (case id, function of (X, y) -> (X_bad, y_bad, extra kwargs), error type, message pattern)
X_CASES = [
    ("nan", lambda X, y: (_with(X, 3, 0, np.nan), y, {}), ValueError, "NaN"),
    ("+inf", lambda X, y: (_with(X, 0, 1, np.inf), y, {}), ValueError, "infinity"),
    ("-inf", lambda X, y: (_with(X, 5, 0, -np.inf), y, {}), ValueError, "infinity"),
    ("empty", lambda X, y: (X[:0], None if y is None else y[:0], {}), ValueError, "0 sample"),
    ("1-d X", lambda X, y: (X[:, 0], y, {}), ValueError, "Expected 2D array"),
    ("3-d X", lambda X, y: (X[:, :, None], y, {}), ValueError, "dim 3"),
    ("wrong n_features", lambda X, y: (np.hstack([X, X[:, :1]]), y, {}), ValueError, "features"),
    ("strings", lambda X, y: (_with(X, 0, 0, "a"), y, {}), ValueError, "could not convert|string"),
    ("complex", lambda X, y: (_with(X, 0, 0, 1 + 2j), y, {}), ValueError, "Complex data not supported"),
    ("sparse", lambda X, y: (scipy.sparse.csr_matrix(X), y, {}), TypeError, "[Ss]parse"),
]
Y_CASES = [
    ("y wrong length", lambda X, y: (X, y[:-1], {}), ValueError, "inconsistent numbers of samples"),
    ("y 2-d", lambda X, y: (X, np.c_[y, y], {}), ValueError, "y should be a 1d array"),
]
KINDS = ["linear", "logistic", "mixture"]
CATALOGUE = [(kind, *case) for kind in KINDS for case in X_CASES] + \
            [(kind, *case) for kind in ("linear", "logistic") for case in Y_CASES] + [
    ("linear", "y nan", lambda X, y: (X, np.where(np.arange(len(y)) == 2, np.nan, y), {}), ValueError, "NaN"),
    ("logistic", "new label", lambda X, y: (X, np.where(np.arange(len(y)) == 2, 9, y), {}), ValueError,
     "labels not in classes"),
    ("logistic", "classes changed", lambda X, y: (X, y, {"classes": [0, 1]}), ValueError, "differs from the classes"),
]


@pytest.mark.parametrize("kind, case, make_bad, error, message", CATALOGUE,
                         ids=[f"{c[0]}-{c[1]}" for c in CATALOGUE])
def test_bad_partial_fit_raises_clearly_and_leaves_state(kind, case, make_bad, error, message):
    est, X, y = _fitted(kind)
    before, attributes = _fingerprint(est), sorted(vars(est))
    X_bad, y_bad, kwargs = make_bad(X, y)
    with pytest.raises(error, match=message):
        est.partial_fit(X_bad, y_bad, **kwargs)
    assert _fingerprint(est) == before and sorted(vars(est)) == attributes


PARAMETER_CASES = [
    ("n_particles", 0), ("n_particles", -3), ("n_particles", 2.5), ("batch_size", 0), ("learning_rate", 0.0),
    ("learning_rate", -0.1), ("target_ess", 0.0), ("target_ess", 1.5), ("reservoir_size", 0), ("n_replicates", 0),
    ("friction", 0.0), ("resample_threshold", 1.5), ("n_mcmc_steps", 0), ("integrator", "leapfrog"),
]


@pytest.mark.parametrize("name, value", PARAMETER_CASES, ids=[f"{n}={v}" for n, v in PARAMETER_CASES])
@pytest.mark.parametrize("kind", KINDS)
def test_bad_parameters_name_the_parameter(kind, name, value):
    est, X, y = _fitted(kind)
    before = _fingerprint(est)
    est.set_params(**{name: value})
    with pytest.raises(ValueError, match=f"'{name}' parameter"):
        est.fit(X, y) if y is not None else est.fit(X)
    assert _fingerprint(est) == before  # the failed fit kept the previous fit


def test_classifier_needs_classes_and_two_of_them():
    with pytest.raises(ValueError, match="classes must be passed"):
        BayesianLogisticClassifier(**FAST).partial_fit(SOFT_X, SOFT.y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        BayesianLogisticClassifier(**FAST).fit(SOFT_X, np.zeros(len(SOFT_X)))


@pytest.mark.parametrize("target, method, error, message", [
    (BayesianMixture(2), "exact", ValueError, "method='exact' is not available"),
    (BayesianMixture(2), "magic", ValueError, "method must be one of"),
    ("not a model", "sgais", TypeError, "estimator or a Model"),
])
def test_log_evidence_errors(target, method, error, message):
    with pytest.raises(error, match=message):
        log_evidence(target, MIX.X, method=method)
