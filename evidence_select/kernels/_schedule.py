"""Adaptive annealing: choose the next tempering increment by the ESS (paper Sec. 3)."""

import numpy as np

from ..utils import logsumexp

__all__ = ["conditional_ess_fraction", "next_tempering_increment"]


def conditional_ess_fraction(log_weights, log_lik, increments):
    """Conditional ESS fraction of the increment ``p(chunk | theta)^delta``.

    ``CESS / M = (sum_i W_i w_i)^2 / (sum_i W_i w_i^2)`` with normalised accumulated
    weights ``W`` (Zhou, Johansen & Aston, 2016), in ``(0, 1]``; with uniform
    ``W`` it is the paper's ESS(delta) / M. Returns the minimum over groups.

    Parameters
    ----------
    log_weights : ndarray of shape (n_groups, n_particles)
        Log-weights normalised within each group.
    log_lik : ndarray of shape (n_groups, n_particles)
        Chunk log-likelihood of each particle (``-inf`` allowed).
    increments : ndarray of shape (n_deltas,)
        Positive candidate increments.

    Returns
    -------
    fraction : ndarray of shape (n_deltas,)
    """
    with np.errstate(invalid="ignore"):
        scaled = increments[:, None, None] * log_lik[None]  # (n_deltas, n_groups, n_particles)
    scaled = np.where(np.isnan(scaled), -np.inf, scaled)  # 0 * -inf: a dead particle stays dead
    log_fraction = 2.0 * logsumexp(log_weights + scaled, axis=2) - logsumexp(log_weights + 2.0 * scaled, axis=2)
    return np.exp(np.min(log_fraction, axis=1))


def next_tempering_increment(log_weights, log_lik, remaining, target_fraction, *, n_grid=16, n_rounds=3,
                             min_increment=1e-12):
    """Largest increment in ``(0, remaining]`` keeping the conditional ESS fraction at target.

    Takes the whole ``remaining`` step when it already keeps the ESS at or above
    target. Otherwise it searches ``log(delta)`` in rounds of ``n_grid`` points
    (a vectorised bisection: each round shrinks the bracket ``n_grid - 1`` fold).
    When even ``min_increment`` falls short (particles with zero likelihood), the
    target is lowered to what is reachable.

    Returns
    -------
    delta : float
        Never larger than ``remaining``, so tempering never passes 1.
    """
    if conditional_ess_fraction(log_weights, log_lik, np.array([remaining]))[0] >= target_fraction:
        return float(remaining)
    low, high = np.log(min(min_increment, remaining)), np.log(remaining)
    floor = conditional_ess_fraction(log_weights, log_lik, np.array([np.exp(low)]))[0]
    target = min(target_fraction, 0.999 * floor)
    for _ in range(n_rounds):
        grid = np.linspace(low, high, n_grid)
        ok = conditional_ess_fraction(log_weights, log_lik, np.exp(grid)) >= target
        last_ok = np.flatnonzero(ok)
        k = last_ok[-1] if len(last_ok) else 0
        low, high = grid[k], grid[min(k + 1, n_grid - 1)]
    return float(min(np.exp(low), remaining))
