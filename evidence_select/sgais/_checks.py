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
    ``POPULATION_BIAS_WARNING`` nats (``ChunkRecord.population_bias``), beyond
    what ``log_evidence_std`` covers.
``lineages``
    The first chunk's resampling left fewer lineages than
    :func:`~._state.lineage_threshold` (``ChunkRecord.n_lineages``).
``fallback``
    A periodic restart was skipped or a chunk's annealing hit its step cap
    (``ChunkRecord.fallback``).
``collapsed_weights``
    The last ``DEGENERATE_CHUNKS`` chunks ended with an ESS below
    ``DEGENERATE_ESS`` in some group.

``degraded``, ``lineages`` and ``fallback`` describe chunks, and stay once
raised; the others describe the current state, and clear when it recovers.
"""

import math

from .._result import check, failed_checks
from ._state import POPULATION_BIAS_WARNING, lineage_threshold, population_log_variance

__all__ = ["CHUNK_CHECKS", "CHECK_NAMES", "DEGENERATE_CHUNKS", "DEGENERATE_ESS", "collapsed_chunks",
           "evidence_diagnostics", "failed_evidence_checks", "with_chunk_checks"]

#: Collapsed weights: the ESS stayed below ``DEGENERATE_ESS`` (fewer than two effective particles: the weight
#: sits on about one particle in some group) for the last ``DEGENERATE_CHUNKS`` chunks.
DEGENERATE_ESS, DEGENERATE_CHUNKS = 2.0, 10

#: Every check, in the order results list them.
CHECK_NAMES = ("degraded", "posterior_mode", "population_bias", "lineages", "fallback", "collapsed_weights")
#: The checks that describe a chunk, which a later chunk cannot undo.
CHUNK_CHECKS = ("degraded", "lineages", "fallback")


def evidence_diagnostics(state, history, n_particles):
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
    n_particles : int
        Particles per replicate group (for :func:`~._state.lineage_threshold`).

    Returns
    -------
    diagnostics : dict
    """
    degraded = int(state.n_degraded_chunks)  # counted by the engine: no pass over the history
    gap = math.sqrt(state.mode_gap_variance)
    bias = 0.5 * population_log_variance(state.log_evidence_variance)
    complete = bool(history) and len(history) == state.n_chunks
    lineages = int(history[0].n_lineages) if complete else None  # 0: a record that predates the count
    threshold = lineage_threshold(n_particles)
    fallbacks = sum(bool(record.fallback) for record in history)
    collapsed = collapsed_chunks(history)
    return {
        "degraded": check(degraded, 0, degraded == 0),
        "posterior_mode": check(gap, 0.0, gap == 0.0),
        "population_bias": check(bias, POPULATION_BIAS_WARNING, bias < POPULATION_BIAS_WARNING),
        "lineages": check(lineages, threshold, not lineages or lineages >= threshold),
        "fallback": check(fallbacks, 0, fallbacks == 0),
        "collapsed_weights": check(collapsed, DEGENERATE_CHUNKS, collapsed < DEGENERATE_CHUNKS),
    }


def collapsed_chunks(history):
    """How many of the last ``DEGENERATE_CHUNKS`` records ended with an ESS below ``DEGENERATE_ESS``: all of them
    fail the ``collapsed_weights`` check (and raise the estimators' SamplerDegeneracyWarning)."""
    return sum(bool(record.ess < DEGENERATE_ESS) for record in history[-DEGENERATE_CHUNKS:])


def failed_evidence_checks(state, history, n_particles):
    """Names of the checks that flag ``state``'s evidence (:func:`evidence_diagnostics`); empty when none."""
    return tuple(failed_checks(evidence_diagnostics(state, history, n_particles)))


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

