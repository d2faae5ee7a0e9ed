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

from ._hmc import adapt_step_size, held_out_preconditioners, hmc_init, hmc_step

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
    factors = _leave_one_out_factors(theta, n_groups, log_weights)
    state = hmc_init(theta, log_density_fn)
    step_size = np.array(np.broadcast_to(np.asarray(step_size, dtype=float), (n_groups,)))
    rates = []
    for _ in range(n_transitions):
        state, info = hmc_step(rng, state, log_density_fn, np.repeat(step_size, n_particles), n_leapfrog, factors)
        group_rates = info.acceptance_rate.reshape(n_groups, n_particles)
        rates.append(float(np.mean(group_rates)))
        step_size = np.array([adapt_step_size(size, rate, target=target_accept)
                              for size, rate in zip(step_size, group_rates)])
    n_evaluations = 1 + n_transitions * n_leapfrog
    return state.position, ParticleHMCInfo(step_size, float(np.mean(rates)) if rates else float("nan"),
                                           n_evaluations)


def _leave_one_out_factors(theta, n_groups, log_weights):
    """Per-particle inverse-mass factors ``(n_total, n_params, n_params)``, each from its group's other particles."""
    n_total, n_params = theta.shape
    n_particles = n_total // n_groups
    groups = theta.reshape(n_groups, n_particles, n_params)
    weights = np.zeros((n_groups, n_particles)) if log_weights is None else log_weights
    return np.concatenate([held_out_preconditioners(group, group_weights, n_folds=n_particles)
                           for group, group_weights in zip(groups, weights)])
