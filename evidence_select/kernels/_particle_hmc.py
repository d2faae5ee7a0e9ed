"""Metropolis-corrected HMC moves for particle groups, each half with a mass from the other half of its group.

A move kernel for the tempering steps of an SMC sampler whose target can be
evaluated exactly (SGAIS while the reservoir still holds every past row). Each
replicate group is split in two halves that move in turn. A half's mass comes
from the other half (:func:`_mass_factor`): that half's weighted covariance
averaged with the target's inverse curvature at its mean. The kernel then sees a
roughly isotropic target whatever the posterior's shape: flat, prior-dominated
directions (a nearly separable classifier, the redundant logit of a two-class
softmax) move as far per step as the data-determined ones, including the
directions that a few particles in many dimensions do not span.

Why halves. For a fixed mass and step every transition leaves the tempered
target invariant, but a mass estimated from particles that move with it is not
fixed: with few particles in many dimensions, particles that shape each other's
kernels (even with each particle's own position left out) pull the population
off its target, narrower than it, and the evidence then reads high. A half
moving with a mass from the other half, which stays put meanwhile, sees a fixed
kernel: if the halves were independent draws of the target before, they are
after (a two-block Gibbs argument). A particle's resampled copies (identical
rows, contiguous after systematic resampling) are kept in one half, so no
particle's mass comes from its own copies. The step size is adapted from
acceptance rates *between* transitions, an adaptive choice of the kind SMC
samplers allow (consistent as the particles grow; Chopin & Papaspiliopoulos,
"An Introduction to Sequential Monte Carlo", Sec. 17.2). Groups never share
information, so their evidence estimates stay independent.
"""

from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular

from ._hmc import (adapt_step_size, hmc_init, hmc_step, jittered_leapfrog_count, preconditioner_from_samples,
                   sample_weights, start_correlation)

__all__ = ["ParticleHMCInfo", "particle_hmc_move", "particle_hmc_move_until_decorrelated"]

#: Forward-difference step of the curvature, relative to the particles' spread in each coordinate (and its floor).
CURVATURE_STEP = 1e-4


class ParticleHMCInfo(NamedTuple):
    """Diagnostics of one :func:`particle_hmc_move`.

    ``step_size`` holds each group's adapted step, to carry to the next move; ``acceptance_rate``
    the mean acceptance over transitions and particles; ``n_evaluations`` the
    number of target evaluations (per particle, gradients included); ``n_moves``
    each group's number of moves and ``start_correlation`` its particles'
    correlation with where they began, after its last move, from
    :func:`particle_hmc_move_until_decorrelated` (None from a single move).
    """

    step_size: np.ndarray  # (n_groups,)
    acceptance_rate: float
    n_evaluations: int
    n_moves: np.ndarray = None  # (n_groups,) moves per group (particle_hmc_move_until_decorrelated)
    start_correlation: np.ndarray = None  # (n_groups,) correlation with the start after the last move


def particle_hmc_move(rng, theta, log_density_fn, *, n_groups, step_size, n_transitions, log_weights=None,
                      trajectory_length=4.0, max_leapfrog=10, target_accept=0.75):
    """Move every group's particles by ``n_transitions`` preconditioned HMC transitions, one half after the other.

    Parameters
    ----------
    rng : numpy.random.Generator
    theta : ndarray of shape (n_groups * n_particles, n_params)
        Particles, groups stacked.
    log_density_fn : callable or KickedTarget
        ``position -> (log_density, grad, None)`` of the (tempered) target, vectorised
        over rows of ``position``; its exact gradient gives the curvature of the masses,
        a :class:`~._hmc.KickedTarget`'s kick gradient drives the trajectories.
    n_groups : int
    step_size : float or ndarray of shape (n_groups,)
        Leapfrog step in whitened units at the start; each group's is adapted towards
        ``target_accept`` between transitions from that group's acceptance rates alone.
    n_transitions : int
    log_weights : ndarray of shape (n_groups, n_particles), default=None
        The particles' importance log-weights (the population the masses describe);
        None means equal weights.
    trajectory_length : float, default=4.0
        Mean integration time per transition in whitened units: each group's
        transitions take ``ceil(trajectory_length * U(0.5, 1.5) / step)`` leapfrog
        steps of its own step (:func:`~._hmc.jittered_leapfrog_count`), so that
        where the adapted step is small (many parameters, a flat or curved
        target) a trajectory still crosses the target rather than diffusing.
    max_leapfrog : int, default=10
        Cap on the leapfrog steps of one transition (bounds a move's cost).
    target_accept : float, default=0.75

    Returns
    -------
    theta : ndarray of shape (n_groups * n_particles, n_params)
        New array.
    info : ParticleHMCInfo

    Notes
    -----
    The mass is dense even when a half holds fewer particles than parameters:
    the directions the particles span (a correlated posterior's narrow and wide
    axes) are the ones a diagonal mass gets wrong, and the curvature keeps the
    others moving. A move costs ``n_params + 1`` extra target evaluations per
    group and half (the curvature's forward differences), counted in
    ``n_evaluations``.

    Examples
    --------
    >>> import numpy as np
    >>> fn = lambda x: (-0.5 * np.sum(x**2 / [1.0, 100.0], axis=1), -x / [1.0, 100.0], None)
    >>> rng = np.random.default_rng(0)
    >>> theta = rng.normal(size=(40, 2)) * [1.0, 10.0]
    >>> moved, info = particle_hmc_move(rng, theta, fn, n_groups=2, step_size=0.5, n_transitions=3)
    >>> moved.shape, info.step_size.shape, 0.3 < info.acceptance_rate <= 1.0
    ((40, 2), (2,), True)
    """
    n_total, n_params = theta.shape
    n_particles = n_total // n_groups
    theta = np.array(theta, dtype=float)
    log_weights = np.zeros((n_groups, n_particles)) if log_weights is None else np.asarray(log_weights, dtype=float)
    step_size = np.array(np.broadcast_to(np.asarray(step_size, dtype=float), (n_groups,)))
    first_half = np.concatenate([_first_half(group) for group in theta.reshape(n_groups, n_particles, n_params)])
    group_of = np.repeat(np.arange(n_groups), n_particles)
    schedule = _Schedule(n_transitions, trajectory_length, max_leapfrog, target_accept)
    rates, evaluations = [], 0
    for moving in (first_half, ~first_half):
        if not moving.any():
            continue
        factors, n_mass_evaluations = _other_half_factors(theta, log_weights.ravel(), moving, group_of, n_groups,
                                                          log_density_fn)
        theta[moving], step_size, half_rates, n_leapfrog = _transitions(
            rng, theta[moving], log_density_fn, factors[group_of[moving]], step_size, group_of[moving], schedule)
        rates.extend(half_rates)
        evaluations += np.count_nonzero(moving) * (1 + n_leapfrog) + n_mass_evaluations
    return theta, ParticleHMCInfo(step_size, float(np.mean(rates)) if rates else float("nan"),
                                  -(-evaluations // n_total))


def particle_hmc_move_until_decorrelated(rng, theta, log_density_fn, *, n_groups, step_size, log_weights=None,
                                         max_repeats=3, max_correlation=0.1, **move_options):
    """:func:`particle_hmc_move`, repeated for each group whose particles still remember where the move began.

    After the first move, a group whose particles' mean coordinate correlation
    with their starting positions (:func:`~._hmc.start_correlation`) exceeds
    ``max_correlation`` moves again (the whole move: fresh halves and masses,
    its adapted step carried), up to ``max_repeats`` more times. Where one
    move's trajectories diffuse rather than cross the target (a nearly
    separable classifier's flat directions, a population the previous
    temperatures left far from the next one), the population would otherwise
    lag behind its tempered target and the weights of the following steps
    would be computed at the wrong particles. Each group's count is decided
    from that group's particles alone, so groups stay independent; like the
    step size, it is a choice made from the population between transitions
    that each leave the target invariant.

    Parameters
    ----------
    rng, theta, log_density_fn, n_groups, step_size, log_weights
        As in :func:`particle_hmc_move`.
    max_repeats : int, default=3
        Extra moves allowed per group (0: exactly :func:`particle_hmc_move`).
    max_correlation : float, default=0.1
    **move_options
        ``n_transitions`` and the trajectory settings of :func:`particle_hmc_move`.

    Returns
    -------
    theta : ndarray of shape (n_groups * n_particles, n_params)
    info : ParticleHMCInfo
        ``n_evaluations`` per particle averaged over all groups, ``acceptance_rate``
        averaged over every move made, ``n_moves`` each group's number of moves,
        ``start_correlation`` each group's correlation with the start after its last
        move (above ``max_correlation`` where the repeats ran out).

    Examples
    --------
    >>> import numpy as np
    >>> fn = lambda x: (-0.5 * np.sum(x**2, axis=1), -x, None)
    >>> rng = np.random.default_rng(0)
    >>> theta = rng.normal(size=(200, 2)) + 3.0  # a population far from its target
    >>> moved, info = particle_hmc_move_until_decorrelated(rng, theta, fn, n_groups=2, step_size=0.5,
    ...                                                    n_transitions=1, max_leapfrog=2)
    >>> info.n_moves.shape, bool(np.all(info.n_moves >= 1))
    ((2,), True)
    """
    n_total, n_params = theta.shape
    n_particles = n_total // n_groups
    start = np.asarray(theta, dtype=float).reshape(n_groups, n_particles, n_params)
    log_weights = (np.zeros((n_groups, n_particles)) if log_weights is None
                   else np.asarray(log_weights, dtype=float).reshape(n_groups, n_particles))
    current, step_size = start.copy(), np.array(np.broadcast_to(np.asarray(step_size, dtype=float), (n_groups,)))
    n_moves, evaluations, rates = np.zeros(n_groups, dtype=int), 0, []
    active = np.ones(n_groups, dtype=bool)
    for _ in range(1 + max_repeats):
        n_active = np.count_nonzero(active)
        moved, info = particle_hmc_move(rng, current[active].reshape(-1, n_params), log_density_fn,
                                        n_groups=n_active, step_size=step_size[active],
                                        log_weights=log_weights[active], **move_options)
        current[active] = moved.reshape(n_active, n_particles, n_params)
        step_size[active] = info.step_size
        n_moves[active] += 1
        evaluations += info.n_evaluations * n_active * n_particles
        rates.append(info.acceptance_rate)
        correlation = np.array([start_correlation(before, after) for before, after in zip(start, current)])
        active = correlation > max_correlation
        if not active.any():
            break
    return current.reshape(n_total, n_params), ParticleHMCInfo(step_size, float(np.nanmean(rates)),
                                                               -(-evaluations // n_total), n_moves, correlation)


class _Schedule(NamedTuple):
    n_transitions: int
    trajectory_length: float
    max_leapfrog: int
    target_accept: float


def _first_half(group):
    """Which particles of ``group`` ``(n_particles, n_params)`` move first: about half, never splitting copies.

    Identical rows (a particle's resampled copies) fall in the same half, so
    no particle's mass is estimated from its own copies.
    """
    _, first_index, copy_of = np.unique(group, axis=0, return_index=True, return_inverse=True)
    copy_of = copy_of.ravel()
    in_first, n_first = np.zeros(len(first_index), dtype=bool), 0
    for position in np.argsort(first_index):  # copies in index order, as resampling left them
        in_first[position] = n_first < len(group) // 2
        n_first += in_first[position] * np.count_nonzero(copy_of == position)
    return in_first[copy_of]


def _other_half_factors(theta, log_weights, moving, group_of, n_groups, log_density_fn):
    """One inverse-mass factor per group, from its particles that stay put (see :func:`_mass_factor`).

    Returns ``(factors, n_evaluations)``: ``(n_groups, n_params, n_params)`` and
    the number of positions at which the target was evaluated.
    """
    factors = np.empty((n_groups, theta.shape[1], theta.shape[1]))
    n_evaluations = 0
    for group in range(n_groups):
        source = (group_of == group) & ~moving & np.isfinite(log_weights)
        if np.count_nonzero(source) < 2:  # nothing to learn a scale from: the identity, a fixed choice
            factors[group] = np.eye(theta.shape[1])
            continue
        factors[group] = _mass_factor(theta[source], log_weights[source], log_density_fn)
        n_evaluations += theta.shape[1] + 1
    return factors, n_evaluations


def _mass_factor(samples, log_weights, log_density_fn):
    """Inverse-mass factor: the average of the samples' covariance and the target's inverse curvature at their mean.

    The particles' covariance carries the target's global extent (skewed and
    flat directions reaching far beyond where the curvature at the centre
    points) but, with fewer particles than parameters, only in the directions
    they span. The inverse of minus the Hessian at their weighted mean has every
    direction at its local scale. Their average is at least half of each, so no
    direction either source sees is moved at a scale far below it. When the
    curvature is not positive definite there (a multimodal target), the
    covariance alone is used.
    """
    spread = preconditioner_from_samples(samples, log_weights)
    spread = spread if spread.ndim == 2 else np.diag(spread)
    weights = sample_weights(log_weights)
    mean = weights @ samples
    steps = CURVATURE_STEP * np.maximum(np.sqrt(weights @ (samples - mean) ** 2), CURVATURE_STEP)
    curvature_covariance = _inverse_curvature(log_density_fn, mean, steps)
    if curvature_covariance is None:
        return spread
    try:
        return np.linalg.cholesky(0.5 * (spread @ spread.T + curvature_covariance))
    except np.linalg.LinAlgError:
        return spread


def _inverse_curvature(log_density_fn, mean, steps):
    """``(-H)^-1`` for the Hessian ``H`` of the log density at ``mean`` (forward differences), or None if not positive."""
    n_params = len(mean)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        _, grad, _ = log_density_fn(np.vstack([mean + np.diag(steps), mean]))
        grad = np.asarray(grad, dtype=float)
        hessian = (grad[:n_params] - grad[n_params]) / steps[:, None]
    precision = -0.5 * (hessian + hessian.T)
    if not np.all(np.isfinite(precision)):
        return None
    try:
        inverse_factor = solve_triangular(np.linalg.cholesky(precision), np.eye(n_params), lower=True)
    except np.linalg.LinAlgError:
        return None
    return inverse_factor.T @ inverse_factor


def _transitions(rng, position, log_density_fn, factors, step_size, group_of, schedule):
    """``schedule.n_transitions`` HMC transitions of ``position`` with per-particle ``factors``.

    Each group's step, and with it its number of leapfrog steps, is adapted
    between transitions from its own particles' acceptance rates alone (groups
    stay independent). Returns ``(position, step_size, mean acceptance per
    transition, leapfrog steps integrated per chain)``, the last counting every
    chain for the longest trajectory of its transition.
    """
    state = hmc_init(position, log_density_fn)
    counts = np.bincount(group_of, minlength=len(step_size))
    rates, n_integrated = [], 0
    for _ in range(schedule.n_transitions):
        n_leapfrog = jittered_leapfrog_count(rng, step_size, schedule.trajectory_length, schedule.max_leapfrog)
        n_integrated += int(n_leapfrog[counts > 0].max())
        state, info = hmc_step(rng, state, log_density_fn, step_size[group_of], n_leapfrog[group_of], factors)
        rates.append(float(np.mean(info.acceptance_rate)))
        group_rates = np.bincount(group_of, weights=info.acceptance_rate, minlength=len(step_size))
        step_size = np.array([size if count == 0 else adapt_step_size(size, rate / count, target=schedule.target_accept)
                              for size, rate, count in zip(step_size, group_rates, counts)])
    return state.position, step_size, rates, n_integrated
