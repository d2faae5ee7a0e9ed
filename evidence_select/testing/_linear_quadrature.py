"""A brute-force reference for the evidence of :class:`~evidence_select.models.LinearHyperModel`.

Independent of the model's own closed forms: given the noise variance and ``g``, the Gaussian marginal evidence
of the rows comes from the Cholesky factor of the posterior precision of ``(w, b)`` (the known-noise formula of
:class:`~evidence_select.models.LinearEvidenceStats`, batched over nodes, with neither the intercept's
elimination, the eigendecomposition nor the incomplete gamma functions), and the hyperparameters are integrated
by the trapezoid rule on a tensor grid in ``(log sigma2, log g)`` that grows until its edges lie ``TAIL_NATS``
below the peak. Comparing with the grid at half the nodes bounds the rule's error.
"""

import numpy as np
from scipy import integrate, optimize

from ..models._linear_hyper_math import LOG_SCALE_RANGE, NOISE_VARIANCE_BOUNDS, log_scale_prior

__all__ = ["linear_hyper_evidence_by_quadrature"]

_LOG_2PI = np.log(2.0 * np.pi)
TAIL_NATS = 40.0


def _gaussian_log_evidence(model, moments, log_noise, log_g):
    """``log N(y; 0, sigma2 (I + g X X^T + kappa2 1 1^T))`` at each node (arrays of one shape), by Woodbury."""
    p = model.n_features
    design = list(range(p)) + ([p] if model.fit_intercept else [])
    gram, cross = moments[np.ix_(design, design)], moments[design, p + 1]
    sum_sq, count = moments[p + 1, p + 1], moments[p, p]
    noise = np.exp(log_noise).ravel()[:, None]
    prior_variance = noise * np.where(np.arange(len(design)) < p, np.exp(log_g).ravel()[:, None],
                                      model.intercept_scale**2)
    # The posterior precision in units of the prior's, I + D^1/2 A^T A D^1/2 / sigma2 (D the prior variances):
    # positive definite at any g however large, with log|precision| + log|D| its own log determinant.
    root = np.sqrt(prior_variance / noise)  # (K, d)
    precision = np.eye(len(design))[None] + root[:, :, None] * gram[None] * root[:, None, :]
    factor = np.linalg.cholesky(precision)
    rhs = (root * cross[None, :])[:, :, None]  # D^1/2 A^T y / sigma2, times sigma
    solved = np.linalg.solve(factor, rhs)[..., 0]
    log_det = 2.0 * np.log(np.diagonal(factor, axis1=1, axis2=2)).sum(axis=1)
    value = (-0.5 * count * (_LOG_2PI + np.log(noise[:, 0])) - 0.5 * log_det
             - 0.5 * (sum_sq - np.sum(solved**2, axis=1)) / noise[:, 0])
    return value.reshape(np.shape(log_noise))


def _log_integrand(model, moments, log_noise, log_g):
    """Log prior of the learned hyperparameters plus the Gaussian marginal evidence."""
    value = _gaussian_log_evidence(model, moments, log_noise, log_g)
    if model.noise_variance is None:
        lo, hi = NOISE_VARIANCE_BOUNDS
        value = value - np.log(np.log(hi / lo))
    if model.prior_scale is None:
        value = value + log_scale_prior(log_g)
    return value


def linear_hyper_evidence_by_quadrature(model, X, y, *, n_nodes=401):
    """``(log p(y | X), error estimate)`` of ``model`` by brute-force quadrature over its learned hyperparameters.

    Parameters
    ----------
    model : LinearHyperModel
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    n_nodes : int, default=401
        Grid nodes per learned hyperparameter (odd: the half grid is every other node).

    Returns
    -------
    log_evidence : float
    error : float
        The change from the grid of every other node (nats).
    """
    moments = model.gradient_statistics(X, np.asarray(y, dtype=float))
    learned = [model.noise_variance is None, model.prior_scale is None]
    fixed = np.array([np.log(model.noise_variance) if model.noise_variance is not None else 0.0,
                      2.0 * np.log(model.prior_scale) if model.prior_scale is not None else 0.0])
    limits = np.array([np.log(NOISE_VARIANCE_BOUNDS), LOG_SCALE_RANGE])[learned]
    if not any(learned):
        return float(_gaussian_log_evidence(model, moments, fixed[:1], fixed[1:])[0]), 0.0

    def point(z):
        full = fixed.copy()
        full[learned] = z
        return full

    def log_f(*axes):
        full = [np.broadcast_to(fixed[k], axes[0].shape) for k in range(2)]
        for k, axis in zip(np.flatnonzero(learned), axes):
            full[k] = axis
        return _log_integrand(model, moments, full[0], full[1])

    # The peak and its curvature set the first box; each side then grows until its edge is TAIL_NATS down.
    start = np.array([np.log(max(moments[-1, -1] / max(moments[-2, -2], 1.0), 1e-12)), 0.0])[learned]
    peak = optimize.minimize(lambda z: -float(log_f(*(np.array([v]) for v in point(z)[learned]))[0]), start,
                             method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000}).x
    box = np.column_stack([np.maximum(peak - 2.0, limits[:, 0]), np.minimum(peak + 2.0, limits[:, 1])])
    for _ in range(60):
        axes = [np.linspace(lo, hi, n_nodes) for lo, hi in box]
        values = log_f(*np.meshgrid(*axes, indexing="ij"))
        top = values.max()
        new_box = _fitted_box(box, axes, values, top, limits)
        if np.array_equal(new_box, box):
            break
        box = new_box
    steps = [axis[1] - axis[0] for axis in axes]
    return _trapezoid(values - top, steps) + top, abs(_trapezoid(values - top, steps) - _trapezoid(
        values[tuple(slice(None, None, 2) for _ in steps)] - top, [2.0 * s for s in steps]))


def _fitted_box(box, axes, values, top, limits):
    """The box grown where an edge is within ``TAIL_NATS`` of the peak (doubling, within the limits) and shrunk to
    one node beyond the last node within it where the box is wider than that (so the grid resolves a narrow peak)."""
    box = box.copy()
    for k in range(len(box)):
        profile = np.moveaxis(values, k, 0).reshape(len(axes[k]), -1).max(axis=1)
        inside = np.flatnonzero(profile > top - TAIL_NATS)
        width = box[k, 1] - box[k, 0]
        for side, edge_index, inner_index in ((0, 0, max(inside[0] - 1, 0)),
                                              (1, len(profile) - 1, min(inside[-1] + 1, len(profile) - 1))):
            if profile[edge_index] > top - TAIL_NATS:
                if box[k, side] != limits[k, side]:
                    box[k, side] = np.clip(box[k, side] + (width if side else -width), *limits[k])
            elif abs(inner_index - edge_index) > len(profile) // 8:  # the level set fills under 3/4: shrink
                box[k, side] = axes[k][inner_index]
    return box


def _trapezoid(log_values, steps):
    values = np.exp(log_values)
    for step in steps:
        values = integrate.trapezoid(values, dx=step, axis=0)
    return float(np.log(values))
