"""Compiled (numba) kernels of the Gaussian mixture: its gradient, its per-row log-likelihood and its log prior.

Imported only on a gradient's first call (``GaussianMixtureModel`` imports it lazily), so importing
``evidence_select`` neither imports numba nor compiles anything; ``cache=True`` keeps the machine code on disk
(numba's ``__pycache__`` next to this file, or ``NUMBA_CACHE_DIR``), so later processes load it instead of
compiling again.

Why compiled: the numpy gradient makes about a dozen passes over a ``(K, n_particles, n_rows)`` block of
component densities (densities, max, single-precision copy, floor, exp, copy back, sum, reciprocal, product,
moments), each through memory, plus some twenty small numpy calls for the parameter maps and the gradient blocks.
Here one pass per particle keeps the block in cache and the small maps are plain loops. The exponentials are
polynomials the compiler vectorises (libm's scalar ``exp`` would cost as much as all the numpy passes):
:func:`~._compiled_exp.exp_accurate` for the log-likelihood, which feeds the evidence;
:func:`~._compiled_exp.exp_coarse` for EM's moments; :func:`~._compiled_exp.exp_single` for SGHMC's gradient,
whose rows' terms are single precision (eight vector lanes, not four). The log prior is compiled for its many
calls: nested sampling weighs thousands of candidate points per chain by it and evaluates it on a few points at a
time in its moves, where numpy's dozen passes over the parameters, and its overhead per call, take a sizeable share
of a run.

The same call gives the same bits wherever its arrays lie, so in every process and joblib worker: the compiler
compiles a loop that reads one array and writes another twice, vectorised and not, and picks one by a run-time check
of the arrays' addresses, which the heap decides. So fast-math reassociation is only in the loops that sum and
store nothing (:func:`_double_sums`, :func:`_single_sums`, :func:`_log_total`), where it lets the sums run in vector
lanes; every loop that stores is compiled without flags, so its two versions give the same bits; and libm's
exponentials, whose vector and scalar versions differ in the last bits, run in place over one array
(:func:`_exp_in_place`).
"""

import numba
import numpy as np

from ._compiled_exp import EXP_FLOOR as _EXP_FLOOR
from ._compiled_exp import FASTMATH as _FASTMATH
from ._compiled_exp import exp_accurate as _exp
from ._compiled_exp import exp_coarse as _exp_coarse
from ._compiled_exp import exp_single as _exp_single
from ._compiled_exp import log_accurate as _log
from ._compiled_exp import quotient as _quotient

__all__ = ["mixture_gradient", "mixture_log_likelihood", "mixture_log_likelihood_and_gradient",
           "mixture_log_likelihood_sum_single", "mixture_log_prior", "mixture_moments", "mixture_prior_gradient"]

_LOG_2PI = float(np.log(2.0 * np.pi))
#: The largest float32: the single-precision gradient's precisions and log-densities are clamped to it.
_SINGLE_MAX = float(np.finfo(np.float32).max)


@numba.njit(cache=True)
def _exp_in_place(values):
    """``values <- exp(values)`` for a 1-d array, in one loop over that array alone.

    The compiler's vector exponential (a vector math library's) and its scalar one (libm's) differ in the last
    bits. A loop that reads one array and writes another is compiled twice, vectorised and not, and a run-time
    check of where the two arrays lie picks one: the bits would then depend on where the heap placed them, and
    the same call could give another result in another process. A loop over one array in place needs no such
    check, so it runs the same code wherever its array lies.
    """
    for i in range(len(values)):
        values[i] = np.exp(values[i])


@numba.njit(cache=True)
def _weights_of(log_weights, weights):
    """``weights <- exp(log_weights)`` (copied, then :func:`_exp_in_place`)."""
    for k in range(len(log_weights)):
        weights[k] = log_weights[k]
    _exp_in_place(weights)


@numba.njit(cache=True)
def _unpack_particle(theta_row, K, d, log_weights, mu, tau, const):
    """One particle's parameter maps into ``log_weights (K,)``, ``mu``, ``tau = 1 / sigma2`` ``(K, d)`` and
    ``const (K,)``, the row-independent part of ``log beta_k + log N(x; mu_k, diag sigma2_k)``.

    Weights by the additive log-ratio map (``eta_K = 0``), variances by ``exp`` (:func:`_exp_in_place`). No
    fast-math flags: the prior's gradient derives from these, and must be the same bits whichever kernel it is
    inlined into.
    """
    largest = 0.0
    for k in range(K - 1):
        largest = max(largest, theta_row[k])
    total = 0.0
    for k in range(K):
        log_weights[k] = (theta_row[k] if k < K - 1 else 0.0) - largest
        total += np.exp(log_weights[k])
    log_total = np.log(total)
    mean_start, var_start = K - 1, K - 1 + K * d
    for k in range(K):
        log_weights[k] -= log_total
        mu_k, tau_k = mu[k], tau[k]
        for i in range(d):
            mu_k[i] = theta_row[mean_start + k * d + i]
            tau_k[i] = -theta_row[var_start + k * d + i]
        _exp_in_place(tau_k)
        quadratic = 0.0
        for i in range(d):
            quadratic += theta_row[var_start + k * d + i] + mu_k[i] * mu_k[i] * tau_k[i]
        const[k] = log_weights[k] - 0.5 * (quadratic + d * _LOG_2PI)


@numba.njit(cache=True)
def _log_densities(xt, x2, mu, tau, const, dens, top, n_rows):
    """Component log-densities of the first ``n_rows`` rows into ``dens`` ``(K, >= n_rows)``, their largest per row
    into ``top``.

    ``xt`` and ``x2`` are the rows' features and their squares laid out ``(d, >= n_rows)``: every loop below runs
    over contiguous rows, so it vectorises.
    """
    K, d = mu.shape
    for k in range(K):
        row = dens[k]
        ck = const[k]
        for j in range(n_rows):
            row[j] = ck
        for i in range(d):
            quad = -0.5 * tau[k, i]
            lin = mu[k, i] * tau[k, i]
            xi, x2i = xt[i], x2[i]
            for j in range(n_rows):
                row[j] += quad * x2i[j] + lin * xi[j]
    for j in range(n_rows):
        top[j] = dens[0, j]
    for k in range(1, K):
        row = dens[k]
        for j in range(n_rows):
            top[j] = max(top[j], row[j])


@numba.njit(cache=True)
def _block_rows(K, d):
    """Rows per block: the scratch of one block, ``(K + 2 d)`` doubles a row, stays near 64 KiB (in cache, and far
    below glibc's mmap threshold, so no block costs a page fault; see ``utils/_workspace.py``)."""
    return max(16, 8192 // (K + 2 * d))


@numba.njit(cache=True)
def _columns(X, start, stop, xt, x2):
    """Rows ``start:stop`` of ``X`` and their squares into ``xt``, ``x2`` laid out ``(d, stop - start)``."""
    d = X.shape[1]
    for j in range(start, stop):
        for i in range(d):
            v = X[j, i]
            xt[i, j - start] = v
            x2[i, j - start] = v * v


@numba.njit(cache=True)
def _scratch(K, d, n_rows):
    """One block's buffers: ``(size, xt, x2, dens, top, totals, (log_weights, mu, tau, const))`` (see
    :func:`_block_rows`, :func:`_columns`, :func:`_unpack_particle`, :func:`_log_densities`)."""
    size = min(_block_rows(K, d), max(n_rows, 1))
    params = (np.empty(K), np.empty((K, d)), np.empty((K, d)), np.empty(K))
    return (size, np.empty((d, size)), np.empty((d, size)), np.empty((K, size)), np.empty(size), np.empty(size),
            params)


@numba.njit(cache=True)
def _particle_log_densities(theta_row, xt, x2, n_block, params, dens, top, totals):
    """One particle's parameter maps into ``params``, its log-densities on a block into ``dens`` and ``top``, and
    ``totals`` zeroed for the sums of exponentials."""
    log_weights, mu, tau, const = params
    K, d = mu.shape
    _unpack_particle(theta_row, K, d, log_weights, mu, tau, const)
    _log_densities(xt, x2, mu, tau, const, dens, top, n_block)
    for j in range(n_block):
        totals[j] = 0.0


@numba.njit(cache=True)
def _exponentials(dens, top, totals, n_block, accurate):
    """``dens[k, j] <- exp(dens[k, j] - top[j])`` (log-ratios floored at -80) and their sums over components added
    to ``totals``, for the first ``n_block`` rows; to 3e-15 relative with ``accurate``
    (:func:`~._compiled_exp.exp_accurate`), else 7e-9 (:func:`~._compiled_exp.exp_coarse`, EM's moments')."""
    for k in range(dens.shape[0]):
        row = dens[k]
        if accurate:
            for j in range(n_block):
                e = _exp(max(row[j] - top[j], _EXP_FLOOR))
                row[j] = e
                totals[j] += e
        else:
            for j in range(n_block):
                e = _exp_coarse(max(row[j] - top[j], _EXP_FLOOR))
                row[j] = e
                totals[j] += e


@numba.njit(cache=True)
def _scale(row, scale, n_block):
    """``row[j] *= scale[j]`` for the first ``n_block`` entries (the responsibilities from the exponentials)."""
    for j in range(n_block):
        row[j] = row[j] * scale[j]


@numba.njit(cache=True, fastmath=_FASTMATH)
def _double_sums(row, xi, x2i, n_block):
    """``(sum r, sum r x, sum r x^2)`` over the first ``n_block`` rows, reassociated into vector lanes.

    Sums run in loops that store nothing: such a loop needs no run-time check of where arrays lie (see
    :func:`_exp_in_place`), so it is summed in one order wherever its arrays lie. A loop that both stored and
    summed would be compiled twice, summed in two orders, and one of them picked by that check.
    """
    total = 0.0
    acc1 = 0.0
    acc2 = 0.0
    for j in range(n_block):
        r = row[j]
        total += r
        acc1 += r * xi[j]
        acc2 += r * x2i[j]
    return total, acc1, acc2


@numba.njit(cache=True, fastmath=_FASTMATH)
def _single_sums(row, xi, centre, n_block):
    """``(sum r, sum r z, sum r z^2)`` in single precision over the first ``n_block`` rows, ``z = x - centre``
    taken in double precision and rounded (see :func:`mixture_gradient`); summed as :func:`_double_sums`."""
    zero = np.float32(0.0)
    total = zero
    acc1 = zero
    acc2 = zero
    for j in range(n_block):
        r = row[j]
        z = np.float32(xi[j] - centre)
        rz = r * z
        total += r
        acc1 += rz
        acc2 += rz * z
    return total, acc1, acc2


@numba.njit(cache=True, fastmath=_FASTMATH)
def _log_total(top, total, n_block):
    """``sum_j top[j] + log(total[j])`` over the first ``n_block`` rows, in double precision from single-precision
    terms, reassociated into vector lanes (a loop that stores nothing: see :func:`_double_sums`)."""
    block = 0.0
    for j in range(n_block):
        block += np.float64(top[j]) + _log(np.float64(total[j]))
    return block


@numba.njit(cache=True)
def mixture_log_likelihood(theta, X, n_components, out):
    """``log p(x_j | theta_m)`` per particle and row into ``out`` ``(n_particles, n_rows)``.

    ``top + log sum_k exp(log-density_k - top)`` with ``top`` the largest component log-density, the exponentials
    to 3e-15 relative (:func:`~._compiled_exp.exp_accurate`) and the logarithm to an ulp
    (:func:`~._compiled_exp.log_accurate`): each entry is within about 1e-14 (absolute, plus its own rounding) of
    numpy's log-sum-exp. Log-ratios below -80 are floored there (their terms are below 2e-35 of the largest, under
    a rounding of the sum).
    """
    n_particles = theta.shape[0]
    n_rows, d = X.shape
    K = n_components
    size, xt, x2, dens, top, total, params = _scratch(K, d, n_rows)
    for start in range(0, n_rows, size):
        stop = min(start + size, n_rows)
        n_block = stop - start
        _columns(X, start, stop, xt, x2)
        for m in range(n_particles):
            _particle_log_densities(theta[m], xt, x2, n_block, params, dens, top, total)
            _exponentials(dens, top, total, n_block, True)
            for j in range(n_block):
                out[m, start + j] = top[j] + _log(total[j])
    return out


@numba.njit(cache=True)
def _add_prior_gradient(weights, mu, tau, prior, mean_start, var_start, out_row):
    """``out_row <- grad log prior + out_row`` for one particle (no fast-math flags: the same bits everywhere).

    ``d/d eta_k = alpha - K alpha beta_k`` (``weights`` are the ``beta_k``), ``d/d mu = -(mu - m0) tau / c``,
    ``d/d log sigma2 = -a + b tau - 1/2 + (mu - m0)^2 tau / (2 c)`` (Dirichlet times the log-ratio map's
    Jacobian; inverse gamma times ``sigma2``; normal means given their variances).
    """
    alpha, a, b, c, m0 = prior[0], prior[1], prior[2], prior[3], prior[4]
    K, d = mu.shape
    for k in range(K - 1):
        out_row[k] = (alpha - K * alpha * weights[k]) + out_row[k]
    for k in range(K):
        for i in range(d):
            centred = mu[k, i] - m0
            t = tau[k, i]
            out_row[mean_start + k * d + i] = -centred * t / c + out_row[mean_start + k * d + i]
            out_row[var_start + k * d + i] = ((-a + b * t - 0.5 + 0.5 * centred * centred * t / c)
                                              + out_row[var_start + k * d + i])


@numba.njit(cache=True)
def mixture_log_prior(theta, n_components, n_features, prior, normalisers, out):
    """The log prior per particle into ``out`` ``(n_particles,)`` (no fast-math flags: NaN and inf propagate).

    The density of ``theta``: the Dirichlet on the weights times the log-ratio map's Jacobian ``prod_k beta_k``,
    the inverse gamma on each variance times its Jacobian ``sigma2``, and the normal on each mean given its
    variance. ``prior`` is ``(alpha, a, b, c, m0)`` (see :func:`mixture_gradient`), ``normalisers``
    ``(gammaln(K alpha) - K gammaln(alpha), a log b - gammaln(a))``.
    """
    alpha, a, b, c, m0 = prior[0], prior[1], prior[2], prior[3], prior[4]
    weight_normaliser, variance_normaliser = normalisers[0], normalisers[1]
    K, d = n_components, n_features
    log_weights, const = np.empty(K), np.empty(K)
    mu, tau = np.empty((K, d)), np.empty((K, d))
    mean_normaliser = np.log(c) + _LOG_2PI
    var_start = K - 1 + K * d
    for m in range(theta.shape[0]):
        _unpack_particle(theta[m], K, d, log_weights, mu, tau, const)
        log_weight_sum = 0.0
        for k in range(K):
            log_weight_sum += log_weights[k]
        total = weight_normaliser + alpha * log_weight_sum
        for k in range(K):
            for i in range(d):
                s = theta[m, var_start + k * d + i]
                t = tau[k, i]
                centred = mu[k, i] - m0
                total += (variance_normaliser - a * s - b * t) - 0.5 * (mean_normaliser + s + centred * centred * t / c)
        out[m] = total
    return out


@numba.njit(cache=True)
def mixture_prior_gradient(theta, n_components, n_features, prior, out):
    """The log prior's gradient per particle into ``out`` ``(n_particles, n_params)`` (see :func:`mixture_gradient`)."""
    K, d = n_components, n_features
    log_weights, weights, const = np.empty(K), np.empty(K), np.empty(K)
    mu, tau = np.empty((K, d)), np.empty((K, d))
    for m in range(theta.shape[0]):
        _unpack_particle(theta[m], K, d, log_weights, mu, tau, const)
        _weights_of(log_weights, weights)
        for p in range(out.shape[1]):
            out[m, p] = 0.0
        _add_prior_gradient(weights, mu, tau, prior, K - 1, K - 1 + K * d, out[m])
    return out


@numba.njit(cache=True)
def mixture_gradient(theta, X, row_weights, n_components, prior, include_prior, out):
    """The weighted log-likelihood's gradient (plus the log prior's with ``prior``) per particle, into ``out``.

    Parameters
    ----------
    theta : ndarray of shape (n_particles, n_params)
        Unconstrained parameters ``[eta (K - 1), means (K d, row per component), log variances (K d)]``.
    X : ndarray of shape (n_rows, n_features)
    row_weights : ndarray of shape (1, n_rows) or (n_particles, n_rows)
        Each row's weight: one row shared by every particle, or one per particle.
    n_components : int
    prior : tuple of 5 floats
        ``(alpha, a, b, c, m0)``: the Dirichlet concentration, inverse-gamma shape and scale, mean-variance factor
        and prior mean.
    include_prior : bool
        Add the log prior's gradient (:func:`_add_prior_gradient`, the same bits as
        :func:`mixture_prior_gradient` plus this kernel's likelihood term).
    out : ndarray of shape (n_particles, n_params)
        Receives the gradient (every entry written).

    Notes
    -----
    The same math as ``GaussianMixtureModel``'s numpy gradient: component log-densities
    ``log beta_k + log N(x; mu_k, diag sigma2_k)``, responsibilities by the largest (log-ratios floored at -80)
    times the row weights; their centred moments ``m = sum r``, ``c1 = sum r (x - mu)``, ``c2 = sum r (x - mu)^2``
    per component give ``d/d eta_k = m_k - beta_k sum_l m_l``, ``d/d mu = tau c1``, ``d/d log sigma2 = -m / 2 +
    tau c2 / 2``. The rows' terms are single precision (:func:`_centred_moments_single`): SGHMC's gradient is a
    mini-batch estimate whose noise is far above float32's rounding, and eight lanes instead of four nearly halve
    the cost. The distances ``x - mu`` are rounded from double precision and the moments are centred, so the
    moments' rounding stays relative to each row's distance from the component, however far from the origin, with
    no cancellation between large moments. A responsibility's rounding grows with the row's log-densities, about
    ``eps32 (z / sigma)^2 / 2`` relative (6e-4 for a row 100 standard deviations from every component): rows that
    far are outliers of every component. Precisions and log-densities are clamped to float32's range, so the
    gradient stays finite where the double-precision kernels' does, for rows within ~1e18 of the components.
    Each block's sums are added in double precision. The sums over rows are
    reassociated into vector lanes, in an order fixed by the compiled code: the same inputs give the same bits on
    a machine, in any process (no threads).
    """
    mass, first, second = _centred_moments_single(theta, X, row_weights, n_components)
    _gradient_from_centred_moments(theta, mass, first, second, prior, include_prior, out)
    return out


@numba.njit(cache=True)
def _single_block_rows(K, d):
    """Rows per block of :func:`_centred_moments_single`: its scratch, ``d`` doubles and ``K + 1`` single-precision
    floats a row, stays near 64 KiB (see :func:`_block_rows`)."""
    return max(16, 16384 // (2 * d + K + 1))


@numba.njit(cache=True)
def _single_scratch(K, d, n_rows):
    """The single-precision kernels' buffers for blocks of :func:`_single_block_rows` rows: ``(size, xt (d, size),
    dens (K + 1, size) float32, params (as :func:`_scratch`'s), half_tau (K, d) float32, const (K,) float32,
    exact (K,))`` (see :func:`_single_particle`)."""
    size = min(_single_block_rows(K, d), max(n_rows, 1))
    params = (np.empty(K), np.empty((K, d)), np.empty((K, d)), np.empty(K))
    return (size, np.empty((d, size)), np.empty((K + 1, size), np.float32), params, np.empty((K, d), np.float32),
            np.empty(K, np.float32), np.empty(K))


@numba.njit(cache=True)
def _transposed_rows(X, start, stop, xt):
    """Rows ``start:stop`` of ``X`` into ``xt`` laid out ``(d, stop - start)``."""
    for j in range(start, stop):
        for i in range(X.shape[1]):
            xt[i, j - start] = X[j, i]


@numba.njit(cache=True)
def _single_particle(theta_row, params, half_tau, const, exact):
    """One particle's maps (:func:`_unpack_particle`, into ``params``) and the single-precision terms of
    :func:`_centred_log_densities`: ``tau / 2`` and ``log beta_k - (sum_i log sigma2_ki + d log 2 pi) / 2``, each
    rounded once from double precision; the constants also unrounded, into ``exact``."""
    log_weights, mu, tau, const64 = params
    K, d = mu.shape
    _unpack_particle(theta_row, K, d, log_weights, mu, tau, const64)
    var_start = K - 1 + K * d
    for k in range(K):
        log_det = 0.0
        for i in range(d):
            log_det += theta_row[var_start + k * d + i]
            half_tau[k, i] = np.float32(min(0.5 * tau[k, i], _SINGLE_MAX))  # finite: inf * 0 would be NaN
        exact[k] = log_weights[k] - 0.5 * (log_det + d * _LOG_2PI)
        const[k] = np.float32(exact[k])


@numba.njit(cache=True)
def _centred_log_densities(xt, mu, half_tau, const, dens, n_rows):
    """Component log-densities ``const_k - sum_i tau_ki (x_i - mu_ki)^2 / 2`` of the first ``n_rows`` rows of ``xt``
    ``(d, >= n_rows)`` into ``dens`` (single precision), then each minus its row's largest, floored at -80.

    The distances ``x - mu`` are taken in double precision and then rounded, so a row keeps its relative precision
    however far the data sit from the origin; the rest is single precision.
    """
    K, d = mu.shape
    floor, lowest = np.float32(_EXP_FLOOR), np.float32(-_SINGLE_MAX)
    for k in range(K):
        row = dens[k]
        ck = const[k]
        for j in range(n_rows):
            row[j] = ck
        for i in range(d):
            h, centre, xi = half_tau[k, i], mu[k, i], xt[i]
            for j in range(n_rows):
                z = np.float32(xi[j] - centre)
                row[j] -= h * z * z
        for j in range(n_rows):  # a row past float32's range from every component keeps a finite largest
            row[j] = max(row[j], lowest)
    top = dens[K]  # the scratch row after the components'
    for j in range(n_rows):
        top[j] = dens[0, j]
    for k in range(1, K):
        row = dens[k]
        for j in range(n_rows):
            top[j] = max(top[j], row[j])
    for k in range(K):
        row = dens[k]
        for j in range(n_rows):
            row[j] = max(row[j] - top[j], floor)


@numba.njit(cache=True)
def _centred_moments_single(theta, X, row_weights, n_components):
    """The responsibilities' weighted centred moments ``m (M, K)``, ``c1``, ``c2 (M, K, d)`` (see
    :func:`mixture_gradient`): each block's in single precision, added over blocks in double."""
    n_particles = theta.shape[0]
    n_rows, d = X.shape
    K = n_components
    shared = row_weights.shape[0] == 1
    size, xt, dens, params, half_tau, const, exact = _single_scratch(K, d, n_rows)  # dens' last row: the scale
    mu = params[1]
    zero = np.float32(0.0)
    mass = np.zeros((n_particles, K))
    first, second = np.zeros((n_particles, K, d)), np.zeros((n_particles, K, d))
    for start in range(0, n_rows, size):
        stop = min(start + size, n_rows)
        n_block = stop - start
        _transposed_rows(X, start, stop, xt)
        for m in range(n_particles):
            _single_particle(theta[m], params, half_tau, const, exact)
            _centred_log_densities(xt, mu, half_tau, const, dens, n_block)
            scale = dens[K]
            for j in range(n_block):
                scale[j] = zero
            for k in range(K):
                row = dens[k]
                for j in range(n_block):
                    e = _exp_single(row[j])
                    row[j] = e
                    scale[j] += e
            weight_row = row_weights[0] if shared else row_weights[m]
            for j in range(n_block):
                scale[j] = _quotient(np.float32(weight_row[start + j]), scale[j])
            for k in range(K):
                row = dens[k]
                _scale(row, scale, n_block)
                for i in range(d):
                    total, acc1, acc2 = _single_sums(row, xt[i], mu[k, i], n_block)
                    if i == 0:
                        mass[m, k] += total
                    first[m, k, i] += acc1
                    second[m, k, i] += acc2
    return mass, first, second


@numba.njit(cache=True)
def mixture_log_likelihood_sum_single(theta, X, n_components, out):
    """``sum_j log p(x_j | theta_m)`` per particle into ``out`` ``(n_particles,)``, each row's term in single
    precision (eight vector lanes and :func:`~._compiled_exp.exp_single`), each block's sum and the logarithms
    in double: for importance draws near a posterior mode (``GaussianMixtureModel.approximate_log_likelihood_sum``).

    The log-densities are :func:`_centred_log_densities`' (distances rounded from double precision, so a row
    keeps its relative precision wherever the data sit), with each component's constant taken relative to the
    particle's largest in double precision and that shift added back per row in double: the rounded constants'
    error then scales with their spread, not with their size (which grows with the data's scale). A row's term
    is off by a few float32 roundings of its log-densities (about ``1e-7`` of their size); their signs vary with
    the row and the particle, so a total over ``n`` rows is off by about ``1e-7 sqrt(n)`` times the rows' typical
    log-density, far below the hundredths of a nat to which the mode's draws value the evidence.
    """
    n_particles = theta.shape[0]
    n_rows, d = X.shape
    K = n_components
    size, xt, dens, params, half_tau, const, exact = _single_scratch(K, d, n_rows)  # dens' last row: the largest
    mu = params[1]
    total = np.empty(size, np.float32)
    zero = np.float32(0.0)
    out[:] = 0.0
    for start in range(0, n_rows, size):
        stop = min(start + size, n_rows)
        n_block = stop - start
        _transposed_rows(X, start, stop, xt)
        for m in range(n_particles):
            _single_particle(theta[m], params, half_tau, const, exact)
            shift = np.max(exact)  # the constants rounded as their differences to the largest
            for k in range(K):
                const[k] = np.float32(exact[k] - shift)
            _centred_log_densities(xt, mu, half_tau, const, dens, n_block)
            for j in range(n_block):
                total[j] = zero
            for k in range(K):
                row = dens[k]
                for j in range(n_block):
                    total[j] += _exp_single(row[j])
            top = dens[K]
            block = _log_total(top, total, n_block)
            out[m] += block + n_block * shift
    return out


@numba.njit(cache=True)
def _gradient_from_centred_moments(theta, mass, first, second, prior, include_prior, out):
    """The gradient per particle into ``out`` from the centred moments (and the prior's with ``include_prior``)."""
    n_particles, K, d = first.shape
    log_weights, weights, const = np.empty(K), np.empty(K), np.empty(K)
    mu, tau = np.empty((K, d)), np.empty((K, d))
    mean_start, var_start = K - 1, K - 1 + K * d
    for m in range(n_particles):
        _unpack_particle(theta[m], K, d, log_weights, mu, tau, const)
        _weights_of(log_weights, weights)
        total_mass = 0.0
        for k in range(K):
            total_mass += mass[m, k]
        for k in range(K - 1):
            out[m, k] = mass[m, k] - weights[k] * total_mass
        for k in range(K):
            for i in range(d):
                tki = tau[k, i]
                out[m, mean_start + k * d + i] = tki * first[m, k, i]
                out[m, var_start + k * d + i] = -0.5 * mass[m, k] + 0.5 * tki * second[m, k, i]
        if include_prior:
            _add_prior_gradient(weights, mu, tau, prior, mean_start, var_start, out[m])


@numba.njit(cache=True)
def mixture_log_likelihood_and_gradient(theta, X, row_weights, n_components, log_lik, out):
    """:func:`mixture_log_likelihood` into ``log_lik`` and the likelihood's gradient into ``out``, in one pass.

    The exponentials serve both: to 3e-15 relative (:func:`~._compiled_exp.exp_accurate`), so ``log_lik`` is the
    same bits as :func:`mixture_log_likelihood`'s and the gradient the same math as :func:`mixture_gradient`'s
    (without the prior) in double precision throughout (an exact HMC move's gradient, beside the log-likelihood
    its acceptance needs at every leapfrog step; one pass costs about half of the two).
    """
    mass, first, second = _weighted_moments(theta, X, row_weights, n_components, log_lik)
    _centre_moments(theta, mass, first, second)  # first and second now about each component's mean
    _gradient_from_centred_moments(theta, mass, first, second, (0.0, 0.0, 0.0, 0.0, 0.0), False, out)
    return log_lik, out


@numba.njit(cache=True)
def mixture_moments(theta, X, row_weights, n_components):
    """The weighted responsibilities' moments ``(m (M, K), s1 (M, K, d), s2 (M, K, d))`` per particle: ``sum_j w_j
    r_jk``, ``sum_j w_j r_jk x_j`` and ``sum_j w_j r_jk x_j^2``, EM's statistics (the M-step's weights, means and
    variances follow from them), in double precision with 7e-9 exponentials
    (:func:`~._compiled_exp.exp_coarse`). Arguments as in :func:`mixture_gradient`."""
    return _weighted_moments(theta, X, row_weights, n_components, np.empty((0, 0)))


@numba.njit(cache=True)
def _weighted_moments(theta, X, row_weights, n_components, log_lik):
    """The responsibilities' weighted moments ``m (M, K)``, ``s1``, ``s2 (M, K, d)`` (see :func:`mixture_moments`).

    With a ``log_lik`` of shape ``(n_particles, n_rows)`` the exponentials are the accurate ones and each row's
    log-likelihood is written there (as :func:`mixture_log_likelihood` computes it); with an empty one, the coarse
    exponentials of EM's moments alone.
    """
    n_particles = theta.shape[0]
    n_rows, d = X.shape
    K = n_components
    shared = row_weights.shape[0] == 1
    with_log_lik = log_lik.shape[0] > 0
    size, xt, x2, dens, top, scale, params = _scratch(K, d, n_rows)
    # Moments per particle and component, accumulated over the blocks of rows.
    mass = np.zeros((n_particles, K))
    first, second = np.zeros((n_particles, K, d)), np.zeros((n_particles, K, d))
    for start in range(0, n_rows, size):
        stop = min(start + size, n_rows)
        n_block = stop - start
        _columns(X, start, stop, xt, x2)
        for m in range(n_particles):
            _particle_log_densities(theta[m], xt, x2, n_block, params, dens, top, scale)
            _exponentials(dens, top, scale, n_block, with_log_lik)
            if with_log_lik:
                for j in range(n_block):
                    log_lik[m, start + j] = top[j] + _log(scale[j])
            weight_row = row_weights[0] if shared else row_weights[m]
            for j in range(n_block):
                scale[j] = _quotient(weight_row[start + j], scale[j])
            for k in range(K):
                row = dens[k]
                _scale(row, scale, n_block)
                for i in range(d):
                    total, acc1, acc2 = _double_sums(row, xt[i], x2[i], n_block)
                    if i == 0:
                        mass[m, k] += total
                    first[m, k, i] += acc1
                    second[m, k, i] += acc2
    return mass, first, second


@numba.njit(cache=True)
def _centre_moments(theta, mass, first, second):
    """The moments ``s1 = sum r x``, ``s2 = sum r x^2`` turned in place into the centred ``c1 = s1 - mu m``, ``c2 =
    s2 - 2 mu s1 + mu^2 m`` of :func:`_gradient_from_centred_moments` (double precision, from double sums)."""
    n_particles, K, d = first.shape
    log_weights, const = np.empty(K), np.empty(K)
    mu, tau = np.empty((K, d)), np.empty((K, d))
    for m in range(n_particles):
        _unpack_particle(theta[m], K, d, log_weights, mu, tau, const)
        for k in range(K):
            for i in range(d):
                mk, mki = mass[m, k], mu[k, i]
                s1, s2 = first[m, k, i], second[m, k, i]
                first[m, k, i] = s1 - mki * mk
                second[m, k, i] = s2 - 2.0 * mki * s1 + mki * mki * mk
