"""The bridge's posterior draws: HMC chains from tempered or prior starts, run again at a higher target
acceptance while their transitions diverge, chains that never moved dropped, and R-hat and ESS within the
mode groups."""

import numpy as np

from ..kernels._adaptive_hmc import SamplerSettings, sample_chains
from ..utils._diagnostics import ess_bulk, split_rhat
from .._result import check
from ._bridge_init import prior_starts, tempered_starts
from ._bridge_modes import unseen_mode_fraction


#: Most share of the kept HMC transitions that may diverge; above it the chains adapt again at the next higher
#: of ``RAISED_TARGET_ACCEPT`` (:func:`_chains_without_divergences`), and after the last the
#: ``divergent_transitions`` check fails.
MAX_DIVERGENT_SHARE = 0.01
RAISED_TARGET_ACCEPT = (0.95, 0.99)


def _chain_starts(rng, model, posterior, settings):
    """The chains' :class:`~._bridge_init.ChainStarts`; a tempered run's evaluations are counted in ``posterior``."""
    if settings.init == "prior":
        return prior_starts(rng, model, settings.n_chains)
    starts = tempered_starts(rng, model, posterior.X, posterior.y, settings.n_chains, settings.n_init_particles)
    posterior.n_calls += starts.n_evaluations
    return starts


def _chains_without_divergences(rng, posterior, positions, settings):
    """HMC chains from ``positions``, adapted again from where they stopped at the next of
    ``RAISED_TARGET_ACCEPT`` while more than ``MAX_DIVERGENT_SHARE`` of their kept transitions diverge; returns
    the last run's :class:`~evidence_select.kernels._adaptive_hmc.SamplerOutput` and its target acceptance.

    A divergence marks where the step size that suits the bulk is too long to enter (the tip of a curved ridge,
    a funnel's neck): chains that rarely go there leave its mass out, and ``log Z`` reads low by more than its
    error while R-hat, the effective sample sizes and the halves may still agree. A higher target acceptance
    (Stan's ``adapt_delta``) shortens the step until they can.
    """
    targets = [settings.target_accept] + [t for t in RAISED_TARGET_ACCEPT if t > settings.target_accept]
    for target in targets:
        sampler = SamplerSettings(n_warmup=settings.n_warmup, n_draws=settings.n_draws, target_accept=target,
                                  trajectory_length=settings.trajectory_length, max_leapfrog=settings.max_leapfrog,
                                  dense_mass=settings.dense_mass, step_jitter=settings.step_jitter)
        out = sample_chains(rng, posterior.kicked(), positions, sampler)
        if _divergent_share(out) <= MAX_DIVERGENT_SHARE:
            break
        positions = out.draws[:, -1]
    return out, target


def _divergent_share(out):
    """Share of the kept transitions of ``out`` that diverged."""
    return out.n_divergent / max(out.draws.shape[0] * out.draws.shape[1], 1)


def _posterior_draws(rng, model, posterior, posterior_samples, settings):
    """Chains ``(n_chains, n_iter, d)``, their log densities, and the sampler's details."""
    d = model.n_params
    if posterior_samples is None:
        starts = _chain_starts(rng, model, posterior, settings)
        out, target_accept = _chains_without_divergences(rng, posterior, starts.positions, settings)
        info = dict(step_size=out.step_size, acceptance=out.acceptance, n_divergent=out.n_divergent,
                    divergent_share=_divergent_share(out), target_accept=target_accept,
                    dense_mass=out.inv_mass_factor.ndim == 2, init=starts.method,
                    n_init_evaluations=starts.n_evaluations, n_init_temperatures=starts.n_temperatures)
        return out.draws, out.log_density, info
    draws = np.asarray(posterior_samples, dtype=float)
    if draws.ndim == 2:
        draws = draws[None]  # independent draws: one chain (its autocorrelation is then estimated as ~1)
    if draws.ndim != 3 or draws.shape[-1] != d or draws.shape[1] < 8:
        raise ValueError(f"posterior_samples must have shape (n_draws, {d}) or (n_chains, n_iter, {d}) with at "
                         f"least 8 draws per chain, got {np.shape(posterior_samples)}")
    log_p = posterior.value(draws.reshape(-1, d)).reshape(draws.shape[:2])
    if not np.all(np.isfinite(log_p)):
        raise ValueError(f"{int(np.sum(~np.isfinite(log_p)))} posterior_samples have zero posterior density")
    return draws, log_p, {}


def _drop_stuck_chains(draws, log_p):
    """The chains that moved, and the ``stuck_chains`` check (passed only when no chain is stuck).

    A chain is stuck when fewer than a tenth of its kept draws are distinct
    (acceptance near 0: a place the sampler cannot leave, such as a funnel's
    neck or a far tail with huge gradients). Its repeated point would weigh
    ``1 / n_chains`` of the posterior draws, so it is left out of the bridge;
    but the region that stopped it may hold mass the other chains never
    reach, so the run is flagged. With no chain moving, every chain is kept.
    """
    stuck = np.array([len(np.unique(chain, axis=0)) < max(draws.shape[1] // 10, 2) for chain in draws])
    kept = np.ones_like(stuck) if stuck.all() else ~stuck
    return draws[kept], log_p[kept], check(int(stuck.sum()), 0, not stuck.any())


def _chain_checks(series, groups, counted, settings):
    """R-hat and bulk ESS over every parameter and the log density; and, for chains the bridge ran itself, the
    census of modes.

    With the bridge summed over cells (``counted`` not None), R-hat and ESS are
    checked within each counted group, and a group's ESS counts for the share
    of chains it holds: each mode needs the ESS per chain that ``min_ess`` asks
    of all chains together.
    """
    parts = [np.arange(len(series))] if counted is None else [g for g, keep in zip(groups, counted) if keep]
    rhat = max(float(np.max(split_rhat(series[chains]))) for chains in parts)
    ess = min(float(np.min(ess_bulk(series[chains]))) * len(series) / len(chains) for chains in parts)
    checks = {"rhat": check(rhat, settings.rhat_threshold, rhat <= settings.rhat_threshold),
              "ess_bulk": check(ess, settings.min_ess, ess >= settings.min_ess)}
    if groups is not None:
        unseen = unseen_mode_fraction(groups)
        checks["mode_census"] = check(unseen, settings.max_unseen_modes, unseen <= settings.max_unseen_modes)
    return checks
