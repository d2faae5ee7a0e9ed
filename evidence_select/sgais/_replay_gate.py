"""The replay gate: a periodic restart runs only where the posterior-mode check says the run fell behind.

A periodic restart (``SGAISConfig.restart_growth``) replays every row seen from the prior and pools that run
with the in-order one: particles that settled in a poorer mode find every later chunk easy to anneal, so no
surprise reveals them while their evidence falls behind at a fixed rate per row. A replay costs a pass of
annealing over every row seen, so the replays cost as much again as the stream. For a model with a mode search
(at most ``ModeCheckSettings.max_symmetries`` label symmetries) the gate asks the posterior's best mode first:
while at most ``max_rows`` rows were seen, the posterior-mode check's own value on every row
(:func:`~._mode_check.rows_mode_evidence`, which the chunk's check and the replays share); past them a mode
search on ``search_rows`` of the stored rows (the particle with the highest log joint on every row among its
starts), the best fit and that particle refined on every row, and ``gate_draws`` importance draws at the mode
(:func:`~._mode_check.importance_at_mode`). The replay runs when the run fell behind the mode's value
(:func:`groups_behind`): its estimate reads below that value (past ``max_rows`` rows, by more than ``gap_sigmas``
combined standard deviations beyond the gap the last check left, :func:`allowed_gap`), which is what a run in a
poorer mode does, by nats that grow with the rows, and then every group replays; or some of its replicate groups
read below the others by more than ``gap_sigmas`` of the groups' own standard deviations, and then those groups
alone replay. A single group left in a poorer mode hides in the pooled estimate, which follows the better groups
(it moves by at most ``log G``), while the groups' spread widens its error bar past any gap the check could see;
the groups that stand need no replay. Either way the chunk's result is then checked against
the same value like any posterior-mode check (:func:`~._mode_check.apply_mode_check`), and keeps the gap in its
error bar if it reads low. A surprise's restart is not gated (:func:`~._policy.closing_action`).

A model without a mode search, or with more label symmetries than ``max_symmetries``, keeps its replays.
The restart decision then depends on the run's own estimate, so the pooled evidence is no longer exactly
unbiased as it is for restarts at fixed positions: a replay comes only after a low reading, and pooling
moves that reading up, towards the mode's value.
"""

import math

import numpy as np

from ..utils._likelihood import log_lik_sum
from ._mode_check import (best_mode, importance_at_mode, local_modes, model_checkable, negative_log_joint,
                          rows_mode_evidence)
from ._state import standing_groups

__all__ = ["gate_applies", "gate_mode_evidence", "groups_behind", "allowed_gap"]


def gate_applies(model, settings):
    """Whether a periodic restart of ``model`` is gated: a model with a mode search and at most
    ``settings.max_symmetries`` label symmetries, unless ``settings.gate_draws`` is 0 (no gate)."""
    return (settings.gate_draws > 0 and model_checkable(model, settings)
            and model.n_mode_symmetries <= settings.max_symmetries)


def gate_mode_evidence(model, rows, rng, settings, particles):
    """The posterior's best mode on ``rows`` ``(X, y)`` and its importance-sampling value (a
    :class:`~._mode_check.ModeEvidence`), or None where no finite value was found.

    Up to ``settings.max_rows`` rows this is the posterior-mode check's value
    (:func:`~._mode_check.rows_mode_evidence`). Past them the k-means++/EM starts and their quasi-Newton
    refinement see ``settings.search_rows`` rows drawn without replacement; the best of ``particles`` on all rows
    joins the starts, so the search never returns a mode poorer than the run's own. The subsample's local modes
    are valued on every row (:func:`_best_on_all_rows`), and the best of them and that particle are refined there.
    """
    X, y = rows
    n_rows = len(X)
    if n_rows <= settings.max_rows:
        return rows_mode_evidence(model, X, y, rng, settings)
    chosen = np.sort(rng.choice(n_rows, size=min(settings.search_rows, n_rows), replace=False))
    X_sub, y_sub = X[chosen], None if y is None else y[chosen]
    with np.errstate(all="ignore"):
        log_joint = model.log_prior(particles) + log_lik_sum(model, particles, X, y, allow_nan=True)
    best_particle = particles[int(np.argmax(np.where(np.isnan(log_joint), -np.inf, log_joint)))]
    starts = np.vstack([model.mode_starts(rng, X_sub, settings.n_starts), best_particle[None]])
    objective = negative_log_joint(model, X, y)
    sub_mode = _best_on_all_rows(objective, local_modes(negative_log_joint(model, X_sub, y_sub), starts,
                                                        settings.same_fit))
    mode = best_mode(objective, [best_particle] if sub_mode is None else [sub_mode, best_particle],
                     settings.same_fit)
    try:
        evidence = importance_at_mode(model, rows, rng, (objective, mode), settings, settings.gate_draws)
    except (np.linalg.LinAlgError, ValueError):  # a degenerate mode (a scale that is not positive definite)
        return None
    if evidence is None or not (np.isfinite(evidence.log_evidence) and np.isfinite(evidence.std)):
        return None
    return evidence


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


def allowed_gap(check, mode_gap_variance, n_rows, settings):
    """Nats by which a run's estimate may read below the mode's value (``check.gap`` of its
    :class:`~._mode_check.ModeCheck`) without a replay, after ``n_rows`` rows (:func:`groups_behind`);
    ``mode_gap_variance`` is the state's ``ErrorWidening.mode_gap_variance``, the square of the gap its last
    check left.

    Up to ``settings.max_rows`` rows none: the run's estimate must read at least the mode's value, which holds
    only the mass near the mode and so stays below the evidence. A replay there costs at most that many rows,
    and pooled with the run it closes a deficit of any size, where a deficit within the run's errors left alone
    grows over the chunks that follow until a check flags it. Past them ``settings.gap_sigmas`` combined
    standard deviations (the run's and the mode value's) beyond the last check's gap: the first chunks'
    annealing from the prior can read low by nats that a replay, annealing from the prior the same way, leaves,
    the error bar already holds that gap, and a replay costs a whole stream's annealing.
    """
    if n_rows <= settings.max_rows:
        return 0.0
    return math.sqrt(mode_gap_variance) + settings.gap_sigmas * math.hypot(check.std, check.evidence.std)


def groups_behind(check, groups, allowed, settings):
    """The replicate groups of a run whose :class:`~._mode_check.ModeCheck` is ``check`` that fell behind the
    mode's value, a boolean mask: every group where the run's estimate reads below that value by more than
    ``allowed`` nats (:func:`allowed_gap`), else the groups that fell behind the others (none, where the run
    stands).

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
    >>> groups_behind(check, ([-0.5, -1800.0], [1.0, 1.0]), 2.0, ModeCheckSettings())  # the second group fell
    array([False,  True])
    >>> groups_behind(check, ([-0.5, -1.5], [1.0, 1.0]), 2.0, ModeCheckSettings())
    array([False, False])
    >>> groups_behind(check, ([-0.5, -1.5], [1.0, 1.0]), 0.0, ModeCheckSettings())  # 1.2 nats below the mode
    array([ True,  True])
    """
    if check.gap > allowed:
        return np.ones(len(groups[0]), dtype=bool)
    return ~standing_groups(*groups, settings.gap_sigmas)
