"""The replay gate: a periodic restart runs only where the posterior-mode check says the run fell behind.

A periodic restart (``SGAISConfig.restart_growth``) replays every row seen from the prior and pools that run
with the in-order one: particles that settled in a poorer mode find every later chunk easy to anneal, so no
surprise reveals them while their evidence falls behind at a fixed rate per row. A replay costs a pass of
annealing over every row seen, so the replays cost as much again as the stream. For a model with a mode search
(at most ``ModeCheckSettings.max_symmetries`` label symmetries) the gate asks the posterior's best mode first:
while at most ``max_rows`` rows were seen, the posterior-mode check's own value on every row
(:func:`~._mode_check.rows_mode_evidence`'s search and draws, which the chunk's check and the replays share);
past them a mode search on ``search_rows`` of the stored rows (the run's best particle among its starts), the
best fit and that particle refined on every row, and ``gate_draws`` importance draws at the lower of the two
(:func:`~._mode_check.importance_at_mode`). The best particle (the highest log joint on every row) is refined on
every row either way, which says whether the particles sit in the best mode's basin. The replay runs when the run
fell behind (:func:`groups_behind`): its estimate reads below the mode's value by more than :func:`allowed_gap`,
which is what a run in a poorer mode does, by nats that grow with the rows, and then every group replays; or some
of its replicate groups read below the others by more than ``gap_sigmas`` of the groups' own standard deviations,
and then those groups alone replay. A single group left in a poorer mode hides in the pooled estimate, which
follows the better groups (it moves by at most ``log G``), while the groups' spread widens its error bar past any
gap the check could see; the groups that stand need no replay. Within ``max_rows`` rows a run whose particles sit
in a poorer basin replays wherever it reads below the mode's value, and one whose particles sit at the best mode
only beyond its errors: within them it lost what it lost within that basin (moves that mix too slowly for the
posterior's narrowing, a finite population), which a replay from the prior, annealing the same way, loses again.
Either way the chunk's result is then checked against the same value like any posterior-mode check
(:func:`~._mode_check.apply_mode_check`), and keeps the gap in its error bar if it reads low. A surprise's
restart is not gated (:func:`~._policy.closing_action`).

A model without a mode search, or with more label symmetries than ``max_symmetries``, keeps its replays.
The restart decision then depends on the run's own estimate, so the pooled evidence is no longer exactly
unbiased as it is for restarts at fixed positions: a replay comes only after a low reading, and pooling
moves that reading up, towards the mode's value.
"""

import math
from typing import NamedTuple

import numpy as np

from ..utils._likelihood import log_lik_sum
from ._mode_check import (DEGENERATE_MODE_ERRORS, ModeCheck, ModeEvidence, best_mode, finite_evidence,
                          importance_at_mode, local_modes, model_checkable, negative_log_joint, rows_mode_evidence,
                          search_starts)
from ._state import standing_groups

__all__ = ["GateCheck", "GateValue", "gate_applies", "gate_mode_evidence", "groups_behind", "allowed_gap"]


def gate_applies(model, settings):
    """Whether a periodic restart of ``model`` is gated: a model with a mode search and at most
    ``settings.max_symmetries`` label symmetries, unless ``settings.gate_draws`` is 0 (no gate)."""
    return (settings.gate_draws > 0 and model_checkable(model, settings)
            and model.n_mode_symmetries <= settings.max_symmetries)


class GateValue(NamedTuple):
    """What the replay gate found on the rows seen (:func:`gate_mode_evidence`)."""

    evidence: ModeEvidence  # the best mode's importance-sampling value
    particles_off_mode: bool  # the best particle's basin is poorer than the best mode's


class GateCheck(NamedTuple):
    """The run's estimate against the gate's value: the posterior-mode check and where the particles sit."""

    check: ModeCheck
    particles_off_mode: bool


def gate_mode_evidence(model, rows, rng, settings, particles, known_modes=None):
    """The posterior's best mode on ``rows`` ``(X, y)``, its importance-sampling value and whether ``particles``
    sit in a poorer basin (a :class:`GateValue`), or None where no finite value was found.

    The particle with the highest log joint on all rows (the best particle) is refined on all of them. Up to
    ``settings.max_rows`` rows the mode and its value are the posterior-mode check's
    (:func:`~._mode_check.rows_mode_evidence`, the same search and draws). Past them the search's starts
    (:func:`~._mode_check.search_starts`: the run's ``known_modes`` and k-means++/EM starts) and the best
    particle are refined on ``settings.search_rows`` rows drawn without replacement, the subsample's
    local modes are valued on every row (:func:`_best_on_all_rows`), the best of them is refined there, and the
    lower of its minimum and the best particle's is the mode (the search never returns a mode poorer than the
    run's own). The particles sit off the mode when the best particle's minimum is poorer than the mode's by more
    than ``settings.same_fit`` nats. The value's ``modes`` are the mode and the subsample's lowest minima.
    """
    X, y = rows
    objective = negative_log_joint(model, X, y)
    best_particle = _best_particle(model, X, y, particles)
    particle_mode = _refined(objective, best_particle, settings.same_fit)
    if len(X) <= settings.max_rows:
        evidence = rows_mode_evidence(model, X, y, rng, settings, known_modes)
    else:
        evidence = _subsample_mode_evidence(model, rows, rng, settings, objective, (best_particle, particle_mode),
                                            known_modes)
    if evidence is None:
        return None
    # A mode of unknown objective leaves the particles off it: the gate then replays as it would without the test.
    at_mode = particle_mode is not None and particle_mode[1] <= evidence.mode_objective + settings.same_fit
    return GateValue(evidence, not at_mode)


def _subsample_mode_evidence(model, rows, rng, settings, objective, particle, known_modes):
    """Past the check's rows: the lower of the subsample search's mode refined on ``rows`` (``objective`` is the
    negative log joint there) and the best particle's ``(minimum, value)`` or None (``particle`` is the best
    particle and that pair), valued with ``settings.gate_draws`` importance draws (None where no finite value was
    found)."""
    best_particle, particle_mode = particle
    subsample_modes = _subsample_local_modes(model, rows, rng, settings, best_particle, known_modes)
    best_start = _best_on_all_rows(objective, subsample_modes)
    searched = _refined(objective, best_start, settings.same_fit)
    mode = _lowest(searched, particle_mode)
    if mode is None:
        return None
    try:
        evidence = importance_at_mode(model, rows, rng, (objective, mode[0]), settings, settings.gate_draws)
    except DEGENERATE_MODE_ERRORS:  # a degenerate mode (a scale that is not positive definite)
        return None
    evidence = finite_evidence(evidence)
    if evidence is None:
        return None
    # The refined start is the mode's unrefined twin: the next search would refine it again.
    others = [start for start in subsample_modes if start is not best_start]
    return evidence._replace(modes=np.array([mode[0], *others][:settings.n_known_modes]))


def _best_particle(model, X, y, particles):
    """The one of ``particles`` with the highest log joint on the rows ``(X, y)``."""
    with np.errstate(all="ignore"):
        log_joint = model.log_prior(particles) + log_lik_sum(model, particles, X, y, allow_nan=True)
    return particles[int(np.argmax(np.where(np.isnan(log_joint), -np.inf, log_joint)))]


def _subsample_local_modes(model, rows, rng, settings, best_particle, known_modes):
    """The local modes the search finds on ``settings.search_rows`` of ``rows`` drawn without replacement, from the
    search's starts (:func:`~._mode_check.search_starts`) and the run's best particle."""
    X, y = rows
    chosen = np.sort(rng.choice(len(X), size=min(settings.search_rows, len(X)), replace=False))
    X_sub, y_sub = X[chosen], None if y is None else y[chosen]
    starts = np.vstack([search_starts(model, X_sub, rng, settings, known_modes), best_particle[None]])
    return local_modes(negative_log_joint(model, X_sub, y_sub), starts, settings.same_fit)


def _refined(objective, start, same_fit):
    """``(mode, objective value)`` of the quasi-Newton minimum reached from ``start``, or None (no start, or no
    finite minimum)."""
    mode = None if start is None else best_mode(objective, [start], same_fit)
    return None if mode is None else (mode, float(objective(mode)[0]))


def _lowest(*minima):
    """The lowest of the ``(mode, value)`` pairs that are not None (the first where they tie), or None."""
    found = [m for m in minima if m is not None]
    return min(found, key=lambda m: m[1]) if found else None


def _best_on_all_rows(objective, modes):
    """The one of a subsample's local ``modes`` with the lowest ``objective`` on every row (None without modes).

    Configurations of a mixture whose log joints differ by hundreds of nats on every row can trade places on a
    subsample of them, whose noise is tens of nats: the subsample's own best would then be refined into the poorer
    configuration. Valuing each (a pass over the rows) keeps the better one.
    """
    if not modes:
        return None
    with np.errstate(all="ignore"):
        values = np.array([objective(mode)[0] for mode in modes])
    return modes[int(np.argmin(np.where(np.isnan(values), np.inf, values)))]


def allowed_gap(gate, mode_gap_variance, n_rows, settings):
    """Nats by which a run's estimate may read below the mode's value (``gate.check.gap``, ``gate`` its
    :class:`GateCheck`) without a replay, after ``n_rows`` rows (:func:`groups_behind`); ``mode_gap_variance`` is
    the state's ``ErrorWidening.mode_gap_variance``, the square of the gap its last check left.

    Up to ``settings.max_rows`` rows, where a replay costs at most that many rows: none while the particles sit
    in a poorer basin than the mode's (``gate.particles_off_mode``), so the run's estimate must read at least the
    mode's value, which holds only the mass near the mode and so stays below the evidence; pooled with the run,
    a replay from the prior, which may find the better basin, closes a deficit of any size, where the deficit of
    a poorer basin left alone grows over the chunks that follow. With the particles at the best mode,
    ``settings.gap_sigmas`` combined standard deviations (the run's and the mode value's): within them the run
    lost what it lost within that basin (moves that mix too slowly, a finite population), which a replay,
    annealing from the prior the same way, loses again; beyond them (the check fails) it may have lost mass
    before its particles found the basin, which a replay mends. Past ``max_rows`` rows ``gap_sigmas`` combined
    standard deviations beyond the last check's gap, wherever the particles sit: the first chunks' annealing
    from the prior can read low by nats that a replay leaves, the error bar already holds that gap, and a
    replay costs a whole stream's annealing.
    """
    check = gate.check
    beyond_errors = settings.gap_sigmas * math.hypot(check.std, check.evidence.std)
    if n_rows <= settings.max_rows:
        return 0.0 if gate.particles_off_mode else beyond_errors
    return math.sqrt(mode_gap_variance) + beyond_errors


def groups_behind(gate, groups, allowed, settings):
    """The replicate groups of a run whose :class:`GateCheck` is ``gate`` that fell behind the mode's value, a
    boolean mask: every group where the run's estimate reads below that value by more than ``allowed`` nats
    (:func:`allowed_gap`), else the groups that fell behind the others (none, where the run stands).

    A replicate group fell behind the others when it sits below the pool by more than
    ``settings.gap_sigmas`` of the groups' own errors (:func:`~._state.standing_groups`): the pooled
    error holds the groups' spread, which such a group widens by as much as it fell behind, while the pooled
    estimate follows the better groups, so replaying that group alone mends the run. ``groups`` is
    ``(log_evidence, log_evidence_variance)``, each of shape ``(n_groups,)``: the groups' estimates after the
    chunk and the variances of their logs. A deficit all groups share (their first chunk's annealing from the
    prior) leaves the groups level.

    Examples
    --------
    >>> from evidence_select.sgais._mode_check import ModeCheck, ModeEvidence
    >>> from evidence_select.sgais._settings import ModeCheckSettings
    >>> check = ModeCheck(evidence=ModeEvidence(0.0, 0.05), log_evidence=-1.2, std=900.0, gap=1.2, failed=False)
    >>> gate = GateCheck(check, particles_off_mode=True)
    >>> groups_behind(gate, ([-0.5, -1800.0], [1.0, 1.0]), 2.0, ModeCheckSettings())  # the second group fell
    array([False,  True])
    >>> groups_behind(gate, ([-0.5, -1.5], [1.0, 1.0]), 2.0, ModeCheckSettings())
    array([False, False])
    >>> groups_behind(gate, ([-0.5, -1.5], [1.0, 1.0]), 0.0, ModeCheckSettings())  # 1.2 nats below the mode
    array([ True,  True])
    """
    if gate.check.gap > allowed:
        return np.ones(len(groups[0]), dtype=bool)
    return ~standing_groups(*groups, settings.gap_sigmas)
