"""The exact math of linear regression with the noise variance and the weights' scale integrated out.

The model (see :class:`~evidence_select.models.LinearHyperModel` for why these priors)::

    y_j = x_j . w + b + eps_j,    eps_j ~ N(0, sigma2)
    w | sigma2, g ~ N(0, g sigma2 I),    b | sigma2 ~ N(0, kappa2 sigma2)
    sigma2 ~ log-uniform on NOISE_VARIANCE_BOUNDS    (or known)
    g ~ InvGamma(1/2, 1/2)    (Zellner-Siow; or fixed)

Everything here is a function of the rows' weighted moments ``M = sum_j w_j [x_j, 1, y_j]^T [x_j, 1, y_j]``
(``(p + 2, p + 2)``; the row weights are SGAIS's tempering powers, 1 for an evidence). Given ``g`` the weights,
the intercept and the noise variance integrate out in closed form:

- the intercept first (its prior precision ``1 / kappa2`` does not scale with ``g``), which leaves the "centred"
  moments ``G~ = G - s_x s_x^T / h``, ``r~ = r - s_x s_y / h``, ``yy~ = yy - s_y^2 / h`` with
  ``h = c + 1 / kappa2`` (``c`` the summed weight) and a factor ``(1 + kappa2 c)^-1/2``;
- then the weights: with ``G~ = V diag(lambda) V^T`` and ``q = V^T r~`` (one eigendecomposition per ``M``), the
  factor is ``prod_i (1 + g lambda_i)^-1/2`` and the residual sum of squares is
  ``S(g) = yy~ - sum_i g q_i^2 / (1 + g lambda_i)``, both O(p) per ``g``;
- then the noise variance: ``sigma2^(-c/2) exp(-S / (2 sigma2))`` against the log-uniform prior, a truncated
  gamma integral in the precision (:func:`~evidence_select.utils._truncated_gamma.log_gamma_integral`).

``g`` is left: a one-dimensional integral over ``u = log g``, on a grid that covers the integrand wherever it is
within ``TAIL_NATS`` of its peak. The trapezoid rule is spectrally accurate for such a smooth, decaying
integrand; the change between the grid and every other node of it bounds the quadrature error.
"""

from typing import NamedTuple

import numpy as np
from scipy import integrate, special

from ..utils._truncated_gamma import log_gamma_integral, sample_truncated_gamma

__all__ = ["NOISE_VARIANCE_BOUNDS", "DEFAULT_INTERCEPT_SCALE", "ReducedStatistics", "ScaleGrid",
           "augmented_moments", "reduce_statistics", "log_marginal", "log_scale_prior", "scale_grid",
           "log_evidence_and_error", "draw_parameters", "predictive_moments", "sample_grid"]

_LOG_2PI = np.log(2.0 * np.pi)
#: The log-uniform prior's support of the noise variance, in the units of ``y`` squared: 40 orders of magnitude
#: around 1, so that the evidence of any target a float64 array holds sensibly changes with its scale only by
#: the Jacobian (its cost, ``log log(hi / lo)`` = 4.5 nats, is the same for every model).
NOISE_VARIANCE_BOUNDS = (1e-20, 1e20)
#: The intercept's prior standard deviation in noise standard deviations, ``kappa``, unless given: wide enough
#: that shifting ``y`` by up to hundreds of noise standard deviations changes the evidence by under 0.1 nat.
DEFAULT_INTERCEPT_SCALE = 1e3
#: The range of ``u = log g`` searched: the Zellner-Siow prior puts ``exp(-e^30 / 2)`` below it and its heavy
#: upper tail (``e^(-u/2)``) holds ``e^-75`` above it.
LOG_SCALE_RANGE = (-30.0, 150.0)
#: The coarse pass's step in ``u``: ``2 sqrt(2 / p)`` (the posterior standard deviation of ``log g`` is at least
#: about ``sqrt(2 / p)``, the information of ``p`` weights about their common variance), within these bounds.
#: A peak between nodes then reads at most ~12 nats low, so the region kept still reaches ~38 nats below it.
_COARSE_STEP_RANGE = (0.1, 1.0)
#: The grid keeps the region where the integrand is within this many nats of its peak (``e^-50`` relative).
TAIL_NATS = 50.0
#: Intervals of the fine grid over that region (even, so that every other node is a grid too): about 25 per
#: posterior standard deviation of ``log g``.
_N_FINE = 512
#: Eigenvalues of ``G~`` below this fraction of the largest are directions the rows do not inform: zeroed.
_RANK_TOL = 1e-13


def augmented_moments(X, y, weights=None):
    """``sum_j w_j [x_j, 1, y_j]^T [x_j, 1, y_j]`` over the rows (the second-to-last axis; leading axes kept).

    Parameters
    ----------
    X : ndarray of shape (..., n_rows, n_features)
    y : ndarray of shape (..., n_rows)
    weights : float or ndarray of shape (n_rows,), default=None
        Row weights (None: 1).

    Returns
    -------
    moments : ndarray of shape (..., n_features + 2, n_features + 2)
    """
    X = np.asarray(X, dtype=float)
    augmented = np.empty(X.shape[:-1] + (X.shape[-1] + 2,))
    augmented[..., :-2] = X
    augmented[..., -2] = 1.0
    augmented[..., -1] = y
    weighted = augmented if weights is None else augmented * np.asarray(weights, dtype=float)[..., None]
    return np.swapaxes(weighted, -1, -2) @ augmented


class ReducedStatistics(NamedTuple):
    """The moments with the intercept integrated out and the weights' Gram matrix diagonalised."""

    count: float  # c, the summed row weight
    log_det_intercept: float  # log(1 + kappa2 c); 0 without an intercept
    intercept_precision: float  # h = c + 1 / kappa2 (noise units); 0 without an intercept
    eigenvalues: np.ndarray  # (p,), of G~, >= 0
    eigenvectors: np.ndarray  # (p, p), V
    rotated_cross: np.ndarray  # (p,), q = V^T r~
    centred_sum_sq: float  # yy~
    least_squares_residual: float  # S(inf) = yy~ - sum_i q_i^2 / lambda_i (lambda_i > 0), >= 0
    sum_x: np.ndarray  # (p,), s_x
    sum_y: float  # s_y


def reduce_statistics(moments, fit_intercept, intercept_variance):
    """:class:`ReducedStatistics` of the moments ``M`` (layout of :func:`augmented_moments`).

    ``intercept_variance`` is ``kappa2``, the intercept's prior variance in units of the noise variance.
    """
    moments = np.asarray(moments, dtype=float)
    p = moments.shape[0] - 2
    gram, sum_x, cross = moments[:p, :p], moments[:p, p], moments[:p, p + 1]
    count, sum_y, sum_sq = float(moments[p, p]), float(moments[p, p + 1]), float(moments[p + 1, p + 1])
    if fit_intercept:
        h = count + 1.0 / intercept_variance
        gram = gram - np.outer(sum_x, sum_x) / h
        cross = cross - sum_x * (sum_y / h)
        sum_sq = sum_sq - sum_y**2 / h
        log_det_intercept = float(np.log1p(intercept_variance * count))
    else:
        h, log_det_intercept = 0.0, 0.0
    eigenvalues, eigenvectors = np.linalg.eigh(0.5 * (gram + gram.T))
    rotated = eigenvectors.T @ cross
    # Directions no row informs carry no signal; their rounding residue would be amplified by huge g.
    blind = eigenvalues <= _RANK_TOL * max(float(eigenvalues[-1]) if p else 0.0, 0.0)
    eigenvalues = np.where(blind, 0.0, eigenvalues)
    rotated = np.where(blind, 0.0, rotated)
    sum_sq = max(sum_sq, 0.0)
    least_squares = max(sum_sq - float(np.sum(_explained(rotated, eigenvalues))), 0.0)
    return ReducedStatistics(count, log_det_intercept, h, eigenvalues, eigenvectors, rotated, sum_sq, least_squares,
                             sum_x, sum_y)


def _explained(rotated, eigenvalues):
    """``q_i^2 / lambda_i`` per direction, 0 where ``lambda_i = 0`` (and there ``q_i = 0``)."""
    informed = eigenvalues > 0.0
    return np.where(informed, rotated**2 / np.where(informed, eigenvalues, 1.0), 0.0)


def _residual_sums(reduced, g):
    """``S(g) = yy~ - sum_i g q_i^2 / (1 + g lambda_i)`` (>= 0) for each ``g`` (shape ``g.shape``).

    Summed as ``S(inf) + sum_i q_i^2 / (lambda_i (1 + g lambda_i))``: positive terms, so a residual that falls
    towards 0 as ``g`` grows (rows a linear model can fit exactly) keeps its precision, where the difference of
    ``yy~`` and the fitted sum would be rounding (and 0 would make the noise variance's integral diverge to
    the bottom of its support).
    """
    g = np.asarray(g, dtype=float)
    remaining = _explained(reduced.rotated_cross, reduced.eigenvalues) / (1.0 + g[..., None] * reduced.eigenvalues)
    return reduced.least_squares_residual + remaining.sum(axis=-1)


def log_marginal(reduced, g, noise_variance):
    """``log int p(w, b, sigma2 | g) prod_j p(y_j | x_j, w, b, sigma2)^(w_j)`` for each ``g``.

    ``noise_variance`` None integrates the noise variance over its log-uniform prior; a float fixes it.
    Shape of ``g``.
    """
    g = np.asarray(g, dtype=float)
    log_det = np.log1p(g[..., None] * reduced.eigenvalues).sum(axis=-1) + reduced.log_det_intercept
    residual = _residual_sums(reduced, g)
    count = reduced.count
    if noise_variance is not None:
        return -0.5 * (count * (_LOG_2PI + np.log(noise_variance)) + log_det + residual / noise_variance)
    lo, hi = NOISE_VARIANCE_BOUNDS
    # In the precision t = 1 / sigma2: prior dt / (t log(hi / lo)), likelihood t^(c/2) exp(-S t / 2).
    log_noise = log_gamma_integral(0.5 * count, 0.5 * residual, 1.0 / hi, 1.0 / lo) - np.log(np.log(hi / lo))
    return -0.5 * (count * _LOG_2PI + log_det) + log_noise


def log_scale_prior(u):
    """Log density of ``u = log g`` for the Zellner-Siow prior ``g ~ InvGamma(1/2, 1/2)`` (with the Jacobian)."""
    u = np.asarray(u, dtype=float)
    return -0.5 * (_LOG_2PI + u + np.exp(-u))


class ScaleGrid(NamedTuple):
    """The unnormalised posterior of ``u = log g`` on an equally spaced grid over where it lives."""

    nodes: np.ndarray  # (n_nodes,)
    log_density: np.ndarray  # (n_nodes,): log prior(u) + log_marginal(e^u)


def scale_grid(reduced, noise_variance):
    """:class:`ScaleGrid`: a coarse pass over ``LOG_SCALE_RANGE``, then ``_N_FINE`` intervals over the region
    within ``TAIL_NATS`` of the peak (and one coarse step beyond either side)."""
    step = float(np.clip(2.0 * np.sqrt(2.0 / max(len(reduced.eigenvalues), 1)), *_COARSE_STEP_RANGE))
    coarse = np.arange(LOG_SCALE_RANGE[0], LOG_SCALE_RANGE[1] + 0.5 * step, step)
    log_coarse = log_scale_prior(coarse) + log_marginal(reduced, np.exp(coarse), noise_variance)
    inside = np.flatnonzero(log_coarse > log_coarse.max() - TAIL_NATS)
    lower, upper = coarse[max(inside[0] - 1, 0)], coarse[min(inside[-1] + 1, len(coarse) - 1)]
    nodes = np.linspace(lower, upper, _N_FINE + 1)
    return ScaleGrid(nodes, log_scale_prior(nodes) + log_marginal(reduced, np.exp(nodes), noise_variance))


def _log_trapezoid(log_values, step):
    top = float(np.max(log_values))
    return top + float(np.log(integrate.trapezoid(np.exp(log_values - top), dx=step)))


def log_evidence_and_error(reduced, noise_variance, prior_scale):
    """The log normaliser of the (tempered) posterior and a bound on its quadrature error (nats).

    A fixed ``prior_scale`` (``g = prior_scale^2``) needs no quadrature: error 0.
    """
    if prior_scale is not None:
        return float(log_marginal(reduced, np.asarray(prior_scale**2), noise_variance)), 0.0
    grid = scale_grid(reduced, noise_variance)
    step = grid.nodes[1] - grid.nodes[0]
    fine = _log_trapezoid(grid.log_density, step)
    half = _log_trapezoid(grid.log_density[::2], 2.0 * step)
    # A grid cut by LOG_SCALE_RANGE (an exactly fitted target drives g up) misses the tail beyond the cut; the
    # integrand there decays at least as the prior's e^(-u/2), so at most twice its end value lies beyond.
    cut = np.log(2.0) + max(grid.log_density[0], grid.log_density[-1]) - fine
    error = abs(fine - half) + (float(np.exp(cut)) if cut > -TAIL_NATS else 0.0)
    return fine, error


def sample_grid(rng, grid, n_samples):
    """Draws of ``u`` from the piecewise exponential interpolation of the grid's density (exact within a cell
    where the log density is linear; elsewhere off by the interpolation's O(step^2) curvature term)."""
    nodes, log_density = grid.nodes, grid.log_density
    step = nodes[1] - nodes[0]
    left, rise = log_density[:-1], np.diff(log_density)
    # Cell masses h e^{f0} (e^d - 1) / d, from whichever end keeps the relative exponential below 1.
    log_mass = np.log(step) + np.where(rise <= 0.0, left + np.log(special.exprel(np.minimum(rise, 0.0))),
                                       log_density[1:] + np.log(special.exprel(-np.maximum(rise, 0.0))))
    cumulative = np.cumsum(np.exp(log_mass - log_mass.max()))
    cell = np.minimum(np.searchsorted(cumulative, rng.random(n_samples) * cumulative[-1], side="right"),
                      len(cumulative) - 1)
    v, d = rng.random(n_samples), rise[cell]
    with np.errstate(divide="ignore", invalid="ignore"):
        offset = np.where(np.abs(d) < 1e-9, v, np.log1p(v * np.expm1(d)) / d)
    return nodes[cell] + step * np.clip(offset, 0.0, 1.0)


def draw_parameters(rng, reduced, n_samples, noise_variance, prior_scale, fit_intercept):
    """Independent exact draws of ``(w, [b], [log sigma2], [log g])`` from the (tempered) posterior.

    ``log g`` from its grid posterior (:func:`sample_grid`) unless fixed, then ``sigma2 | g`` from its truncated
    inverse gamma unless known, then ``w | sigma2, g`` (Gaussian, by the eigenvectors) and ``b | w, sigma2``.

    Returns
    -------
    theta : ndarray of shape (n_samples, n_params)
    """
    if prior_scale is None:
        log_g = sample_grid(rng, scale_grid(reduced, noise_variance), n_samples)
    else:
        log_g = np.full(n_samples, 2.0 * np.log(prior_scale))
    g = np.exp(log_g)
    if noise_variance is None:
        lo, hi = NOISE_VARIANCE_BOUNDS
        precision = sample_truncated_gamma(rng, 0.5 * reduced.count, 0.5 * _residual_sums(reduced, g),
                                           1.0 / hi, 1.0 / lo)
        log_noise = -np.log(precision)
    else:
        log_noise = np.full(n_samples, np.log(noise_variance))
    noise_sd = np.exp(0.5 * log_noise)[:, None]
    curvature = 1.0 / g[:, None] + reduced.eigenvalues  # (n, p): eigenvalues of I/g + G~
    coefficients = (reduced.rotated_cross + noise_sd * np.sqrt(curvature)
                    * rng.standard_normal(curvature.shape)) / curvature
    weights = coefficients @ reduced.eigenvectors.T
    columns = [weights]
    if fit_intercept:
        h = reduced.intercept_precision
        intercept = (reduced.sum_y - weights @ reduced.sum_x) / h + noise_sd[:, 0] / np.sqrt(h) * rng.standard_normal(
            n_samples)
        columns.append(intercept[:, None])
    if noise_variance is None:
        columns.append(log_noise[:, None])
    if prior_scale is None:
        columns.append(log_g[:, None])
    return np.hstack(columns)


def _noise_variance_means(reduced, g, noise_variance):
    """``E[sigma2 | g, rows]`` per ``g``: the known value, or the mean of the truncated inverse gamma."""
    if noise_variance is not None:
        return np.full(np.shape(g), float(noise_variance))
    lo, hi = NOISE_VARIANCE_BOUNDS
    rate = 0.5 * _residual_sums(reduced, g)
    a = 0.5 * reduced.count
    # E[1 / t] = int t^(a-2) e^(-rate t) / int t^(a-1) e^(-rate t), over t in [1 / hi, 1 / lo].
    return np.exp(log_gamma_integral(a - 1.0, rate, 1.0 / hi, 1.0 / lo)
                  - log_gamma_integral(a, rate, 1.0 / hi, 1.0 / lo))


#: Nodes of the fine grid used for the predictive mixture over ``g`` (every fourth: the weights are smooth).
_PREDICTIVE_STRIDE = 4


def predictive_moments(reduced, X, noise_variance, prior_scale, fit_intercept):
    """Posterior-predictive mean and variance of ``y`` at the rows ``X`` (shape ``(n_rows,)`` each).

    Given ``g`` the predictive is a Student-t (a Gaussian for a known noise variance) with mean
    ``z^T m_w(g) + s_y / h`` and variance ``E[sigma2 | g] (1 + 1/h + z^T (I/g + G~)^-1 z)``, ``z = x - s_x / h``;
    over a learned ``g`` it is their mixture by the grid posterior of ``log g``.
    """
    X = np.asarray(X, dtype=float)
    if prior_scale is None:
        grid = scale_grid(reduced, noise_variance)
        nodes, log_density = grid.nodes[::_PREDICTIVE_STRIDE], grid.log_density[::_PREDICTIVE_STRIDE]
        mixture = np.exp(log_density - log_density.max())
        mixture /= mixture.sum()
        g = np.exp(nodes)
    else:
        g, mixture = np.array([prior_scale**2]), np.ones(1)
    h = reduced.intercept_precision
    z = (X - reduced.sum_x / h) if fit_intercept else X
    rotated = z @ reduced.eigenvectors  # (n_rows, p)
    inverse_curvature = 1.0 / (1.0 / g[None, :] + reduced.eigenvalues[:, None])  # (p, n_g)
    means = rotated @ (reduced.rotated_cross[:, None] * inverse_curvature)  # (n_rows, n_g)
    spread = 1.0 + (rotated**2) @ inverse_curvature
    if fit_intercept:
        means = means + reduced.sum_y / h
        spread = spread + 1.0 / h
    variances = _noise_variance_means(reduced, g, noise_variance)[None, :] * spread
    mean = means @ mixture
    variance = (variances + means**2) @ mixture - mean**2
    return mean, np.maximum(variance, (variances @ mixture) * 1e-12)
