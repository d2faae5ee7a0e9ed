"""Full-data likelihood evaluation and argument checks shared by the reference backends.

AIS, NS and bridge sampling all evaluate ``sum_j log p(y_j | x_j, theta)`` for a
population of parameter vectors; :func:`log_lik_sum` and :func:`log_lik_and_grad`
do it in memory-bounded chunks of particles (at most ``MAX_CELLS`` particle-row
cells per model call), which bounds memory at ``N = 1e4..1e5`` rows.
"""

import numbers

import numpy as np

__all__ = ["MAX_CELLS", "check_data", "check_fraction", "check_positive_int", "grad_lik_sum", "log_lik_and_grad",
           "log_lik_sum"]

MAX_CELLS = 2**20


def check_positive_int(value, name, minimum=1):
    """``int(value)``, or a ValueError naming ``name`` unless it is an integer ``>= minimum``.

    Examples
    --------
    >>> check_positive_int(3, "n_live")
    3
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def check_fraction(value, name, *, low=0.0, high=1.0, closed_low=False):
    """``float(value)``, or a ValueError unless it is a real number in ``(low, high)`` (``[low, high)``).

    Examples
    --------
    >>> check_fraction(0.5, "target_ess")
    0.5
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and value < high and (
        value >= low if closed_low else value > low)
    if not ok:
        bracket = "[" if closed_low else "("
        raise ValueError(f"{name} must be a number in {bracket}{low}, {high}), got {value!r}")
    return float(value)


def check_data(X, y):
    """``X`` as a non-empty 2-d float array and ``y`` (or None) with as many rows."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or len(X) == 0:
        raise ValueError(f"X must be a non-empty 2-d array, got shape {X.shape}")
    if y is not None:
        y = np.asarray(y)
        if len(y) != len(X):
            raise ValueError(f"y has {len(y)} rows but X has {len(X)}")
    return X, y


def _chunks(n_particles, n_rows, max_cells=MAX_CELLS):
    step = max(1, max_cells // max(n_rows, 1))
    return [slice(i, min(i + step, n_particles)) for i in range(0, n_particles, step)]


def approximate_total(model):
    """``model``'s :meth:`~evidence_select.models.Model.approximate_log_likelihood_sum` where it declares one for
    its own likelihood (``capabilities().approximate_sum``), else its ``log_likelihood_sum``: a ``total`` for
    :func:`log_lik_sum`. Resolve it once per run, not per call (the declaration costs microseconds)."""
    return model.approximate_log_likelihood_sum if model.capabilities().approximate_sum else model.log_likelihood_sum


def log_lik_sum(model, theta, X, y, *, allow_nan=False, max_cells=MAX_CELLS, total=None):
    """Full-data log-likelihood per particle, ``(n_particles,)``, in memory-bounded chunks.

    A NaN is an error unless ``allow_nan`` (callers that treat it as zero likelihood). At most ``max_cells``
    particle-row cells go to one model call; each particle's sum is the same whichever call computes it.
    ``total`` is the model's ``(theta, X, y) -> (n_particles,)`` sum to call: ``log_likelihood_sum`` by default,
    :func:`approximate_total` for the approximate one.
    """
    theta = np.asarray(theta, dtype=float)
    out = np.empty(len(theta))
    total = model.log_likelihood_sum if total is None else total
    for part in _chunks(len(theta), len(X), max_cells):
        out[part] = total(theta[part], X, y)
    if not allow_nan and np.any(np.isnan(out)):
        raise ValueError(f"log_likelihood of {type(model).__name__} returned NaN for "
                         f"{int(np.isnan(out).sum())} of {len(out)} particles")
    return out


def grad_lik_sum(model, theta, X, y):
    """Full-data log-likelihood's gradient per particle, ``(n, n_params)``, from ``grad_log_likelihood`` alone, in
    memory-bounded chunks (as :func:`log_lik_sum`)."""
    theta = np.asarray(theta, dtype=float)
    grad = np.empty_like(theta)
    for part in _chunks(len(theta), len(X)):
        grad[part] = model.grad_log_likelihood(theta[part], X, y, 1.0)
    return grad


def log_lik_and_grad(model, theta, X, y):
    """Full-data log-likelihood ``(n,)`` and its gradient ``(n, n_params)``."""
    theta = np.asarray(theta, dtype=float)
    log_lik = np.empty(len(theta))
    grad = np.empty_like(theta)
    for part in _chunks(len(theta), len(X)):
        log_lik[part], grad[part] = model.log_likelihood_and_grad(theta[part], X, y, 1.0)
    return log_lik, grad
