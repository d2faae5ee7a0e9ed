"""A volume-preserving quadratic shift: the layer that straightens curved (banana-shaped) posteriors.

Marginal spline layers (:mod:`._gaussianize`) map one direction at a time and
cannot undo a dependence such as ``b = a^2 + small noise``: along any fixed
direction the thin curved ridge looks like a broad marginal. This layer models
it directly. It finds conditioning directions ``u_k`` such that another
direction of the (whitened) samples is well predicted by a quadratic in
``w_k = u_k . z``, and subtracts the prediction:

``z' = z - F(U^T z) B``, ``F(W) = [1, W, W^2]`` (columns), with every row of
``B`` orthogonal to the span of ``U``.

Because the shift never moves ``z`` along a conditioning direction, ``U^T z' =
U^T z``: the map is triangular with unit diagonal, so its Jacobian determinant
is exactly 1 and its inverse is ``z = z' + F(U^T z') B``. A whitening affine
map follows, so that later layers see unit variance.

Fitting, on whitened samples:

1. A pair ``(v, u)`` of orthonormal directions is sought that maximises the
   share of the variance of ``v . z`` explained by ``(u . z)^2``,
   ``cov(v.z, (u.z)^2)^2 / var((u.z)^2)``, by Riemannian gradient ascent
   started from the samples' most skewed direction (a curved ridge is skewed
   along its bend) and the direction that best explains its curvature.
2. ``u`` is refined by Gauss-Newton on ``v.z ~ c0 + c1 w + c2 w^2``: the
   linearised ``((u + delta).z)^2`` adds the features ``2 w (delta . z)``.
   This matters: with a thin ridge the fit's residual is the ridge's
   thickness, and a conditioning direction off by a few degrees leaves
   residuals several times that.
3. The pair's prediction is removed (provisionally) and the search repeats,
   its responses kept orthogonal to the conditioning directions found, until
   the explained share falls below ``_MIN_SHARE_PER_PARAM * n_params / n``
   (noise gives shares of order ``n_params / n``).
4. Each ``u`` is refined once more on the original samples, and ``B`` is one
   least-squares fit of the samples (projected off ``span(U)``) on all the
   pairs' features together, so that errors of the provisional shifts do not
   accumulate.

This follows the idea of normalising flows built from triangular (autoregressive)
maps with polynomial conditioners, restricted to directions the samples show
to be curved; it needs numpy only.
"""

from typing import NamedTuple

import numpy as np

from ..utils._whitening import whitening

__all__ = ["QuadraticShift", "fit_quadratic_shift", "quadratic_shift_forward", "quadratic_shift_inverse"]

_MIN_SHARE_PER_PARAM = 10.0  # a pair counts when it explains more than 10 n_params / n of its response's variance
_N_STARTS = 3  # skewness starts of the pair search (the best one is kept)
_N_POWER_STEPS = 15  # power-iteration steps of each start
_N_ASCENT_STEPS = 60
_ASCENT_STEP = 0.3  # first step length (radians, roughly); shrinks by _STEP_DECAY per step
_STEP_DECAY = 0.97
_N_REFINE_STEPS = 4  # Gauss-Newton steps on a conditioning direction


class QuadraticShift(NamedTuple):
    """A fitted shift ``z' = chol^-1 (z - F(z @ directions) @ coef - mean)``.

    directions : (n_params, K), the conditioning directions ``U``;
    coef : (2 K + 1, n_params), ``B`` (rows orthogonal to ``span(U)``);
    mean, chol : the whitening of the shifted samples.
    """

    directions: np.ndarray
    coef: np.ndarray
    mean: np.ndarray
    chol: np.ndarray


def _features(w):
    """``[1, w, w^2]`` for ``w`` of shape (n,) or (n, K)."""
    w = w.reshape(len(w), -1)
    return np.column_stack([np.ones(len(w)), w, w**2])


def _least_squares(design, y):
    """``argmin_c |design c - y|^2`` (the minimum-norm one where ``design`` is rank-deficient), from the normal
    equations.

    The designs here are a few to ``n_params + 2`` columns of functions of
    whitened draws over thousands of rows, well conditioned, so squaring their
    condition number costs no digits that matter, and solving with the small
    Gram matrix costs a fraction of ``lstsq``'s SVD of the whole design.
    """
    return np.linalg.lstsq(design.T @ design, design.T @ y, rcond=None)[0]


def _unit(vector):
    return vector / np.linalg.norm(vector)


def _project_out(vector, basis):
    """``vector`` minus its component in the span of the orthonormal columns of ``basis``."""
    return vector - basis @ (basis.T @ vector)


def _explained_share(z, v, u):
    """``cov(y, w^2)^2 / var(w^2)`` pieces for ``y = v.z``, ``w = u.z``: (cov, var(w^2), w, centred y and w^2)."""
    w, y = z @ u, z @ v
    y = y - y.mean()
    w2 = w**2 - np.mean(w**2)
    return np.mean(y * w2), np.mean(w2**2), w, y, w2


def _skew_start(rng, z, blocked):
    """A start for the pair search: ``v`` a most skewed direction off ``blocked`` (power iteration on the third
    moment), ``u`` the direction off ``v`` along which ``v.z`` curves most (top eigenvector of
    ``E[(v.z) z z^T]``)."""
    n, d = z.shape
    v = _unit(_project_out(rng.standard_normal(d), blocked))
    for _ in range(_N_POWER_STEPS):
        y = z @ v
        v = _unit(_project_out(z.T @ (y**2 - np.mean(y**2)) / n, blocked))
    y = z @ v - np.mean(z @ v)
    u = _unit(_project_out(rng.standard_normal(d), v[:, None]))
    for _ in range(_N_POWER_STEPS):
        u = _unit(_project_out(z.T @ (y * (z @ u)) / n, v[:, None]))
    return v, u


def _ascend(z, v, u, blocked):
    """Riemannian gradient ascent of the explained share over orthonormal pairs ``(v, u)``, ``v`` off
    ``blocked``; normalised steps of decaying length, QR-like retraction."""
    n = len(z)
    for step in range(_N_ASCENT_STEPS):
        cov, var_w2, w, y, w2 = _explained_share(z, v, u)
        grad_v = _project_out(2.0 * cov / var_w2 * (z.T @ w2) / n, blocked)
        grad_u = (4.0 * cov / var_w2 * (z.T @ (y * w)) - 4.0 * cov**2 / var_w2**2 * (z.T @ (w2 * w))) / n
        frame, grad = np.column_stack([v, u]), np.column_stack([grad_v, grad_u])
        sym = frame.T @ grad
        tangent = grad - frame @ (0.5 * (sym + sym.T))
        norm = np.linalg.norm(tangent)
        if not norm > 1e-12:
            break
        frame = frame + _ASCENT_STEP * _STEP_DECAY**step / norm * tangent
        v = _unit(frame[:, 0])
        u = _unit(frame[:, 1] - (frame[:, 1] @ v) * v)
    return v, u


def _find_conditioning(rng, z, blocked):
    """The conditioning ``u`` of the pair (its response ``v`` off ``blocked``) with the largest explained share;
    :func:`_refine` then sets the response anew."""
    best, best_share = None, -np.inf
    for _ in range(_N_STARTS):
        v, u = _ascend(z, *_skew_start(rng, z, blocked), blocked)
        cov, var_w2, *_ = _explained_share(z, v, u)
        if cov * cov / var_w2 > best_share:
            best, best_share = u, cov * cov / var_w2
    return best


def _refine(z, u):
    """Gauss-Newton on ``u`` for ``v.z ~ c0 + c1 w + c2 w^2``, ``w = u.z``, with ``v`` the direction (off ``u``)
    along which ``w^2`` shows; returns ``(v, u)``.

    ``u`` may move in every direction but its own, ``v``'s included: a start
    with a little of the response in ``u`` would otherwise keep it.
    """
    n, d = z.shape
    for _ in range(_N_REFINE_STEPS):
        w = z @ u
        v = _unit(_project_out(z.T @ (w**2 - np.mean(w**2)), u[:, None]))
        others = np.linalg.qr(_project_out(np.eye(d), u[:, None]))[0][:, : d - 1]
        design = np.column_stack([_features(w), w[:, None] * (z @ others)])
        coef = _least_squares(design, z @ v)
        if not abs(coef[2]) > 0:
            break
        u = _unit(u + others @ coef[3:] / (2.0 * coef[2]))
    w = z @ u
    return _unit(_project_out(z.T @ (w**2 - np.mean(w**2)), u[:, None])), u


def _share_explained_by(w, y):
    """``1 - var(residual) / var(y)`` of the least-squares fit of ``y`` on ``[1, w, w^2]``."""
    features = _features(w)
    residual = y - features @ _least_squares(features, y)
    return 1.0 - np.var(residual) / np.var(y)


def _conditioning_directions(rng, z, max_pairs):
    """Conditioning directions found one pair at a time, each pair's curvature removed (provisionally, along its
    response off the directions so far) before the next search; columns of an ``(n_params, K)`` array."""
    n, d = z.shape
    threshold = _MIN_SHARE_PER_PARAM * d / n
    shifted, directions = z.copy(), np.zeros((d, 0))
    blocked = directions  # an orthonormal basis of the directions' span
    for _ in range(max_pairs):
        v, u = _refine(shifted, _find_conditioning(rng, shifted, blocked))
        w = shifted @ u
        if not _share_explained_by(w, shifted @ v) > threshold:
            break
        directions = np.column_stack([directions, u])
        blocked = np.linalg.qr(directions)[0]
        response = _unit(_project_out(v, blocked))
        y = shifted @ response
        shifted = shifted - np.outer(_features(w) @ _least_squares(_features(w), y), response)
    return directions


def fit_quadratic_shift(rng, z, max_pairs):
    """Fit the shift to whitened samples ``z`` (n, n_params); None when no pair explains enough.

    Parameters
    ----------
    rng : numpy.random.Generator
        For the starts of the pair search.
    z : ndarray of shape (n, n_params)
        Whitened samples (mean 0, covariance about the identity).
    max_pairs : int
        Most conditioning directions (at most ``n_params - 1`` are useful).

    Returns
    -------
    shift : QuadraticShift or None
    """
    n, d = z.shape
    if d < 2 or max_pairs < 1:
        return None
    found = _conditioning_directions(rng, z, min(max_pairs, d - 1))
    if found.shape[1] == 0:
        return None
    directions = np.column_stack([_refine(z, u)[1] for u in found.T])
    basis = np.linalg.qr(directions)[0]
    features = _features(z @ directions)
    coef = _least_squares(features, z - (z @ basis) @ basis.T)
    coef = coef - (coef @ basis) @ basis.T  # exactly off span(U), so that U^T z is kept
    return QuadraticShift(directions, coef, *whitening(z - features @ coef))


def quadratic_shift_forward(shift, z):
    """The shifted and whitened ``z`` and the log-Jacobian (the whitening's; the shift's is 0), shape (n,)."""
    shifted = z - _features(z @ shift.directions) @ shift.coef
    out = np.linalg.solve(shift.chol, (shifted - shift.mean).T).T
    return out, np.full(len(z), -np.sum(np.log(np.diag(shift.chol))))


def quadratic_shift_inverse(shift, z):
    """The inverse of :func:`quadratic_shift_forward` at ``z`` and the forward log-Jacobian there."""
    shifted = shift.mean + z @ shift.chol.T
    out = shifted + _features(shifted @ shift.directions) @ shift.coef
    return out, np.full(len(z), -np.sum(np.log(np.diag(shift.chol))))
