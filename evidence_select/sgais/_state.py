"""SGAIS state, settings and records, and the combination of the replicate groups' evidences.

The types every part of the engine shares: :class:`SGAISConfig` (frozen settings),
:class:`SGAISState` (all a run carries from chunk to chunk), :class:`ChunkRecord` (one
entry of ``evidence_history_``), the initial state, and the pooled evidence of the
independent replicate groups with its standard error.
"""

import math
from typing import NamedTuple

import numpy as np

from ._reservoir import reservoir_init
from ._settings import EngineTuning
from ..utils import log_mean_exp, logsumexp
from ..utils._diagnostics import mean_and_squared_error
from ..utils._logspace import log_expm1

__all__ = ["SGAISConfig", "SGAISState", "ErrorWidening", "ChunkRecord", "Particles", "StepCounts", "sgais_init",
           "state_particles", "particle_fields",
           "combine_replicates", "evidence_estimate", "increment_spread", "initial_increment_variance",
           "group_left_behind", "standing_groups", "checked_groups_lead", "OVERSHOOT_STD",
           "population_log_variance", "particle_log_weights", "SamplerDegeneracyWarning", "PAPER_SETTINGS"]


class SamplerDegeneracyWarning(RuntimeWarning):
    """The particle system degenerated (annealing stalled or weights collapsed).

    Emitted when a chunk needs more than ``max_annealing_steps`` annealing steps
    (the rest of the chunk is then taken at once), and by the estimators when a
    group's weights stay on one particle for many chunks. The run continues;
    the warning says the evidence may rest on few particles. Escalate it to an
    error where a silent degradation is not acceptable.

    Examples
    --------
    >>> import warnings
    >>> from evidence_select import SamplerDegeneracyWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", SamplerDegeneracyWarning)  # stop a long stream instead
    ...     issubclass(SamplerDegeneracyWarning, RuntimeWarning)
    True
    """


class SGAISConfig(NamedTuple):
    """Frozen SGAIS settings (see the module docstring of :mod:`._engine` for their meaning).

    ``surprise_budget`` bounds the work of restarts and excursions: their
    datum evaluations stay within that multiple of the stream's own (plus the
    overrun of one restart or excursion). ``exact_move_rows``: while every row
    seen (chunk included) is stored and there are at most this many, particles
    move by Metropolis-corrected HMC on the exact tempered target instead of SGHMC
    (:func:`~._moves.exact_hmc_kernel`), or by exact draws where the model
    offers them; 0 never does, None sets no limit. A model that draws from its
    rows' summed statistics (:func:`~._moves.offers_statistics_draws`)
    needs no stored rows for them. ``restart_on_shift``: in
    a run with no surprise trigger configured, a chunk past those rows that shifts
    (:func:`~._policy.shift_detected`) restarts while every row seen is stored
    and the budget covers it; it is flagged (degraded) either way. ``tuning``
    holds the engine's own numbers (:class:`~._settings.EngineTuning`).
    """

    n_particles: int = 20
    n_replicates: int = 2
    batch_size: int = 500
    learning_rate: float = 0.1
    friction: float = 0.2
    n_mcmc_steps: int = 5
    target_ess: float = 0.9
    resample_threshold: float = 0.5
    control_variates: bool = True
    step_size_schedule: str = "tempered"
    reservoir_size: int = 100_000
    recentre_factor: float = 2.0
    max_annealing_steps: int = 500
    integrator: str = "baoab"
    initial_mcmc_factor: int = 2
    reheat_after_steps: int = None
    reheat_mcmc_factor: int = 3
    reheat_target_ess: float = None
    surprise_threshold: float = None
    restart_on_surprise: bool = False
    restart_growth: float = None
    surprise_budget: float = 4.0
    exact_move_rows: int = 1000  # None: no limit
    restart_on_shift: bool = True
    tuning: EngineTuning = EngineTuning()  # the engine's own numbers (see ._settings)


#: The settings of the paper's Sec. 6.1 (for reproduction and comparison).
PAPER_SETTINGS = dict(n_particles=10, learning_rate=0.1, friction=0.2, n_mcmc_steps=20, target_ess=0.5,
                      resample_threshold=0.0, control_variates=False, step_size_schedule="data",
                      integrator="sghmc", exact_move_rows=0)


class ErrorWidening(NamedTuple):
    """What a run's error bar adds, in quadrature, for errors that neither the groups' spread nor their weights
    can see: variances in nats^2 that persist from chunk to chunk into ``log_evidence_std``, until a restart
    (the degraded variance) or a posterior-mode check (both: the gap it measured replaces them) resets them; and
    the groups such a check measured where the others sat in a poorer mode, whose spread then stands for the
    groups'."""

    degraded_variance: float = 0.0  # added by degraded chunks (ChunkRecord.degraded, .log_evidence_widening)
    n_degraded_chunks: int = 0  # the chunks whose evidence the engine could not guarantee
    mode_gap_variance: float = 0.0  # squared gap of the last posterior-mode check that failed, 0 if it passed
    # The groups a posterior-mode check measured where others were left behind in a poorer mode
    # (combine_replicates); () for all groups. A restart, which pools the groups afresh, clears it.
    checked_groups: tuple = ()
    checked_variance: float = 0.0  # what a passing check of those groups vouched for (checked_widening), nats^2


class SGAISState(NamedTuple):
    """Everything an online SGAIS run carries from chunk to chunk.

    ``particles`` has shape ``(n_replicates * n_particles, n_params)`` (groups
    stacked), ``log_weights`` ``(n_replicates, n_particles)`` normalised within
    each group, ``log_evidence`` ``(n_replicates,)`` per group. ``rng`` is the
    one mutable member: updates advance a copy and return it in the new state.
    """

    particles: np.ndarray
    log_weights: np.ndarray
    log_evidence: np.ndarray
    log_evidence_variance: np.ndarray  # (n_replicates,) accumulated Var(log Z_g) estimate from the weights
    reference: np.ndarray  # (n_total, n_params) or None
    reference_grad: np.ndarray  # sum over all data seen of grad log p(y|reference), or None
    n_reference: int  # data seen when the references were last re-centred
    reservoir: object
    rng: np.random.Generator
    n_samples_seen: int
    n_chunks: int
    n_datum_evaluations: int
    step_scales: np.ndarray = None  # inverse mean per-datum curvature over all rows seen (SGHMC step factors)
    n_surprise_evaluations: int = 0  # datum evaluations spent by restarts and excursions, over the stream
    increment_variance: float = 0.0  # sum over chunks of the groups' mean log-evidence increment's variance
    widening: ErrorWidening = ErrorWidening()  # what log_evidence_std adds for degraded chunks and failed checks
    past_statistics: np.ndarray = None  # summed gradient_statistics of every row seen, where the model draws from them
    restart_pending: int = 0  # rows seen when a surprise's restart began to wait (_policy.closing_action), 0 for none
    # The lowest distinct minima of the last posterior-mode search due by the rows, (n, n_params) (the next
    # search's starts, ModeCheckSettings.n_known_modes), or None before one.
    known_modes: np.ndarray = None
    # Rows seen after the chunk whose SGHMC particles fell behind the posterior (ExactMoveSettings.lag_ratio) or
    # whose rows shifted, 0 for none: from there the chunks move exactly while every row is stored, up to
    # CheckSettings.lag_rows.
    sghmc_fell_behind: int = 0


class ChunkRecord(NamedTuple):
    """One entry of ``evidence_history_`` (one per processed chunk).

    Attributes
    ----------
    n_samples_seen : int
        Rows seen up to and including this chunk.
    log_evidence : float
        Log evidence of those rows.
    log_evidence_std : float
        Its standard error (see ``log_evidence_std_``).
    n_annealing_steps : int
        Tempering steps the chunk needed; spikes mark surprising data (change points).
    ess : float
        Smallest ESS (in particles) over the replicate groups after the chunk.
    log_predictive_per_datum : float
        ``(log Z after - log Z before) / chunk size``: how well the past predicted the chunk.
    n_resampled : int
        Group resampling events during the chunk.
    seconds : float
        Wall time of the update.
    n_reheat_steps : int
        Steps of the excursion that tempered the past data down and back
        (``reheat_after_steps``); 0 when the chunk did not trigger one.
    n_jumps_accepted : int
        Accepted global Metropolis-Hastings moves (models with ``propose_jump``).
    n_replayed : int
        Rows that a restart re-estimated the evidence of, by annealing them
        again from the prior or by importance draws at the posterior's best
        mode (:mod:`._mode_restart`) (``restart_on_surprise``,
        ``restart_growth``, or a shift in a run with no surprise trigger:
        ``restart_on_shift``; or, at the mode, the chunk's posterior-mode check
        finding the run below the mode's value or resting on few lineages,
        :func:`~._mode_restart.mends_at_mode`); 0 when the chunk did not restart.
    n_surprise_evaluations : int
        Per-datum likelihood and gradient evaluations of this chunk's restart
        and excursion, charged to the budget (``surprise_budget``).
    degraded : str
        Why the engine cannot guarantee this chunk's evidence, or ``""``: the
        chunk surprised the particles but its cure (a restart, an excursion or
        the model's global moves, all of which need every past row) was not
        available, because the reservoir no longer holds every row seen or the
        surprise budget is spent. ``log_evidence_std`` is then widened (see
        ``log_evidence_widening``) and an
        :class:`~evidence_select.EvidenceConvergenceWarning` names
        the cure.
    log_evidence_widening : float
        Standard deviation (nats) added in quadrature to the error of ``log Z``
        for this chunk's degradation; 0 when it is not degraded. The chunk's
        rows times the particles' per-row spread on them, times how far the
        particles lag behind the posterior, in posterior standard deviations:
        one, or less where a measurement on every row (while all are stored, up
        to ``CheckSettings.lag_rows``) shows them closer, or more beyond the
        reservoir (:func:`~evidence_select.sgais._engine.degraded_widening`).
    fallback : str
        The fallbacks the chunk took, ``"; "``-separated, or ``""``: a step cap
        reached (``max_annealing_steps``; the rest of the tempering taken at
        once, with a :class:`SamplerDegeneracyWarning`), a periodic restart
        (``restart_growth``) skipped because the reservoir no longer holds every
        row or the surprise budget is spent (with an
        :class:`~evidence_select.EvidenceConvergenceWarning`).
    n_correlated_moves : int
        Exact moves (the first rows, ``exact_move_rows``) after which a group's
        particles still correlated with where the move began although its
        repeats had run out: the population may lag behind its tempered target
        there. A diagnostic without a warning (on a flat, nearly separable
        posterior it is common, and the evidence usually still within its
        error): such chunks are the ones to check against a reference backend
        when the evidence decides something.
    population_bias : float
        How low ``log_evidence`` reads, at least, from the finite particle
        population: ``-s**2 / 2`` nats with ``s**2`` the log-variance of the
        groups' mean evidence from their importance weights
        (:func:`population_log_variance`; the bias of the log of an unbiased
        estimate whose log is Gaussian). The weight variance accumulates chunk
        by chunk, so on a long stream this grows; heavy-tailed weights make the
        bias larger than this lognormal value (see the user guide's coverage of
        long streams). At ``-CheckSettings.population_bias`` an
        :class:`~evidence_select.EvidenceConvergenceWarning` names the cure.
    n_lineages : int
        Lineages left by the chunk's resampling: the largest number, over the
        replicate groups, of the group's particles at the chunk's start that its
        particles at the end descend from (before a restart pools them; 0 in
        records written before this was tracked). Below
        ``lineage_threshold(n_particles)`` (:mod:`._settings`) in every group, each group's evidence
        increment rests on a few particle paths: its weights cannot measure its variance, and
        the groups' spread is a couple of draws of a heavy-tailed quantity. On a
        chunk annealed from the prior, where the increment is the whole log
        evidence of the chunk, that raises an
        :class:`~evidence_select.EvidenceConvergenceWarning`.
    mode_log_evidence, mode_log_evidence_std : float
        The posterior-mode check run after this chunk
        (:func:`~evidence_select.sgais._mode_check.apply_mode_check`; models
        that declare a mode search, such as the mixture up to seven components
        (:func:`~evidence_select.sgais._mode_check.model_checkable`),
        while every row seen is stored and their number is small; at row
        checkpoints, after restarts and excursions, and after the last chunk of
        every call): importance sampling
        at the best posterior mode found by optimisation, a value the evidence
        cannot lie far below. NaN where no check ran. When ``log_evidence``
        reads below it by more than ``ModeCheckSettings.gap_sigmas`` combined standard
        deviations, the gap is added to ``log_evidence_std`` in quadrature and an
        :class:`~evidence_select.EvidenceConvergenceWarning` names the cure.
    n_collapsed_chunks : int
        Chunks in a row, up to this one, that ended with an ESS below
        ``CheckSettings.degenerate_ess`` in some group (the ``collapsed_weights``
        check).
    failed_checks : tuple of str
        The checks that flag the evidence after this chunk
        (:mod:`~evidence_select.sgais._checks`): an estimator's
        ``evidence_checks_`` is its last record's.
    notices : tuple of Notice
        The warnings this chunk gives (check, cause, category, message), raised
        by the run's caller once per cause per call.
    sghmc_lag_ratio : float
        Where SGHMC's particles fell behind the posterior of every row seen on
        this chunk (above ``ExactMoveSettings.lag_ratio``) or the chunk's rows
        shifted, how far they lagged, in units of their own sampling noise
        (:func:`~evidence_select.sgais._lag.lag_ratio`): the chunk was then
        annealed again with exact moves, as are the later chunks while every
        row is stored, up to ``CheckSettings.lag_rows`` rows. 0 where no SGHMC
        run was replaced. A cure, not a warning: the evidence is the exact
        moves'.

    Examples
    --------
    >>> from evidence_select import BayesianLinearRegressor
    >>> from evidence_select.datasets import make_linear_regression
    >>> data = make_linear_regression(1000, random_state=0)
    >>> reg = BayesianLinearRegressor(random_state=0).fit(data.X, data.y)
    >>> [record.n_samples_seen for record in reg.evidence_history_]
    [500, 1000]
    >>> reg.evidence_history_[-1].log_evidence == reg.log_evidence_
    True
    """

    n_samples_seen: int
    log_evidence: float
    log_evidence_std: float
    n_annealing_steps: int
    ess: float  # min over groups of the accumulated-weight ESS (particles) at the end of the chunk
    log_predictive_per_datum: float  # (log Z after - log Z before) / |chunk|
    n_resampled: int  # group resampling events during the chunk
    seconds: float
    n_reheat_steps: int = 0
    n_jumps_accepted: int = 0
    n_replayed: int = 0
    n_surprise_evaluations: int = 0
    degraded: str = ""
    log_evidence_widening: float = 0.0
    fallback: str = ""
    n_correlated_moves: int = 0
    population_bias: float = 0.0
    n_lineages: int = 0
    mode_log_evidence: float = float("nan")
    mode_log_evidence_std: float = float("nan")
    n_collapsed_chunks: int = 0
    failed_checks: tuple = ()
    notices: tuple = ()
    sghmc_lag_ratio: float = 0.0

    def __deepcopy__(self, memo):
        # Numbers, strings and tuples of them only, so the record is its own deep copy. Estimators are deep-copied on
        # every selector update; walking each record's fields would make that cost grow with the stream.
        return self


class Particles(NamedTuple):
    """The particle system of all replicate groups (groups stacked as in :class:`SGAISState`).

    ``theta`` ``(n_groups * n_particles, n_params)``; ``log_weights``
    ``(n_groups, n_particles)`` normalised within each group; ``log_evidence`` and
    ``log_evidence_variance`` ``(n_groups,)``; ``reference`` and ``reference_grad``
    the control-variate points and their exact past gradient sums (same shape as
    ``theta``) or None; ``origins`` ``(n_groups * n_particles,)`` the row of
    ``theta`` at the chunk's start that each particle descends from (resampling
    carries it along), or None where nothing tracks it.
    """

    theta: np.ndarray
    log_weights: np.ndarray
    log_evidence: np.ndarray
    log_evidence_variance: np.ndarray
    reference: np.ndarray
    reference_grad: np.ndarray
    origins: np.ndarray = None
    exact_step: np.ndarray = None  # (n_groups,) exact HMC's adapted leapfrog steps, carried between a chunk's moves


def state_particles(state, origins=None):
    """The particle system an :class:`SGAISState` holds, as :class:`Particles` (with ``origins`` as given)."""
    return Particles(theta=state.particles, log_weights=state.log_weights, log_evidence=state.log_evidence,
                     log_evidence_variance=state.log_evidence_variance, reference=state.reference,
                     reference_grad=state.reference_grad, origins=origins)


def particle_fields(particles):
    """The :class:`SGAISState` fields that hold the :class:`Particles` ``particles`` (for ``SGAISState(...)`` or
    ``_replace``): the inverse of :func:`state_particles`."""
    return dict(particles=particles.theta, log_weights=particles.log_weights, log_evidence=particles.log_evidence,
                log_evidence_variance=particles.log_evidence_variance, reference=particles.reference,
                reference_grad=particles.reference_grad)


class StepCounts(NamedTuple):
    """Work done so far on a chunk (summed with :meth:`plus`)."""

    n_evaluations: int = 0  # per-datum likelihood or gradient evaluations
    n_resampled: int = 0  # group resampling events
    n_steps: int = 0  # annealing steps of the chunk's own tempering
    n_reheat_steps: int = 0  # excursion steps
    n_jumps: int = 0  # accepted global Metropolis-Hastings moves
    n_surprise_evaluations: int = 0  # evaluations of restarts and excursions (charged to the surprise budget)
    n_capped: int = 0  # steps that took the rest of their tempering at once (a step cap was reached)
    n_correlated_moves: int = 0  # groups' exact moves that ran out of repeats still correlated with their start

    def plus(self, other):
        """The element-wise sum of two counts."""
        return StepCounts(**{name: a + b for name, a, b in zip(self._fields, self, other)})


def sgais_init(rng, model, config, n_features, y_dtype=None):
    """Initial state: particles from the prior, uniform weights, empty reservoir."""
    n_total = config.n_particles * config.n_replicates
    particles = np.asarray(model.sample_prior(rng, n_total), dtype=float)
    log_weights = np.full((config.n_replicates, config.n_particles), -np.log(config.n_particles))
    return SGAISState(particles=particles, log_weights=log_weights, log_evidence=np.zeros(config.n_replicates),
                      log_evidence_variance=np.zeros(config.n_replicates), reference=None, reference_grad=None,
                      n_reference=0, reservoir=reservoir_init(config.reservoir_size, n_features, y_dtype), rng=rng,
                      n_samples_seen=0, n_chunks=0, n_datum_evaluations=0)


#: Half the overshoot that Markov's inequality allows an unbiased evidence estimate at 5%: ``Z_hat`` reads ``e^t``
#: above the truth with probability at most ``e^-t``, and ``t = log 20`` there. The most the spread of groups left
#: far behind adds to the error bar of an estimate a posterior-mode check measured (:func:`combine_replicates`).
OVERSHOOT_STD = math.log(20.0) / 2


def combine_replicates(log_evidence, log_evidence_variance=None, increment_variance=None, checked_groups=(),
                       checked_variance=0.0):
    """Combine per-group log evidences: ``(log mean Z_g, std of log Z)``.

    The mean of independent unbiased ``Z_g`` is unbiased. Its log has three
    standard-error estimates, each blind where another sees, and the largest is
    reported:

    - the spread of the groups, ``sd(log Z_g) / sqrt(G)`` (for small spreads the
      delta method's ``sd(Z_g / Z_mean) / sqrt(G)``; unlike the latter it keeps
      growing when groups disagree by many nats, e.g. in different modes, where
      the ratio form saturates at 1). It sees every error the groups do not
      share, but from ``G`` values only (one degree of freedom for two groups);
    - ``sqrt(increment_variance)``: the same spread taken chunk by chunk, the
      groups' log-evidence increments' variance summed over the chunks
      (:func:`increment_spread`; the checked groups' alone while they lead).
      Many more degrees of freedom, but blind to a difference between the
      groups that persists from chunk to chunk;
    - each group's importance-weight variance ``v_g``, summed over its resampling
      segments (:func:`~._steps.segment_log_variance`), combined as
      ``sqrt(log(1 + mean(expm1(v_g)) / G))`` (blind to correlation between
      particles that share an ancestor).

    None sees errors the groups share. The two steadier terms stand in for a
    small-sample correction of the first: ``benchmarks/bench_coverage.py``
    measures the coverage this gives. Returns NaN for the std only when no
    term is available.

    ``checked_groups`` (indices, ``ErrorWidening.checked_groups``) are the
    groups a posterior-mode check measured the estimate on while the others
    were left behind in a poorer mode (:func:`group_left_behind`); the check
    measured whether they missed mass, the side of the error where the truth
    lies above the estimate. A group left far behind adds almost nothing to the
    mean ``Z``, and its distance measures the gap between the modes, not the
    error of the groups the mean rests on; the other side of the error, the
    estimate above the truth, has Markov's bound: an unbiased mean ``Z`` reads
    ``e^t`` above the truth with probability at most ``e^-t``. While every
    other group reads below all the checked ones, the spread term is the
    checked groups' spread, or the spread of all groups capped at
    :data:`OVERSHOOT_STD` where that is larger: two of it are the overshoot
    Markov's bound allows at 5%, so a group left far behind cannot widen the
    error bar beyond what the estimate can read too high, and a split within
    the groups' noise keeps its spread. The std is then at least the square
    root of ``checked_variance`` (``ErrorWidening.checked_variance``), what the
    check vouched for.
    """
    log_evidence = np.asarray(log_evidence, dtype=float)
    combined = float(log_mean_exp(log_evidence))
    if not np.isfinite(combined):
        return combined, float("nan")
    candidates = []
    if len(log_evidence) >= 2:
        spread = math.sqrt(mean_and_squared_error(log_evidence)[1])
        if checked_groups_lead(log_evidence, checked_groups):
            checked = log_evidence[list(checked_groups)]
            spread = max(min(spread, OVERSHOOT_STD),
                         math.sqrt(mean_and_squared_error(checked)[1]) if len(checked) >= 2 else 0.0,
                         math.sqrt(checked_variance))
        candidates.append(spread)
    if increment_variance:
        candidates.append(math.sqrt(increment_variance))
    if log_evidence_variance is not None:
        candidates.append(math.sqrt(population_log_variance(log_evidence_variance)))
    return combined, float(max(candidates)) if candidates else float("nan")


def checked_groups_lead(log_evidence, checked_groups):
    """Whether ``checked_groups`` (indices, some of the groups) still read above every other group.

    Examples
    --------
    >>> checked_groups_lead([-10.0, -90.0], (0,)), checked_groups_lead([-10.0, -9.0], (0,))
    (True, False)
    """
    if len(checked_groups) == 0 or len(checked_groups) == len(log_evidence):
        return False
    log_evidence = np.asarray(log_evidence, dtype=float)
    checked = np.zeros(len(log_evidence), dtype=bool)
    checked[list(checked_groups)] = True
    return bool(np.max(log_evidence[~checked]) < np.min(log_evidence[checked]))


def increment_spread(log_evidence_before, log_evidence_after, checked_groups=()):
    """Variance of the groups' mean log-evidence increment over one chunk, from the groups' spread (0 for one group).

    ``sample variance of (log Z_g after - log Z_g before) / G``. Summed over the
    chunks (``SGAISState.increment_variance``) it estimates the variance of the
    groups' mean log evidence when the chunks' errors are independent, with a
    degree of freedom per chunk where the final spread has ``G - 1`` in all.
    While ``checked_groups`` (``ErrorWidening.checked_groups``) read above every
    other group (:func:`checked_groups_lead`), only their increments count: a
    group left far behind in a poorer mode adds almost nothing to the mean ``Z``,
    and its increments, lower chunk after chunk, measure how the gap between the
    modes grows, not the error of the groups the estimate rests on (the same
    rule as :func:`combine_replicates`' spread term).
    """
    if checked_groups_lead(log_evidence_after, checked_groups):
        groups = list(checked_groups)
        log_evidence_before = np.asarray(log_evidence_before, dtype=float)[groups]
        log_evidence_after = np.asarray(log_evidence_after, dtype=float)[groups]
    increments = np.asarray(log_evidence_after, dtype=float) - log_evidence_before
    if len(increments) < 2 or not np.all(np.isfinite(increments)):
        return 0.0
    return mean_and_squared_error(increments)[1]


def standing_groups(log_evidence, log_evidence_variance, sigmas):
    """Boolean mask of the replicate groups that stand with the pool: those not left behind
    (:func:`group_left_behind`).

    A group reading below the pool of the groups (their log mean exp) by more than ``sigmas`` standard deviations
    of a difference of two groups (its own log-variance plus the groups' mean) is left behind, as is a group whose
    estimate is -inf (no mass left). A NaN reading says nothing: every group stands.

    Examples
    --------
    >>> standing_groups([-0.5, -1800.0, -1.0], [1.0, 1.0, 1.0], sigmas=2.0)
    array([ True, False,  True])
    """
    log_evidence = np.asarray(log_evidence, dtype=float)
    if len(log_evidence) < 2 or not np.all(np.isfinite(log_evidence)):
        return log_evidence != -np.inf
    variance = np.asarray(log_evidence_variance, dtype=float)
    below_pool = log_mean_exp(log_evidence) - log_evidence
    return ~(below_pool > sigmas * np.sqrt(variance + np.mean(variance)))


def group_left_behind(log_evidence, log_evidence_variance, sigmas):
    """Whether a replicate group reads below the pool of the groups (their log mean exp) by more than ``sigmas``
    standard deviations of a difference of two groups (its own log-variance plus the groups' mean).

    Such a group sits in a poorer mode than the others: the pooled estimate follows the better groups, and the
    groups' spread then measures the gap between the modes, not the noise of the groups the estimate rests on.
    A group whose estimate is -inf (no mass left) is behind; a NaN reading, or a single group, says nothing.

    Examples
    --------
    >>> group_left_behind([-0.5, -1800.0], [1.0, 1.0], sigmas=2.0)
    True
    >>> group_left_behind([-0.5, -1.5], [1.0, 1.0], sigmas=2.0)
    False
    """
    return not bool(np.all(standing_groups(log_evidence, log_evidence_variance, sigmas)))


def initial_increment_variance(log_evidence, standing=None):
    """The groups' spread of their log evidences, ``sample variance of log Z_g / G`` (0 for one group): where
    the least ``SGAISState.increment_variance`` keeps after a restart pooled the groups. ``standing`` (a boolean
    mask, :func:`standing_groups`) keeps the groups the pooled estimate rests on."""
    log_evidence = np.asarray(log_evidence, dtype=float)
    if standing is not None:
        log_evidence = log_evidence[standing]
    if len(log_evidence) < 2 or not np.all(np.isfinite(log_evidence)):
        return 0.0
    return mean_and_squared_error(log_evidence)[1]


def population_log_variance(log_evidence_variance):
    """``log(1 + mean(expm1(v_g)) / G)``: the log-variance of the groups' mean evidence from their weights.

    ``v_g`` is each group's importance-weight log-variance (its relative variance
    ``expm1(v_g)``); the mean of ``G`` independent groups has ``1/G`` of their mean
    relative variance. Half of it is the lognormal bias of ``log mean Z_g``
    (``ChunkRecord.population_bias``).
    """
    n_groups = len(log_evidence_variance)
    # In log space: a degraded group's widened log-variance can exceed exp's range.
    log_relative = float(logsumexp(log_expm1(log_evidence_variance))) - 2.0 * math.log(n_groups)
    return float(np.logaddexp(0.0, log_relative))


def evidence_estimate(state):
    """``(log_evidence, log_evidence_std)`` of a state.

    The std is that of :func:`combine_replicates` (its spread over the groups
    a posterior-mode check measured, where it left out groups in a poorer
    mode: ``ErrorWidening.checked_groups``, and then at least what the check
    vouched for, ``checked_variance``), widened in quadrature by the
    variance that degraded chunks added (``ChunkRecord.degraded``) and by the
    gap to a failed posterior-mode check (``ChunkRecord.mode_log_evidence``).
    """
    log_z, std = combine_replicates(state.log_evidence, state.log_evidence_variance, state.increment_variance,
                                    state.widening.checked_groups, state.widening.checked_variance)
    widening = state.widening.degraded_variance + state.widening.mode_gap_variance
    if widening:
        std = math.sqrt(std**2 + widening)
    return log_z, std


def particle_log_weights(state):
    """Normalised log-weights of all particles, shape ``(n_total,)``.

    Groups are weighted by their evidence estimates, the consistent way to pool
    independent SMC runs.
    """
    group = state.log_evidence - logsumexp(state.log_evidence)
    return (state.log_weights + group[:, None]).ravel()
