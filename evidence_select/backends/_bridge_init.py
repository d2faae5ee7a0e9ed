"""Starting points for the bridge's HMC chains, from a short tempered (SMC) run from the prior to the posterior.

Chains started at prior draws must find the posterior on their own. Under a
box prior reached through the sigmoid map, a thin curved ridge fills a tiny
part of the unconstrained space, and a prior draw sits where the likelihood
is tens of thousands of nats below its peak and its gradient is huge: the
warm-up's step size, shared by all chains, shrinks to what the worst-placed
chain needs, and the chains stop wherever they landed. The bridge then sees
a few stuck chains and many "modes" that are only places where chains froze.

A tempered population avoids that: particles drawn from the prior follow the
geometric path ``p(theta) L(theta)^lambda`` from ``lambda = 0`` to ``1``
(:func:`~._ais._ais_run`, an SMC sampler with adaptive temperatures, HMC
moves and resampling), so that at every temperature the moves only have to
follow a small change of the target. Their final positions, resampled by
their weights, are in the posterior's bulk (in proportion to the mass of the
modes the population found), which is where the chains start. The population
need not be in equilibrium, nor its evidence be accurate: the chains' own
warm-up does the rest, and R-hat, the mode census and the bridge's other
checks judge the chains as before.

Neal, "Annealed importance sampling" (2001); Del Moral, Doucet and Jasra,
"Sequential Monte Carlo samplers" (2006); Stan's and BlackJAX's advice to
start chains from points in the typical set rather than from extreme
dispersion (an SMC or Pathfinder initialisation).
"""

from typing import NamedTuple

import numpy as np

from ..kernels._resampling import systematic_resample
from ..utils._logspace import normalize_log_weights
from ._ais import AISConfig, _ais_run

__all__ = ["ChainStarts", "prior_starts", "tempered_starts"]

_N_GROUPS = 4  # groups of the tempered run: each group's mass matrix comes from the other groups' particles
_N_MOVES = 4  # HMC transitions per temperature: enough to follow the path, the warm-up does the rest
# Leapfrog steps per transition at most (about 4.5 at the initial step): where the step collapses on a thin ridge,
# AIS's longer trajectories would multiply the start's cost, and the chains' own warm-up does the rest.
_MAX_LEAPFROG = 7


class ChainStarts(NamedTuple):
    """Where the chains start, ``positions`` ``(n_chains, n_params)``, how (``"tempered"`` or ``"prior"``), the
    likelihood evaluations spent finding them and the tempered run's number of temperatures (0 for prior draws)."""

    positions: np.ndarray
    method: str
    n_evaluations: int
    n_temperatures: int


def prior_starts(rng, model, n_chains):
    """``n_chains`` prior draws: dispersed starts at no likelihood cost."""
    return ChainStarts(np.asarray(model.sample_prior(rng, n_chains), dtype=float), "prior", 0, 0)


def tempered_starts(rng, model, X, y, n_chains, n_particles):
    """``n_chains`` starts resampled from the final particles of a tempered run of ``n_particles``.

    Parameters
    ----------
    rng : numpy.random.Generator
    model : Model
    X, y : the data (``X`` a dummy row for a model without data)
    n_chains : int
    n_particles : int
        Particles of the tempered run (rounded up to a multiple of its groups).

    Returns
    -------
    starts : ChainStarts
        Positions chosen by systematic resampling of the particles' weights,
        each group's weights normalised so that every group counts equally
        (distinct particles whenever ``n_chains`` is at most the number of
        particles with weight above ``1 / n_chains`` of the total).
    """
    config = AISConfig(n_chains=n_particles, n_repeats=_N_GROUPS, n_mcmc_steps=_N_MOVES, max_mcmc_steps=_N_MOVES,
                       max_leapfrog=_MAX_LEAPFROG, mode_jumps=0)
    state, log_weights, _, n_evaluations, trace, _ = _ais_run(rng, model, X, y, config, None)
    pooled = normalize_log_weights(log_weights, axis=1).ravel()
    chosen = systematic_resample(rng, pooled[None], n_chains)[0]
    return ChainStarts(state.position[chosen], "tempered", int(n_evaluations), len(trace.temperatures) - 1)
