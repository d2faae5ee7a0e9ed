"""Warm-up adaptation of HMC: dual-averaging step size and a mass matrix from warm-up draws.

Both follow Stan's warm-up (Hoffman and Gelman, "The No-U-Turn Sampler", JMLR
2014, Sec. 3.2, for dual averaging; the Stan reference manual for the windows):
a fast initial buffer tunes only the step size, slow windows of doubling length
each end with a new inverse mass ``M^-1 = L L^T`` estimated from the window's
draws (pooled over chains), and a final fast buffer tunes the step size for the
last mass matrix. The mass comes from the within-chain scatter, so chains
that sit in different modes do not inflate it. Adaptation happens only during warm-up; the kernel used for the
kept draws is fixed, so each of them leaves the target exactly invariant.
"""

from typing import NamedTuple

import numpy as np

from ._hmc import preconditioner_from_samples

__all__ = ["DualAveragingState", "dual_averaging_init", "dual_averaging_update", "warmup_windows",
           "inverse_mass_factor"]


class DualAveragingState(NamedTuple):
    """Nesterov dual-averaging state of ``log step_size`` (Hoffman and Gelman, Alg. 5).

    ``log_step`` is the step to use next, ``log_step_avg`` the averaged iterate
    to use after warm-up; ``mu`` the shrinkage point, ``h_bar`` the running mean
    of ``target - acceptance``, ``count`` the number of updates.
    """

    log_step: float
    log_step_avg: float
    h_bar: float
    mu: float
    count: int


def dual_averaging_init(step_size):
    """Start dual averaging at ``step_size`` (shrinking towards ``10 * step_size``).

    Examples
    --------
    >>> state = dual_averaging_init(0.1)
    >>> round(float(np.exp(state.log_step)), 3)
    0.1
    """
    log_step = float(np.log(step_size))
    return DualAveragingState(log_step, log_step, 0.0, float(np.log(10.0 * step_size)), 0)


def dual_averaging_update(state, acceptance, target=0.8, gamma=0.05, t0=10.0, kappa=0.75):
    """One dual-averaging update of the step size from a mean acceptance statistic.

    Parameters
    ----------
    state : DualAveragingState
    acceptance : float
        Mean Metropolis acceptance probability of the last transitions (over chains).
    target : float, default=0.8
        Desired mean acceptance probability.
    gamma, t0, kappa : float, default=0.05, 10, 0.75
        Hoffman and Gelman's constants.

    Returns
    -------
    state : DualAveragingState

    Examples
    --------
    >>> state = dual_averaging_init(0.1)
    >>> dual_averaging_update(state, 1.0).log_step > state.log_step
    True
    """
    count = state.count + 1
    eta = 1.0 / (count + t0)
    h_bar = (1.0 - eta) * state.h_bar + eta * (target - float(acceptance))
    log_step = state.mu - np.sqrt(count) / gamma * h_bar
    weight = count ** (-kappa)
    log_step_avg = weight * log_step + (1.0 - weight) * state.log_step_avg
    return DualAveragingState(float(log_step), float(log_step_avg), float(h_bar), state.mu, count)


def warmup_windows(n_warmup, init_buffer=75, term_buffer=50, base_window=25):
    """Ends (exclusive iteration indices) of the slow mass-adaptation windows.

    The iterations ``[0, init_buffer)`` tune only the step size; then windows of
    ``base_window, 2 base_window, ...`` iterations follow (the last stretched to
    end at ``n_warmup - term_buffer``), each ending with a new mass matrix; the
    last ``term_buffer`` iterations tune the step size again. Short warm-ups
    shrink the buffers to 15% / 10% / 75% of ``n_warmup``, as Stan does.

    Parameters
    ----------
    n_warmup : int
    init_buffer, term_buffer, base_window : int, default=75, 50, 25

    Returns
    -------
    starts, ends : list of int
        Start and end of each slow window.

    Examples
    --------
    >>> warmup_windows(500)
    ([75, 100, 150, 250], [100, 150, 250, 450])
    """
    if n_warmup < 20:
        return [], []
    if init_buffer + term_buffer + base_window > n_warmup:
        init_buffer, term_buffer = int(0.15 * n_warmup), int(0.1 * n_warmup)
        base_window = n_warmup - init_buffer - term_buffer
    end_slow = n_warmup - term_buffer
    starts, ends = [], []
    start, size = init_buffer, base_window
    while start < end_slow:
        end = start + size
        # A remainder shorter than the next window is merged into this one.
        if end + 2 * size > end_slow:
            end = end_slow
        starts.append(start)
        ends.append(end)
        start, size = end, 2 * size
    return starts, ends


def inverse_mass_factor(draws, dense):
    """Factor ``L`` of the inverse mass ``L L^T`` from warm-up draws pooled over chains.

    The covariance is regularised towards a small multiple of the identity as in
    Stan (``n / (n + 5) C + 1e-3 * 5 / (n + 5) I``) and, when dense and the draws
    are few for the dimension, shrunk by 5% towards its diagonal, which keeps it
    positive definite (``shrinkage="auto"`` of
    :func:`~evidence_select.kernels._hmc.preconditioner_from_samples`). With
    ample draws it is not: 5% towards the diagonal would widen a correlated
    posterior's thin directions far beyond their scale, and the step size
    would shrink with them.

    Parameters
    ----------
    draws : ndarray of shape (n_draws, n_params)
    dense : bool
        Lower Cholesky factor if True, else the vector of standard deviations.

    Returns
    -------
    inv_mass_factor : ndarray of shape (n_params, n_params) or (n_params,)

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(2000, 2)) * [1.0, 3.0]
    >>> np.round(inverse_mass_factor(x, dense=False), 1)
    array([1., 3.])
    """
    draws = np.asarray(draws, dtype=float)
    n = len(draws)
    factor = preconditioner_from_samples(draws, dense=dense, shrinkage="auto")
    shrink = n / (n + 5.0)
    extra = 1e-3 * 5.0 / (n + 5.0)
    if factor.ndim == 1:
        return np.sqrt(shrink * factor**2 + extra)
    cov = shrink * factor @ factor.T + extra * np.eye(len(factor))
    return np.linalg.cholesky(cov)
