"""AIS's jumps between a mixture's configurations: independence proposals from a t at the tempered mode.

HMC moves a particle within its configuration of a mixture's clusters; a particle
that the early temperatures left in a poorer configuration (two components
sharing a cluster, one cluster split) stays there, and a group whose particles
mostly did reads its ``log Z`` low by nats (the groups then disagree by several
nats: the ``"group_agreement"`` check). For a model with a mode search (its
``mode_starts``, as the posterior-mode check of SGAIS uses,
:mod:`evidence_select.sgais._mode_check`), the run first finds the posterior's
best mode on the data, then follows it down through the tempered posteriors
``p L^lambda`` at ``lambda = 1/2, 1/4, ..., 2^-13`` (each mode refined by
L-BFGS from the one above), and takes the Hessians of ``-log p`` and ``-log L``
at each. At a group's temperature the tempered posterior is approximated by a
multivariate t at the nearest of those modes (in ``log lambda``) whose inverse
scale is ``H_prior + lambda H_lik`` there (inflated by
``ModeCheckSettings.inflate``), symmetrised over the model's label symmetries;
each particle proposes one draw of it and accepts it by the independence
Metropolis-Hastings ratio ``pi(theta') q(theta) / (pi(theta) q(theta'))``. The
proposal depends on the data and the group's temperature only, never on the
particles, so the jump leaves each group's tempered target invariant, like the
HMC moves, whatever the quality of the approximation: a poor one is only
rejected. A jump costs one likelihood (and gradient) evaluation per particle;
the tempered modes cost 13 quasi-Newton refinements and their Hessians, once.

Tierney, "Markov chains for exploring posterior distributions" (1994, the
independence sampler); Del Moral, Doucet and Jasra (2006) on mixing SMC kernels.
"""

from typing import NamedTuple

import numpy as np
from scipy import optimize

from ..sgais._mode_check import (best_mode, central_hessian, mode_proposal, model_checkable, negative_log_joint,
                                 symmetrised_draws, symmetrised_log_density)
from ..sgais._settings import ModeCheckSettings

__all__ = ["ModeJumps", "mode_jumps", "jump_proposal", "jump"]


class ModeJumps(NamedTuple):
    """Modes of the tempered posteriors ``p L^lambda`` at the temperatures ``temperings`` (``1, 1/2, 1/4, ...``),
    and the Hessians there of ``-log p`` and ``-log L``, one row per temperature."""

    model: object
    temperings: np.ndarray
    modes: np.ndarray
    hessian_prior: np.ndarray
    hessian_likelihood: np.ndarray
    settings: ModeCheckSettings


#: The tempered modes are found at ``2**-j`` for ``j < _N_TEMPERINGS``; below the last, its proposal serves.
_N_TEMPERINGS = 14


def mode_jumps(rng, model, X, y, settings=ModeCheckSettings()):
    """The :class:`ModeJumps` of ``model`` on ``(X, y)`` (the tempered modes down to the first that is not finite).

    None for a model without a mode search, or with more than ``settings.max_symmetries`` label symmetries (a
    mixture of six or more components, whose proposal draws from its mode's own copy while its density sums only
    the nearby copies: not the draws' density, which the Metropolis-Hastings ratio needs), and where no finite
    mode is found.
    """
    if not model_checkable(model, settings) or model.n_mode_symmetries > settings.max_symmetries:
        return None
    with np.errstate(all="ignore"):
        mode = best_mode(negative_log_joint(model, X, y), model.mode_starts(rng, X, settings.n_starts),
                         settings.same_fit)
    if mode is None:
        return None
    found = _tempered_modes(model, X, y, mode, settings)
    if not found:
        return None
    temperings, modes, priors, likelihoods = map(np.array, zip(*found))
    return ModeJumps(model, temperings, _coarse(modes), _coarse(priors), _coarse(likelihoods), settings)


def _tempered_modes(model, X, y, mode, settings):
    """``[(tempering, mode, H_prior, H_lik), ...]`` at ``tempering = 1, 1/2, ...`` (``_N_TEMPERINGS`` of them),
    each mode refined by L-BFGS from the one above, down to the first that is not finite."""
    found = []
    for tempering in 2.0 ** -np.arange(_N_TEMPERINGS):
        objective = negative_log_joint(model, X, y, tempering)
        with np.errstate(all="ignore"):
            if tempering < 1.0:
                mode = optimize.minimize(objective, mode, jac=True, method="L-BFGS-B",
                                         options={"maxiter": 2000, "gtol": 1e-8}).x
            joint = central_hessian(lambda theta: objective(theta)[1], mode, settings.hessian_step)
            prior = central_hessian(lambda theta: -model.grad_log_prior(theta[None])[0], mode, settings.hessian_step)
        if not (np.all(np.isfinite(mode)) and np.all(np.isfinite(joint)) and np.all(np.isfinite(prior))):
            break
        found.append((tempering, mode, prior, (joint - prior) / tempering))
    return found


def _coarse(values, bits=20):
    """``values`` with ``bits`` significant bits: the mode search's last bits can depend on the memory alignment
    of its vectorised sums (the same data in another process may give a mode a few ulps away), and the jumps'
    draws would carry that into the evidence. Any fixed proposal leaves the target invariant, so a coarser one
    costs nothing, and a value then changes only where that noise crosses a rounding boundary."""
    mantissa, exponent = np.frexp(np.asarray(values, dtype=float))
    return np.ldexp(np.round(mantissa * 2.0**bits) / 2.0**bits, exponent)


def jump_proposal(jumps, tempering):
    """The symmetrised t that ``jumps`` proposes from at ``tempering`` (a
    :class:`~evidence_select.sgais._mode_check.SymmetrisedT`) at the tempered mode nearest it in ``log tempering``,
    or None where ``H_prior + tempering H_lik`` is not positive definite there."""
    j = int(np.argmin(np.abs(np.log(jumps.temperings) - np.log(max(tempering, 1e-300)))))
    hessian = jumps.hessian_prior[j] + tempering * jumps.hessian_likelihood[j]
    if np.linalg.eigvalsh(hessian)[0] <= 0:
        return None
    try:
        return mode_proposal(jumps.model, jumps.modes[j], jumps.settings.inflate * np.linalg.inv(hessian),
                             jumps.settings)
    except np.linalg.LinAlgError:
        return None


def jump(rng, state, target, jumps, tempering):
    """One independence Metropolis-Hastings jump per particle, each group from its own temperature's proposal.

    Parameters
    ----------
    rng : numpy.random.Generator
    state : HMCState
        The particles, ``(n_groups * n_group, n_params)`` in contiguous groups, with ``target``'s density.
    target : TemperedTarget
        The tempered target, its ``tempering`` one value per particle.
    jumps : ModeJumps
    tempering : ndarray of shape (n_groups,)
        Each group's temperature.

    Returns
    -------
    state : HMCState
    acceptance : float
        The mean acceptance probability over the particles that proposed (NaN when none did).
    """
    n_chains = len(state.position)
    n_group = n_chains // len(tempering)
    # One proposal per distinct temperature: the groups that reached lambda = 1 wait there for the others.
    temperings = np.asarray(tempering, dtype=float).tolist()
    by_tempering = {t: jump_proposal(jumps, t) for t in set(temperings)}
    proposals = [by_tempering[t] for t in temperings]
    moving = np.repeat([p is not None for p in proposals], n_group)
    if not np.any(moving):
        return state, float("nan")
    new = state.position.copy()
    log_q_new, log_q_old = np.zeros(n_chains), np.zeros(n_chains)
    for g, proposal in enumerate(proposals):
        if proposal is None:
            continue
        block = slice(g * n_group, (g + 1) * n_group)
        new[block] = symmetrised_draws(proposal, rng, n_group)
        log_q_new[block] = symmetrised_log_density(proposal, new[block])
        log_q_old[block] = symmetrised_log_density(proposal, state.position[block])
    everyone = target.tempering
    target.tempering = np.asarray(everyone)[moving]
    try:
        log_density, grad, aux = target(new[moving])
    finally:
        target.tempering = everyone
    log_ratio = np.full(n_chains, -np.inf)
    with np.errstate(invalid="ignore"):
        log_ratio[moving] = (log_density - log_q_new[moving]) - (state.log_density[moving] - log_q_old[moving])
    log_ratio = np.where(np.isnan(log_ratio), -np.inf, log_ratio)
    accepted = np.log(rng.uniform(size=n_chains)) < log_ratio
    taken = accepted[moving]
    position, log_dens = state.position.copy(), state.log_density.copy()
    gradient, cached = state.grad_log_density.copy(), state.aux.copy()
    position[accepted], log_dens[accepted] = new[accepted], log_density[taken]
    gradient[accepted], cached[accepted] = grad[taken], aux[taken]
    acceptance = float(np.mean(np.exp(np.minimum(log_ratio[moving], 0.0))))
    return state._replace(position=position, log_density=log_dens, grad_log_density=gradient, aux=cached), acceptance
