"""The named checks that flag an online (SGAIS) evidence as possibly wrong, read off its state and records.

Each name matches a warning the stream raised when the check failed, so a
result can say what its warnings said after they have scrolled away (an
estimator's ``evidence_checks_``, a selector's ``checks`` column):

``degraded``
    A chunk surprised the particles and got no cure (``ChunkRecord.degraded``);
    ``log_evidence_std`` was widened.
``posterior_mode``
    The latest posterior-mode check found the evidence below the best mode's
    importance-sampling value (``ChunkRecord.mode_log_evidence``); the gap is
    in ``log_evidence_std``.
``population_bias``
    The finite particle population makes the log evidence read low by at least
    ``CheckSettings.population_bias`` nats (``ChunkRecord.population_bias``), beyond
    what ``log_evidence_std`` covers.
``lineages``
    The first chunk's resampling left fewer lineages than
    :func:`~._settings.lineage_threshold` (``ChunkRecord.n_lineages``).
``fallback``
    A periodic restart was skipped or a chunk's annealing hit its step cap
    (``ChunkRecord.fallback``).
``collapsed_weights``
    The last ``CheckSettings.degenerate_chunks`` chunks ended with an ESS below
    ``CheckSettings.degenerate_ess`` in some group.

``degraded``, ``lineages`` and ``fallback`` describe chunks, and stay once
raised; the others describe the current state, and clear when it recovers.
"""

import math

from .._result import check, failed_checks
from ._settings import lineage_threshold
from ._state import population_log_variance

__all__ = ["CHUNK_CHECKS", "CHECK_NAMES", "collapsed_chunks", "evidence_diagnostics", "failed_evidence_checks",
           "with_chunk_checks"]

#: Every check, in the order results list them.
CHECK_NAMES = ("degraded", "posterior_mode", "population_bias", "lineages", "fallback", "collapsed_weights")
#: The checks that describe a chunk, which a later chunk cannot undo.
CHUNK_CHECKS = ("degraded", "lineages", "fallback")


def evidence_diagnostics(state, history, config):
    """The checks of ``state``'s evidence as a diagnostics dict, ``name -> check(value, threshold, passed)``.

    The format of :attr:`~evidence_select.EvidenceResult.diagnostics`, in the order
    of this module's list; a check that needs records the history does not
    hold passes.

    Parameters
    ----------
    state : SGAISState
    history : list of ChunkRecord
        The stream's records, oldest first; the chunk checks read only these,
        so a shortened history (a selector's job) sees only its own chunks,
        and ``lineages`` only a history that starts at the first chunk.
    config : SGAISConfig
        The run's settings: its particles per replicate group (for
        :func:`~._settings.lineage_threshold`) and its checks' thresholds.

    Returns
    -------
    diagnostics : dict
    """
    checks = config.tuning.checks
    degraded = int(state.widening.n_degraded_chunks)  # counted by the engine: no pass over the history
    gap = math.sqrt(state.widening.mode_gap_variance)
    bias = 0.5 * population_log_variance(state.log_evidence_variance)
    complete = bool(history) and len(history) == state.n_chunks
    lineages = int(history[0].n_lineages) if complete else None
    threshold = lineage_threshold(config.n_particles, checks)
    fallbacks = sum(bool(record.fallback) for record in history)
    collapsed = collapsed_chunks(history, checks)
    return {
        "degraded": check(degraded, 0, degraded == 0),
        "posterior_mode": check(gap, 0.0, gap == 0.0),
        "population_bias": check(bias, checks.population_bias, bias < checks.population_bias),
        "lineages": check(lineages, threshold, not lineages or lineages >= threshold),
        "fallback": check(fallbacks, 0, fallbacks == 0),
        "collapsed_weights": check(collapsed, checks.degenerate_chunks, collapsed < checks.degenerate_chunks),
    }


def collapsed_chunks(history, checks):
    """How many of the last ``checks.degenerate_chunks`` records ended with an ESS below ``checks.degenerate_ess``
    (``checks`` a :class:`~._settings.CheckSettings`): all of them fail the ``collapsed_weights`` check (and raise
    the estimators' SamplerDegeneracyWarning)."""
    return sum(bool(record.ess < checks.degenerate_ess) for record in history[-checks.degenerate_chunks:])


def failed_evidence_checks(state, history, config):
    """Names of the checks that flag ``state``'s evidence (:func:`evidence_diagnostics`); empty when none."""
    return tuple(failed_checks(evidence_diagnostics(state, history, config)))


def with_chunk_checks(current, earlier):
    """``current`` failed checks with the chunk checks among ``earlier`` ones added (they cannot clear); names
    the engine does not know (an estimator's own, such as ``feature_scale``) follow as ``current`` has them.

    Examples
    --------
    >>> with_chunk_checks(("population_bias",), ("lineages", "posterior_mode"))
    ('population_bias', 'lineages')
    """
    return (tuple(name for name in CHECK_NAMES if name in current or (name in CHUNK_CHECKS and name in earlier))
            + tuple(name for name in current if name not in CHECK_NAMES))

