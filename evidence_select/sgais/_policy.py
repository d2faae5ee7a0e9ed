"""What SGAIS does when a chunk surprises the particles: finer annealing, an excursion, or a restart.

A chunk *surprises* when the particles disagree about it before its first step
(``surprise_threshold``) or when it needs ``reheat_after_steps`` annealing
steps. The rest of such a chunk anneals in :func:`surprise_mode` (more moves per
step, the model's global moves, optionally a finer ESS target), and then either

- an *excursion* (:func:`excursion`) tempers the past data down to the weight of
  one chunk and back, so the particles can cross barriers that the past data
  raised; or
- a *restart* (``restart_on_surprise``, while the reservoir holds every row seen)
  replays all rows from the prior in a random order (:func:`replay_from_prior`)
  and pools that run with the in-order one (:func:`merge_independent_runs`).

With ``restart_growth`` a restart also comes each time the rows seen grow by
that factor, at positions fixed in advance. :class:`SurprisePolicy` holds these
decisions for one chunk.
"""

import math
import warnings
from typing import NamedTuple

import numpy as np
from joblib import delayed

from ..exceptions import EvidenceConvergenceWarning
from ._reservoir import reservoir_data
from ..kernels._resampling import systematic_resample
from ..utils import log_mean_exp, make_generator
from ..utils._diagnostics import mean_and_squared_error
from ..utils._logspace import log_expm1
from ..utils._nested import run_inner
from ..utils._threads import single_threaded_blas
from ..utils._warnings import warn
from ._moves import MoveTarget, past_log_likelihood
from ._state import Particles, StepCounts
from ._steps import choose_increment, tempering_step

__all__ = ["ChunkMode", "SurprisePolicy", "initial_mode", "surprise_policy", "surprised_on_arrival", "shift_detected",
           "SHIFT_Z",
           "excursion_due", "growth_checkpoint", "growth_restart_due", "excursion", "replay_from_prior",
           "merge_independent_runs",
           "per_row_spread", "crossed_checkpoint"]


class ChunkMode(NamedTuple):
    """How the rest of a chunk anneals: moves per step, ESS target, and whether global moves follow SGHMC."""

    n_mcmc_steps: int
    target_ess: float
    jump: bool


class SurprisePolicy(NamedTuple):
    """The surprise decisions for one chunk (built by :func:`surprise_policy`)."""

    surprise_threshold: float  # per-row spread that flags a chunk before its first step, or None
    excursion_after: int  # annealing steps after which a chunk surprises, or None
    restart_on_surprise: bool  # the configured cure is a restart (else an excursion)
    can_restart: bool  # restarts are on, the reservoir holds every row seen and the budget allows a replay
    restart_on_shift: bool  # a shift in a run with no surprise trigger restarts (see surprise_policy)
    can_excurse: bool  # the reservoir holds every row seen and the budget allows a pass over them
    restart_growth: float  # restart where the rows seen grow by this factor, or None
    has_past: bool  # more rows seen than one chunk: a surprise is possible
    mode: ChunkMode  # the mode of a surprised chunk
    degraded_reason: str  # why a surprise could not get its cure ("" if it could)
    restart_blocked: str  # why a restart cannot run ("" if it can or restarts are off)
    past_exact: bool  # the reservoir holds every row seen
    watch_shifts: bool  # consult shift_detected: beyond the reservoir, or SGHMC moves with no surprise trigger
    log_z_per_row: float  # the state's log evidence per row seen (its mean log predictive), or None without past
    already_degraded: bool  # an earlier chunk beyond the reservoir was degraded: the kernels may target a wrong past


def initial_mode(config, n_seen, move_factor=1):
    """The mode a chunk starts in. The first chunk carries the particles from the prior to a posterior: the
    longest way, through any multimodality, so it gets ``initial_mcmc_factor`` times the moves; a later one
    gets ``move_factor`` times them (:func:`~._moves.sghmc_move_factor`)."""
    factor = config.initial_mcmc_factor if n_seen == 0 else move_factor
    return ChunkMode(config.n_mcmc_steps * factor, config.target_ess, False)


#: The openings of :attr:`SurprisePolicy.degraded_reason` that name a cure of their own (see ``_sgais._CURES``).
RESERVOIR_OUTGROWN = "the reservoir no longer holds every row seen"
SHIFT_UNCURED = "the rows shifted after the exact moves' first rows"


def surprise_policy(state, context):
    """The :class:`SurprisePolicy` of the chunk of ``context`` (a :class:`~._moves.ChunkContext`) after the
    rows of ``state``.

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
    whether it restarted or not. A chunk whose particles draw exactly from every
    past row's summed statistics (the linear model) needs no cure at any ``n``:
    nothing degrades it.
    """
    config, n_chunk = context.config, len(context.X)
    n_seen, reservoir = state.n_samples_seen, state.reservoir
    past_exact = reservoir.n_stored == n_seen
    ordinary = state.n_datum_evaluations - state.n_surprise_evaluations
    budget = config.surprise_budget * ordinary - state.n_surprise_evaluations
    replay_cost = (n_seen + n_chunk) * ordinary / max(n_seen, 1)
    # A surprised chunk anneals with more moves per step, the model's global moves (when the past is exact) and
    # optionally finer steps (reheat_target_ess), so the particles can follow the mass to modes the past made remote.
    target_ess = config.target_ess if config.reheat_target_ess is None else config.reheat_target_ess
    mode = ChunkMode(config.n_mcmc_steps * config.reheat_mcmc_factor, target_ess, past_exact)
    can_restart = config.restart_on_surprise and past_exact and budget >= replay_cost
    can_excurse = past_exact and budget > 0
    # With no surprise trigger configured, past the exact moves' rows, SGHMC may not follow a shift and nothing
    # else would: the shift detection then watches these chunks too.
    uncured = (config.reheat_after_steps is None and config.surprise_threshold is None
               and not config.restart_on_surprise and context.exact_step is None)
    # Such a shift restarts when it can: a replay in random order sees no shift, and the pooled evidence loses
    # at most log 2 to the in-order run that did not follow it. The chunk is degraded either way: after the
    # restart the posterior may keep moving (a model the shift made misspecified), the in-order SGHMC chunks
    # may lag it by nats, and no test on the rows sees that.
    restart_on_shift = uncured and past_exact and config.restart_on_shift and budget >= replay_cost
    reason, restart_blocked = _uncured_reasons(config, state, uncured, restart_on_shift, can_restart or can_excurse,
                                               can_restart)
    watch_shifts = not past_exact or uncured
    already_degraded = state.n_degraded_chunks > 0 and not past_exact
    if context.exact_step is not None and context.past_statistics is not None:
        # Exact draws from every past row's summed statistics follow any shift at any n: nothing to cure or degrade.
        reason, watch_shifts, already_degraded = "", False, False
    log_z_per_row = float(log_mean_exp(state.log_evidence)) / n_seen if n_seen else None
    return SurprisePolicy(config.surprise_threshold, config.reheat_after_steps, config.restart_on_surprise,
                          can_restart, restart_on_shift, can_excurse, config.restart_growth, n_seen > n_chunk, mode,
                          reason, restart_blocked, past_exact, watch_shifts, log_z_per_row, already_degraded)


def _uncured_reasons(config, state, uncured, restart_on_shift, can_cure, can_restart):
    """``(degraded_reason, restart_blocked)`` of :class:`SurprisePolicy`: why a surprise or shift of the chunk
    would go without its cure, and why a restart cannot run (each "" when nothing stands in the way)."""
    budget_spent = (f"the surprise budget is spent (restarts and excursions may cost surprise_budget="
                    f"{config.surprise_budget} times the stream's own annealing)")
    if state.reservoir.n_stored != state.n_samples_seen:
        reason = (f"{RESERVOIR_OUTGROWN} (reservoir_size={state.reservoir.capacity} < {state.n_samples_seen} "
                  "rows), so no restart, excursion or global move can run")
        return reason, reason
    if uncured:
        shifted = f"{SHIFT_UNCURED} (exact_move_rows={config.exact_move_rows}) and no surprise trigger is configured"
        if restart_on_shift:
            return (f"{shifted}: the chunk restarted, but SGHMC may not follow the posterior while it keeps moving "
                    "after the shift"), ""
        cannot = "restarts on a shift are off" if not config.restart_on_shift else budget_spent
        return f"{shifted}, and no restart could run ({cannot}), so the particles may not have followed it", ""
    return ("" if can_cure else budget_spent), (budget_spent if config.restart_on_surprise and not can_restart else "")


def surprised_on_arrival(policy, spread):
    """Whether the particles disagree on the chunk's mean per-row log-likelihood (``spread``, nats per row, from
    :func:`per_row_spread`) by more than the threshold.

    Decided before the first step, from the state and the chunk alone (no random
    draw). The step-count trigger fires only after ``reheat_after_steps`` steps,
    by which time particles that missed new modes may have annealed part of the
    chunk in, a loss never recovered.
    """
    return policy.surprise_threshold is not None and policy.has_past and spread > policy.surprise_threshold


#: A chunk whose mean per-row log-likelihood under the particles falls this many standard errors below the
#: stream's mean log predictive per row is taken as a shift (see :func:`shift_detected`).
SHIFT_Z = 5.0


def shift_detected(policy, log_weights, log_lik):
    """Whether the chunk's rows are predicted far worse than the rows seen so far (a distribution shift).

    ``log_lik`` ``(n_total, n_chunk)`` at the particles before the first step.
    The posterior-mean log-likelihood of each row (weights pooled over the
    groups) is compared with the stream's mean log predictive per row, ``log
    Z / n``: a drop of more than :data:`SHIFT_Z` standard errors of the chunk's
    mean is a shift. Early rows, predicted from a vaguer posterior, pull
    ``log Z / n`` down, so stationary streams rarely trip it. Only consulted
    where no surprise trigger watches the chunk (``policy.watch_shifts``, see
    :func:`surprise_policy`): beyond the reservoir, where the particles follow
    the reservoir's view of the past (a shift is degraded), and past the exact
    moves' rows when no surprise trigger is configured (a shift restarts, or is
    degraded when it cannot).
    """
    if not policy.watch_shifts or policy.log_z_per_row is None or log_lik.shape[1] < 2:
        return False
    weights = np.exp(log_weights).ravel() / log_weights.shape[0]
    with np.errstate(invalid="ignore"):
        per_row = weights @ log_lik  # (n_chunk,)
    if not np.all(np.isfinite(per_row)):
        return True
    mean, squared_error = mean_and_squared_error(per_row)
    return bool(policy.log_z_per_row - mean > SHIFT_Z * math.sqrt(squared_error))


def excursion_due(policy, n_steps, excursed, restart):
    """Whether a chunk that has needed ``n_steps`` annealing steps now counts as a surprise."""
    return (not excursed and not restart and policy.excursion_after is not None and policy.has_past
            and n_steps >= policy.excursion_after)


def growth_checkpoint(policy, n_seen, n_chunk, unit):
    """Whether the rows seen crossed a periodic-restart checkpoint with this chunk (restart possible or not)."""
    return (policy.restart_on_surprise and policy.restart_growth is not None and policy.has_past
            and crossed_checkpoint(n_seen, n_seen + n_chunk, unit, policy.restart_growth))


def growth_restart_due(policy, n_seen, n_chunk, unit):
    """Whether the rows seen crossed a checkpoint ``unit * restart_growth**j`` with this chunk.

    Particles that settled in a poorer mode find every later chunk easy to
    anneal, so no surprise reveals them, while the evidence falls behind at a
    fixed rate per row. A restart whenever the rows seen have grown by
    ``restart_growth`` re-estimates everything seen so far: amortised ``O(1)``
    per row, at positions fixed in advance.
    """
    return policy.can_restart and growth_checkpoint(policy, n_seen, n_chunk, unit)


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


def replay_from_prior(rng, reservoir, rows, model, config, stream_fn):
    """Fresh runs from the prior over every past row and the chunk, one per replicate group, each in its own
    random order.

    ``rows`` is the chunk ``(X, y)``; the past rows are the reservoir's, so this
    is exact only while it holds all of them. ``stream_fn(rng, model, config, X,
    y)`` runs a fresh stream (:func:`~._engine.sgais_stream`), here with chunks of
    ``batch_size`` rows and no restarts of its own. Independent orders make the
    groups' spread also measure how much the evidence depends on the order the
    rows came in. The groups' orders and seeds are drawn first, so the runs are
    independent tasks: they run in parallel under a :func:`joblib.parallel_config`
    with ``n_jobs`` above 1 (the estimators' ``n_jobs``), with the same results,
    by the nested-parallelism rule of :mod:`~evidence_select.utils._nested`.
    Returns ``(particles, n_datum_evaluations, n_reference)``, the groups stacked
    as in :class:`SGAISState` and ``n_reference`` the smallest of the runs'.
    """
    X, y = rows
    res_X, res_y = reservoir_data(reservoir)
    all_X = np.concatenate([res_X, X])
    all_y = None if y is None else np.concatenate([res_y, y])
    group_config = config._replace(restart_on_surprise=False, restart_on_shift=False, n_replicates=1)
    tasks = []
    for _ in range(config.n_replicates):
        order = rng.permutation(len(all_X))
        seed = make_generator(int(rng.integers(2**63)))
        tasks.append(delayed(_replay_group)(stream_fn, seed, model, group_config, all_X[order],
                                            None if all_y is None else all_y[order]))
    runs = run_inner(tasks)
    for category, message in (relayed for run in runs for relayed in run.warnings):
        warn(message, category)
    particles = Particles(*(np.concatenate([getattr(run.particles, name) for run in runs])
                            if getattr(runs[0].particles, name) is not None else None for name in Particles._fields))
    if any(run.degraded_variance for run in runs):
        particles = particles._replace(log_evidence_variance=particles.log_evidence_variance
                                       + np.array([run.degraded_variance for run in runs]))
    return particles, sum(run.n_datum_evaluations for run in runs), min(run.n_reference for run in runs)


class _ReplayRun(NamedTuple):
    """What a replay group's run hands back (not its reservoir, which would travel back from a worker)."""

    particles: Particles
    degraded_variance: float
    n_datum_evaluations: int
    n_reference: int
    warnings: tuple  # (category, message) of the run's warnings for the caller, in order


def _replay_group(stream_fn, seed, model, config, X, y):
    """One replay group: a fresh stream over ``(X, y)``, its warnings recorded wherever it runs."""
    with warnings.catch_warnings(record=True) as caught, single_threaded_blas():
        warnings.simplefilter("always")
        run = stream_fn(seed, model, config, X, y)
    # A replay's own degraded chunks (surprise budget spent) widen its group's variance instead of warning;
    # the rest (a degenerate sampler) go to the caller, from a worker process as from its own.
    relayed = tuple((w.category, str(w.message)) for w in caught
                    if not issubclass(w.category, EvidenceConvergenceWarning))
    particles = Particles(run.particles, *(getattr(run, name) for name in Particles._fields
                                           if name not in ("theta", "origins")))
    return _ReplayRun(particles, run.degraded_variance, run.n_datum_evaluations, run.n_reference, relayed)


def merge_independent_runs(rng, first, second):
    """Pool two independent particle systems over the same rows, group by group.

    ``first`` and ``second`` are :class:`Particles`. Group ``g``'s evidence
    becomes the mean of the two runs' ``Z_g`` (unbiased, as the mean over groups
    is), and its particles are drawn by systematic resampling from both runs'
    particles, each weighted by its run's ``Z_g`` times its own weight: the
    importance sampler of the two runs as one. A run stuck in a poor mode thus
    costs at most ``log 2`` nats, and the groups stay independent. Returns the
    merged :class:`Particles` with uniform weights.
    """
    n_groups, n_particles = first.log_weights.shape
    n_total = n_groups * n_particles
    log_z_a, log_z_b = first.log_evidence, second.log_evidence
    log_z_sum = np.logaddexp(log_z_a, log_z_b)
    pooled = np.concatenate([first.log_weights + (log_z_a - log_z_sum)[:, None],
                             second.log_weights + (log_z_b - log_z_sum)[:, None]], axis=1)
    ancestors = systematic_resample(rng, pooled, n_particles)  # (n_groups, n_particles) into the 2 runs' particles
    rows = np.arange(n_total).reshape(n_groups, n_particles)
    flat = np.take_along_axis(np.concatenate([rows, n_total + rows], axis=1), ancestors, axis=1).ravel()
    theta, reference, reference_grad = (np.concatenate([a, b])[flat] if a is not None else None for a, b in
                                        ((first.theta, second.theta), (first.reference, second.reference),
                                         (first.reference_grad, second.reference_grad)))
    # Var((Z_a + Z_b) / 2) / mean^2 = (v_a Z_a^2 + v_b Z_b^2) / (Z_a + Z_b)^2, v = expm1(log-variance) the
    # relative variances; in log space, since a degraded replay's log-variance can exceed exp's range.
    log_relative_variance = np.logaddexp(log_expm1(first.log_evidence_variance) + 2 * (log_z_a - log_z_sum),
                                         log_expm1(second.log_evidence_variance) + 2 * (log_z_b - log_z_sum))
    log_weights = np.full((n_groups, n_particles), -math.log(n_particles))
    return first._replace(theta=theta, log_weights=log_weights, log_evidence=log_z_sum - math.log(2),
                          log_evidence_variance=np.logaddexp(0.0, log_relative_variance), reference=reference,
                          reference_grad=reference_grad, origins=None)


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
