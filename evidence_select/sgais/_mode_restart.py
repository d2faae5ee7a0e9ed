"""Restarts at the posterior's best mode: importance draws there as the independent run a restart pools with.

A restart re-estimates the evidence of every row seen by an independent run and pools it with the in-order
run (:func:`~._policy.merge_independent_runs`: a fixed mix of the two ``Z``, particles drawn from both by
weight). Replaying the whole stream from the prior (:func:`~._policy.replay_from_prior`) is one such run, pooled
at half. Where the posterior-mode check has just valued the rows (:mod:`._mode_check`), its proposal at the best
mode gives another at a small share of the cost: each replicate group draws points from it, its ``Z`` is
their importance-sampling mean (unbiased, as the proposal, a heavy-tailed t symmetrised over the
label symmetries, is positive everywhere) and its particles are drawn from them by weight. The draws are fresh,
not those that valued the mode, so the value that decided the restart does not select the estimate pooled.

The draws take ``restart_share`` of each pooled group's ``Z``: by default all of it, so that they replace the
group's run (its particles and evidence). A restart runs because the in-order run fell behind the mode's value
or a surprise carried it far; a fixed mix with such a run stays unbiased, but reads ``-log restart_share`` low
where the run sat in a poorer mode (``log 2`` for an even mean), which no error bar holds, while the draws'
value is unbiased for every row seen whatever decided the restart. Mass that the proposal misses (a second
configuration the in-order run may have held) is lost, as the check's own value loses it; the draws hold at
least the best mode's. Each group draws enough points to value the rows to the check's ``target_std`` at the
check's spread of weights (not the fresh draws', whose value the number would then select).

It takes the replay's place where the proposal fits the posterior: where the check's importance weights spread
by at most ``restart_spread`` (the relative standard deviation of the weights truncated at ``sqrt(S)`` times
their mean, :attr:`~._mode_check.ModeEvidence.fit_spread`, which a single heavy draw does not swing).
A posterior far from the t's shape (few rows, a component that holds hardly any) spreads them more, and the
restart replays from the prior. Even where they spread little, importance sampling cannot see mass its draws
never reach, and no statistic of the draws measures it: a weakly determined component stretches the posterior
into tails that the t's draws under-sample, reading low by tenths of a nat with an error of hundredths. How far
the posterior is from Gaussian around the mode bounds that: the draws' value against the Laplace approximation
at the same mode (:attr:`~._mode_check.ModeEvidence.laplace_log_evidence`). Their distance, squared, is the
least variance the restarted run's error keeps (``SGAISState.increment_variance``, the run's own, which every
group shares: each group's draws miss the same tails), so a posterior that is Gaussian there keeps the draws'
hundredths and a stretched one an error of its stretch.
"""

import math

import numpy as np

from ..kernels._resampling import systematic_resample
from ..utils import make_generator
from ._mode_check import importance_estimate, importance_log_weights, symmetrised_draws
from ._policy import Replay, pooled_restart
from ._reservoir import reservoir_data
from ._reference import grad_sum
from ._state import Particles, particle_fields, state_particles

__all__ = ["restarts_at_mode", "mends_at_mode", "restarted_state", "mode_population", "restart_draws"]


def restarts_at_mode(evidence, settings):
    """Whether a restart draws at the mode (:func:`mode_population`) rather than replaying from the prior: the
    check's value ``evidence`` (a :class:`~._mode_check.ModeEvidence` or None) carries the proposal it drew
    from, its truncated weights spread by at most ``settings.restart_spread``
    (:attr:`~._mode_check.ModeEvidence.fit_spread`), and ``settings.restart_share`` is positive."""
    return (settings.restart_share > 0 and evidence is not None and evidence.proposal is not None
            and evidence.fit_spread <= settings.restart_spread)


def mends_at_mode(check, lineages_failing, settings):
    """Whether a chunk's posterior-mode ``check`` (a :class:`~._mode_check.ModeCheck`, or None where none ran)
    asks for a restart of every group at the mode after the chunk closed.

    Where the check's proposal fits (:func:`restarts_at_mode`), draws there give an error bar the run cannot:
    the restart runs where the run failed the check (it missed mass at the mode; its error bar would otherwise
    carry the gap) or where its evidence rests on a few annealing paths (``lineages_failing``: the first
    chunk's resampling left few lineages, an error no spread measures), unless the run then reads above the
    mode's value by more than ``settings.gap_sigmas`` combined standard deviations: it holds mass the proposal
    misses (another configuration), which the draws would lose. ``settings.restart_after_check=False`` never
    restarts after a check, nor does a ``restart_share`` below 1 (which would pool the draws with the run the
    check found wanting).
    """
    if (not settings.restart_after_check or settings.restart_share < 1.0 or check is None
            or not restarts_at_mode(check.evidence, settings)):
        return False
    if check.failed:
        return True
    return lineages_failing and -check.gap <= settings.gap_sigmas * math.hypot(check.std, check.evidence.std)


def restarted_state(rng, state, model, config, evidence):
    """``state`` (a chunk closed, every row seen stored) after a restart of every group at the mode of the
    check's value ``evidence`` (:func:`mode_population` on every row seen, pooled as a restart's run is in
    :func:`~._engine.sgais_update`), and the datum evaluations the draws cost.

    The draws replace the run (``restart_share`` 1, :func:`mends_at_mode`), so nothing the chunks before left in
    its error bar stays but the floor of the draws and their groups' spread: no mode gap, no degraded chunks'
    widening, no checked groups, and no restart waiting.
    """
    groups = np.ones(len(state.log_evidence), dtype=bool)
    replay = mode_population(rng, reservoir_data(state.reservoir), model, config, evidence, groups)
    pooled = pooled_restart(rng, state_particles(state), replay, groups,
                            (state.widening.mode_gap_variance, state.increment_variance),
                            config.tuning.mode_check.gap_sigmas)
    n_evaluations = replay.n_datum_evaluations
    widening = state.widening._replace(mode_gap_variance=pooled.mode_gap_variance, degraded_variance=0.0,
                                       checked_groups=(), checked_variance=0.0)
    return state._replace(
        **particle_fields(pooled.particles), n_reference=min(state.n_reference, replay.n_reference),
        n_datum_evaluations=state.n_datum_evaluations + n_evaluations,
        n_surprise_evaluations=state.n_surprise_evaluations + n_evaluations,
        increment_variance=pooled.increment_variance, widening=widening, restart_pending=0), n_evaluations


def mode_population(rng, rows, model, config, evidence, groups):
    """Importance draws at the mode as a restart's independent run over every row seen: a :class:`~._policy.Replay`.

    ``rows`` ``(X, y)`` are every row seen, ``evidence`` the check's :class:`~._mode_check.ModeEvidence` (with
    its proposal), ``groups`` a boolean mask over the replicate groups (as for
    :func:`~._policy.replay_from_prior`). Its ``share`` of the pooled ``Z`` is ``restart_share``, its draws per
    group :func:`restart_draws`, its ``floor_variance`` the check's value's squared distance from the Laplace
    value. Each group draws from a generator of its own, drawn from ``rng`` for every group whether it runs or
    not, so a group's run is the same whichever others run. With control variates each particle is its own
    reference, its gradient summed exactly over the rows. The mode gap of such a run is 0: it is the mode's value.
    """
    settings = config.tuning.mode_check
    n_particles = config.n_particles
    n_draws = restart_draws(evidence, settings)
    seeds = [make_generator(int(rng.integers(2**63))) for _ in groups]
    runs = [_group_population(seed, model, rows, evidence.proposal, n_draws, n_particles)
            for seed, run in zip(seeds, groups) if run]
    theta = np.concatenate([run[0] for run in runs])
    values = [run[1] for run in runs]
    X, y = rows
    reference = reference_grad = None
    n_evaluations = len(runs) * n_draws * len(X)
    if config.control_variates:
        reference, reference_grad = theta.copy(), grad_sum(model, theta, X, y)
        n_evaluations += len(theta) * len(X)
    particles = Particles(
        theta=theta, log_weights=np.full((len(runs), n_particles), -math.log(n_particles)),
        log_evidence=np.array([value.log_evidence for value in values]),
        log_evidence_variance=np.array([_log_variance(value) for value in values]),
        reference=reference, reference_grad=reference_grad)
    # Run-level, not per group: the draws of every group under-sample the same tails.
    floor_variance = (evidence.log_evidence - evidence.laplace_log_evidence)**2
    return Replay(particles=particles, n_datum_evaluations=n_evaluations, n_reference=len(X),
                  mode_gap_variance=np.zeros(len(runs)), share=settings.restart_share,
                  floor_variance=floor_variance if np.isfinite(floor_variance) else 0.0)


def restart_draws(evidence, settings):
    """Draws per group: enough that the group's value has a standard error of ``target_std`` at the check's spread
    of weights (``(spread / target_std)**2``), within ``[min_draws, n_draws]`` (``n_draws`` where ``target_std``
    is 0)."""
    if settings.target_std <= 0:
        return settings.n_draws
    wanted = math.ceil((evidence.weight_spread / settings.target_std)**2)
    return int(min(settings.n_draws, max(settings.min_draws, wanted)))


def _group_population(rng, model, rows, proposal, n_draws, n_particles):
    """One group's ``(theta (n_particles, n_params), ModeEvidence)``: ``n_draws`` importance draws, their value,
    and ``n_particles`` of them drawn by weight (systematic). Where no draw has a finite weight, the value is
    ``-inf`` and the particles (the first draws) carry no weight in the pooled run."""
    theta = symmetrised_draws(proposal, rng, n_draws)
    log_weights = importance_log_weights(model, rows, proposal, theta)
    value = importance_estimate(log_weights)
    if not np.isfinite(value.log_evidence):
        return theta[np.arange(n_particles) % n_draws], value
    return theta[systematic_resample(rng, log_weights[None], n_particles)[0]], value


def _log_variance(value):
    """``log(1 + relative variance)`` of an importance estimate's ``Z`` (0 where it has no finite value)."""
    return math.log1p(value.std**2) if np.isfinite(value.std) else 0.0
