"""Compiled (numba) kernels of the softmax regression: per-row log-likelihoods and the weighted gradient.

Imported only on a likelihood's first call (``SoftmaxRegressionModel`` imports it lazily), so importing
``evidence_select`` neither imports numba nor compiles anything; ``cache=True`` keeps the machine code on disk
(numba's ``__pycache__`` next to this file, or ``NUMBA_CACHE_DIR``), so later processes load it instead of
compiling again.

Why compiled: the numpy path makes about ten passes through memory over an ``(n_rows, K, n_particles)`` block
(logits, max, shift, exp, sum, division, gradient product, plus casts), each larger than the cache. Here the rows
go by blocks that stay in cache, and every particle's logits, exponentials, residuals and gradient sums run over
one block before the next.

The math, per particle and row: logits ``l_k = w_k . x + b_k``; only their differences to the last class,
``z_k = l_k - l_{K-1}`` (``z_{K-1} = 0``), enter the softmax, so the kernels compute ``K - 1`` of them. The
softmax is shifted by ``top = max_k z_k`` (no overflow, and the largest term is 1, so the sum never underflows to
zero), shifted values below -80 are floored there (their terms are below 2e-35 of the largest, under a rounding
of the sum; the exponentials need the range), ``log p(y | x) = z_y - top - log sum_k exp(z_k - top)`` from the
unfloored ``z_y``. The gradient of ``sum_j w_j log p(y_j | x_j)`` for class ``k`` is
``sum_j w_j (onehot_jk - p_jk) [x_j, 1]``; the classes' gradients sum to zero (the probabilities sum to one), so
the last class's is minus the sum of the others', and its products are never formed.
"""

import numba
import numpy as np

from ._compiled_exp import EXP_FLOOR as _EXP_FLOOR
from ._compiled_exp import exp_of_precision as _exp
from ._compiled_exp import log_accurate as _log
from ._compiled_exp import quotient as _quotient

__all__ = ["softmax_class_spread", "softmax_gradient", "softmax_log_likelihood",
           "softmax_log_likelihood_and_gradient"]

#: Reassociation lets the sums over rows run in vector lanes; contraction lets the logits' and the gradient's
#: products fuse into multiply-adds. No finite-math flags (NaN keeps its meaning). The softmax's prior gradient is
#: numpy's, so no kernel's bits need to match another's term by term (compare ``_compiled_exp.FASTMATH``).
_FASTMATH = {"reassoc", "contract"}
#: Features per step of the products' loops: four rows of the block read per pass over the logits or residuals.
_TILE = 4


@numba.njit(cache=True)
def _block_rows(n_classes, n_features):
    """Rows per block: the scratch of one block, ``(2 K + d + 2)`` numbers a row, stays near 32 KiB in single and
    64 KiB in double precision (in cache, and below glibc's mmap threshold; see ``utils/_workspace.py``)."""
    return max(16, 8192 // (2 * n_classes + n_features + 2))


@numba.njit(cache=True)
def _scratch(n_classes, n_features, n_rows, dtype):
    """One block's buffers: ``size`` rows, then in ``dtype`` ``xt (d, size)`` (the rows' features), ``z (K - 1,
    size)`` (logits, exponentials, residuals), ``onehot (K - 1, size)`` (each row's weight in its class's row),
    ``weights``, ``top``, ``total``, ``observed`` ``(size,)`` and ``coefficients (K - 1, d + 1)``; the features'
    bounds ``(d,)`` in double precision."""
    size = min(_block_rows(n_classes, n_features), max(n_rows, 1))
    rows = (np.empty((n_features, size), dtype), np.empty((n_classes - 1, size), dtype),
            np.empty((n_classes - 1, size), dtype))
    return (size, rows, (np.empty(size, dtype), np.empty(size, dtype), np.empty(size, dtype), np.empty(size, dtype)),
            np.empty((n_classes - 1, n_features + 1), dtype), np.empty(n_features))


@numba.njit(cache=True)
def _columns(X, y, n_classes, start, stop, xt):
    """Rows ``start:stop`` of ``X`` into ``xt`` laid out ``(d, stop - start)``; checks their class codes (the
    kernels index with them)."""
    d = X.shape[1]
    for j in range(start, stop):
        if y[j] < 0 or y[j] >= n_classes:
            raise ValueError("class codes must lie in 0..n_classes - 1")
        for i in range(d):
            xt[i, j - start] = X[j, i]


@numba.njit(cache=True)
def _relative_coefficients(theta_row, n_classes, n_features, fit_intercept, coefficients):
    """``coefficients[k] = [w_k - w_{K-1}, b_k - b_{K-1}]`` for ``k < K - 1`` (intercept 0 without intercepts),
    differences in double precision, then rounded to ``coefficients``' precision."""
    K, d = n_classes, n_features
    last = (K - 1) * d
    for k in range(K - 1):
        for i in range(d):
            coefficients[k, i] = theta_row[k * d + i] - theta_row[last + i]
        coefficients[k, d] = theta_row[K * d + k] - theta_row[K * d + K - 1] if fit_intercept else 0.0


@numba.njit(cache=True, fastmath=_FASTMATH)
def _relative_logits(coefficients, xt, z, n_block):
    """``z[k, j] = coefficients[k] . [x_j, 1]`` for the first ``n_block`` rows (a few features per pass over
    ``z``, so the loop does more multiply-adds than loads and stores)."""
    d = xt.shape[0]
    for k in range(z.shape[0]):
        row, c = z[k], coefficients[k]
        intercept = c[d]
        for j in range(n_block):
            row[j] = intercept
        for i in range(0, d - d % _TILE, _TILE):
            a0, a1, a2, a3 = c[i], c[i + 1], c[i + 2], c[i + 3]
            x0, x1, x2, x3 = xt[i], xt[i + 1], xt[i + 2], xt[i + 3]
            for j in range(n_block):
                row[j] += a0 * x0[j] + a1 * x1[j] + a2 * x2[j] + a3 * x3[j]
        for i in range(d - d % _TILE, d):
            a, x = c[i], xt[i]
            for j in range(n_block):
                row[j] += a * x[j]


@numba.njit(cache=True)
def _column_bounds(xt, n_block, bounds):
    """``bounds[i] = max_j |x_ji|`` over the block's rows (NaN if any is NaN)."""
    for i in range(xt.shape[0]):
        x = xt[i]
        largest = 0.0
        for j in range(n_block):
            v = abs(x[j])
            largest = v if not v <= largest else largest  # NaN wins
        bounds[i] = largest


@numba.njit(cache=True)
def _logits_are_safe(coefficients, bounds):
    """Whether every logit of the block lies in ``[-80, 80]``: ``|b_k| + sum_i |c_ki| max_j |x_ji| <= 80`` for
    each class (Hoelder's inequality per feature; False when any term is NaN)."""
    d = bounds.shape[0]
    for k in range(coefficients.shape[0]):
        bound = abs(coefficients[k, d])
        for i in range(d):
            bound += abs(coefficients[k, i]) * bounds[i]
        if not bound <= -_EXP_FLOOR:
            return False
    return True


@numba.njit(cache=True, fastmath=_FASTMATH)
def _exponentials(z, top, total, n_block, safe):
    """``z[k, j] <- exp(z[k, j] - top[j])`` and ``total[j] = sum_k exp(z_k - top)`` including the last class's
    ``exp(-top)``, in ``z``'s precision (:func:`~._compiled_exp.exp_of_precision`).

    ``safe`` (every logit of the block in ``[-80, 80]``, see :func:`_logit_bound`): the shift ``top`` is 0 (the
    exponentials stay normal numbers and their sum, at least 1, cannot overflow), one exponential fewer per row
    and no per-row maximum. Otherwise ``top = max(0, max_k z[k, j])`` per row, shifted values floored at -80.
    """
    zero, one = z.dtype.type(0.0), z.dtype.type(1.0)
    floor = z.dtype.type(_EXP_FLOOR)
    if safe:
        for j in range(n_block):
            top[j] = zero
            total[j] = one
        for k in range(z.shape[0]):
            row = z[k]
            for j in range(n_block):
                e = _exp(row[j])
                row[j] = e
                total[j] += e
        return
    for j in range(n_block):
        top[j] = zero
    for k in range(z.shape[0]):
        row = z[k]
        for j in range(n_block):
            top[j] = max(top[j], row[j])
    for j in range(n_block):
        total[j] = _exp(max(-top[j], floor))
    for k in range(z.shape[0]):
        row = z[k]
        for j in range(n_block):
            e = _exp(max(row[j] - top[j], floor))
            row[j] = e
            total[j] += e


@numba.njit(cache=True)
def _observed(z, y, start, n_block, observed):
    """``observed[j] = z[y_j, j]`` (0 for the last class) for the rows ``start:start + n_block``."""
    last = z.shape[0]
    for j in range(n_block):
        c = y[start + j]
        observed[j] = z[c, j] if c < last else 0.0


@numba.njit(cache=True)
def _block_weights(weight_row, y, start, n_block, weights, onehot):
    """``weights[j] = w_j`` and ``onehot[k, j] = w_j`` if ``y_j = k`` else 0 (``k < K - 1``) for the rows
    ``start:start + n_block``."""
    zero = onehot.dtype.type(0.0)
    for k in range(onehot.shape[0]):
        for j in range(n_block):
            onehot[k, j] = zero
    for j in range(n_block):
        w = weight_row[start + j]
        weights[j] = w
        if y[start + j] < onehot.shape[0]:
            onehot[y[start + j], j] = w


@numba.njit(cache=True, fastmath=_FASTMATH)
def _residuals(z, total, weights, onehot, n_block):
    """``z[k, j] <- w_j (p_jk - onehot_jk)`` from the exponentials and their totals (``total`` is overwritten)."""
    for j in range(n_block):
        total[j] = _quotient(weights[j], total[j])
    for k in range(z.shape[0]):
        row, hit = z[k], onehot[k]
        for j in range(n_block):
            row[j] = row[j] * total[j] - hit[j]


@numba.njit(cache=True, fastmath=_FASTMATH)
def _subtract_products(z, xt, n_block, fit_intercept, n_classes, out_row):
    """``out_row[theta's index of (k, i)] -= sum_j z[k, j] x_ji`` (and of ``b_k``: ``sum_j z[k, j]``) for
    ``k < K - 1``; each block's sums in ``z``'s precision, added to ``out_row`` (double precision).

    Two classes per pass over the features (each feature row read once for both), the odd one alone.
    """
    d = xt.shape[0]
    n = z.shape[0]
    for k in range(0, n - n % 2, 2):
        _pair_products(z[k], z[k + 1], xt, n_block, out_row[k * d:(k + 2) * d])
    if n % 2:
        _class_products(z[n - 1], xt, n_block, out_row[(n - 1) * d:n * d])
    if fit_intercept:
        zero = z.dtype.type(0.0)
        for k in range(n):
            row = z[k]
            a = zero
            for j in range(n_block):
                a += row[j]
            out_row[n_classes * d + k] -= a


@numba.njit(cache=True, fastmath=_FASTMATH)
def _pair_products(r0, r1, xt, n_block, out):
    """``out[i] -= sum_j r0[j] x_ji`` and ``out[d + i] -= sum_j r1[j] x_ji``, four features per pass."""
    d = xt.shape[0]
    zero = r0.dtype.type(0.0)
    for i in range(0, d - d % _TILE, _TILE):
        x0, x1, x2, x3 = xt[i], xt[i + 1], xt[i + 2], xt[i + 3]
        a0, a1, a2, a3, b0, b1, b2, b3 = zero, zero, zero, zero, zero, zero, zero, zero
        for j in range(n_block):
            p, q = r0[j], r1[j]
            v0, v1, v2, v3 = x0[j], x1[j], x2[j], x3[j]
            a0 += p * v0
            a1 += p * v1
            a2 += p * v2
            a3 += p * v3
            b0 += q * v0
            b1 += q * v1
            b2 += q * v2
            b3 += q * v3
        out[i] -= a0
        out[i + 1] -= a1
        out[i + 2] -= a2
        out[i + 3] -= a3
        out[d + i] -= b0
        out[d + i + 1] -= b1
        out[d + i + 2] -= b2
        out[d + i + 3] -= b3
    for i in range(d - d % _TILE, d):
        x = xt[i]
        a, b = zero, zero
        for j in range(n_block):
            a += r0[j] * x[j]
            b += r1[j] * x[j]
        out[i] -= a
        out[d + i] -= b


@numba.njit(cache=True, fastmath=_FASTMATH)
def _class_products(row, xt, n_block, out):
    """``out[i] -= sum_j row[j] x_ji``, four features per pass."""
    d = xt.shape[0]
    zero = row.dtype.type(0.0)
    for i in range(0, d - d % _TILE, _TILE):
        x0, x1, x2, x3 = xt[i], xt[i + 1], xt[i + 2], xt[i + 3]
        a0, a1, a2, a3 = zero, zero, zero, zero
        for j in range(n_block):
            r = row[j]
            a0 += r * x0[j]
            a1 += r * x1[j]
            a2 += r * x2[j]
            a3 += r * x3[j]
        out[i] -= a0
        out[i + 1] -= a1
        out[i + 2] -= a2
        out[i + 3] -= a3
    for i in range(d - d % _TILE, d):
        x = xt[i]
        a = zero
        for j in range(n_block):
            a += row[j] * x[j]
        out[i] -= a


@numba.njit(cache=True)
def _last_class_gradient(out_row, n_classes, n_features, fit_intercept):
    """The last class's gradient entries: minus the sum of the other classes' (the gradients sum to zero)."""
    K, d = n_classes, n_features
    for i in range(d):
        total = 0.0
        for k in range(K - 1):
            total += out_row[k * d + i]
        out_row[(K - 1) * d + i] = 0.0 - total
    if fit_intercept:
        total = 0.0
        for k in range(K - 1):
            total += out_row[K * d + k]
        out_row[K * d + K - 1] = 0.0 - total


@numba.njit(cache=True, fastmath=_FASTMATH)
def _softmax_pass(theta, X, y, row_weights, n_classes, fit_intercept, dtype, log_lik, out):
    """The per-row log-likelihoods into ``log_lik`` (unless it has no rows) and the weighted gradient into ``out``
    (unless it has no rows), in ``dtype``'s precision, one block of rows at a time (see the module's notes)."""
    n_particles = theta.shape[0]
    n_rows, d = X.shape
    K = n_classes
    with_log_lik = log_lik.shape[0] > 0
    with_grad = out.shape[0] > 0
    shared = row_weights.shape[0] == 1
    size, (xt, z, onehot), (weights, top, total, observed), coefficients, bounds = _scratch(K, d, n_rows, dtype)
    if with_grad:
        out[:] = 0.0
    for start in range(0, n_rows, size):
        stop = min(start + size, n_rows)
        n_block = stop - start
        _columns(X, y, K, start, stop, xt)
        _column_bounds(xt, n_block, bounds)
        if with_grad and shared:
            _block_weights(row_weights[0], y, start, n_block, weights, onehot)
        for m in range(n_particles):
            _relative_coefficients(theta[m], K, d, fit_intercept, coefficients)
            _relative_logits(coefficients, xt, z, n_block)
            if with_log_lik:
                _observed(z, y, start, n_block, observed)
            _exponentials(z, top, total, n_block, _logits_are_safe(coefficients, bounds))
            if with_log_lik:
                for j in range(n_block):
                    log_lik[m, start + j] = (observed[j] - top[j]) - _log(total[j])
            if with_grad:
                if not shared:
                    _block_weights(row_weights[m], y, start, n_block, weights, onehot)
                _residuals(z, total, weights, onehot, n_block)
                _subtract_products(z, xt, n_block, fit_intercept, K, out[m])
    if with_grad:
        for m in range(n_particles):
            _last_class_gradient(out[m], K, d, fit_intercept)


@numba.njit(cache=True)
def softmax_log_likelihood(theta, X, y, n_classes, fit_intercept, out):
    """``log p(y_j | x_j, theta_m)`` per particle and row into ``out`` ``(n_particles, n_rows)``, in double precision
    with exponentials to 3e-15 relative (:func:`~._compiled_exp.exp_accurate`) and the logarithm to an ulp
    (:func:`~._compiled_exp.log_accurate`).

    Parameters
    ----------
    theta : ndarray of shape (n_particles, n_params)
        ``[W (n_classes, n_features) row by row, b (n_classes)]`` (no ``b`` without intercepts).
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_rows,), integer
        Class codes ``0..n_classes - 1`` (``ValueError`` otherwise).
    n_classes : int
    fit_intercept : bool
    out : ndarray of shape (n_particles, n_rows)
    """
    _softmax_pass(theta, X, y, np.ones((1, X.shape[0])), n_classes, fit_intercept, np.float64, out,
                  np.empty((0, theta.shape[1])))
    return out


@numba.njit(cache=True)
def softmax_gradient(theta, X, y, row_weights, n_classes, fit_intercept, out):
    """The gradient of ``sum_j w_j log p(y_j | x_j, theta_m)`` per particle into ``out`` ``(n_particles, n_params)``.

    In single precision (logits, exponentials by :func:`~._compiled_exp.exp_single`, residuals, and each block's
    sums; the blocks' sums added in double precision): accurate to about 1e-6 of the weighted rows' absolute total,
    far below a mini-batch gradient's own noise. ``row_weights`` is ``(1, n_rows)`` (shared by every particle) or
    ``(n_particles, n_rows)``; the other arguments as in :func:`softmax_log_likelihood`.
    """
    _softmax_pass(theta, X, y, row_weights, n_classes, fit_intercept, np.float32, np.empty((0, X.shape[0])), out)
    return out


@numba.njit(cache=True)
def softmax_log_likelihood_and_gradient(theta, X, y, row_weights, n_classes, fit_intercept, log_lik, out):
    """:func:`softmax_log_likelihood` into ``log_lik`` and the gradient of :func:`softmax_gradient` into ``out``,
    both in double precision from one pass (the same bits of ``log_lik`` as :func:`softmax_log_likelihood`): for an
    exact HMC move, which needs both."""
    _softmax_pass(theta, X, y, row_weights, n_classes, fit_intercept, np.float64, log_lik, out)
    return log_lik, out


@numba.njit(cache=True, fastmath=_FASTMATH)
def softmax_class_spread(theta, X, n_classes, fit_intercept, out):
    """``mean_m p_k (1 - p_k)`` per row and class into ``out`` ``(n_rows, n_classes)``, in double precision, with
    ``1 - p_k`` as the other classes' share (no cancellation where ``p_k`` is near 1): the Fisher information's
    factor of ``SoftmaxRegressionModel.curvature_ratio``. Arguments as in :func:`softmax_log_likelihood`."""
    n_particles = theta.shape[0]
    n_rows, d = X.shape
    K = n_classes
    codes = np.zeros(n_rows, dtype=np.intp)  # no targets: any valid code passes _columns' check
    size, (xt, z, _), (last, top, total, _), coefficients, bounds = _scratch(K, d, n_rows, np.float64)
    out[:] = 0.0
    for start in range(0, n_rows, size):
        stop = min(start + size, n_rows)
        n_block = stop - start
        _columns(X, codes, K, start, stop, xt)
        _column_bounds(xt, n_block, bounds)
        for m in range(n_particles):
            _relative_coefficients(theta[m], K, d, fit_intercept, coefficients)
            _relative_logits(coefficients, xt, z, n_block)
            _exponentials(z, top, total, n_block, _logits_are_safe(coefficients, bounds))
            for j in range(n_block):
                last[j] = _exp(max(-top[j], _EXP_FLOOR))
            for k in range(K):
                row = z[k] if k < K - 1 else last
                for j in range(n_block):
                    out[start + j, k] += row[j] * (total[j] - row[j]) / (total[j] * total[j])
    out /= max(n_particles, 1)
    return out
