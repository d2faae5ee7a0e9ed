"""Iterative Gaussianization: a normalised density fitted to samples, numpy/scipy only.

The bijection ``z = Psi(x)`` is a whitening affine layer followed by layers that
each (i) find ``K`` orthonormal directions along which the samples look least
Gaussian (largest sliced Wasserstein-1 distance between the projections and
``N(0, 1)``, by projected gradient ascent over orthonormal frames; also for
``K = n_params``, where a random frame's projections would look Gaussian by the
central limit theorem and the layer would learn little) and (ii) map
the samples' marginal along each direction to ``N(0, 1)`` with a monotone
rational-quadratic spline (Durkan et al., "Neural spline flows", 2019) through
knots of the smoothed (kernel) CDF, ``y = Phi^-1(F_kde(p))``, with linear tails.
A direction whose distance is within sampling noise of zero
(``noise_floor / sqrt(n)``) gets no spline: fitting it would add only noise.
Components orthogonal to the directions are left alone, so each layer is
invertible and its log-Jacobian is the sum of the splines' log-derivatives.
This follows the Iterative Neural Transform of Jia and Seljak, "Normalizing
constant estimation with Gaussianized bridge sampling" (AABI 2019, Sec. 3).

Between the whitening and the marginal layers sits an optional quadratic
shift (:mod:`._quadratic_shift`): a volume-preserving triangular map that
subtracts from some directions a quadratic in others, which is what straightens
a thin curved (banana-shaped) ridge that no sequence of marginal maps can.
It is kept only when, with marginal layers fitted after it, the held-out
samples' mean log density beats that of the marginal layers alone.

The density is ``q(x) = N(Psi(x); 0, I) |det dPsi/dx|``: exactly normalised for
any fitted knots (a smooth bijection of ``R^d`` onto ``R^d``), which is what
bridge sampling needs. Layers are added while the mean log density of held-out
samples improves, which stops the fit before it chases the noise of a finite
sample. The splines invert in closed form, so sampling is exact, and the
inverse pass also yields each draw's density
(:func:`gaussianization_sample_and_log_density`).

:func:`fit_marginal_product` is the one-layer special case along the
coordinate axes with no whitening rotation: the product of the samples'
marginals, whose kernel bandwidths are chosen by cross-validation.
"""

from typing import NamedTuple

import numpy as np
from scipy.special import log_ndtr, logsumexp, ndtr, ndtri, ndtri_exp

from ._quadratic_shift import fit_quadratic_shift, quadratic_shift_forward, quadratic_shift_inverse
from ..utils._whitening import whitening

__all__ = ["GaussianizationSettings", "Gaussianization", "fit_gaussianization", "fit_marginal_product",
           "settled_settings", "gaussianization_forward", "gaussianization_inverse", "gaussianization_log_density",
           "gaussianization_sample", "gaussianization_sample_and_log_density", "marginal_log_densities"]

_LOG_2PI = np.log(2.0 * np.pi)
_N_BINS = 1024  # kernel-estimate bins per marginal (bin width ~ range / 1024, far below the bandwidth)


class GaussianizationSettings(NamedTuple):
    """Settings of :func:`fit_gaussianization`.

    max_layers : int, most marginal layers (fewer when held-out samples stop improving).
    n_directions : int or None, directions per layer (None: all ``n_params``).
    n_knots : int or None, spline knots per direction (None: ``sqrt(n)`` within [20, 100]).
    bandwidth_factor : float, multiplies Silverman's kernel bandwidth.
    n_search_steps : int, gradient steps of the direction search.
    validation_fraction : float in (0, 0.5), held-out share of the samples for stopping.
    noise_floor : float, a direction gets a spline only when its W1 distance to N(0, 1) exceeds
        ``noise_floor / sqrt(n)`` (the distance of a Gaussian sample of size n is of order ``1 / sqrt(n)``).
    max_curved_pairs : int or None, most conditioning directions of the quadratic shift
        (None: ``n_params // 2``; 0: no shift).
    compare_without_shift : bool, where a shift is found, also fit the marginal layers without it and keep
        whichever the held-out samples prefer (False: keep the shift). :func:`settled_settings` sets it, or
        ``max_curved_pairs=0``, for further fits to draws of a target whose first fit made that choice.
    """

    max_layers: int = 10
    n_directions: int = None
    n_knots: int = None
    bandwidth_factor: float = 1.0
    n_search_steps: int = 20
    validation_fraction: float = 0.2
    noise_floor: float = 2.0
    max_curved_pairs: int = None
    compare_without_shift: bool = True


class _SplineLayer(NamedTuple):
    """Directions ``(n_params, K)``; per direction the knots ``x``, ``y`` and slopes (tuples of K arrays)."""

    directions: np.ndarray
    knots_x: np.ndarray
    knots_y: np.ndarray
    slopes: np.ndarray


class Gaussianization(NamedTuple):
    """A fitted iterative Gaussianization: ``z = layers(shift(chol^-1 (x - mean)))``.

    mean : (n_params,); chol : (n_params, n_params), lower Cholesky factor of the
    whitening covariance; layers : tuple of spline layers, applied in order;
    shift : QuadraticShift or None, applied between the whitening and the layers.
    """

    mean: np.ndarray
    chol: np.ndarray
    layers: tuple
    shift: object = None


# -- monotone rational-quadratic spline (one direction) ------------------------------------
def _bins(values, knots):
    return np.clip(np.searchsorted(knots, values, side="right") - 1, 0, len(knots) - 2)


def _rq_forward(x, knots_x, knots_y, slopes):
    """Spline value and log-derivative at ``x`` (1-d); linear beyond the end knots."""
    k = _bins(x, knots_x)
    width = knots_x[k + 1] - knots_x[k]
    height = knots_y[k + 1] - knots_y[k]
    s = height / width
    d0, d1 = slopes[k], slopes[k + 1]
    xi = np.clip((x - knots_x[k]) / width, 0.0, 1.0)
    mix = xi * (1.0 - xi)
    denom = s + (d0 + d1 - 2.0 * s) * mix
    y = knots_y[k] + height * (s * xi**2 + d0 * mix) / denom
    below, above = x < knots_x[0], x > knots_x[-1]
    y = np.where(below, knots_y[0] + slopes[0] * (x - knots_x[0]), y)
    y = np.where(above, knots_y[-1] + slopes[-1] * (x - knots_x[-1]), y)
    return y, _rq_log_deriv(xi, s, d0, d1, denom, below, above, slopes)


def _rq_log_deriv(xi, s, d0, d1, denom, below, above, slopes):
    """``log dy/dx`` of the spline at the bin position ``xi`` (the end slopes beyond the knots)."""
    log_deriv = 2.0 * np.log(s) + np.log(d1 * xi**2 + 2.0 * s * xi * (1.0 - xi) + d0 * (1.0 - xi) ** 2)
    log_deriv = log_deriv - 2.0 * np.log(denom)
    return np.where(below, np.log(slopes[0]), np.where(above, np.log(slopes[-1]), log_deriv))


def _rq_inverse(y, knots_x, knots_y, slopes):
    """Inverse of :func:`_rq_forward` in closed form (the root of a quadratic in ``xi``), and the forward map's
    log-derivative at the result (so that a draw's density needs no forward pass)."""
    k = _bins(y, knots_y)
    width = knots_x[k + 1] - knots_x[k]
    height = knots_y[k + 1] - knots_y[k]
    s = height / width
    d0, d1 = slopes[k], slopes[k + 1]
    dy = y - knots_y[k]
    curvature = d0 + d1 - 2.0 * s
    a = height * (s - d0) + dy * curvature
    b = height * d0 - dy * curvature
    c = -s * dy
    # The numerically stable root 2c / (-b - sqrt(b^2 - 4ac)) lies in [0, 1] (Durkan et al., Eq. 29).
    xi = np.clip(2.0 * c / (-b - np.sqrt(np.maximum(b * b - 4.0 * a * c, 0.0))), 0.0, 1.0)
    x = knots_x[k] + xi * width
    below, above = y < knots_y[0], y > knots_y[-1]
    x = np.where(below, knots_x[0] + (y - knots_y[0]) / slopes[0], x)
    x = np.where(above, knots_x[-1] + (y - knots_y[-1]) / slopes[-1], x)
    return x, _rq_log_deriv(xi, s, d0, d1, s + curvature * xi * (1.0 - xi), below, above, slopes)


# -- fitting one marginal ------------------------------------------------------------------
def _binned_kernel(values, h):
    """The variance-keeping kernel estimate of ``values`` with bandwidth ``h``, binned: bin centres, their log
    weights and the shrunk bandwidth.

    The samples are shrunk towards their mean by ``1 / sqrt(1 + (h / sd)^2)``
    and the bandwidth alike, so the estimate keeps the samples' variance. Bins
    far narrower than ``h`` change it negligibly and cost ``O(n_bins)`` per
    evaluation point.
    """
    sd, centre = float(np.std(values)), float(np.mean(values))
    shrink = 1.0 / np.sqrt(1.0 + (h / sd) ** 2)
    counts, edges = np.histogram(centre + (values - centre) * shrink, bins=_N_BINS)
    centres = 0.5 * (edges[1:] + edges[:-1])[counts > 0]
    return centres, np.log(counts[counts > 0] / len(values)), h * shrink


def _log_kernel_sum(log_terms, weights):
    """``log sum_j weights_j exp(log_terms_ij)`` per row: the row's largest term factored out, then a matrix
    product (no underflow: that term contributes ``weights_j >= 1 / n`` times one)."""
    top = np.max(log_terms, axis=1)
    return top + np.log(np.exp(log_terms - top[:, None]) @ weights)


_TAIL_PROBABILITY = 1e-6  # below it a kernel CDF is recomputed in log space (1 - cdf loses digits there)


def _kernel_normal_scores(std, log_w):
    """``Phi^-1`` of the binned kernel CDF at each row's points, ``std = (x_i - centre_j) / h``.

    The CDF is summed in linear space (a matrix product); the few rows whose
    CDF or survival probability is below ``_TAIL_PROBABILITY`` are summed
    again in log space, where the complement would have lost its digits.
    """
    cdf = ndtr(std) @ np.exp(log_w)
    y = np.where(cdf < 0.5, ndtri(cdf), -ndtri(1.0 - cdf))
    tail = np.minimum(cdf, 1.0 - cdf) < _TAIL_PROBABILITY
    if np.any(tail):
        log_cdf = logsumexp(log_ndtr(std[tail]) + log_w, axis=1)
        log_sf = logsumexp(log_ndtr(-std[tail]) + log_w, axis=1)
        y[tail] = np.where(log_cdf < np.log(0.5), ndtri_exp(log_cdf), -ndtri_exp(log_sf))
    return y


def _fit_marginal(values, n_knots, bandwidth_factor):
    """Knots ``(x, y, slopes)`` of the spline mapping the kernel-smoothed CDF of ``values`` to N(0, 1).

    The kernel estimate uses the samples shrunk towards their mean by
    ``1 / sqrt(1 + (h / sd)^2)`` and bandwidth shrunk alike, so it keeps the
    samples' variance (plain smoothing would widen every layer's marginal).
    The tail slopes are secants over the outer tenth of the knots, so the tails
    are no lighter than the data's outer quantiles suggest.
    """
    h = bandwidth_factor * 1.06 * float(np.std(values)) * len(values) ** (-0.2)
    centres, log_w, h = _binned_kernel(values, h)
    knots = np.unique(np.quantile(values, np.linspace(0.0, 1.0, n_knots)))
    std = (knots[:, None] - centres[None, :]) / h
    y = _kernel_normal_scores(std, log_w)
    log_pdf = _log_kernel_sum(-0.5 * std**2, np.exp(log_w)) - np.log(h) - 0.5 * _LOG_2PI
    slopes = np.exp(log_pdf + 0.5 * y**2 + 0.5 * _LOG_2PI)
    keep = np.concatenate([[True], np.diff(y) > 1e-9 * (1.0 + np.abs(y[1:]))])
    knots, y, slopes = knots[keep], y[keep], slopes[keep]
    tail = max(1, len(knots) // 10)
    slopes[0] = min(slopes[0], (y[tail] - y[0]) / (knots[tail] - knots[0]))
    slopes[-1] = min(slopes[-1], (y[-1] - y[-1 - tail]) / (knots[-1] - knots[-1 - tail]))
    return knots, y, slopes


# -- direction search ----------------------------------------------------------------------
def _orthonormal(matrix):
    q, r = np.linalg.qr(matrix)
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def _quantile_residuals(proj, quantiles):
    """Each column's sorted-order residual against the ``N(0, 1)`` ``quantiles``, in the samples' order.

    Sorted as rows of the transpose: each direction's projections contiguous, which sorts faster. Each
    sample's quantile is scattered to its place by flat indices and subtracted there (the same differences
    as subtracting in sorted order and scattering them back, with one scatter and no gather).
    """
    rows = np.ascontiguousarray(proj.T)
    n_rows, n = rows.shape
    order = np.argsort(rows, axis=1)
    quantile_at = np.empty_like(rows)
    quantile_at.ravel()[(order + n * np.arange(n_rows)[:, None]).ravel()] = np.tile(quantiles, n_rows)
    return (rows - quantile_at).T


def _find_directions(rng, z, n_directions, n_steps, start_identity):
    """Orthonormal ``(n_params, K)`` frame with large sliced W1 distance of projections to N(0, 1).

    Returns the frame and each direction's W1 distance.
    """
    n, d = z.shape
    frame = np.eye(d)[:, :n_directions] if start_identity else _orthonormal(rng.standard_normal((d, n_directions)))
    quantiles = ndtri((np.arange(n) + 0.5) / n)
    for _ in range(n_steps):
        grad = z.T @ np.sign(_quantile_residuals(z @ frame, quantiles)) / n
        frame = _orthonormal(frame + grad)
    return frame, np.mean(np.abs(_quantile_residuals(z @ frame, quantiles)), axis=0)


# -- transforms --------------------------------------------------------------------------
def _layer_map(layer, z, spline):
    """``z`` with its projections on the layer's directions replaced by ``spline`` of them, and the summed
    log-derivatives. The projections are held as rows (each direction's values contiguous for the spline)."""
    proj = layer.directions.T @ z.T
    mapped = np.empty_like(proj)
    log_det = np.zeros(len(z))
    for k in range(len(proj)):
        mapped[k], log_deriv = spline(proj[k], layer.knots_x[k], layer.knots_y[k], layer.slopes[k])
        log_det += log_deriv
    return z + (mapped - proj).T @ layer.directions.T, log_det


def _layer_forward(layer, z):
    return _layer_map(layer, z, _rq_forward)


def _layer_inverse(layer, z):
    """The layer's inverse at ``z`` and the forward map's log-Jacobian at the result."""
    return _layer_map(layer, z, _rq_inverse)


def _std_normal_log_pdf(z):
    return -0.5 * np.sum(z**2, axis=1) - 0.5 * z.shape[1] * _LOG_2PI


def gaussianization_forward(model, x):
    """``z = Psi(x)`` and ``log |det dPsi/dx|``.

    Parameters
    ----------
    model : Gaussianization
    x : ndarray of shape (n, n_params)

    Returns
    -------
    z : ndarray of shape (n, n_params)
    log_det : ndarray of shape (n,)
    """
    z = np.linalg.solve(model.chol, (np.atleast_2d(x) - model.mean).T).T
    log_det = np.full(len(z), -np.sum(np.log(np.diag(model.chol))))
    if model.shift is not None:
        z, step = quadratic_shift_forward(model.shift, z)
        log_det = log_det + step
    for layer in model.layers:
        z, step = _layer_forward(layer, z)
        log_det = log_det + step
    return z, log_det


def gaussianization_inverse(model, z):
    """``x = Psi^-1(z)``, exact up to rounding (closed-form spline inverses)."""
    return _inverse_and_log_det(model, z)[0]


def _inverse_and_log_det(model, z):
    """``x = Psi^-1(z)`` and ``log |det dPsi/dx|`` at ``x``."""
    z = np.atleast_2d(np.asarray(z, dtype=float))
    log_det = np.full(len(z), -np.sum(np.log(np.diag(model.chol))))
    for layer in reversed(model.layers):
        z, step = _layer_inverse(layer, z)
        log_det = log_det + step
    if model.shift is not None:
        z, step = quadratic_shift_inverse(model.shift, z)
        log_det = log_det + step
    return model.mean + z @ model.chol.T, log_det


def gaussianization_log_density(model, x):
    """Normalised log density ``log q(x)``, shape ``(n,)``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> model = fit_gaussianization(rng, rng.normal(size=(2000, 2)))
    >>> x = gaussianization_sample(model, rng, 3)
    >>> gaussianization_log_density(model, x).shape
    (3,)
    """
    z, log_det = gaussianization_forward(model, x)
    return _std_normal_log_pdf(z) + log_det


def gaussianization_sample(model, rng, n_samples):
    """``n_samples`` exact draws from ``q``, shape ``(n_samples, n_params)``."""
    return gaussianization_inverse(model, rng.standard_normal((n_samples, len(model.mean))))


def gaussianization_sample_and_log_density(model, rng, n_samples):
    """Draws as :func:`gaussianization_sample` (the same for the same ``rng`` state) and their ``log q``.

    The density comes from the inverse pass itself (the base draw's normal
    density and the log-derivatives at the bin positions the inverse found), so
    it costs no forward pass; it equals :func:`gaussianization_log_density` at
    the draws up to rounding.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> model = fit_gaussianization(rng, rng.standard_t(4, size=(2000, 2)))
    >>> x, log_q = gaussianization_sample_and_log_density(model, rng, 5)
    >>> bool(np.allclose(log_q, gaussianization_log_density(model, x), rtol=0, atol=1e-9))
    True
    """
    z = rng.standard_normal((n_samples, len(model.mean)))
    x, log_det = _inverse_and_log_det(model, z)
    return x, _std_normal_log_pdf(z) + log_det


def _spline_layer(z, frame, n_knots, bandwidth_factor):
    """A layer mapping the marginals of ``z`` along the columns of ``frame`` to N(0, 1)."""
    proj = frame.T @ z.T  # each direction's projections contiguous
    fits = [_fit_marginal(values, n_knots, bandwidth_factor) for values in proj]
    return _SplineLayer(frame, *(tuple(f[j] for f in fits) for j in range(3)))


def _default_knots(settings, n):
    return settings.n_knots or int(np.clip(np.sqrt(n), 20, 100))


def _check_settings(settings, n, d):
    if not isinstance(settings, GaussianizationSettings):
        raise TypeError(f"settings must be a GaussianizationSettings, got {type(settings).__name__}")
    if settings.max_layers < 0:
        raise ValueError(f"max_layers must be >= 0, got {settings.max_layers!r}")
    if settings.n_directions is not None and not 1 <= settings.n_directions <= d:
        raise ValueError(f"n_directions must be in [1, {d}], got {settings.n_directions!r}")
    if not 0.0 < settings.validation_fraction < 0.5:
        raise ValueError(f"validation_fraction must be in (0, 0.5), got {settings.validation_fraction!r}")
    if not settings.bandwidth_factor > 0:
        raise ValueError(f"bandwidth_factor must be positive, got {settings.bandwidth_factor!r}")
    if not settings.noise_floor >= 0:
        raise ValueError(f"noise_floor must be >= 0, got {settings.noise_floor!r}")
    if not isinstance(settings.compare_without_shift, (bool, np.bool_)):
        raise TypeError(f"compare_without_shift must be a bool, got {settings.compare_without_shift!r}")
    pairs = settings.max_curved_pairs
    if pairs is not None and (isinstance(pairs, bool) or not isinstance(pairs, (int, np.integer)) or pairs < 0):
        raise ValueError(f"max_curved_pairs must be None or an int >= 0, got {pairs!r}")
    if n < max(2 * d, 20):
        raise ValueError(f"Gaussianization needs at least max(2 n_params, 20) = {max(2 * d, 20)} samples, got {n}")


def fit_gaussianization(rng, samples, settings=GaussianizationSettings()):
    """Fit an iterative Gaussianization to samples.

    Parameters
    ----------
    rng : numpy.random.Generator
        For the validation split and the random starting frames.
    samples : ndarray of shape (n, n_params)
    settings : GaussianizationSettings

    Returns
    -------
    model : Gaussianization
        Use with :func:`gaussianization_log_density`, :func:`gaussianization_sample`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_t(3, size=(3000, 2))
    >>> model = fit_gaussianization(rng, x)
    >>> len(model.layers) >= 1
    True
    """
    samples = np.asarray(samples, dtype=float)
    n, d = samples.shape
    _check_settings(settings, n, d)
    order = rng.permutation(n)
    n_val = max(int(settings.validation_fraction * n), 1)
    train, val = samples[order[n_val:]], samples[order[:n_val]]
    mean, chol = whitening(train)
    base = Gaussianization(mean, chol, ())
    z_train, _ = gaussianization_forward(base, train)
    z_val, log_det_val = gaussianization_forward(base, val)
    state = _FitState(z_train, z_val, log_det_val, float(np.mean(_std_normal_log_pdf(z_val) + log_det_val)))
    layers, score = _marginal_layers(rng, state, settings) if settings.compare_without_shift else (None, -np.inf)
    shift = _fit_shift(rng, z_train, settings)
    if shift is not None:
        # A shift can also bend skewed but independent directions into each other, which helps a Gaussian
        # and hurts the marginal layers; the held-out density after all the layers decides.
        shifted_layers, shifted_score = _marginal_layers(rng, _after_shift(shift, state), settings)
        if shifted_score > score:
            return Gaussianization(mean, chol, shifted_layers, shift)
    if layers is None:  # no shift was found after all
        layers, _ = _marginal_layers(rng, state, settings)
    return Gaussianization(mean, chol, layers)


def settled_settings(settings, model):
    """``settings`` for further fits to draws of the target that ``model`` was fitted to: the first fit's choice
    about the quadratic shift kept, so that they fit only the path it chose.

    Whether a thin curved ridge needs the shift is the target's geometry, not the sample's, and trying both
    paths on every fit doubles its cost (the search for the shift's pairs and a second set of marginal layers).
    A model without a shift gives ``max_curved_pairs=0``, one with a shift ``compare_without_shift=False``.
    """
    if model.shift is None:
        return settings._replace(max_curved_pairs=0)
    return settings._replace(compare_without_shift=False)


class _FitState(NamedTuple):
    """Whitened training samples, held-out samples, their log-Jacobians so far and mean log density."""

    z_train: np.ndarray
    z_val: np.ndarray
    log_det_val: np.ndarray
    score: float


def _marginal_layers(rng, state, settings):
    """Spline layers added to ``state`` while the held-out score rises: the layers and the final score."""
    z_train, z_val, log_det_val, best_score = state
    n, d = z_train.shape
    n_directions = settings.n_directions or d
    n_knots = _default_knots(settings, n)
    layers = []
    for index in range(settings.max_layers):
        frame, distance = _find_directions(rng, z_train, n_directions, settings.n_search_steps,
                                           start_identity=index == 0)
        frame = frame[:, distance > settings.noise_floor / np.sqrt(n)]
        if frame.shape[1] == 0:  # every direction already looks Gaussian
            break
        layer = _spline_layer(z_train, frame, n_knots, settings.bandwidth_factor)
        z_new_val, step = _layer_forward(layer, z_val)
        score = float(np.mean(_std_normal_log_pdf(z_new_val) + log_det_val + step))
        if not score > best_score + 1e-4 * d:
            break
        layers.append(layer)
        best_score, z_val, log_det_val = score, z_new_val, log_det_val + step
        z_train = _layer_forward(layer, z_train)[0]
    return tuple(layers), best_score


def _fit_shift(rng, z_train, settings):
    """The quadratic shift of the whitened training samples, or None (disabled, or no curved pair found)."""
    d = z_train.shape[1]
    max_pairs = d // 2 if settings.max_curved_pairs is None else settings.max_curved_pairs
    return fit_quadratic_shift(rng, z_train, max_pairs) if max_pairs > 0 else None


def _after_shift(shift, state):
    """``state`` with the shift applied to both sample sets."""
    z_val, step = quadratic_shift_forward(shift, state.z_val)
    log_det_val = state.log_det_val + step
    return _FitState(quadratic_shift_forward(shift, state.z_train)[0], z_val, log_det_val,
                     float(np.mean(_std_normal_log_pdf(z_val) + log_det_val)))


def fit_marginal_product(samples, settings=GaussianizationSettings()):
    """The product of the samples' smoothed marginals, each coordinate on its own.

    Each marginal's kernel bandwidth is chosen by likelihood cross-validation
    between the first and the second half of the rows (pass rows grouped by
    chain, so that the halves are independent).

    One spline layer along the coordinate axes after scaling each coordinate by
    its standard deviation: ``q(x) = prod_j q_j(x_j)``. It ignores every
    dependence between coordinates, and so proposes every combination of the
    coordinates' modes: where a target's modes form a product (2 peaks in each
    of ``d`` coordinates give ``2^d`` modes), draws from a few of them suffice
    to propose all of them, which :func:`fit_gaussianization` fitted to a few
    clusters would not.

    Parameters
    ----------
    samples : ndarray of shape (n, n_params)
    settings : GaussianizationSettings
        Only ``n_knots`` and ``bandwidth_factor`` are used.

    Returns
    -------
    model : Gaussianization

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.where(rng.uniform(size=(4000, 2)) < 0.5, -2.0, 2.0) + 0.3 * rng.normal(size=(4000, 2))
    >>> model = fit_marginal_product(x[x[:, 0] * x[:, 1] > 0])  # two of the four modes
    >>> logq = gaussianization_log_density(model, np.array([[2.0, 2.0], [2.0, -2.0], [0.0, 0.0]]))
    >>> bool(abs(logq[0] - logq[1]) < 0.5), bool(logq[2] < logq[0] - 5)
    (True, True)
    """
    samples = np.asarray(samples, dtype=float)
    n, d = samples.shape
    _check_settings(settings, n, d)
    mean, scale = samples.mean(axis=0), samples.std(axis=0)
    if not np.all(scale > 0):
        raise ValueError(f"coordinates {np.flatnonzero(~(scale > 0)).tolist()} of the samples do not vary: "
                         "no marginal density to fit")
    z = (samples - mean) / scale
    n_knots = _default_knots(settings, n)
    fits = [_fit_marginal(z[:, k], n_knots, _cross_validated_bandwidth(z[:, k], settings.bandwidth_factor))
            for k in range(d)]
    layer = _SplineLayer(np.eye(d), *(tuple(f[j] for f in fits) for j in range(3)))
    return Gaussianization(mean, np.diag(scale), (layer,))


_CV_FACTORS = (1.0, 0.5, 0.25, 0.125)  # multiples of Silverman's bandwidth tried by cross-validation
_CV_TEST_POINTS = 500


def _kernel_log_pdf(train, h, at):
    """Log density at ``at`` of :func:`_fit_marginal`'s kernel estimate of ``train`` (shrunk, binned)."""
    centres, log_w, h = _binned_kernel(train, h)
    return _log_kernel_sum(-0.5 * ((at[:, None] - centres[None, :]) / h) ** 2, np.exp(log_w)) - np.log(h) \
        - 0.5 * _LOG_2PI


def _cross_validated_bandwidth(values, bandwidth_factor):
    """The multiple of Silverman's bandwidth (times ``bandwidth_factor``) from ``_CV_FACTORS`` whose kernel
    estimate of the first half of ``values`` gives the second half the largest mean log density.

    Silverman's rule takes the scale from the standard deviation, which for
    separated narrow peaks is the distance between them: it smears each peak
    over several of its widths. The halves are the first and last rows, so
    that rows grouped by chain give independent halves (repeated states of one
    chain would otherwise reward the narrowest kernel).
    """
    half = len(values) // 2
    train, test = values[:half], values[half:]
    sd = float(np.std(train))
    if not sd > 0 or half < 2:
        return bandwidth_factor
    test = test[:: max(1, len(test) // _CV_TEST_POINTS)]
    silverman = 1.06 * sd * len(train) ** (-0.2)
    scores = [np.mean(_kernel_log_pdf(train, bandwidth_factor * f * silverman, test)) for f in _CV_FACTORS]
    return bandwidth_factor * _CV_FACTORS[int(np.argmax(scores))]


def marginal_log_densities(model, x):
    """Each coordinate's log density under a :func:`fit_marginal_product` model, shape ``(n, n_params)``.

    Their sum over coordinates is :func:`gaussianization_log_density`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> model = fit_marginal_product(rng.normal(size=(2000, 3)))
    >>> x = rng.normal(size=(4, 3))
    >>> bool(np.allclose(marginal_log_densities(model, x).sum(axis=1), gaussianization_log_density(model, x)))
    True
    """
    (layer,) = model.layers
    scale = np.diag(model.chol)
    u = (np.atleast_2d(x) - model.mean) / scale
    out = np.empty_like(u)
    for k in range(u.shape[1]):
        y, log_deriv = _rq_forward(u[:, k], layer.knots_x[k], layer.knots_y[k], layer.slopes[k])
        out[:, k] = -0.5 * y**2 - 0.5 * _LOG_2PI + log_deriv - np.log(scale[k])
    return out
