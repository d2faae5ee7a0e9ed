"""The engine's tuning: every number the SGAIS engine decides by that is not an estimator parameter.

Grouped by the part of the engine that reads it and nested in :class:`~._state.SGAISConfig` as its ``tuning``
field (:class:`EngineTuning`), so that a run's behaviour is a function of its config alone, and a test or a study
changes a number by building a config, never by patching a module::

    config = SGAISConfig()
    config = config._replace(tuning=config.tuning._replace(mode_check=ModeCheckSettings(max_rows=0)))

The defaults are the engine's; each field says what it bounds and why it has its value.
"""

import math
from typing import NamedTuple

__all__ = ["EngineTuning", "ExactMoveSettings", "StepSettings", "ModeCheckSettings", "CheckSettings",
           "lineage_threshold", "with_tuning"]


class ExactMoveSettings(NamedTuple):
    """Metropolis-corrected HMC on the first rows (:func:`~._moves.exact_hmc_kernel`).

    A move makes ``n_mcmc_steps * move_factor / leapfrog`` transitions (the SGHMC move's gradients twice over
    at ``leapfrog`` steps each). Each transition integrates for ``trajectory_length`` whitened units on average
    (jittered; see :func:`~..kernels._hmc.jittered_leapfrog_count`), in at most ``max_leapfrog`` steps, which
    bounds a move at twice that nominal cost: a fixed integration time rather than a fixed count, since the
    adapted step shrinks where the mass cannot whiten the target (a nearly separable classifier's flat
    directions end in a cliff), and short trajectories there diffuse and leave each group's evidence low by an
    amount its spread understates. The first leapfrog step is ``initial_step`` whitened units. A group whose
    particles still correlate with where a move began (mean coordinate correlation above ``max_correlation``)
    moves again, up to ``max_repeats`` more times
    (:func:`~..kernels._particle_hmc.particle_hmc_move_until_decorrelated`): on a stream sorted by class the
    tempered posterior keeps moving far between steps, and a population one move cannot carry lags behind it.

    Past those rows SGHMC moves the particles, and on a posterior it cannot follow (a classifier whose rows
    separate the classes: flat directions, not along the axes its step scales see, that keep moving as rows
    arrive) they fall behind it chunk after chunk while every importance weight looks healthy, and the evidence
    reads low by more than its error bar. So while every row seen is stored and there are at most
    ``CheckSettings.lag_rows`` of them, a chunk annealed by SGHMC is measured against the posterior of every row
    (:func:`~._lag.lag_ratio`); where the particles lag more than ``lag_ratio`` times their own sampling noise
    behind it (or its rows shifted, :data:`~._policy.SHIFTS`), the chunk is annealed again with exact moves, and
    so is every later chunk up to those rows (:func:`~._moves.uses_exact_moves`). Particles that follow the
    posterior read a ratio of 1 to 2 (more than 1 where the posterior is far from Gaussian); a lag that grows from
    chunk to chunk passes ``lag_ratio`` within a chunk or two of its start.
    """

    leapfrog: int = 5
    move_factor: int = 2
    trajectory_length: float = 4.0
    max_leapfrog: int = 10
    initial_step: float = 0.5
    max_repeats: int = 3
    max_correlation: float = 0.1
    lag_ratio: float = 3.0


class StepSettings(NamedTuple):
    """How SGHMC's step follows the curvature at the particles (:func:`~._moves.relative_step_floor`).

    ``typical_curvature_ratio``: the smallest share of ``learning_rate`` that the step keeps in units of the
    curvature at the particles, where the mini-batch noise allows; the step scales' curvature bound can
    overstate that curvature by this factor before the step grows. Where the classes overlap, the softmax's
    curvature lies within it, so such runs keep the steps the default ``learning_rate`` was sized with.
    ``gradient_noise_share``: the share of the momentum refresh's noise per step that the mini-batch gradient's
    own noise may add when the step grows (the particles then run at most this much hotter than the target).
    ``max_move_factor``: most SGHMC moves per annealing step, in units of ``n_mcmc_steps``, that
    :func:`~._moves.sghmc_move_factor` asks for (the surprise mode's own factor).
    """

    typical_curvature_ratio: float = 0.25
    gradient_noise_share: float = 0.1
    max_move_factor: int = 3


class ModeCheckSettings(NamedTuple):
    """The posterior-mode check (:mod:`._mode_check`): when it runs, how it searches and samples, when it fails.

    It runs while at most ``max_rows`` rows were seen (all of them stored), for a model with at most
    ``max_listed_symmetries`` label symmetries (``K!`` of a mixture: seven components), after each chunk that
    crosses a checkpoint ``floor(unit * growth**j)`` (100, 141, 200, 282, ...), so a stream's checks cost about 3.4
    times its last one however small its chunks, and its last check is at most a factor ``growth`` of rows behind
    its end. It fails when the estimate reads below the mode's value by more than ``gap_sigmas`` combined standard
    deviations: a run whose own 2-sigma interval misses the mass the mode alone holds. The search starts from
    ``n_starts`` k-means++ points (starts whose objective values lie within ``same_fit`` nats are one fit); the
    Hessian at the mode is taken by central differences of step ``hessian_step``; the importance sampler draws
    ``draw_block`` points at a time from a t with ``df`` degrees of freedom and ``inflate`` times the inverse
    Hessian as its scale (heavier tails than the posterior's, so the weights stay bounded), until the mode's value
    has a standard error of at most ``target_std`` nats, with at least ``min_draws`` and at most ``n_draws`` draws
    (``target_std=0``: always ``n_draws``). The check compares that value with the run's estimate within their
    combined errors, and a mixture's run carries tenths of a nat or more, so a few hundred draws usually settle it;
    a posterior far from the t's shape (few rows) spreads the weights, and the draws go on, except that a chunk's
    check whose proposal does not fit (its weights spread beyond ``restart_spread``, so no restart draws from it)
    stops once its error is ``relative_std`` times the run's: a third widens the combined error the comparison
    uses by at most 5.4%. The proposal's density
    sums over all ``max_symmetries`` or fewer label symmetries (``K!``: five components) for every draw; with more
    it keeps the symmetries whose copy of the mode lies within ``copy_radius * sqrt(n_params)`` whitened units of
    the mode (:func:`~._mode_check.mode_proposal`), and the mode search and the importance draws cost as before;
    finding those symmetries builds all their maps, so a model whose maps hold more than ``max_listed_entries``
    numbers (``n_symmetries * n_params**2``; 2**23 is 64 MiB, seven components in two dimensions, six in eight)
    is not checked.

    The check also gates the periodic restarts of such a model with at most ``max_symmetries`` label symmetries
    (:mod:`._replay_gate`; larger mixtures, whose particles settle more slowly, keep every periodic replay): a
    restart replays every group where the pooled estimate reads below the mode's value (past ``max_rows``: by more
    than ``gap_sigmas`` combined standard deviations beyond the gap the last check left,
    :func:`~._replay_gate.allowed_gap`; within ``max_rows`` by more than those standard deviations alone where the
    run's best particle refines to the mode, within ``same_fit`` nats), and only the groups left behind where a
    replicate group reads ``gap_sigmas`` of its own below the others (:func:`~._replay_gate.groups_behind`). Up to
    ``max_rows`` rows the check's own value decides; past them the search runs on ``search_rows`` of the stored
    rows, its modes are valued on all of them, the best and the best particle are refined there, and ``gate_draws``
    importance draws value the mode (a few hundredths of a nat at such sizes, well under the run's own error, at a
    cost that grows with the rows seen like the replay it may save). ``gate_draws=0`` turns the gate off (every
    periodic restart replays).

    A restart after such a value (a gated periodic one, or one on a surprise or shift while the rows can be
    checked) draws fresh points per replicate group from the check's proposal instead of replaying the stream
    from the prior (:mod:`._mode_restart`), where the check's importance weights spread by at most
    ``restart_spread`` (the relative standard deviation of the weights truncated at ``sqrt(S)`` times their mean
    over ``S`` draws, which one heavy draw does not swing: 1 to 2 where the t fits the posterior; 3 where a tenth
    of the draws count). Those draws take ``restart_share`` of each pooled group's evidence (1: they replace the
    group's run, which a stuck run then costs nothing, where an even mean costs up to ``log 2``); a group draws
    enough of them to value the rows to ``target_std`` at the check's spread (within ``min_draws`` and
    ``n_draws``), and the run's error keeps at least the distance between their value and the Laplace
    approximation at the mode (tails the draws may under-sample). ``restart_share=0`` always replays.

    With ``restart_after_check``, a chunk's check whose proposal fits that way also restarts every group at the
    mode after the chunk where the run failed it, or where the run's evidence rests on a few annealing paths (the
    ``lineages`` check) and reads no more than ``gap_sigmas`` combined standard deviations above the mode's value
    (:func:`~._mode_restart.mends_at_mode`): the draws give the run an error bar it can trust instead of a
    warning.

    A run's searches remember what they found: a check due by the rows (not one a caller asked for at a call's
    last chunk, so that a stream's result does not depend on how it is split into calls) keeps the lowest
    ``n_known_modes`` of its distinct minima (``SGAISState.known_modes``), and the next search starts from them
    and from ``n_fresh_starts`` new k-means++ points instead of ``n_starts``. A mode moves little between
    checks a factor ``growth`` of rows apart, so its refinement takes a few steps; the fresh starts look for a
    better configuration, and the best one found so far stays among the starts, so the searches of a run
    together try more configurations than one cold search.
    """

    max_rows: int = 5000
    unit: int = 100
    growth: float = math.sqrt(2.0)
    max_symmetries: int = 120
    gap_sigmas: float = 2.0
    n_draws: int = 4000
    n_starts: int = 16
    df: float = 5.0
    inflate: float = 1.2
    draw_block: int = 200
    hessian_step: float = 1e-5
    same_fit: float = 1e-3
    search_rows: int = 5000
    gate_draws: int = 200
    # Last, so that a checkpoint pickled before them loads with their defaults.
    min_draws: int = 400
    target_std: float = 0.05
    max_listed_symmetries: int = 5040
    copy_radius: float = 6.0
    max_listed_entries: int = 2**23
    restart_share: float = 1.0
    restart_spread: float = 3.0
    restart_after_check: bool = True
    n_fresh_starts: int = 4
    n_known_modes: int = 4
    relative_std: float = 1.0 / 3.0


class CheckSettings(NamedTuple):
    """The thresholds of the checks that flag a run (:mod:`._checks`) and of the shift detection.

    ``population_bias``: ``ChunkRecord.population_bias`` (nats, as a magnitude) at which the run warns, half
    the 0.5-nat floor of the calibration criterion, since measured biases on long streams are two to four
    times this lognormal value. ``min_lineages`` and ``lineage_fraction``: a first chunk whose resampling left
    fewer lineages than :func:`lineage_threshold` warns. ``degenerate_ess`` and ``degenerate_chunks``: the
    weights count as collapsed when the ESS stayed below ``degenerate_ess`` (fewer than two effective
    particles: the weight sits on about one particle in some group) for the last ``degenerate_chunks``
    chunks. ``shift_z``: a chunk whose mean per-row log-likelihood under the particles falls this many
    standard errors below the stream's mean log predictive per row is a shift
    (:func:`~._policy.shift_detected`). ``unusable_std``: a run flagged by another check whose
    ``log_evidence_std`` (nats) exceeds this reports its log evidence as NaN (the ``unusable`` check).
    ``lag_rows``: while at most this many rows were seen (all of them stored), a degraded chunk's widening
    measures the particles' lag behind the posterior on every row (:mod:`~._lag`, one gradient per particle
    and row), and takes it where it is under one posterior standard deviation; beyond, it assumes one (or the
    reservoir's bound, if larger). Up to the same rows every chunk that SGHMC annealed is measured so
    (``ExactMoveSettings.lag_ratio``).
    """

    population_bias: float = 0.25
    min_lineages: int = 3
    lineage_fraction: tuple = (3, 20)
    degenerate_ess: float = 2.0
    degenerate_chunks: int = 10
    shift_z: float = 5.0
    unusable_std: float = 1000.0
    lag_rows: int = 5000


class EngineTuning(NamedTuple):
    """All of the engine's tuning, by the part of the engine that reads it (``SGAISConfig.tuning``)."""

    exact_moves: ExactMoveSettings = ExactMoveSettings()
    steps: StepSettings = StepSettings()
    mode_check: ModeCheckSettings = ModeCheckSettings()
    checks: CheckSettings = CheckSettings()


def lineage_threshold(n_particles, checks=CheckSettings()):
    """The ``n_lineages`` below which a chunk annealed from the prior warns, for groups of ``n_particles``.

    ``checks.min_lineages``, or ``checks.lineage_fraction`` of the group (rounded down) where that is more: a
    group that keeps the same fraction of its starting particles is no more reliable for having more of them,
    so raising ``n_particles`` must not silence the warning unless the lineages grow with it. Rounded down, so
    that a group between multiples of 20 (the classifier's default of 30: threshold 4) is held to no more than
    its share.

    Examples
    --------
    >>> [lineage_threshold(n) for n in (8, 20, 30, 40)]
    [3, 3, 4, 6]
    """
    numerator, denominator = checks.lineage_fraction
    return max(checks.min_lineages, numerator * int(n_particles) // denominator)


def with_tuning(config, **groups):
    """``config`` with fields of its tuning groups replaced: ``with_tuning(config, mode_check=dict(max_rows=0))``.

    Examples
    --------
    >>> from evidence_select.sgais import SGAISConfig
    >>> with_tuning(SGAISConfig(), checks=dict(shift_z=3.0)).tuning.checks.shift_z
    3.0
    """
    tuning = config.tuning
    for group, fields in groups.items():
        tuning = tuning._replace(**{group: getattr(tuning, group)._replace(**fields)})
    return config._replace(tuning=tuning)
