"""SGAIS: stochastic gradient annealed importance sampling, the one online engine.

Implements Algorithm 1 of Cameron, Eggers & Kroon, "Stochastic Gradient Annealed
Importance Sampling for Efficient Online Marginal Likelihood Estimation",
Entropy 21 (2019) 1109. :func:`sgais_update` anneals one chunk into an
:class:`SGAISState` as a short pipeline of pure steps; each module owns one job:

- :mod:`._state`: settings, state, records, initial state, the pooled
  evidence of the replicate groups;
- :mod:`._steps`: the tempering step (choose the increment, reweight,
  resample, move) on a :class:`~._state.Particles` system;
- :mod:`._moves`: the move kernels (SGHMC, then a model's global
  Metropolis-Hastings moves) on a tempered target;
- :mod:`._reference`: the control-variate references of the gradients;
- :mod:`._policy`: what a surprising chunk gets (finer annealing, an
  excursion, a restart);
- this module: the chunk pipeline, the record, and :func:`sgais_stream`.

The chunk's log-likelihood is annealed in along ``f(theta) ∝
p(chunk|theta)^lambda p(past|theta) p(theta)`` (paper Eq. 2); log-weights grow
by ``delta * log p(chunk|theta)`` and each group's log evidence by the logsumexp
of normalised weights times increments (thesis Ch. 4.2, Eq. 4.6-4.11). Particles
move by SGHMC on the potential of Eq. (4) (by default the BAOAB splitting, exact
for Gaussian targets), the past-data gradient a reservoir mini-batch scaled by
``n / |B|`` with control variates; the step size follows the current tempered
target's curvature (see ``doc/user_guide/sgais.rst`` for every departure from
the paper and its reason). ``n_replicates`` independent particle groups run in
one vectorised state on a common schedule; the combined ``Z`` is their mean and
their spread gives ``log_evidence_std``.

Adaptive choices and unbiasedness
---------------------------------
For a path and kernels fixed in advance, each group's ``Z_g`` is an unbiased
estimate of the evidence when every move leaves its tempered target invariant
(thesis Ch. 4.2) and every resampling is unbiased (systematic resampling). The
engine adapts these choices to the particles; for each:

- *the tempering increment* (largest keeping the conditional ESS at
  ``target_ess``, common to the groups): chosen from the weights and chunk
  log-likelihoods it then reweights, so ``Z`` is consistent as the particles
  grow (adaptive SMC, Beskos, Jasra, Kantas & Thiery 2016) with an ``O(1/M)``
  bias, not exactly unbiased;
- *the resampling trigger* (ESS below ``resample_threshold``): each
  resampling is unbiased given the weights, and the trigger is decided from
  them before the draw; with it ``Z`` is consistent (Del Moral, Doucet & Jasra
  2012, adaptive resampling); ``resample_threshold=0`` never resamples;
- *the step size* (``n``, the tempering reached, the data's step scales): it
  changes which kernel runs, not the weights; it is adaptive only through the
  tempering. The SGHMC/BAOAB kernels are not exactly invariant (discretisation
  and mini-batch noise, no accept/reject): this is the one bias that more
  particles do not remove; it shrinks with ``learning_rate`` (BAOAB removes it
  for Gaussian targets);
- *the exact HMC kernel* on the first rows (``exact_move_rows``):
  Metropolis-corrected, so exactly invariant for a fixed mass and step; each
  group moves in two halves in turn, each with a mass from the other half (its
  covariance averaged with the target's inverse curvature at its mean; a
  particle's resampled copies in its own half), so the mass a particle moves
  with is fixed while it moves; the step comes from earlier acceptance
  rates, an adaptive choice of kernel from the population: consistent, like the
  schedule;
- *exact moves after SGHMC fell behind*: a chunk on which SGHMC's particles
  lag behind the posterior of every row (:func:`~._lag.lag_ratio`, while the
  rows are stored) is annealed again with the exact kernel, and so are the
  later chunks up to ``CheckSettings.lag_rows`` rows: an adaptive choice of
  kernel from the population, consistent like the schedule; the first
  attempt's weights are discarded whole, never mixed in;
- *exact draws* (a conjugate model, in the exact kernel's place): the kernel
  ``K(theta, .) = target``, exactly invariant; from every past row's summed
  statistics where the model offers that (the linear model, at any ``n``);
- *the global moves' proposals* (mixtures: refits drawn from the particle
  population): Metropolis-Hastings with the exact tempered target while the
  reservoir holds every past row, so invariant for the population they were
  built from; consistent, like the schedule;
- *surprise flags* (``surprise_threshold`` from the particles' disagreement
  before the first step; ``reheat_after_steps`` from the step count): they
  choose the kernel (more moves, global moves), the ESS target and whether an
  excursion runs. An excursion tempers the past down and back, another SMC path
  between the same two distributions, its increments multiplying to 1 in
  expectation. Both are adaptive choices of the path: consistent;
- *restarts*: a replay from the prior is an independent run of the same
  estimator, and fresh importance draws at the posterior's best mode
  (:mod:`._mode_restart`) an independent unbiased estimate of the same ``Z``;
  pooling either (a fixed mix of the two ``Z_g``, particles resampled from
  both) is unbiased for restart positions fixed in advance (``restart_growth``).
  Positions chosen by a surprise depend on the run (a run that did badly is
  more likely to be averaged with a fresh one; where the posterior-mode check
  covers the rows, the restart waits for the first chunk that does not
  surprise), so ``Z`` is then consistent, not unbiased; so is a periodic
  restart of a model with a mode search, which
  replays only where the run fell behind the posterior's best mode
  (:mod:`._replay_gate`). Draws at the mode that replace a run (a restart at
  the mode, also the one a chunk's failed check or few lineages ask for,
  :func:`~._mode_restart.mends_at_mode`) are unbiased for the rows seen
  whatever decided them: nothing of the run they replace stays;
- *the past likelihood* in weights (excursions) and acceptances (global
  moves) is always exact: those steps run only while the reservoir holds every
  row seen (a subsample's scaled log-likelihood in an exponent would not be an
  unbiased estimate of the likelihood);
- *beyond* ``reservoir_size`` the reservoir is a uniform sample of the past:
  mini-batch gradients and re-centred reference sums are unbiased over the
  reservoir's draw but fixed given it, so the kernels follow the reservoir's
  view of the past, whose mode can sit ``sqrt(n / |R| - 1)`` posterior standard
  deviations off. On a stationary stream the control variates keep this small;
  after a shift it is not, and nothing the engine can run cures it.

Long streams and the surprise budget
------------------------------------
Beyond the reservoir, a chunk that surprises (the configured triggers) or
shifts (its rows predicted far worse than the stream so far,
:func:`~._policy.shift_detected`; every later chunk too) is *degraded*:
``ChunkRecord.degraded`` says why, an
:class:`~evidence_select.EvidenceConvergenceWarning` names the cure
(a ``reservoir_size`` at least the stream's length), and the error is widened
in quadrature by ``|chunk|`` times the particles' per-row spread on it times
their lag behind the posterior in posterior standard deviations: one, or less
where Stein's identities on every stored row show them closer (:mod:`._lag`),
or ``sqrt(n / |R| - 1)`` beyond the reservoir (:func:`degraded_widening`), until a restart
replays the rows or a posterior-mode check measures the gap that replaces it
(:func:`~._mode_check.checked_widening`). So is a chunk that
shifts while the reservoir still holds every row, past ``exact_move_rows`` and
past ``CheckSettings.lag_rows`` (or in a run without exact moves), in a run with
no surprise trigger configured: it restarts when the budget covers the replay,
but SGHMC alone may not follow a posterior that keeps moving after the shift, so
it is degraded either way. Within ``lag_rows`` such a chunk is annealed again
with exact moves instead, as are the chunks after it (:func:`sgais_update`),
which follow the shift: nothing degrades it. Restarts and
excursions share a budget: their datum evaluations stay within
``surprise_budget`` (default 4) times the stream's own annealing, plus the
overrun of one restart or excursion. A surprise refused its cure by the budget
is degraded the same way; a periodic restart skipped (reservoir or budget) is
recorded in ``ChunkRecord.fallback`` with a warning. So the amortised cost of
a chunk of ``b`` rows is at most ``1 + surprise_budget`` times that of its own
annealing, which is bounded by ``max_annealing_steps * n_mcmc_steps`` passes
over ``b`` chunk rows and at most ``b`` mini-batch rows: a constant times the
chunk.

The paper's settings are ``n_particles=10, n_replicates=1 (std unavailable),
learning_rate=0.1, friction=0.2, n_mcmc_steps=20, target_ess=0.5,
resample_threshold=0, control_variates=False, step_size_schedule="data",
integrator="sghmc", exact_move_rows=0`` (:data:`PAPER_SETTINGS`, without the replicate count).
"""

import functools
import math
import time
from typing import NamedTuple

import numpy as np

from ._reservoir import reservoir_data, reservoir_insert
from ..utils import ess_from_log_weights, log_mean_exp, make_generator
from ._checks import ChunkCauses, lineages_fail, with_checks
from ._lag import lag_measurable, lag_ratio, posterior_lag
from ._mode_check import (ModeEvidence, apply_mode_check, compare_with_mode, mode_check_due, remembered_modes,
                          rows_checkable, rows_mode_evidence)
from ._mode_restart import mends_at_mode, mode_population, restarted_state, restarts_at_mode
from ._replay_gate import GateCheck, allowed_gap, gate_applies, gate_mode_evidence, groups_behind
from ._moves import MoveTarget, SGHMCDivergence, chunk_context, exact_recovery, pooled_step_scales
from ._policy import (SHIFTS, ActionKind, ChunkMode, arrival_action, closing_action, degradation_text, excursion,
                      initial_mode, per_row_spread, periodic_restart_due, pooled_restart, replay_from_prior,
                      replayed_groups, shift_detected, steps_action, surprise_limits, surprised_on_arrival)
from ._reference import refresh_reference
from ._state import (PAPER_SETTINGS, ChunkRecord, Particles, SamplerDegeneracyWarning, SGAISConfig, SGAISState,
                     StepCounts, combine_replicates, evidence_estimate, increment_spread, particle_fields,
                     particle_log_weights, population_log_variance, sgais_init, state_particles)
from ._steps import choose_increment, count_lineages, tempering_step

__all__ = ["SGAISConfig", "SGAISState", "ChunkRecord", "sgais_init", "sgais_update", "sgais_stream",
           "combine_replicates", "evidence_estimate", "particle_log_weights", "SamplerDegeneracyWarning",
           "PAPER_SETTINGS"]


class ChunkProgress(NamedTuple):
    """Where the annealing of one chunk stands (see :func:`anneal_chunk`)."""

    particles: Particles
    tempering: float  # the chunk's power, in [0, 1]
    mode: ChunkMode
    action: object  # the policy's ChunkAction so far
    excursed: bool  # the chunk has surprised by its step count (an excursion ran, or a restart replaces it)
    counts: StepCounts
    arrival_spread: float = 0.0  # per-row spread of the particles' chunk log-likelihood before the first step


class ClosedChunk(NamedTuple):
    """The particles after a chunk's references were re-centred and its restart (if any) pooled."""

    particles: Particles
    n_reference: int  # rows seen when the references were last re-centred
    counts: StepCounts
    n_replayed: int  # rows a restart re-annealed from the prior (0 without one)
    mode_gap_variance: float  # the pooled run's squared posterior-mode gap (see pooled_mode_gap)
    mode_evidence: ModeEvidence = None  # the posterior-mode check's value on every row seen, where a restart took it
    increment_variance: float = None  # the pooled run's (pooled_increment_variance), after a restart
    every_group_replayed: bool = True  # a restart replayed every group (a gated one may replay those behind only)
    restarted_at_mode: bool = False  # every group's run was replaced by draws at the posterior's best mode


def sgais_update(state, X, y, model, config, *, check=None, previous=None):
    """Anneal one chunk into the state (paper Algorithm 1, lines 4-10), then check it.

    Parameters
    ----------
    state : SGAISState
    X : ndarray of shape (n_chunk, n_features)
    y : ndarray of shape (n_chunk,) or None
    model : Model
    config : SGAISConfig
    check : bool, None or ModeEvidence, default=None
        Whether the posterior-mode check runs after the chunk
        (:func:`~._mode_check.apply_mode_check`, where the model and the rows
        allow it): None when due (:func:`~._mode_check.mode_check_due`: at row
        checkpoints and after a chunk that surprised the particles or
        restarted), True always (the last chunk of a call, whose evidence its
        caller reports), False never; a :class:`~._mode_check.ModeEvidence`
        always, against that value of the rows seen (a restart's replays share
        the restart's). With True or a value the caller reports the chunk's
        evidence, so no surprise's restart waits past it
        (:func:`~._policy.closing_action`).
    previous : ChunkRecord or None, default=None
        The stream's record of the chunk before, None before the first: the
        checks that describe chunks stay failed from it
        (:func:`~._checks.with_checks`).

    Returns
    -------
    new_state : SGAISState
    record : ChunkRecord
        With the checks that fail after the chunk and the warnings it gives,
        which the caller raises (:func:`~._checks.raise_notices`).
    reservoir_undo : tuple or None
        Pass to :func:`~evidence_select.sgais._reservoir.reservoir_undo` with
        ``new_state.reservoir`` to roll the in-place reservoir insertion back.

    Notes
    -----
    The pipeline: measure what the state allows the chunk
    (:func:`~._policy.surprise_limits`), anneal the chunk in, carrying out the
    policy's action (:func:`anneal_chunk`), take the closing action
    (:func:`~._policy.closing_action`; for a model with a mode search, a
    periodic restart asks the posterior-mode check first, :mod:`._replay_gate`),
    re-centre the control-variate references and restart if the action says
    so, insert the chunk into the reservoir,
    build the state and the record, then check the evidence against the
    posterior's best mode. ``state`` is never modified except for the reservoir
    rows overwritten by the insertion (after everything that can fail but the
    check, which reads the new state; the caller undoes the insertion on any
    failure).

    A chunk on which SGHMC diverges is annealed again from ``state`` with exact,
    Metropolis-corrected moves while the reservoir holds every row seen
    (:func:`~._moves.exact_recovery`), and ``ChunkRecord.fallback`` says so;
    beyond the reservoir the divergence is raised. A chunk on which SGHMC's
    particles fell behind the posterior, or whose rows shifted
    (:func:`_check_sghmc_kept_up`), is annealed again from ``state`` with exact
    moves too, as are the chunks after it while the rows allow
    (``SGAISState.sghmc_fell_behind``), and ``ChunkRecord.sghmc_lag_ratio``
    says how far they lagged: a cure that needs no warning, since the chunk's
    evidence is then the exact moves'.
    """
    try:
        return _update(state, X, y, model, config, check, previous)
    except SGHMCDivergence as divergence:
        recovered = exact_recovery(config, state, len(X))
        if recovered is None:
            raise
        recovery = f"{divergence.what}: the chunk was annealed again with exact moves"
        return _update(state, X, y, model, recovered, check, previous, recovery)
    except _FellBehind as behind:
        # From this chunk on, moves are exact while every row is stored, up to CheckSettings.lag_rows.
        new_state, record, undo = _update(state._replace(sghmc_fell_behind=state.n_samples_seen + len(X)), X, y,
                                          model, config, check, previous)
        return new_state, record._replace(sghmc_lag_ratio=behind.ratio), undo


class _FellBehind(Exception):
    """SGHMC's particles fell behind the posterior on a chunk (:func:`_check_sghmc_kept_up`); ``ratio`` says how far."""

    def __init__(self, ratio):
        super().__init__(f"SGHMC's particles lag {ratio:.3g} times their sampling noise behind the posterior")
        self.ratio = ratio


def _check_sghmc_kept_up(context, progress):
    """Raise :class:`_FellBehind` where SGHMC annealed the chunk of ``context`` and its particles (``progress``,
    the annealed chunk's :class:`ChunkProgress`) lag behind the posterior of every row seen by more than
    ``ExactMoveSettings.lag_ratio`` times their own sampling noise (:func:`~._lag.lag_ratio`), or the chunk's
    rows shifted (:data:`~._policy.SHIFTS`: SGHMC may not follow the posterior there, where exact moves do).
    Only while the reservoir holds every row seen, the chunk's included, and they are at most
    ``CheckSettings.lag_rows``, in a run with exact moves (``exact_move_rows`` not 0)."""
    config, reservoir = context.config, context.reservoir
    if (context.exact_moves or config.exact_move_rows == 0
            or not lag_measurable(reservoir, context.n_seen + len(context.X), config)):
        return
    ratio = lag_ratio(context.model, progress.particles, *_rows_seen(reservoir, (context.X, context.y)))
    # NaN too: a lag that cannot be measured.
    if progress.action.reason in SHIFTS or not ratio <= config.tuning.exact_moves.lag_ratio:
        raise _FellBehind(ratio)


def _update(state, X, y, model, config, check, previous, recovery=""):
    """:func:`sgais_update`'s one attempt; ``recovery`` (or "") is added to the record's ``fallback``."""
    tic = time.perf_counter()
    rng = make_generator(state.rng)  # a copy: the old state's generator is never advanced
    context = chunk_context(state, X, y, model, config)
    settings = config.tuning.mode_check
    limits = surprise_limits(state, context, rows_checkable(model, state.n_samples_seen + len(X), settings))
    progress = anneal_chunk(rng, context, limits, _start_particles(state))
    _check_sghmc_kept_up(context, progress)
    gate = _replay_gate(rng, state, context, limits, progress)
    groups = (progress.particles.log_evidence, progress.particles.log_evidence_variance)
    behind = None if gate is None else groups_behind(
        gate, groups, allowed_gap(gate, state.widening.mode_gap_variance, state.n_samples_seen + len(X), settings),
        settings)
    # A chunk whose evidence the caller reports (checked always) never leaves a surprise's restart waiting.
    reported = check is True or isinstance(check, ModeEvidence)
    closing = closing_action(config, limits, progress.action, len(X), behind, state.restart_pending, reported)
    closed = _close_chunk(rng, state, context, progress,
                          replayed_groups(closing.action, progress.action, behind, len(groups[0])),
                          None if gate is None else gate.check.evidence)
    reservoir, undo = reservoir_insert(rng, state.reservoir, X, y)  # the only in-place write
    new_state, record, causes = _chunk_result(state, context, limits, (progress, closing, closed),
                                              (reservoir, rng, tic))
    if recovery:
        record = record._replace(fallback="; ".join(filter(None, (record.fallback, recovery))))
        causes = causes._replace(recovery=recovery)
    evidence = check if isinstance(check, ModeEvidence) else closed.mode_evidence
    # A restart makes the chunk due whatever caused it (a periodic one need not follow a surprise).
    due = gate is not None or mode_check_due(state.n_samples_seen, new_state.n_samples_seen, settings,
                                             surprised=closing.action.surprised or record.n_replayed > 0)
    if gate is not None:  # the gate's value checks the chunk's result too, whether it replayed or not
        check, evidence = True, gate.check.evidence
    elif check is None:
        check = due
    new_state, record, mode_check = _posterior_mode_check(new_state, record, (model, config), check, evidence)
    restarted_at_mode = closed.restarted_at_mode  # every group restarted at the mode: its lineages are gone
    few_lineages = not restarted_at_mode and lineages_fail(record, previous, config, state.n_samples_seen)
    if limits.can_restart and mends_at_mode(mode_check, few_lineages, settings):
        new_state, record, mode_check = _restart_after_check(rng, state, new_state, record, mode_check,
                                                             (model, config))
        restarted_at_mode = True
    if due:  # a check only a call's end asked for leaves the next search's starts as a stream in one call has them
        new_state = remembered_modes(new_state, mode_check)
    record = with_checks(record, previous, new_state, config,
                         causes._replace(mode_check=mode_check, restarted_at_mode=restarted_at_mode))
    return new_state, record, undo


def _restart_after_check(rng, state, new_state, record, mode_check, model_config):
    """``(new_state, record, mode_check)`` after the restart of every group at the posterior's best mode that the
    chunk's failed ``mode_check`` (or its few lineages) asked for (:func:`~._mode_restart.mends_at_mode`): the
    state restarted (:func:`~._mode_restart.restarted_state`), the record's estimates read from it, and the
    check's value compared with the restarted run."""
    model, config = model_config
    restarted, n_evaluations = restarted_state(rng, new_state, model, config, mode_check.evidence)
    restarted, mode_check = apply_mode_check(restarted, model, config.tuning.mode_check, mode_check.evidence)
    record = record._replace(n_replayed=restarted.n_samples_seen,
                             n_surprise_evaluations=record.n_surprise_evaluations + n_evaluations,
                             **_estimate_fields(state, restarted))
    return restarted, record, mode_check


def _chunk_result(state, context, limits, outcome, carried):
    """``(new_state, record, causes)`` of the chunk of ``context``: ``outcome`` is ``(progress, closing,
    closed)`` of its annealing and closing (a :class:`~._policy.Closing`), ``carried`` ``(reservoir, rng, tic)``;
    ``causes`` are its warnings' (:class:`~._checks.ChunkCauses`, the posterior-mode check still to run)."""
    progress, closing, closed = outcome
    action, skipped = closing.action, closing.skipped
    reservoir, rng, tic = carried
    config = context.config
    degraded = "" if action.reason is None else degradation_text(action.reason, config, limits)
    lag = _measured_lag(context, closed.particles, reservoir) if degraded else None
    widening = degraded_widening(bool(degraded), progress.arrival_spread, len(context.X), state.n_samples_seen,
                                 state.reservoir.n_stored, lag)
    new_state = _next_state(state, context, closed, (reservoir, rng), widening, bool(degraded))._replace(
        restart_pending=closing.pending)
    blocked = limits.restart_blocked if skipped else None  # why a periodic restart due here could not run
    blocked_text = "" if blocked is None else degradation_text(blocked, config, limits)
    record = chunk_record(state, new_state, closed, time.perf_counter() - tic)._replace(
        degraded=degraded, log_evidence_widening=widening, fallback=_fallbacks(closed.counts, blocked_text),
        n_lineages=count_lineages(progress.particles))
    # Beyond the reservoir every chunk after the first degraded one is degraded too: only the first warns.
    causes = ChunkCauses(degradation=None if limits.already_degraded else action.reason,
                         blocked=(blocked, blocked_text), mode_check=None, capabilities=context.capabilities,
                         n_seen_before=state.n_samples_seen, fell_behind=state.sghmc_fell_behind)
    return new_state, record, causes


def _posterior_mode_check(state, record, model_config, check, evidence):
    """The chunk's posterior-mode check (``check``: whether it runs, True, False or a
    :class:`~._mode_check.ModeEvidence` as in :func:`sgais_update`; ``evidence``, the mode's value on these rows
    where already taken, or None): ``(state, record, mode_check)``, the state with its widening, the record with
    the check's result and the error bar it leaves, and the :class:`~._mode_check.ModeCheck` (or None where no
    check ran)."""
    model, config = model_config
    settings = config.tuning.mode_check
    if check is False:
        return state, record, None
    state, result = apply_mode_check(state, model, settings, evidence)
    if result is None:
        return state, record, None
    return state, record._replace(log_evidence_std=evidence_estimate(state)[1],
                                  mode_log_evidence=result.evidence.log_evidence,
                                  mode_log_evidence_std=result.evidence.std), result


def _start_particles(state):
    """The chunk's starting :class:`Particles`, each its own lineage's origin."""
    return state_particles(state, origins=np.arange(len(state.particles)))


def _next_state(state, context, closed, carried, widening, degraded):
    """The :class:`SGAISState` after the chunk of ``context``; ``carried`` is ``(reservoir, rng)``."""
    particles, counts = closed.particles, closed.counts
    n_seen, n_chunk = state.n_samples_seen, len(context.X)
    reservoir, rng = carried
    past_statistics = (None if context.past_statistics is None
                       else context.past_statistics + context.chunk_statistics)
    return SGAISState(
        **particle_fields(particles), n_reference=closed.n_reference, reservoir=reservoir, rng=rng,
        n_samples_seen=n_seen + n_chunk, n_chunks=state.n_chunks + 1,
        n_datum_evaluations=state.n_datum_evaluations + counts.n_evaluations,
        step_scales=pooled_step_scales(context.scales.past, n_seen, context.scales.chunk, n_chunk),
        n_surprise_evaluations=state.n_surprise_evaluations + counts.n_surprise_evaluations,
        increment_variance=_increment_variance(state, closed),
        widening=_kept_widening(state, closed)._replace(
            degraded_variance=_kept_degraded_variance(state, closed) + widening**2,
            n_degraded_chunks=state.widening.n_degraded_chunks + degraded, mode_gap_variance=closed.mode_gap_variance),
        past_statistics=past_statistics, known_modes=state.known_modes, sghmc_fell_behind=state.sghmc_fell_behind)


def _increment_variance(state, closed):
    """``SGAISState.increment_variance`` after the chunk (``closed``, a :class:`ClosedChunk`): the pooled run's
    after a restart (:func:`~._policy.pooled_increment_variance`), else the chunk's increment spread added to the
    state's."""
    if closed.n_replayed:
        return closed.increment_variance
    return _summed_increment_variance(state, closed.particles.log_evidence)


def _summed_increment_variance(state, log_evidence):
    """The state's ``increment_variance`` plus the spread of the groups' increments from its ``log_evidence`` to
    ``log_evidence`` (:func:`~._state.increment_spread`, the checked groups' alone while they lead)."""
    return state.increment_variance + increment_spread(state.log_evidence, log_evidence,
                                                       state.widening.checked_groups)


def _kept_widening(state, closed):
    """The state's :class:`~._state.ErrorWidening`, less the groups a posterior-mode check measured
    (``checked_groups``) after a restart: it pooled the groups afresh."""
    if closed.n_replayed:
        return state.widening._replace(checked_groups=(), checked_variance=0.0)
    return state.widening


def _kept_degraded_variance(state, closed):
    """The degraded chunks' variance that stays after the chunk closed (``closed``, a :class:`ClosedChunk`): none
    after a restart that replayed every group, whose replays ran every earlier chunk again (their own degraded
    chunks widen their groups' variances, :func:`~._policy.replay_from_prior`), else the state's."""
    return 0.0 if closed.n_replayed and closed.every_group_replayed else state.widening.degraded_variance


def _fallbacks(counts, skipped_restart):
    """The record's ``fallback`` text: step caps reached, a periodic restart skipped (``skipped_restart``: why,
    or "")."""
    taken = []
    if counts.n_capped:
        taken.append(f"{counts.n_capped} step(s) took the rest of their tempering at once (step cap reached)")
    if skipped_restart:
        taken.append(f"periodic restart skipped: {skipped_restart}")
    return "; ".join(taken)


def _measured_lag(context, particles, reservoir):
    """The closed chunk's :class:`~._lag.PosteriorLag` on every row seen, or None beyond the reservoir (its rows
    are a subsample, whose gradient errs by about ``sqrt(n / |R| - 1)`` posterior standard deviations: the lag
    it would measure) or beyond ``CheckSettings.lag_rows`` rows."""
    if not lag_measurable(reservoir, reservoir.n_seen, context.config):
        return None
    return posterior_lag(context.model, particles, *reservoir_data(reservoir))


def degraded_widening(degraded, arrival_spread, n_chunk, n_seen, n_stored, lag=None):
    """Standard deviation (nats) to add for a ``degraded`` chunk, else 0.

    ``n_chunk`` times the arrival spread is the standard deviation across the
    particles of the chunk's total log-likelihood: the change of the chunk's
    log predictive when the particles sit one posterior standard deviation off.
    While every row is stored, ``lag`` (a :class:`~._lag.PosteriorLag` of the
    chunk's closing particles on all rows) measures how far off they sit, the
    particles' dispersion below the posterior's scaling the spread up, and
    where that is less than one standard deviation it replaces the one. (Its
    sampling noise, about ``sqrt(n_params / n_particles)``, only adds to it, so
    it reads small only where the particles are close; where it reads large,
    as with more parameters than particles, it says nothing the one does not.)
    Beyond the reservoir (``lag`` None) the particles follow the reservoir's
    view of the past, whose mode may sit ``sqrt(n / |R| - 1)`` posterior
    standard deviations off (a uniform subsample's mode error relative to the
    full posterior's width), and a surprise whose cure could not run may have
    left them further off; the larger factor, at least 1, multiplies.
    """
    if not degraded:
        return 0.0
    if lag is not None and lag.dispersion > 0:
        return n_chunk * arrival_spread * min(lag.lag / math.sqrt(lag.dispersion), 1.0)
    return n_chunk * arrival_spread * math.sqrt(max(n_seen / max(n_stored, 1) - 1.0, 1.0))


def anneal_chunk(rng, context, limits, particles):
    """Anneal the chunk's power from 0 to 1 by tempering steps, carrying out the policy's actions; returns the
    final :class:`ChunkProgress`."""
    progress = ChunkProgress(particles=particles, tempering=0.0,
                             mode=initial_mode(context.config, context.n_seen, context.move_factor),
                             action=arrival_action(limits, False, False), excursed=False, counts=StepCounts())
    while progress.tempering < 1.0:
        progress = _annealing_step(rng, context, limits, progress)
    return progress


def _annealing_step(rng, context, limits, progress):
    """One tempering step of the chunk (the first one measures its arrival), then the policy's step action."""
    model, config, n_seen = context.model, context.config, context.n_seen
    particles, tempering = progress.particles, progress.tempering
    arrival = progress.counts.n_steps == 0 and limits.has_past
    # The rows' values one by one only where the shift detection reads them; every other step needs the
    # particles' totals, which a model may sum without the (particles, rows) array (a linear model from the
    # chunk's moments).
    log_lik = (model.log_likelihood(particles.theta, context.X, context.y) if arrival and limits.watch_shifts
               else None)
    chunk_log_lik = (model.log_likelihood_sum(particles.theta, context.X, context.y) if log_lik is None
                     else log_lik.sum(axis=1)).reshape(particles.log_weights.shape)
    _check_finite_log_lik(chunk_log_lik, (model, particles.theta, context.X, context.y), tempering, n_seen)
    counts = progress.counts.plus(StepCounts(n_evaluations=chunk_log_lik.size * len(context.X)))
    if arrival:
        progress = _arrival(context, limits, progress, log_lik, chunk_log_lik)
    mode, remaining = progress.mode, 1.0 - tempering
    at_cap = counts.n_steps + 1 >= config.max_annealing_steps
    cap_message = (f"annealing the chunk after {n_seen} samples needed more than {config.max_annealing_steps} steps"
                   if at_cap else None)
    delta = choose_increment(particles.log_weights, chunk_log_lik, remaining, mode.target_ess, cap_message)
    tempering = 1.0 if delta >= remaining else tempering + delta
    particles, step_counts, _ = tempering_step(
        rng, context, particles, chunk_log_lik, delta, MoveTarget(tempering, 1.0, mode.n_mcmc_steps, mode.jump),
        f"on the chunk after {n_seen} samples (tempering={tempering:.3g})")
    counts = counts.plus(step_counts).plus(StepCounts(n_steps=1, n_capped=int(at_cap)))
    return _after_step(rng, context, limits, progress._replace(particles=particles, tempering=tempering,
                                                                counts=counts))


def _arrival(context, limits, progress, log_lik, chunk_log_lik):
    """The chunk's arrival, measured before its first step: the particles' per-row spread on it, whether it
    surprised them or shifted, and the policy's action on that. ``log_lik`` holds the rows' values ``(n_total,
    n_chunk)`` where the limits watch for shifts (:func:`~._policy.shift_detected`), else None."""
    log_weights = progress.particles.log_weights
    spread = per_row_spread(log_weights, chunk_log_lik / len(context.X))
    surprised = surprised_on_arrival(context.config, limits, spread)
    shifted = not surprised and (limits.already_degraded or shift_detected(
        limits, log_weights, log_lik, context.config.tuning.checks.shift_z))
    action = arrival_action(limits, surprised, shifted)
    return progress._replace(arrival_spread=spread, action=action,
                             mode=limits.mode if action.surprised else progress.mode)


def _after_step(rng, context, limits, progress):
    """The policy's action after a step (:func:`~._policy.steps_action`), carried out: a chunk that surprised by
    its step count anneals on in the surprise mode, after an excursion where that is the action."""
    action = steps_action(context.config, limits, progress.action, progress.counts.n_steps, progress.excursed)
    if action is None:
        return progress
    # A surprising chunk: the posterior may be moving to modes that local moves cannot reach. Like the first
    # chunk, the rest of it carries the particles a long way, so it gets more moves per step.
    progress = progress._replace(action=action, mode=limits.mode, excursed=True)
    if action.kind is not ActionKind.EXCURSION:  # a restart (after the chunk) replaces it, or it is degraded
        return progress
    particles, excursion_counts = excursion(rng, context, progress.particles, progress.tempering,
                                            limits.mode.n_mcmc_steps)
    return progress._replace(particles=particles, counts=progress.counts.plus(excursion_counts))


def _close_chunk(rng, state, context, progress, replayed_groups, gate_evidence=None):
    """Re-centre the references, then restart if asked: a :class:`ClosedChunk`.

    A restart (``replayed_groups``, a boolean mask of the groups to replay, or
    None for no restart) runs an independent estimate of every row seen for
    each group replayed and pools it with this run group by group at the
    restart's share (unbiased for fixed restart decisions): importance draws at
    the posterior's best mode where the check's proposal there fits the
    posterior, which replace the group's run (:mod:`._mode_restart`), else a
    fresh run from the prior in a random order of the rows, pooled at half (the
    evidence keeps the better of the two up to ``log 2``).
    ``gate_evidence`` is the replay gate's value of the mode, where one ran:
    while the rows can be checked it is the posterior-mode check's value on
    them, which the restart then shares instead of taking it again.
    """
    model, config, X, y = context.model, context.config, context.X, context.y
    particles, counts = progress.particles, progress.counts
    reference, reference_grad, n_reference, n_evaluations = refresh_reference(state, model, config, particles, X, y,
                                                                              context.chunk_statistics)
    particles = particles._replace(reference=reference, reference_grad=reference_grad)
    counts = counts.plus(StepCounts(n_evaluations=n_evaluations))
    if replayed_groups is None:
        return ClosedChunk(particles=particles, n_reference=n_reference, counts=counts, n_replayed=0,
                           mode_gap_variance=state.widening.mode_gap_variance)
    evidence = _rows_evidence(rng, state, (X, y), model, config.tuning.mode_check, gate_evidence)
    # Past the check's rows only the gate values the mode (on a subsample's best modes, its draws on every row).
    mode_value = gate_evidence if evidence is None else evidence
    at_mode = restarts_at_mode(mode_value, config.tuning.mode_check)
    if at_mode:
        replay = mode_population(rng, _rows_seen(state.reservoir, (X, y)), model, config, mode_value,
                                 replayed_groups)
    else:
        replay = replay_from_prior(rng, state.reservoir, (X, y), model, config, functools.partial(
            replay_stream, check=True if evidence is None else evidence.without_proposal()), replayed_groups)
    replay_counts = StepCounts(n_evaluations=replay.n_datum_evaluations,
                               n_surprise_evaluations=replay.n_datum_evaluations)
    pooled = pooled_restart(rng, particles, replay, replayed_groups, (state.widening.mode_gap_variance,
                            _summed_increment_variance(state, particles.log_evidence)),
                            config.tuning.mode_check.gap_sigmas)
    every_group = bool(np.all(replayed_groups))
    return ClosedChunk(particles=pooled.particles, n_reference=min(n_reference, replay.n_reference),
                       counts=counts.plus(replay_counts), n_replayed=state.n_samples_seen + len(X),
                       mode_gap_variance=pooled.mode_gap_variance, mode_evidence=evidence,
                       increment_variance=pooled.increment_variance, every_group_replayed=every_group,
                       restarted_at_mode=every_group and replay.share >= 1.0 and at_mode)


def _rows_evidence(rng, state, rows, model, settings, gate_evidence=None):
    """The posterior-mode check's value on every row seen by ``state`` and the chunk's ``rows``, where they can
    be checked (``gate_evidence`` where the replay gate took it, else a copy of ``rng`` draws it, its search
    also from the state's known modes), else None: a restart's replays and the chunk's own check share it."""
    reservoir = state.reservoir
    if not rows_checkable(model, reservoir.n_seen + len(rows[0]), settings):
        return None
    if gate_evidence is not None:
        return gate_evidence
    return rows_mode_evidence(model, *_rows_seen(reservoir, rows), make_generator(rng), settings, state.known_modes)


def _rows_seen(reservoir, rows):
    """``(X, y)`` of every row seen: the reservoir's (which must hold them all) and the chunk's ``rows``."""
    X, y = rows
    past_X, past_y = reservoir_data(reservoir)
    return np.concatenate([past_X, X]), None if y is None else np.concatenate([past_y, y])


def _replay_gate(rng, state, context, limits, progress):
    """The replay gate's :class:`~._replay_gate.GateCheck` of the annealed chunk (:mod:`._replay_gate`), where a
    periodic restart is due and the model can be checked, else None (the restart, if due, runs unchecked). A
    copy of ``rng`` draws it, so the run's own draws are those it would make without it."""
    model, config = context.model, context.config
    settings = config.tuning.mode_check
    if not (periodic_restart_due(config, limits, progress.action, len(context.X), state.restart_pending)
            and gate_applies(model, settings)):
        return None
    particles = progress.particles
    value = gate_mode_evidence(model, _rows_seen(state.reservoir, (context.X, context.y)), make_generator(rng),
                               settings, particles.theta, state.known_modes)
    if value is None:
        return None
    running = state._replace(  # the run's estimate after the chunk, without a restart or a mode gap
        log_evidence=particles.log_evidence, log_evidence_variance=particles.log_evidence_variance,
        increment_variance=_summed_increment_variance(state, particles.log_evidence),
        widening=state.widening._replace(mode_gap_variance=0.0))
    check = compare_with_mode(evidence_estimate(running), value.evidence, settings)
    return GateCheck(check, value.particles_off_mode)


def chunk_record(state, new_state, closed, seconds):
    """The :class:`ChunkRecord` of the update ``state -> new_state`` (its policy fields left at their defaults)."""
    counts = closed.counts
    return ChunkRecord(
        n_samples_seen=new_state.n_samples_seen, n_annealing_steps=counts.n_steps, n_resampled=counts.n_resampled,
        seconds=seconds, n_reheat_steps=counts.n_reheat_steps, n_jumps_accepted=counts.n_jumps,
        n_replayed=closed.n_replayed, n_surprise_evaluations=counts.n_surprise_evaluations,
        n_correlated_moves=counts.n_correlated_moves, **_estimate_fields(state, new_state))


def _estimate_fields(state, new_state):
    """The :class:`ChunkRecord` fields read from the state after the chunk (``new_state``; ``state`` before it):
    the evidence, its error, the lowest ESS, the log predictive per row, the population bias."""
    log_z, log_z_std = evidence_estimate(new_state)
    n_chunk = new_state.n_samples_seen - state.n_samples_seen
    return dict(log_evidence=log_z, log_evidence_std=log_z_std,
                ess=float(np.min(ess_from_log_weights(new_state.log_weights, axis=1))),
                log_predictive_per_datum=(log_z - float(log_mean_exp(state.log_evidence))) / n_chunk,
                population_bias=-0.5 * population_log_variance(new_state.log_evidence_variance))


def _check_finite_log_lik(chunk_log_lik, rows, tempering, n_seen):
    """Raise where a particle's total on the chunk is NaN or +inf; ``rows`` is ``(model, theta, X, y)``, whose
    rows' values are taken only then, to say how many particles a row failed for."""
    # A particle's row sum is NaN or +inf exactly when a row entry is (or the sum overflows): a cheap screen,
    # one comparison (NaN < inf is False).
    if not np.all(chunk_log_lik < np.inf):
        model, theta, X, y = rows
        with np.errstate(all="ignore"):
            log_lik = model.log_likelihood(theta, X, y)
        bad = int(np.sum(np.any(np.isnan(log_lik) | np.isposinf(log_lik), axis=1)))
        what = f"NaN or +inf for {bad} particle(s)" if bad else "overflowing (its sum over the chunk is +inf)"
        raise FloatingPointError(
            f"log-likelihood is {what} on the chunk after {n_seen} samples "
            f"(tempering={tempering:.3g}); check the data for extreme values or lower learning_rate")


def sgais_stream(rng, model, config, X, y=None, *, history=None, check_chunks=True, check=True):
    """A fresh run over ``(X, y)`` in chunks of ``config.batch_size`` rows, from the prior; its final state.

    Every chunk goes through :func:`sgais_update`, the last one checked as
    ``check`` says (as in :func:`sgais_update`; by default always);
    ``check_chunks=False`` checks only that last one. ``history``, a list,
    receives each chunk's :class:`ChunkRecord` (whose warnings the caller
    raises, :func:`~._checks.raise_notices`).
    """
    state = sgais_init(rng, model, config, X.shape[1], None if y is None else np.asarray(y).dtype)
    record = None
    for start in range(0, len(X), config.batch_size):
        stop = start + config.batch_size
        last = stop >= len(X)
        state, record, _ = sgais_update(state, X[start:stop], None if y is None else y[start:stop], model, config,
                                        check=check if last else (None if check_chunks else False), previous=record)
        if history is not None:
            history.append(record)
    return state


def replay_stream(rng, model, config, X, y=None, *, check=True):
    """A restart's replay of one group (:func:`~._policy.replay_from_prior`): :func:`sgais_stream` with only its
    last chunk checked (``check``, the restart's value of the rows where it took one), since nothing reads a
    replay's records and its last check decides its widening."""
    return sgais_stream(rng, model, config, X, y, check_chunks=False, check=check)
