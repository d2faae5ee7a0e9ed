"""Adaptive annealing: choose the next tempering increment by the ESS (paper Sec. 3)."""

import numpy as np

from ..utils import logsumexp

__all__ = ["conditional_ess_fraction", "next_tempering_increment"]


def conditional_ess_fraction(log_weights, log_lik, increments, reduce=np.min):
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
        Positive candidate increments (positive, so a dead particle, ``l = -inf``, stays dead, never NaN).
    reduce : callable, default=numpy.min
        Reduction over groups (``axis=1``): SGAIS keeps every group at target (min);
        AIS's adaptive schedule uses the mean.

    Returns
    -------
    fraction : ndarray of shape (n_deltas,)
        The reduction over groups of each group's fraction.
    """
    scaled = increments[:, None, None] * log_lik[None]  # (n_deltas, n_groups, n_particles); -inf stays -inf
    # Both sums in one logsumexp: [log W + delta l, log W + 2 delta l] -> log sum W w, log sum W w^2.
    terms = np.empty((2,) + scaled.shape)
    np.add(log_weights, scaled, out=terms[0])
    np.add(terms[0], scaled, out=terms[1])
    log_sums = logsumexp(terms, axis=3)
    return reduce(np.exp(2.0 * log_sums[0] - log_sums[1]), axis=1)


def next_tempering_increment(log_weights, log_lik, remaining, target_fraction, *, n_grid=16, n_rounds=3,
                             min_increment=1e-12, reduce=np.min):
    """Largest increment in ``(0, remaining]`` keeping the conditional ESS fraction at target.

    Takes the whole ``remaining`` step when it already keeps the ESS at or above
    target. Otherwise it searches ``log(delta)`` in rounds of ``n_grid`` points
    (a vectorised bisection: each round shrinks the bracket ``n_grid - 1`` fold).
    When even ``min_increment`` falls short (particles with zero likelihood), the
    target is lowered to what is reachable. ``reduce`` combines the groups'
    fractions (see :func:`conditional_ess_fraction`): SGAIS keeps every group at
    target, AIS their mean (with more rounds, since it runs once per temperature
    on the full data).

    Returns
    -------
    delta : float
        Never larger than ``remaining``, so tempering never passes 1.
    """
    if conditional_ess_fraction(log_weights, log_lik, np.array([remaining]), reduce)[0] >= target_fraction:
        return float(remaining)
    low, high = np.log(min(min_increment, remaining)), np.log(remaining)
    floor = conditional_ess_fraction(log_weights, log_lik, np.array([np.exp(low)]), reduce)[0]
    target = min(target_fraction, 0.999 * floor)
    for _ in range(n_rounds):
        grid = np.linspace(low, high, n_grid)
        ok = conditional_ess_fraction(log_weights, log_lik, np.exp(grid), reduce) >= target
        last_ok = np.flatnonzero(ok)
        k = last_ok[-1] if len(last_ok) else 0
        low, high = grid[k], grid[min(k + 1, n_grid - 1)]
    return float(min(np.exp(low), remaining))
