"""The named checks that flag an online (SGAIS) evidence as possibly wrong, and the warnings that name them.

Each name matches a warning the stream raised when the check failed, so a
result can say what its warnings said after they have scrolled away (an
estimator's ``evidence_checks_``, a selector's ``checks`` column):

``degraded``
    A chunk surprised the particles and got no cure (``ChunkRecord.degraded``);
    ``log_evidence_std`` was widened.
``posterior_mode``
    The latest posterior-mode check found the evidence below the best mode's
    importance-sampling value (``ChunkRecord.mode_log_evidence``); the gap is
    in ``log_evidence_std`` until a later check passes.
``population_bias``
    The finite particle population's lognormal bias of the log evidence
    (``ChunkRecord.population_bias``) reaches ``CheckSettings.population_bias``
    nats, a bias that ``log_evidence_std`` does not include.
``lineages``
    The first chunk's resampling left fewer lineages than
    :func:`~._settings.lineage_threshold` (``ChunkRecord.n_lineages``), and no
    restart at the posterior's best mode has since replaced every group's run
    (:mod:`._mode_restart`).
``fallback``
    A periodic restart was skipped or a chunk's annealing hit its step cap
    (``ChunkRecord.fallback``).
``collapsed_weights``
    The last ``CheckSettings.degenerate_chunks`` chunks ended with an ESS below
    ``CheckSettings.degenerate_ess`` in some group (``ChunkRecord.n_collapsed_chunks``).
``unusable``
    Another check flags the run and its ``log_evidence_std`` exceeds
    ``CheckSettings.unusable_std`` nats: the estimate says nothing, so the
    estimators and :func:`~evidence_select.log_evidence` report NaN
    (:func:`reported_estimate`; the records keep the number).

``degraded`` and ``fallback`` describe chunks, and stay once raised;
``lineages`` describes the first chunk and stays until such a restart; the
others describe the current state, and clear when it recovers.

Every chunk's :class:`~._state.ChunkRecord` carries the checks that fail after
it (``failed_checks``, :func:`with_checks`) and the warnings it gives
(``notices``); the caller of a run raises those once per cause per call
(:func:`raise_notices`), so an estimator's fitted attributes only read its last
record.
"""

import math
from typing import NamedTuple

from .._result import check
from ..exceptions import EvidenceConvergenceWarning
from ..utils._warnings import warn
from ._policy import cure_of
from ._settings import lineage_threshold
from ._state import SamplerDegeneracyWarning, evidence_estimate, population_log_variance

__all__ = ["CHUNK_CHECKS", "CHECK_NAMES", "ChunkCauses", "Notice", "evidence_diagnostics", "failed_evidence_checks",
           "lineages_fail", "raise_notices", "reported_estimate", "with_checks", "with_chunk_checks"]

#: Every check, in the order results list them.
CHECK_NAMES = ("degraded", "posterior_mode", "population_bias", "lineages", "fallback", "collapsed_weights",
               "unusable")
#: The checks that describe a chunk, which a later chunk cannot undo.
CHUNK_CHECKS = ("degraded", "fallback")


class Notice(NamedTuple):
    """A warning a chunk gives, kept in its record until the run's caller raises it (:func:`raise_notices`)."""

    check: str  # the check it names (CHECK_NAMES)
    cause: str  # which of that check's causes ("" where it has one; the Degradation's name for degraded chunks)
    category: type
    message: str


class ChunkCauses(NamedTuple):
    """What a chunk's warnings say, beyond its record (see :func:`with_checks`)."""

    degradation: object  # the Degradation of a degraded chunk that warns, or None (not degraded, or not the first)
    blocked: tuple  # (Degradation, its words) of a periodic restart the chunk skipped, or (None, "")
    mode_check: object  # the ModeCheck run after the chunk, or None
    capabilities: object  # the model's ModelCapabilities (the cures name only what it offers)
    n_seen_before: int  # rows seen before the chunk
    recovery: str = ""  # why SGHMC's chunk was annealed again with exact moves (sgais_update), or ""
    restarted_at_mode: bool = False  # every group's run was replaced by draws at the posterior's best mode
    fell_behind: int = 0  # SGAISState.sghmc_fell_behind of the chunk (rows seen where SGHMC fell behind, or 0)


def with_checks(record, previous, state, config, causes):
    """``record`` with its ``n_collapsed_chunks``, ``failed_checks`` and ``notices``.

    ``previous`` is the stream's previous record (None before the first chunk): the chunk checks stay failed once
    failed, and the state checks give a notice where they start to fail (``posterior_mode`` on every check that
    fails: each measures a new gap); ``unusable`` fails where another check does and the error bar exceeds
    ``CheckSettings.unusable_std``; ``state`` is the state after the chunk, whose population bias and error bar
    ``record`` already holds (:func:`~._engine.chunk_record`, the posterior-mode check's error bar where one ran).
    """
    checks = config.tuning.checks
    collapsed = ((0 if previous is None else previous.n_collapsed_chunks) + 1 if record.ess < checks.degenerate_ess
                 else 0)
    bias = -record.population_bias
    failing = {
        "degraded": bool(record.degraded),
        "posterior_mode": state.widening.mode_gap_variance > 0,
        "population_bias": bias >= checks.population_bias,
        # The first chunk's few lineages stay failed until a restart at the mode replaced every group's run.
        "lineages": not causes.restarted_at_mode and lineages_fail(record, previous, config, causes.n_seen_before),
        "fallback": bool(record.fallback),
        "collapsed_weights": collapsed >= checks.degenerate_chunks,
    }
    before = () if previous is None else previous.failed_checks
    flagged = [name for name in failing if failing[name] or (name in CHUNK_CHECKS and name in before)]
    failing["unusable"] = bool(flagged) and record.log_evidence_std > checks.unusable_std
    failed = tuple(name for name in CHECK_NAMES if failing[name] or (name in CHUNK_CHECKS and name in before))
    record = record._replace(n_collapsed_chunks=collapsed, failed_checks=failed)
    started = {name for name in failed if name not in before}
    return record._replace(notices=_notices(record, started, causes, config))


def lineages_fail(record, previous, config, n_seen_before):
    """Whether the ``lineages`` check fails after the chunk of ``record``: its first chunk's resampling left
    fewer lineages than :func:`~._settings.lineage_threshold` (``n_seen_before`` 0), or the stream's ``previous``
    record (None: the first chunk) carries the failure."""
    if previous is not None and "lineages" in previous.failed_checks:
        return True
    return n_seen_before == 0 and record.n_lineages < lineage_threshold(config.n_particles, config.tuning.checks)


def _notices(record, started, causes, config):
    """The record's :class:`Notice` tuple: the degraded chunk, the skipped restart, a failed posterior-mode check,
    and the checks that started to fail with this chunk."""
    notices = []
    if causes.degradation is not None:
        notices.append(Notice("degraded", causes.degradation.name, EvidenceConvergenceWarning,
                              _degraded_message(record, causes)))
    reason, words = causes.blocked
    if reason is not None:
        notices.append(Notice("fallback", reason.name, EvidenceConvergenceWarning,
                              f"SGAIS: the periodic restart at row {record.n_samples_seen} was skipped: {words}; a "
                              "mode the particles missed would go unnoticed. "
                              f"{cure_of(reason, causes.capabilities)}"))
    if causes.recovery:
        notices.append(Notice("fallback", "sghmc_divergence", SamplerDegeneracyWarning,
                              f"SGAIS: {causes.recovery}; standardise the features or lower learning_rate so that "
                              "SGHMC follows the posterior (beyond the reservoir a divergence cannot be recovered)"))
    if causes.mode_check is not None and causes.mode_check.failed:
        notices.append(Notice("posterior_mode", "", EvidenceConvergenceWarning,
                              _mode_message(record.n_samples_seen, causes.mode_check)))
    if "lineages" in started:
        notices.append(Notice("lineages", "", EvidenceConvergenceWarning, _lineage_message(record, config)))
    if "population_bias" in started:
        notices.append(Notice("population_bias", "", EvidenceConvergenceWarning,
                              _bias_message(record, causes.fell_behind, config)))
    if "collapsed_weights" in started:
        notices.append(Notice("collapsed_weights", "", SamplerDegeneracyWarning, _collapsed_message(config)))
    if "unusable" in started:
        notices.append(Notice("unusable", "", EvidenceConvergenceWarning, _unusable_message(record, config)))
    return tuple(notices)


def _degraded_message(record, causes):
    return (f"SGAIS: the chunk ending at row {record.n_samples_seen} surprised the particles, but "
            f"{record.degraded}; its evidence is not guaranteed and log_evidence_std was widened by "
            f"{record.log_evidence_widening:.3g} nats (later degraded chunks are flagged in ChunkRecord.degraded and "
            f"widened too). {cure_of(causes.degradation, causes.capabilities)}")


def _mode_message(n_seen, mode_check):
    evidence = mode_check.evidence
    return (f"SGAIS: importance sampling at the best posterior mode that optimisation finds on the {n_seen} rows "
            f"gives log Z = {evidence.log_evidence:.2f} +/- {evidence.std:.2g}, {mode_check.gap:.2f} nats above the "
            f"SGAIS estimate {mode_check.log_evidence:.2f} +/- {mode_check.std:.2g}: the particles missed posterior "
            "mass (e.g. a better cluster configuration). The reported standard error includes the gap, and "
            "evidence_checks_ names 'posterior_mode', until a later check passes; ChunkRecord.mode_log_evidence "
            "records the checks. Cure: more n_mcmc_steps or n_particles, or a reference evidence on the rows "
            "(log_evidence with method='ais' and more n_chains and n_mcmc_steps than its defaults)")


def _lineage_message(record, config):
    return (f"SGAIS: resampling on the first {record.n_samples_seen} rows left every replicate group's particles "
            f"descending from at most {record.n_lineages} of its {config.n_particles} starting particles, so each "
            "group's evidence rests on a few annealing paths from the prior; neither the importance weights nor the "
            "groups' spread can measure its error, and the estimate may read low by nats beyond log_evidence_std. "
            "ChunkRecord.n_lineages records it. Cure: check the evidence against a reference backend on these rows "
            "(log_evidence with method='ais' and more n_chains and n_mcmc_steps than its defaults); more n_particles "
            "or n_mcmc_steps make the miss smaller, but log_evidence_std may still not cover it")


def _bias_message(record, fell_behind, config):
    """The ``population_bias`` warning; past ``CheckSettings.lag_rows`` in a run whose SGHMC fell behind the
    posterior at row ``fell_behind`` (0: never), it also names that cause and its cures, before the particle
    count's."""
    bias = -record.population_bias
    cause = ""
    lag_rows = config.tuning.checks.lag_rows
    if fell_behind and record.n_samples_seen > lag_rows:
        cause = (f"SGHMC fell behind this posterior at row {fell_behind} and, past {lag_rows} rows "
                 "(CheckSettings.lag_rows), moves the particles again, so the evidence may read lower than this "
                 "bias and its error bar say: check it against a reference evidence on the rows (log_evidence with "
                 "method='bridge' or 'ais'), or set exact_move_rows to the stream's length (exact moves "
                 "throughout, at a cost that grows with the rows). Also: ")
    return (f"SGAIS: after {record.n_samples_seen} rows the groups' importance weights put the log evidence's "
            f"log-variance at {2 * bias:.3g}, so log_evidence is expected to read about {bias:.3g} nats low "
            f"(ChunkRecord.population_bias = {record.population_bias:.3g} at that row): the lognormal bias of a "
            "finite particle population, which log_evidence_std does not include; heavy-tailed weights make it "
            f"larger, and it grows with the stream. {cause}Cure: more n_particles (the bias falls as 1/n_particles) "
            "or a target_ess closer to 1")


def _collapsed_message(config):
    checks = config.tuning.checks
    return (f"SGAIS: the importance weights of a particle group have been on one particle (ESS < "
            f"{checks.degenerate_ess}) for the last {checks.degenerate_chunks} chunks; the evidence rests on that "
            "particle: enable resampling (resample_threshold > 0) or use more particles")


def _unusable_message(record, config):
    checks = [name for name in record.failed_checks if name != "unusable"]
    return (f"SGAIS: after {record.n_samples_seen} rows the run is flagged ({', '.join(checks)}) and its "
            f"log_evidence_std is {record.log_evidence_std:.3g} nats, over {config.tuning.checks.unusable_std:g}: "
            "the estimate is unusable and log_evidence_ reads NaN (ChunkRecord.log_evidence keeps the number). "
            "Cure: what the run's other warnings name, or a reference evidence on the rows (log_evidence with "
            "method='ais' or 'bridge')")


def reported_estimate(state, history):
    """``(log_evidence, log_evidence_std)`` as a run reports them: :func:`~._state.evidence_estimate`, with the
    log evidence NaN while the last of ``history`` fails the ``unusable`` check."""
    log_z, std = evidence_estimate(state)
    if history and "unusable" in history[-1].failed_checks:
        return float("nan"), std
    return log_z, std


def raise_notices(records):
    """Raise the warnings of one call's chunk ``records``, one per cause, at the user's line.

    A chunk check's cause raises its first notice of the call (a degraded run's first degraded chunk, say); a
    state check's cause raises its last, and only while the check still fails after the call's last chunk (a
    population bias that crossed its threshold twice in the call warns once, with the latest numbers). The
    ``lineages`` check is raised as a state check: a restart at the mode later in the call may have cleared it.
    """
    if not records:
        return
    failing = set(records[-1].failed_checks)
    chosen = {}
    for record in records:
        for notice in record.notices:
            key = (notice.check, notice.cause)
            if notice.check in CHUNK_CHECKS:
                chosen.setdefault(key, notice)
            elif notice.check in failing:
                chosen[key] = notice
    for notice in chosen.values():
        warn(notice.message, notice.category)


def evidence_diagnostics(state, history, config):
    """The checks of a run's evidence as a diagnostics dict, ``name -> check(value, threshold, passed)``.

    The format of :attr:`~evidence_select.EvidenceResult.diagnostics`, in the order of this module's list; the
    verdicts are the last record's ``failed_checks`` (all pass without records).

    Parameters
    ----------
    state : SGAISState
        The run's final state.
    history : list of ChunkRecord
        The run's records, oldest first.
    config : SGAISConfig
        The run's settings: its particles per replicate group (for :func:`~._settings.lineage_threshold`) and its
        checks' thresholds.

    Returns
    -------
    diagnostics : dict
    """
    checks = config.tuning.checks
    failed = failed_evidence_checks(history)
    last = history[-1] if history else None
    values = {
        "degraded": (sum(bool(record.degraded) for record in history), 0),
        "posterior_mode": (math.sqrt(state.widening.mode_gap_variance), 0.0),
        "population_bias": (0.5 * population_log_variance(state.log_evidence_variance), checks.population_bias),
        "lineages": (history[0].n_lineages if history else None, lineage_threshold(config.n_particles, checks)),
        "fallback": (sum(bool(record.fallback) for record in history), 0),
        "collapsed_weights": (0 if last is None else last.n_collapsed_chunks, checks.degenerate_chunks),
        "unusable": (evidence_estimate(state)[1], checks.unusable_std),
    }
    return {name: check(*values[name], name not in failed) for name in CHECK_NAMES}


def failed_evidence_checks(history):
    """Names of the checks that flag the evidence after the last of ``history`` (its ``failed_checks``); empty
    when none fails or there is no record."""
    return tuple(history[-1].failed_checks) if history else ()


def with_chunk_checks(current, earlier):
    """``current`` failed checks with the chunk checks among ``earlier`` ones added (they cannot clear); names
    the engine does not know (an estimator's own, such as ``feature_scale``) follow as ``current`` has them.
    (``lineages`` can clear, and travels with the records themselves.)

    Examples
    --------
    >>> with_chunk_checks(("population_bias",), ("degraded", "lineages", "posterior_mode"))
    ('degraded', 'population_bias')
    """
    return (tuple(name for name in CHECK_NAMES if name in current or (name in CHUNK_CHECKS and name in earlier))
            + tuple(name for name in current if name not in CHECK_NAMES))
