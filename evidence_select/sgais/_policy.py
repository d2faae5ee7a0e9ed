"""What SGAIS does when a chunk surprises the particles: the policy's one action per chunk, and its cures.

A chunk *surprises* when the particles disagree about it before its first step
(``surprise_threshold``) or when it needs ``reheat_after_steps`` annealing
steps. The rest of such a chunk anneals in the surprise mode (more moves per
step, the model's global moves, optionally a finer ESS target), and then either

- an *excursion* (:func:`excursion`) tempers the past data down to the weight of
  one chunk and back, so the particles can cross barriers that the past data
  raised; or
- a *restart* (``restart_on_surprise``, while the reservoir holds every row seen)
  replays all rows from the prior in a random order (:func:`replay_from_prior`)
  and pools that run with the in-order one (:func:`merge_independent_runs`).
  Where the posterior-mode check covers the rows, the restart waits while the
  chunks after it keep surprising (:func:`closing_action`).

With ``restart_growth`` a restart also comes each time the rows seen grow by
that factor, at positions fixed in advance; past the rows the posterior-mode
check covers, only where that check says the run fell behind
(:mod:`._replay_gate`). A chunk that *shifts*
(:func:`shift_detected`) where no surprise trigger watches restarts when it can
and is degraded either way.

The policy is a set of pure functions of measured inputs: :func:`surprise_limits`
(what the state and the budget allow, before the chunk's first step), and
:func:`arrival_action`, :func:`steps_action` and :func:`closing_action`, each of
which returns one :class:`ChunkAction` (continue, excursion, restart, or
degraded, with a :class:`Degradation` reason) that the engine carries out. The
text of a reason and the cure a warning names are looked up from the reason.
"""

import enum
import math
import warnings
from typing import NamedTuple

import numpy as np
from joblib import delayed

from ..exceptions import EvidenceConvergenceWarning
from ._reservoir import reservoir_data
from ..kernels._resampling import systematic_resample
from ..utils import log_mean_exp, logsumexp, make_generator
from ..utils._diagnostics import mean_and_squared_error
from ..utils._logspace import log_expm1
from ..utils._nested import run_inner
from ..utils._threads import single_threaded_blas
from ..utils._warnings import warn
from ._moves import MoveTarget, past_log_likelihood
from ._state import (OVERSHOOT_STD, Particles, StepCounts, group_left_behind, initial_increment_variance,
                     standing_groups)
from ._steps import choose_increment, tempering_step

__all__ = ["DEFERRAL_GROWTH", "SHIFTS", "ActionKind", "ChunkAction", "ChunkMode", "Closing", "Degradation", "Replay",
           "SurpriseLimits", "arrival_action", "closing_action", "cure_of", "degradation_text", "initial_mode",
           "steps_action", "surprise_limits",
           "surprised_on_arrival", "shift_detected", "excursion", "replay_from_prior", "merge_independent_runs",
           "PooledRestart", "pooled_restart", "pooled_mode_gap", "pooled_shares", "pooled_increment_variance",
           "per_row_spread", "crossed_checkpoint", "periodic_restart_due", "replayed_groups"]


class ChunkMode(NamedTuple):
    """How the rest of a chunk anneals: moves per step, ESS target, and whether global moves follow SGHMC."""

    n_mcmc_steps: int
    target_ess: float
    jump: bool


class Degradation(enum.Enum):
    """Why the engine cannot guarantee a chunk's evidence: its surprise or shift went without the cure it needed."""

    RESERVOIR_OUTGROWN = "the reservoir no longer holds every row seen"
    BUDGET_SPENT = "the surprise budget is spent"
    SHIFT_RESTARTED = "a shift past the exact moves restarted, but SGHMC may lag the still-moving posterior"
    SHIFT_RESTARTS_OFF = "a shift past the exact moves could not restart: restarts on a shift are off"
    SHIFT_BUDGET_SPENT = "a shift past the exact moves could not restart: the surprise budget is spent"


#: The degradations of a shift past the exact moves' rows: where the rows allow, the engine anneals such a chunk
#: again with exact moves instead (:func:`~._engine.sgais_update`), which follow a shift.
SHIFTS = frozenset({Degradation.SHIFT_RESTARTED, Degradation.SHIFT_RESTARTS_OFF, Degradation.SHIFT_BUDGET_SPENT})


class ActionKind(enum.Enum):
    """What the engine does with the rest of a chunk."""

    CONTINUE = "continue"  # anneal on (in the surprise mode if the action says so)
    EXCURSION = "excursion"  # temper the past down and back, then anneal on
    RESTART = "restart"  # anneal on, then replay every row from the prior and pool the two runs
    DEFER = "defer"  # anneal on in the surprise mode; the surprise's restart waits (closing_action)
    DEGRADED = "degraded"  # anneal on without the cure the chunk needed; the record says why


class ChunkAction(NamedTuple):
    """The policy's decision for a chunk (see :func:`arrival_action`, :func:`steps_action`, :func:`closing_action`).

    ``reason`` is set for a ``DEGRADED`` chunk and for a ``RESTART`` that cannot cure its chunk
    (:attr:`Degradation.SHIFT_RESTARTED`); ``surprised``: the rest of the chunk anneals in the surprise mode.
    """

    kind: ActionKind = ActionKind.CONTINUE
    reason: Degradation = None
    surprised: bool = False


class SurpriseLimits(NamedTuple):
    """What the state allows a chunk, measured before its first step (built by :func:`surprise_limits`)."""

    n_seen: int  # rows seen before the chunk
    capacity: int  # the reservoir's
    has_past: bool  # more rows seen than one chunk: a surprise is possible
    past_exact: bool  # the reservoir holds every row seen
    can_restart: bool  # restarts are on, the reservoir holds every row seen and the budget allows a replay
    can_defer: bool  # a surprise's restart may wait: it can run, and the posterior-mode check covers the rows
    can_excurse: bool  # the reservoir holds every row seen and the budget allows a pass over them
    restart_on_shift: bool  # a shift in a run with no surprise trigger restarts
    watch_shifts: bool  # consult shift_detected: beyond the reservoir, or SGHMC moves with no surprise trigger
    already_degraded: bool  # an earlier chunk beyond the reservoir was degraded: the kernels may target a wrong past
    log_z_per_row: float  # the state's log evidence per row seen (its mean log predictive), or None without past
    mode: ChunkMode  # the mode of a surprised chunk
    degradation: Degradation  # why a surprise or shift of the chunk would go without its cure, or None
    restart_blocked: Degradation  # why a restart cannot run, or None (it can, or restarts are off)


def initial_mode(config, n_seen, move_factor=1):
    """The mode a chunk starts in. The first chunk carries the particles from the prior to a posterior: the
    longest way, through any multimodality, so it gets ``initial_mcmc_factor`` times the moves; a later one
    gets ``move_factor`` times them (:func:`~._moves.sghmc_move_factor`)."""
    factor = config.initial_mcmc_factor if n_seen == 0 else move_factor
    return ChunkMode(config.n_mcmc_steps * factor, config.target_ess, False)


def surprise_limits(state, context, checkable=False):
    """The :class:`SurpriseLimits` of the chunk of ``context`` (a :class:`~._moves.ChunkContext`) after the
    rows of ``state``; ``checkable``: the posterior-mode check covers the rows seen after the chunk
    (:func:`~._mode_check.rows_checkable`), so a surprise's restart may wait (:func:`closing_action`).

    The cures of a surprise (restart, excursion, global moves) evaluate the
    likelihood of every past row inside weights or Metropolis-Hastings
    acceptances, so they run only while the reservoir holds every row seen (a
    subsample's scaled log-likelihood in an exponent is not an unbiased
    estimate of the likelihood). Their cost is bounded by the surprise budget:
    their datum evaluations stay within ``surprise_budget`` times the stream's
    own (the ordinary annealing of every chunk). A restart runs when the budget
    covers its expected cost, every row seen streamed once more at the stream's
    cost per row; an excursion when any budget is left (it may overrun by its
    own cost, at most ``max_annealing_steps / 2`` steps). In a run with no
    surprise trigger, a shift (:func:`shift_detected`) past the exact moves'
    rows restarts on the same terms (``restart_on_shift``), and is degraded
    whether it restarted or not, except where the engine anneals it again with
    exact moves (:data:`SHIFTS`, within ``CheckSettings.lag_rows``). A chunk whose particles draw exactly from every
    past row's summed statistics (the linear model) needs no cure at any ``n``:
    nothing degrades it.
    """
    config, n_chunk = context.config, len(context.X)
    n_seen, reservoir = state.n_samples_seen, state.reservoir
    past_exact = reservoir.n_stored == n_seen
    ordinary = state.n_datum_evaluations - state.n_surprise_evaluations
    budget = config.surprise_budget * ordinary - state.n_surprise_evaluations
    replay_affordable = budget >= (n_seen + n_chunk) * ordinary / max(n_seen, 1)
    can_restart = config.restart_on_surprise and past_exact and replay_affordable
    can_excurse = past_exact and budget > 0
    # With no surprise trigger configured, past the exact moves' rows, SGHMC may not follow a shift and nothing
    # else would: the shift detection then watches these chunks too.
    uncured = (config.reheat_after_steps is None and config.surprise_threshold is None
               and not config.restart_on_surprise and not context.exact_moves)
    # Such a shift restarts when it can: a replay in random order sees no shift, and the pooled evidence loses
    # at most log 2 to the in-order run that did not follow it (draws at the mode replace that run). The chunk is
    # degraded either way: after the restart the posterior may keep moving (a model the shift made
    # misspecified), the in-order SGHMC chunks may lag it by nats, and no test on the rows sees that.
    restart_on_shift = uncured and past_exact and config.restart_on_shift and replay_affordable
    degradation, restart_blocked = _uncured_reasons(config, past_exact, uncured, restart_on_shift,
                                                    can_restart or can_excurse, can_restart)
    watch_shifts = not past_exact or uncured
    already_degraded = state.widening.n_degraded_chunks > 0 and not past_exact
    if context.exact_moves and context.past_statistics is not None:
        # Exact draws from every past row's summed statistics follow any shift at any n: nothing to cure or degrade.
        degradation, watch_shifts, already_degraded = None, False, False
    return SurpriseLimits(
        n_seen=n_seen, capacity=reservoir.capacity, has_past=n_seen > n_chunk, past_exact=past_exact,
        can_restart=can_restart, can_defer=can_restart and checkable, can_excurse=can_excurse,
        restart_on_shift=restart_on_shift,
        watch_shifts=watch_shifts, already_degraded=already_degraded,
        log_z_per_row=float(log_mean_exp(state.log_evidence)) / n_seen if n_seen else None,
        mode=_surprise_mode(config, past_exact), degradation=degradation, restart_blocked=restart_blocked)


def _surprise_mode(config, past_exact):
    """The :class:`ChunkMode` of a surprised chunk: more moves per step, the model's global moves (when the past is
    exact) and optionally finer steps (``reheat_target_ess``), so the particles can follow the mass to modes the
    past made remote."""
    target_ess = config.target_ess if config.reheat_target_ess is None else config.reheat_target_ess
    return ChunkMode(config.n_mcmc_steps * config.reheat_mcmc_factor, target_ess, past_exact)


def _uncured_reasons(config, past_exact, uncured, restart_on_shift, can_cure, can_restart):
    """``(degradation, restart_blocked)`` of :class:`SurpriseLimits`: why a surprise or shift of the chunk would go
    without its cure, and why a restart cannot run (each None when nothing stands in the way)."""
    if not past_exact:
        return Degradation.RESERVOIR_OUTGROWN, Degradation.RESERVOIR_OUTGROWN
    if uncured:
        if restart_on_shift:
            return Degradation.SHIFT_RESTARTED, None
        if not config.restart_on_shift:
            return Degradation.SHIFT_RESTARTS_OFF, None
        return Degradation.SHIFT_BUDGET_SPENT, None
    spent = Degradation.BUDGET_SPENT
    return (None if can_cure else spent), (spent if config.restart_on_surprise and not can_restart else None)


def degradation_text(reason, config, limits):
    """The words of a :class:`Degradation` for a record and a warning, with the numbers of the run."""
    budget_spent = (f"the surprise budget is spent (restarts and excursions may cost surprise_budget="
                    f"{config.surprise_budget} times the stream's own annealing)")
    shifted = (f"the rows shifted after the exact moves' first rows (exact_move_rows={config.exact_move_rows}) and "
               "no surprise trigger is configured")
    not_followed = "so the particles may not have followed it"
    return {
        Degradation.RESERVOIR_OUTGROWN: (
            f"the reservoir no longer holds every row seen (reservoir_size={limits.capacity} < {limits.n_seen} "
            "rows), so no restart, excursion or global move can run"),
        Degradation.BUDGET_SPENT: budget_spent,
        Degradation.SHIFT_RESTARTED: (f"{shifted}: the chunk restarted, but SGHMC may not follow the posterior "
                                      "while it keeps moving after the shift"),
        Degradation.SHIFT_RESTARTS_OFF: f"{shifted}, and no restart could run (restarts on a shift are off), "
                                        f"{not_followed}",
        Degradation.SHIFT_BUDGET_SPENT: f"{shifted}, and no restart could run ({budget_spent}), {not_followed}",
    }[reason]


def _shift_cure(capabilities):
    """The cure of a shift the particles may not have followed: a reference evidence the model offers."""
    exact = capabilities is not None and capabilities.exact_evidence
    backends = "method='exact', 'ais' or 'bridge'" if exact else "method='ais' or 'bridge'"
    return (f"Cure: a reference evidence on the rows (log_evidence with {backends}); exact_move_rows at least the "
            "stream's length (where its rows fit) narrows the miss")


#: The cure each reason's warning names (a shift's, by the model's capabilities: :func:`_shift_cure`).
_CURES = {
    Degradation.RESERVOIR_OUTGROWN: "Cure: a reservoir_size at least the stream's length",
    Degradation.BUDGET_SPENT: "Cure: a larger surprise_budget",
    Degradation.SHIFT_RESTARTED: _shift_cure,
    Degradation.SHIFT_RESTARTS_OFF: _shift_cure,
    Degradation.SHIFT_BUDGET_SPENT: _shift_cure,
}


def cure_of(reason, capabilities=None):
    """The cure a warning about a chunk degraded for ``reason`` (a :class:`Degradation`) names, among what the
    model offers (``capabilities``, its :class:`~evidence_select.models.ModelCapabilities`; None offers no exact
    evidence)."""
    cure = _CURES[reason]
    return cure(capabilities) if callable(cure) else cure


def surprised_on_arrival(config, limits, spread):
    """Whether the particles disagree on the chunk's mean per-row log-likelihood (``spread``, nats per row, from
    :func:`per_row_spread`) by more than ``surprise_threshold``.

    Decided before the first step, from the state and the chunk alone (no random
    draw). The step-count trigger fires only after ``reheat_after_steps`` steps,
    by which time particles that missed new modes may have annealed part of the
    chunk in, a loss never recovered.
    """
    return config.surprise_threshold is not None and limits.has_past and spread > config.surprise_threshold


def arrival_action(limits, surprised, shifted):
    """The :class:`ChunkAction` of a chunk before its first step, from whether it ``surprised`` the particles
    (:func:`surprised_on_arrival`) or ``shifted`` (:func:`shift_detected`, or an earlier degraded chunk beyond
    the reservoir, after which every chunk is degraded).

    A surprise restarts where the limits allow (after the chunk, or later where it may wait: :func:`_restart`);
    otherwise the chunk anneals on in the surprise mode, degraded when its cure cannot run. A shift restarts
    where ``restart_on_shift`` allows, degraded either way.
    """
    if surprised:
        if limits.can_restart:
            return _restart(limits)
        kind = ActionKind.DEGRADED if limits.degradation is not None else ActionKind.CONTINUE
        return ChunkAction(kind=kind, reason=limits.degradation, surprised=True)
    if shifted:
        kind = ActionKind.RESTART if limits.restart_on_shift else ActionKind.DEGRADED
        return ChunkAction(kind=kind, reason=limits.degradation)
    return ChunkAction()


def steps_action(config, limits, action, n_steps, excursed):
    """The :class:`ChunkAction` after a chunk's ``n_steps``-th annealing step, or None when nothing changes.

    A chunk that has needed ``reheat_after_steps`` steps surprised the particles (once per chunk: ``excursed``
    says it already did; a chunk that will restart anyway is left alone): it restarts where the limits allow
    (:func:`_restart`), else takes an excursion where they allow, else anneals on degraded.
    """
    due = (not excursed and action.kind not in (ActionKind.RESTART, ActionKind.DEFER)
           and config.reheat_after_steps is not None and limits.has_past and n_steps >= config.reheat_after_steps)
    if not due:
        return None
    if limits.can_restart:  # the replay after the chunk (or later) takes the excursion's place
        return _restart(limits, action)
    if not limits.can_excurse:
        kind = ActionKind.DEGRADED if limits.degradation is not None else ActionKind.CONTINUE
        return ChunkAction(kind=kind, reason=limits.degradation, surprised=True)
    return action._replace(kind=ActionKind.EXCURSION, surprised=True)


def _restart(limits, action=ChunkAction()):
    """The action of a surprise whose restart can run: a restart after the chunk, or a deferred one
    (:attr:`ActionKind.DEFER`) where ``limits.can_defer``."""
    return action._replace(kind=ActionKind.DEFER if limits.can_defer else ActionKind.RESTART, surprised=True)


def _periodic_checkpoint(config, limits, n_chunk):
    """Whether the chunk takes the rows seen across a periodic restart's checkpoint ``batch_size *
    restart_growth**j`` (:func:`crossed_checkpoint`)."""
    return (config.restart_on_surprise and config.restart_growth is not None and limits.has_past
            and crossed_checkpoint(limits.n_seen, limits.n_seen + n_chunk, config.batch_size,
                                   config.restart_growth))


def periodic_restart_due(config, limits, action, n_chunk, pending=0):
    """Whether a periodic restart comes after the chunk unless its gate passes it (:func:`closing_action`):
    not where a surprise's restart runs or waits (the chunk's ``action``, or ``pending``)."""
    return (action.kind not in (ActionKind.RESTART, ActionKind.DEFER) and not pending and limits.can_restart
            and _periodic_checkpoint(config, limits, n_chunk))


#: A surprise's restart waits at most until the rows seen have grown by this factor (:func:`closing_action`).
DEFERRAL_GROWTH = 2.0


class Closing(NamedTuple):
    """What :func:`closing_action` decides at the end of a chunk."""

    action: ChunkAction  # the chunk's final action
    skipped: bool  # a periodic checkpoint's restart was skipped because the limits do not allow one
    pending: int  # rows seen when a surprise's restart began to wait (SGAISState.restart_pending), 0 for none


def closing_action(config, limits, action, n_chunk, behind=None, pending=0, reported=False):
    """The chunk's :class:`Closing`: a surprise's restart where it is due, else a restart where the rows seen
    crossed a periodic checkpoint (:func:`periodic_restart_due`), the limits allow one and no gate passed it.

    Particles that settled in a poorer mode find every later chunk easy to
    anneal, so no surprise reveals them, while the evidence falls behind at a
    fixed rate per row. A restart whenever the rows seen have grown by
    ``restart_growth`` re-estimates everything seen so far: amortised ``O(1)``
    per row, at positions fixed in advance. ``behind`` is the replay gate's
    verdict where one ran (:mod:`._replay_gate`, for a model with a mode
    search: a boolean mask of the groups that fell behind,
    :func:`~._replay_gate.groups_behind`), else None: a run none of whose
    groups fell behind the posterior's best mode is not replayed. A surprise's
    restart is not gated: its replay also renews a population the surprise
    carried far, from which the chunks after it anneal, and a check of the
    chunk cannot see that. It runs after its chunk (``action`` a restart), or,
    deferred (``action`` :attr:`ActionKind.DEFER`), after the first chunk that
    does not surprise: :func:`_deferred_closing`. ``pending`` is the rows seen
    when a surprise's restart began to wait (``SGAISState.restart_pending``, 0
    for none); ``reported``, whether the caller reports the chunk's evidence
    (the last chunk of a call), which no restart waits past.
    """
    if action.kind is ActionKind.RESTART:
        return Closing(action, False, 0)
    checkpoint = _periodic_checkpoint(config, limits, n_chunk)
    if pending or action.kind is ActionKind.DEFER:
        return _deferred_closing(limits, action, n_chunk, pending, reported, checkpoint)
    if checkpoint and limits.can_restart:
        if behind is not None and not np.any(behind):
            return Closing(action, False, 0)
        return Closing(action._replace(kind=ActionKind.RESTART), False, 0)
    return Closing(action, checkpoint, 0)


def _deferred_closing(limits, action, n_chunk, pending, reported, checkpoint):
    """The :class:`Closing` of a chunk of ``n_chunk`` rows while a surprise's restart waits (``pending``, or the
    chunk's own deferred surprise; ``pending`` and ``reported`` as in :func:`closing_action`); ``checkpoint``: the
    chunk crossed a periodic restart's checkpoint.

    While chunk after chunk surprises, the posterior is still moving to where
    the new rows put it: a replay now would renew a population that the next
    chunk surprises again, and cost a pass over every row seen each time. The
    restart therefore waits for the first chunk that does not surprise, at most
    until the rows seen have grown by :data:`DEFERRAL_GROWTH` (so restarts stay
    ``O(1)`` per row where every chunk surprises), never past a chunk whose
    evidence the caller reports, and only while the posterior-mode check covers
    the rows (``limits.can_defer``): the chunks that surprise while it waits are
    checked against the posterior's best mode (:func:`~._mode_check.mode_check_due`),
    which vouches for or flags the estimates they record. The periodic restarts
    wait with it. A restart that can no longer run leaves the chunk degraded:
    the surprise went without its cure.
    """
    n_after = limits.n_seen + n_chunk
    since = pending or n_after
    if (action.kind is ActionKind.DEFER and limits.can_defer and not reported
            and n_after < DEFERRAL_GROWTH * since):
        return Closing(action._replace(kind=ActionKind.CONTINUE), False, since)
    if limits.can_restart:
        return Closing(ChunkAction(kind=ActionKind.RESTART, surprised=True), False, 0)
    return Closing(ChunkAction(kind=ActionKind.DEGRADED, reason=limits.restart_blocked, surprised=True),
                   checkpoint, 0)


def replayed_groups(action, chunk_action, behind, n_groups):
    """The replicate groups a restart replays (a boolean mask of ``n_groups``), or None where ``action`` (from
    :func:`closing_action`) is no restart: after a gated periodic restart the groups that fell behind
    (``behind``), after a surprise's restart (``chunk_action``) or an ungated one every group."""
    if action.kind is not ActionKind.RESTART:
        return None
    if behind is not None and chunk_action.kind is not ActionKind.RESTART:
        return behind
    return np.ones(n_groups, dtype=bool)


def shift_detected(limits, log_weights, log_lik, shift_z):
    """Whether the chunk's rows are predicted far worse than the rows seen so far (a distribution shift).

    ``log_lik`` ``(n_total, n_chunk)`` at the particles before the first step.
    The posterior-mean log-likelihood of each row (weights pooled over the
    groups) is compared with the stream's mean log predictive per row, ``log
    Z / n``: a drop of more than ``shift_z`` (``CheckSettings.shift_z``)
    standard errors of the chunk's mean is a shift. Early rows, predicted from a
    vaguer posterior, pull ``log Z / n`` down, so stationary streams rarely trip
    it. Only consulted where no surprise trigger watches the chunk
    (``limits.watch_shifts``, see :func:`surprise_limits`): beyond the
    reservoir, where the particles follow the reservoir's view of the past (a
    shift is degraded), and past the exact moves' rows when no surprise trigger
    is configured (a shift restarts, or is degraded when it cannot).
    """
    if not limits.watch_shifts or limits.log_z_per_row is None or log_lik.shape[1] < 2:
        return False
    weights = np.exp(log_weights).ravel() / log_weights.shape[0]
    with np.errstate(invalid="ignore"):
        per_row = weights @ log_lik  # (n_chunk,)
    if not np.all(np.isfinite(per_row)):
        return True
    mean, squared_error = mean_and_squared_error(per_row)
    return bool(limits.log_z_per_row - mean > shift_z * math.sqrt(squared_error))


class _Leg(NamedTuple):
    direction: float  # -1 tempers the past down, +1 back up
    end: float  # the past's power at the end of the leg
    n_steps: int  # step cap of the leg


class _Excursion(NamedTuple):
    particles: object  # Particles
    power: float  # the past data's current power
    past_log_lik: np.ndarray  # log p(past|theta) at the particles, (n_total,), or None when unknown
    counts: StepCounts


def excursion(rng, context, particles, tempering, n_mcmc_steps):
    """Temper the past data down to the weight of one chunk and back, at the chunk's current tempering.

    When a chunk surprises the particles, the posterior may be shifting to a
    configuration that the past data separates from theirs by a barrier (a
    mixture component that must leave its cluster for a new one), which local
    SGHMC moves do not cross. Along ``p(theta) p(past|theta)^b p(chunk|theta)^t``
    with ``b`` going from 1 down to ``|chunk| / n`` and back to 1 the barriers
    fall and rise again, so the particles can redistribute over the modes in
    proportion to their mass. It is one more SMC path between the same two
    distributions (its increments multiply to 1 in expectation), so ``Z`` stays
    unbiased; its cost is ``O(|reservoir|)`` per step, paid only at surprises.
    Each leg has a quarter of ``max_annealing_steps`` (a degenerate particle
    system would otherwise pay ``2 max_annealing_steps`` reservoir passes):
    going down, the cap just turns the path early (any turning point gives a
    valid path); coming back, the last allowed step takes the rest at once, with
    the engine's degeneracy warning. Returns ``(particles, counts)``.
    """
    leg_steps = max(context.config.max_annealing_steps // 4, 1)
    lowest = context.block.n_chunk / context.n_seen
    template = MoveTarget(tempering, 1.0, n_mcmc_steps, True)
    state = _Excursion(particles, 1.0, None, StepCounts())
    for leg in (_Leg(-1.0, lowest, leg_steps), _Leg(1.0, 1.0, leg_steps)):
        for step in range(leg.n_steps):
            remaining = state.power - leg.end if leg.direction < 0 else leg.end - state.power
            if remaining <= 0.0:
                break
            at_cap = leg.direction > 0 and step + 1 == leg.n_steps
            state = _excursion_step(rng, context, state, leg, at_cap, template)
    return state.particles, state.counts._replace(n_surprise_evaluations=state.counts.n_evaluations)


def _excursion_step(rng, context, state, leg, at_cap, template):
    """One tempering step of the past data's power along ``leg``."""
    n_seen, n_evaluations = context.n_seen, 0
    log_weights = state.particles.log_weights
    remaining = state.power - leg.end if leg.direction < 0 else leg.end - state.power
    past = state.past_log_lik
    if past is None:
        past, n_evaluations = past_log_likelihood(context.model, context.reservoir, n_seen, state.particles.theta)
    with np.errstate(invalid="ignore"):
        signed = leg.direction * past.reshape(log_weights.shape)
    cap_message = (f"re-tempering the past data after {n_seen} samples needed more than {leg.n_steps} steps"
                   if at_cap else None)
    delta = choose_increment(log_weights, signed, remaining, context.config.target_ess, cap_message)
    power = leg.end if delta >= remaining else state.power + leg.direction * delta
    particles, counts, past = tempering_step(rng, context, state.particles, signed, delta,
                                             template._replace(past_power=power),
                                             f"on the chunk after {n_seen} samples (past tempered to {power:.3g})")
    counts = state.counts.plus(counts).plus(StepCounts(n_evaluations=n_evaluations, n_reheat_steps=1,
                                                       n_capped=int(at_cap)))
    return _Excursion(particles, power, past, counts)


def replay_from_prior(rng, reservoir, rows, model, config, stream_fn, groups=None):
    """Fresh runs from the prior over every past row and the chunk, one per replicate group, each in its own
    random order.

    ``rows`` is the chunk ``(X, y)``; the past rows are the reservoir's, so this
    is exact only while it holds all of them. ``stream_fn(rng, model, config, X,
    y)`` runs a fresh stream (:func:`~._engine.sgais_stream`), here with chunks of
    ``batch_size`` rows and no restarts of its own. Independent orders make the
    groups' spread also measure how much the evidence depends on the order the
    rows came in. ``groups`` (a boolean mask over the replicate groups, None for
    all) says which groups run: a group left behind by the others is replayed
    alone (:func:`~._replay_gate.groups_behind`). Every group's order and seed
    is drawn first, whether it runs or not, so the runs are independent tasks
    and a group's replay is the same whichever others run: they run in parallel
    under a :func:`joblib.parallel_config` with ``n_jobs`` above 1 (the
    estimators' ``n_jobs``), with the same results, by the nested-parallelism
    rule of :mod:`~evidence_select.utils._nested`. Returns a :class:`Replay` of
    the groups that ran, in their order.
    """
    X, y = rows
    res_X, res_y = reservoir_data(reservoir)
    all_X = np.concatenate([res_X, X])
    all_y = None if y is None else np.concatenate([res_y, y])
    group_config = config._replace(restart_on_surprise=False, restart_on_shift=False, n_replicates=1)
    groups = np.ones(config.n_replicates, dtype=bool) if groups is None else groups
    tasks = []
    for replayed in groups:
        order = rng.permutation(len(all_X))
        seed = make_generator(int(rng.integers(2**63)))
        if replayed:
            tasks.append(delayed(_replay_group)(stream_fn, seed, model, group_config, all_X[order],
                                                None if all_y is None else all_y[order]))
    runs = run_inner(tasks)
    for category, message in (relayed for run in runs for relayed in run.warnings):
        warn(message, category)
    stacked = ("theta", "log_weights", "log_evidence", "log_evidence_variance", "reference", "reference_grad")
    particles = Particles(**{name: None if getattr(runs[0].particles, name) is None
                             else np.concatenate([getattr(run.particles, name) for run in runs]) for name in stacked})
    degraded = np.array([run.widening.degraded_variance for run in runs])
    if np.any(degraded):
        particles = particles._replace(log_evidence_variance=particles.log_evidence_variance + degraded)
    return Replay(particles=particles, n_datum_evaluations=sum(run.n_datum_evaluations for run in runs),
                  n_reference=min(run.n_reference for run in runs),
                  mode_gap_variance=np.array([run.widening.mode_gap_variance for run in runs]))


class Replay(NamedTuple):
    """A restart's independent run (:func:`replay_from_prior`, or draws at the mode,
    :func:`~._mode_restart.mode_population`): the runs of the groups replayed, stacked as in :class:`SGAISState`."""

    particles: Particles
    n_datum_evaluations: int
    n_reference: int  # the smallest of the runs'
    mode_gap_variance: np.ndarray  # one per group replayed: the squared gap of its failed final mode check, or 0
    share: float = 0.5  # its share of each pooled group's Z (merge_independent_runs)
    floor_variance: float = 0.0  # the least variance the pooled run's error keeps (see _mode_restart)


class _ReplayRun(NamedTuple):
    """What a replay group's run hands back (not its reservoir, which would travel back from a worker)."""

    particles: Particles
    widening: object  # the run's ErrorWidening
    n_datum_evaluations: int
    n_reference: int
    warnings: tuple  # (category, message) of the run's warnings for the caller, in order


def _replay_group(stream_fn, seed, model, config, X, y):
    """One replay group: a fresh stream over ``(X, y)``, its warnings recorded wherever it runs."""
    with warnings.catch_warnings(record=True) as caught, single_threaded_blas():
        warnings.simplefilter("always")
        run = stream_fn(seed, model, config, X, y)
    # A replay's own degraded chunks (surprise budget spent) and failed final check widen the pooled error bar
    # instead of warning; the rest (a degenerate sampler) go to the caller, from a worker process as from its own.
    relayed = tuple((w.category, str(w.message)) for w in caught
                    if not issubclass(w.category, EvidenceConvergenceWarning))
    particles = Particles(theta=run.particles, log_weights=run.log_weights, log_evidence=run.log_evidence,
                          log_evidence_variance=run.log_evidence_variance, reference=run.reference,
                          reference_grad=run.reference_grad)
    return _ReplayRun(particles=particles, widening=run.widening,
                      n_datum_evaluations=run.n_datum_evaluations, n_reference=run.n_reference, warnings=relayed)


def merge_independent_runs(rng, first, second, groups=None, share=0.5):
    """Pool two independent particle systems over the same rows, group by group.

    ``first`` and ``second`` are :class:`Particles`. Group ``g``'s evidence
    becomes ``(1 - share) Z_a,g + share Z_b,g`` of the two runs' (unbiased for a
    ``share`` fixed apart from their values, as the mean over groups is), and its
    particles are drawn by systematic resampling from both runs' particles, each
    weighted by its run's term times its own weight: the importance sampler of
    the two runs as one. A run stuck in a poor mode thus costs at most
    ``-log`` of the other's share (``log 2`` for the mean of two replays), and the
    groups stay independent. ``groups`` (a boolean mask over ``first``'s groups,
    None for all) names the groups ``second`` holds, in order; the others keep
    ``first``'s particles, weights and evidence. Returns the merged
    :class:`Particles`, uniform weights in the pooled groups.
    """
    if groups is not None and not np.all(groups):
        return _merge_some_groups(rng, first, second, groups, share)
    n_groups, n_particles = first.log_weights.shape
    n_total = n_groups * n_particles
    log_first, log_second = _log_shares(share)
    log_z_a, log_z_b = first.log_evidence + log_first, second.log_evidence + log_second
    log_z_sum = np.logaddexp(log_z_a, log_z_b)
    pooled = np.concatenate([first.log_weights + (log_z_a - log_z_sum)[:, None],
                             second.log_weights + (log_z_b - log_z_sum)[:, None]], axis=1)
    ancestors = systematic_resample(rng, pooled, n_particles)  # (n_groups, n_particles) into the 2 runs' particles
    rows = np.arange(n_total).reshape(n_groups, n_particles)
    flat = np.take_along_axis(np.concatenate([rows, n_total + rows], axis=1), ancestors, axis=1).ravel()
    theta, reference, reference_grad = (np.concatenate([a, b])[flat] if a is not None else None for a, b in
                                        ((first.theta, second.theta), (first.reference, second.reference),
                                         (first.reference_grad, second.reference_grad)))
    # Var(Z_a + Z_b) / (Z_a + Z_b)^2 = (v_a Z_a^2 + v_b Z_b^2) / (Z_a + Z_b)^2 with each run's term as its Z and
    # v = expm1(log-variance) their relative variances; in log space, since a degraded replay's log-variance can
    # exceed exp's range.
    log_relative_variance = np.logaddexp(log_expm1(first.log_evidence_variance) + 2 * (log_z_a - log_z_sum),
                                         log_expm1(second.log_evidence_variance) + 2 * (log_z_b - log_z_sum))
    log_weights = np.full((n_groups, n_particles), -math.log(n_particles))
    return first._replace(theta=theta, log_weights=log_weights, log_evidence=log_z_sum,
                          log_evidence_variance=np.logaddexp(0.0, log_relative_variance), reference=reference,
                          reference_grad=reference_grad, origins=None)


def _log_shares(share):
    """``(log(1 - share), log(share))``: the two runs' shares of a pooled ``Z``, ``-inf`` for a share of 0."""
    return (-math.inf if share >= 1.0 else math.log1p(-share)), (-math.inf if share <= 0.0 else math.log(share))


#: Fields of :class:`Particles` with a row per particle, and with an entry per group.
_PER_PARTICLE = ("theta", "reference", "reference_grad")
_PER_GROUP = ("log_weights", "log_evidence", "log_evidence_variance")


def _merge_some_groups(rng, first, second, groups, share):
    """:func:`merge_independent_runs` of the ``groups`` (a boolean mask) of ``first`` with ``second`` (its
    ``share``), the other groups of ``first`` kept as they are."""
    rows = np.repeat(groups, first.log_weights.shape[1])  # the pooled groups' particles
    picked = first._replace(origins=None, **{name: getattr(first, name)[rows] for name in _PER_PARTICLE
                                             if getattr(first, name) is not None},
                            **{name: getattr(first, name)[groups] for name in _PER_GROUP})
    merged = merge_independent_runs(rng, picked, second, share=share)
    spliced = {}
    for name, where in [(name, rows) for name in _PER_PARTICLE] + [(name, groups) for name in _PER_GROUP]:
        if getattr(first, name) is not None:
            spliced[name] = getattr(first, name).copy()
            spliced[name][where] = getattr(merged, name)
    return first._replace(origins=None, **spliced)


class PooledRestart(NamedTuple):
    """A run pooled with a restart's :class:`Replay` (:func:`pooled_restart`)."""

    particles: Particles  # merged (merge_independent_runs)
    mode_gap_variance: float  # pooled_mode_gap
    increment_variance: float  # pooled_increment_variance, at least the replay's floor_variance


def pooled_restart(rng, particles, replay, groups, widening_and_increments, split_sigmas):
    """The run of ``particles`` pooled group by group with a restart's ``replay`` over the ``groups`` it ran (a
    boolean mask), at the replay's share: a :class:`PooledRestart`. ``widening_and_increments`` is ``(mode gap
    variance, summed increment variance)`` of the run before pooling; ``split_sigmas`` as in
    :func:`pooled_increment_variance`."""
    mode_gap_variance, increment_variance = widening_and_increments
    mode_gap = pooled_mode_gap(particles, replay.particles, mode_gap_variance, replay.mode_gap_variance, groups,
                               replay.share)
    merged = merge_independent_runs(rng, particles, replay.particles, groups, replay.share)
    increments = pooled_increment_variance(particles, merged, increment_variance, split_sigmas, groups, replay.share)
    return PooledRestart(merged, mode_gap, max(replay.floor_variance, increments))


def pooled_mode_gap(first, second, mode_gap_variance, replay_gaps, groups=None, share=0.5):
    """The squared mode gap of a pooled run (:func:`merge_independent_runs` of ``first`` and ``second``), from
    the in-order run's ``mode_gap_variance`` and the replay groups' ``replay_gaps`` (one per group replayed;
    ``groups`` and ``share`` as in :func:`merge_independent_runs`).

    A gap is a possible error of the log evidence it was measured on. The pooled
    log evidence ``log sum_g ((1 - share) Z_a,g + share Z_b,g) - log G`` moves by ``s_a`` times a
    shift of the whole in-order run and by ``s_b,g`` times one of replay group
    ``g``, ``s`` the runs' shares of the pooled ``Z``: the delta method weighs
    each squared gap by its share squared. A run the pooled evidence barely
    rests on (a replay far below the in-order run, or the reverse) passes on
    little of its gap.
    """
    share_first, shares_second = pooled_shares(first, second, groups, share)
    return share_first**2 * mode_gap_variance + float(np.sum(shares_second**2 * replay_gaps))


def _in_order_share_logs(first, groups, share):
    """The in-order groups' terms of the pooled ``Z_g``, in logs: a group not replayed counts whole, where a
    pooled group's ``Z_g`` enters at ``1 - share`` (``groups`` None: every group pooled)."""
    pooled = np.ones(len(first.log_evidence), dtype=bool) if groups is None else groups
    return first.log_evidence + np.where(pooled, _log_shares(share)[0], 0.0)


def pooled_shares(first, second, groups=None, share=0.5):
    """``(s_a, s_b)``: the in-order run ``first``'s share of the pooled ``Z`` (a float) and each replay group's of
    ``second`` (one per group replayed, ``groups`` and ``share`` as in :func:`merge_independent_runs`), as
    :func:`pooled_mode_gap` weighs them."""
    in_order = _in_order_share_logs(first, groups, share)
    replays = second.log_evidence + _log_shares(share)[1]
    log_total = float(logsumexp(np.concatenate([in_order, replays])))
    return math.exp(float(logsumexp(in_order)) - log_total), np.exp(replays - log_total)


def pooled_increment_variance(first, merged, increment_variance, split_sigmas, groups=None, share=0.5):
    """``SGAISState.increment_variance`` after a restart pooled the in-order run ``first`` with its replays into
    ``merged`` (:func:`merge_independent_runs`, the ``groups`` it pooled at ``share``).

    The groups' jump from the in-order run to the pooled one measures the in-order run's error, not the pooled
    estimate's, so it does not enter the sum. The in-order run's summed increment spread passes on by its share of
    the pooled ``Z`` squared (the delta method of :func:`pooled_mode_gap`), but no less than the pooled groups' own
    spread of their log evidences is kept; later chunks add their increments to it. Where one of the in-order
    groups sits below the others by more than ``split_sigmas`` of their own errors
    (:func:`~._state.group_left_behind`), its spread measured the gap between their modes, which the pooled ``Z``
    does not rest on, and only the pooled groups' spread is kept. Where pooled groups too were left behind
    (:func:`~._state.standing_groups`), the spread they add beyond the standing groups' is kept up to
    :data:`~._state.OVERSHOOT_STD` only: the groups' spread of levels, a term of its own in
    :func:`~._state.combine_replicates`, still shows the split until a posterior-mode check measures the groups
    the estimate follows.
    """
    standing = standing_groups(merged.log_evidence, merged.log_evidence_variance, split_sigmas)
    kept = min(initial_increment_variance(merged.log_evidence),
               max(initial_increment_variance(merged.log_evidence, standing), OVERSHOOT_STD**2))
    if group_left_behind(first.log_evidence, first.log_evidence_variance, split_sigmas):
        return kept
    in_order = _in_order_share_logs(first, groups, share)
    share_first = math.exp(float(logsumexp(in_order) - logsumexp(merged.log_evidence)))
    return max(share_first**2 * increment_variance, kept)


def per_row_spread(log_weights, per_row_log_lik):
    """How much the particles disagree on a chunk: the weighted standard deviation across particles of its mean
    per-row log-likelihood (nats per row), the largest over the groups.

    Scale-free and computed from the state and the chunk alone, before any random draw, so a choice made on it
    keeps ``Z`` unbiased. While the particles track a stationary stream it shrinks as the posterior concentrates;
    rows the posterior did not foresee (new clusters) make some particles explain them far better than others.
    """
    weights = np.exp(log_weights)
    mean = np.sum(weights * per_row_log_lik, axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return float(np.max(np.sqrt(np.sum(weights * (per_row_log_lik - mean) ** 2, axis=1))))


def crossed_checkpoint(n_before, n_after, unit, growth):
    """Whether a checkpoint ``floor(unit * growth**j)`` (``j >= 0``; whole rows, ``growth > 1``) lies in
    ``(n_before, n_after]``.

    Whole rows, so that a power of an irrational growth that rounds to a row count (``100 * sqrt(2)**8``
    is 1600.0000000000005) is crossed by the chunk ending at that row.
    """
    if not growth > 1:
        raise ValueError(f"checkpoints need a growth factor above 1, got {growth}")
    j = 0
    while (checkpoint := math.floor(unit * growth**j + 1e-9)) <= n_after:
        if checkpoint > n_before:
            return True
        j += 1
    return False
