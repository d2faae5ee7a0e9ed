"""Posterior draws from several HMC chains with warm-up adaptation, vectorised over chains.

Warm-up tunes the step size by dual averaging and the mass matrix from the
draws of doubling windows (:mod:`._adaptation`); the kept draws then come from a
fixed Metropolis-corrected HMC kernel (:func:`._hmc.hmc_step`) whose trajectory
length in whitened units is jittered uniformly in ``[0.5, 1.5] x
trajectory_length`` per transition, which avoids the resonances of a fixed
length, and whose step size may be jittered log-uniformly below the adapted one,
so that regions more sharply curved than the bulk (the tips of a curved ridge, a
funnel's neck) are entered by the transitions with the shorter steps. Both are
drawn independently of the state: a mixture of invariant kernels, so still
invariant. Chains start wherever the caller puts them, ideally dispersed
(prior draws), so that R-hat can see modes they fail to connect.
"""

from typing import NamedTuple

import numpy as np

from ._adaptation import dual_averaging_init, dual_averaging_update, inverse_mass_factor, warmup_windows
from ._hmc import hmc_init, hmc_step, jittered_leapfrog_count

__all__ = ["SamplerSettings", "SamplerOutput", "sample_chains", "run_fixed_kernel", "step_jitter_floor"]


class SamplerSettings(NamedTuple):
    """Settings of :func:`sample_chains`.

    n_warmup : int, iterations of adaptation per chain (discarded).
    n_draws : int, kept iterations per chain.
    target_accept : float in (0, 1), mean acceptance probability aimed at by dual averaging.
    trajectory_length : float > 0, mean integration time in whitened units.
    max_leapfrog : int, cap on leapfrog steps per transition.
    dense_mass : bool or None, dense inverse mass (None: dense when a window
    holds at least ``10 n_params`` pooled draws).
    step_jitter : float in (0, 1], each kept transition's step size is the adapted
    one times a log-uniform draw in ``[step_jitter, 1]`` (1: no jitter); its
    leapfrog count grows to keep the trajectory length (see :func:`step_jitter_floor`).
    """

    n_warmup: int = 500
    n_draws: int = 500
    target_accept: float = 0.8
    trajectory_length: float = 2.0
    max_leapfrog: int = 64
    dense_mass: bool = None
    step_jitter: float = 1.0


class SamplerOutput(NamedTuple):
    """Draws and adaptation results of :func:`sample_chains`.

    draws : (n_chains, n_draws, n_params); log_density : (n_chains, n_draws);
    step_size : float; inv_mass_factor : (n_params,) or (n_params, n_params);
    n_evaluations : int, target density-and-gradient evaluations (one per chain per leapfrog step);
    acceptance : float, mean acceptance probability of the kept transitions;
    n_divergent : int, divergent kept transitions.
    """

    draws: np.ndarray
    log_density: np.ndarray
    step_size: float
    inv_mass_factor: np.ndarray
    n_evaluations: int
    acceptance: float
    n_divergent: int


def _n_leapfrog(rng, step_size, settings):
    return int(jittered_leapfrog_count(rng, step_size, settings.trajectory_length, settings.max_leapfrog))


def _warmup(rng, state, log_density_fn, settings):
    """Adapt step size and mass; return the final state, step size, mass factor and evaluations."""
    n_chains, n_params = state.position.shape
    factor = np.ones(n_params)
    averaging = dual_averaging_init(0.1)
    starts, ends = warmup_windows(settings.n_warmup)
    window = []
    n_eval = 0
    for it in range(settings.n_warmup):
        step = float(np.exp(averaging.log_step))
        n_leapfrog = _n_leapfrog(rng, step, settings)
        state, info = hmc_step(rng, state, log_density_fn, step, n_leapfrog, factor)
        n_eval += n_chains * n_leapfrog
        averaging = dual_averaging_update(averaging, np.mean(info.acceptance_rate), settings.target_accept)
        if any(s <= it < e for s, e in zip(starts, ends)):
            window.append(state.position)
        if it + 1 in ends:
            # Within-chain scatter only: chains sitting in different modes must not inflate the mass.
            window = np.stack(window)
            pooled = (window - window.mean(axis=0)).reshape(-1, n_params)
            dense = settings.dense_mass if settings.dense_mass is not None else len(pooled) >= 10 * n_params
            factor = inverse_mass_factor(pooled, dense)
            # The whitened scale changed: restart the step search near the current step.
            averaging = dual_averaging_init(float(np.exp(averaging.log_step)))
            window = []
    step = float(np.exp(averaging.log_step_avg)) if settings.n_warmup else 0.1
    return state, step, factor, n_eval


def sample_chains(rng, log_density_fn, init, settings=SamplerSettings()):
    """Run adapted HMC chains from ``init`` and return their kept draws.

    Parameters
    ----------
    rng : numpy.random.Generator
    log_density_fn : callable
        ``position (n_chains, n_params) -> (log_density, grad, aux)`` as for
        :func:`~evidence_select.kernels._hmc.hmc_step`; ``-inf`` outside the support.
    init : ndarray of shape (n_chains, n_params)
        Starting points, one per chain (dispersed, e.g. prior draws).
    settings : SamplerSettings

    Returns
    -------
    output : SamplerOutput

    Examples
    --------
    >>> import numpy as np
    >>> fn = lambda x: (-0.5 * np.sum(x**2, axis=1), -x, None)
    >>> rng = np.random.default_rng(0)
    >>> out = sample_chains(rng, fn, rng.normal(size=(4, 2)), SamplerSettings(n_warmup=100, n_draws=200))
    >>> out.draws.shape, bool(abs(out.draws.var() - 1.0) < 0.2)
    ((4, 200, 2), True)
    """
    state = hmc_init(init, log_density_fn)
    state, step, factor, n_eval = _warmup(rng, state, log_density_fn, settings)
    state, draws, log_density, n_kept, acceptance, n_divergent = run_fixed_kernel(
        rng, state, log_density_fn, step, factor, settings.n_draws, settings)
    return SamplerOutput(draws, log_density, step, factor, n_eval + n_kept + len(init), acceptance, n_divergent)


def step_jitter_floor(step_size, settings):
    """The smallest factor the kept transitions' step may be jittered by: ``settings.step_jitter``, raised
    as far as needed for the mean trajectory to stay within ``max_leapfrog`` steps.

    A shorter step is worth taking only with the leapfrog steps that keep its
    trajectory length; where the adapted step already needs the whole cap (many
    parameters, a small step) the floor is 1 and the kernel is not jittered,
    rather than trading the trajectory's length for a shorter step.

    Examples
    --------
    >>> settings = SamplerSettings(trajectory_length=2.0, max_leapfrog=64, step_jitter=0.5)
    >>> step_jitter_floor(0.5, settings), step_jitter_floor(0.05, settings), step_jitter_floor(0.01, settings)
    (0.5, 0.625, 1.0)
    """
    mean_leapfrog = settings.trajectory_length / step_size
    return max(settings.step_jitter, min(1.0, mean_leapfrog / settings.max_leapfrog))


def run_fixed_kernel(rng, state, log_density_fn, step_size, inv_mass_factor, n_steps, settings=SamplerSettings()):
    """``n_steps`` transitions of the fixed (non-adapting) HMC kernel used for the kept draws.

    Each transition draws its step as ``step_size * exp(U(log floor, 0))``, with
    the floor of :func:`step_jitter_floor`, and its number of leapfrog steps as
    ``ceil(trajectory_length * U(0.5, 1.5) / step)`` (at most ``max_leapfrog``),
    independently of the state, and applies
    :func:`~evidence_select.kernels._hmc.hmc_step`; every transition leaves the
    target exactly invariant.

    Parameters
    ----------
    rng : numpy.random.Generator
    state : HMCState
    log_density_fn : callable
    step_size : float
    inv_mass_factor : ndarray of shape (n_params,) or (n_params, n_params)
    n_steps : int
    settings : SamplerSettings
        Its ``trajectory_length``, ``max_leapfrog`` and ``step_jitter``.

    Returns
    -------
    state : HMCState
    draws : ndarray of shape (n_chains, n_steps, n_params)
    log_density : ndarray of shape (n_chains, n_steps)
    n_evaluations : int
    acceptance : float
        Mean acceptance probability.
    n_divergent : int
    """
    n_chains, n_params = state.position.shape
    draws = np.empty((n_chains, n_steps, n_params))
    log_density = np.empty((n_chains, n_steps))
    acceptance, n_divergent, n_eval = 0.0, 0, 0
    log_jitter = np.log(step_jitter_floor(step_size, settings))
    for it in range(n_steps):
        # No draw at all when unjittered, so that such a run keeps the random stream of the plain kernel.
        step = step_size * float(np.exp(rng.uniform(log_jitter, 0.0))) if log_jitter < 0 else step_size
        n_leapfrog = _n_leapfrog(rng, step, settings)
        state, info = hmc_step(rng, state, log_density_fn, step, n_leapfrog, inv_mass_factor)
        n_eval += n_chains * n_leapfrog
        draws[:, it] = state.position
        log_density[:, it] = state.log_density
        acceptance += float(np.mean(info.acceptance_rate))
        n_divergent += int(np.sum(info.is_divergent))
    return state, draws, log_density, n_eval, acceptance / max(n_steps, 1), n_divergent
