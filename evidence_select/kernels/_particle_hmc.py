"""Metropolis-corrected HMC moves for particle groups, preconditioned by the other particles of the group.

A move kernel for the tempering steps of an SMC sampler whose target can be
evaluated exactly (SGAIS while the reservoir still holds every past row). Each
particle's mass comes from the weighted covariance of the *other* particles of
its replicate group (leave-one-out,
:func:`~evidence_select.kernels._hmc.held_out_preconditioners`), so the kernel
sees a roughly isotropic target whatever the posterior's shape: flat,
prior-dominated directions (a nearly separable classifier, the redundant logit of
a two-class softmax) move as far per step as the data-determined ones. For a
fixed mass and step every transition leaves the tempered target exactly
invariant; here both are chosen from the population, an adaptive choice of the
kind SMC samplers allow (consistent as the particles grow; Chopin &
Papaspiliopoulos, "An Introduction to Sequential Monte Carlo", Sec. 17.2).
Leaving the particle out removes its own position from its kernel (only its
resampled copies remain), which keeps that dependence small with few particles
in many dimensions, where a mass built from a population including the particle
distorts the target (the bias AIS showed in tens of dimensions). The step size is
adapted from acceptance rates *between* transitions. Groups never share
information, so their evidence estimates stay independent.
"""

from typing import NamedTuple

import numpy as np

from ._hmc import adapt_step_size, hmc_init, hmc_step, preconditioner_from_samples

__all__ = ["ParticleHMCInfo", "particle_hmc_move"]


class ParticleHMCInfo(NamedTuple):
    """Diagnostics of one :func:`particle_hmc_move`.

    ``step_size`` holds each group's adapted step, to carry to the next move; ``acceptance_rate``
    the mean acceptance over transitions and particles; ``n_evaluations`` the
    number of target evaluations (per particle, gradients included).
    """

    step_size: np.ndarray  # (n_groups,)
    acceptance_rate: float
    n_evaluations: int


def particle_hmc_move(rng, theta, log_density_fn, *, n_groups, step_size, n_transitions, log_weights=None,
                      n_leapfrog=5, target_accept=0.75):
    """Move every group's particles by ``n_transitions`` preconditioned HMC transitions.

    Parameters
    ----------
    rng : numpy.random.Generator
    theta : ndarray of shape (n_groups * n_particles, n_params)
        Particles, groups stacked.
    log_density_fn : callable
        ``position -> (log_density, grad, None)`` of the (tempered) target, vectorised
        over rows of ``position``.
    n_groups : int
    step_size : float or ndarray of shape (n_groups,)
        Leapfrog step in whitened units at the start; each group's is adapted towards
        ``target_accept`` between transitions from that group's acceptance rates alone.
    n_transitions : int
    log_weights : ndarray of shape (n_groups, n_particles), default=None
        The particles' importance log-weights (the population the masses describe);
        None means equal weights.
    n_leapfrog : int, default=5
    target_accept : float, default=0.75

    Returns
    -------
    theta : ndarray of shape (n_groups * n_particles, n_params)
        New array.
    info : ParticleHMCInfo

    Notes
    -----
    The mass is dense (the leave-one-out covariance shrunk towards its diagonal)
    even when a group holds fewer particles than parameters: the directions the
    particles span (a correlated posterior's narrow and wide axes) are the ones a
    diagonal mass gets wrong, and the shrinkage keeps the others moving.

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
    rates, evaluations = [], 0
    for moving in (first_half, ~first_half):
        if not moving.any():
            continue
        factors = _other_half_factors(theta, log_weights.ravel(), moving, group_of, n_groups)
        theta[moving], step_size, half_rates = _transitions(
            rng, theta[moving], log_density_fn, factors[group_of[moving]], step_size, group_of[moving],
            _Schedule(n_transitions, n_leapfrog, target_accept))
        rates.extend(half_rates)
        evaluations += np.count_nonzero(moving) * (1 + len(half_rates) * n_leapfrog)
    return theta, ParticleHMCInfo(step_size, float(np.mean(rates)) if rates else float("nan"),
                                  -(-evaluations // n_total))


class _Schedule(NamedTuple):
    n_transitions: int
    n_leapfrog: int
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


def _other_half_factors(theta, log_weights, moving, group_of, n_groups):
    """One inverse-mass factor per group ``(n_groups, n_params, n_params)``, from its particles that stay put."""
    factors = np.empty((n_groups, theta.shape[1], theta.shape[1]))
    for group in range(n_groups):
        source = (group_of == group) & ~moving & np.isfinite(log_weights)
        if np.count_nonzero(source) < 2:  # nothing to learn a scale from: the identity, a fixed choice
            factors[group] = np.eye(theta.shape[1])
            continue
        factor = preconditioner_from_samples(theta[source], log_weights[source])
        factors[group] = factor if factor.ndim == 2 else np.diag(factor)
    return factors


def _transitions(rng, position, log_density_fn, factors, step_size, group_of, schedule):
    """``schedule.n_transitions`` HMC transitions of ``position`` with per-particle ``factors``.

    Each group's step is adapted between transitions from its own particles'
    acceptance rates. Returns ``(position, step_size, mean acceptance per transition)``.
    """
    state = hmc_init(position, log_density_fn)
    counts = np.bincount(group_of, minlength=len(step_size))
    rates = []
    for _ in range(schedule.n_transitions):
        state, info = hmc_step(rng, state, log_density_fn, step_size[group_of], schedule.n_leapfrog, factors)
        rates.append(float(np.mean(info.acceptance_rate)))
        group_rates = np.bincount(group_of, weights=info.acceptance_rate, minlength=len(step_size))
        step_size = np.array([size if count == 0 else adapt_step_size(size, rate / count, target=schedule.target_accept)
                              for size, rate, count in zip(step_size, group_rates, counts)])
    return state.position, step_size, rates
