"""The replay gate: past the rows the posterior-mode check covers, a periodic restart runs only where that check fails.

A periodic restart (``SGAISConfig.restart_growth``) replays every row seen from the prior and pools that run
with the in-order one: particles that settled in a poorer mode find every later chunk easy to anneal, so no
surprise reveals them while their evidence falls behind at a fixed rate per row. A replay costs a pass of
annealing over every row seen, so the replays cost as much again as the stream. Past
``ModeCheckSettings.max_rows`` rows the gate asks the posterior's best mode first: a mode search on
``search_rows`` of the stored rows (the particle with the highest log joint on every row among its starts),
the best fit and that particle refined on every row, and ``gate_draws`` importance draws at the mode
(:func:`~._mode_check.importance_at_mode`). The replay runs when the run fell behind the mode's value
(:func:`fell_behind`): its estimate reads lower than at the last check by more than ``gap_sigmas`` combined
standard deviations, which is what a run in a poorer mode does, by nats that grow with the rows; or one of its
replicate groups reads below the others by more than ``gap_sigmas`` of the groups' own standard deviations. A
single group left in a poorer mode hides in the pooled estimate, which follows the better groups (it moves by
at most ``log G``), while the groups' spread widens its error bar past any gap the check could see. A gap
that stands since an earlier check (the first chunk's annealing from the prior read low, and the error bar
already holds that gap) is not cured by a replay, which anneals from the prior the same way. Either way the
chunk's result is then checked against the same value like any posterior-mode check
(:func:`~._mode_check.apply_mode_check`), and keeps the gap in its error bar if it reads low.

A model without a mode search, or with more label symmetries than ``max_symmetries``, keeps its replays.
The restart decision then depends on the run's own estimate, so the pooled evidence is no longer exactly
unbiased as it is for restarts at fixed positions: a replay comes only after a low reading, and pooling
moves that reading up, towards the mode's value.
"""

import math

import numpy as np

from ..utils._likelihood import log_lik_sum
from ._mode_check import best_mode, importance_at_mode, negative_log_joint
from ._state import group_left_behind

__all__ = ["gate_applies", "gate_mode_evidence", "fell_behind"]


def gate_applies(model, n_rows, settings):
    """Whether a periodic restart after ``n_rows`` rows of ``model`` is gated: past ``settings.max_rows`` rows, for
    a model with a mode search and at most ``settings.max_symmetries`` label symmetries, unless
    ``settings.gate_draws`` is 0 (no gate)."""
    return (settings.gate_draws > 0 and n_rows > settings.max_rows and model.capabilities().mode_search
            and model.n_mode_symmetries <= settings.max_symmetries)


def gate_mode_evidence(model, rows, rng, settings, particles):
    """The posterior's best mode on ``rows`` ``(X, y)`` and its importance-sampling value (a
    :class:`~._mode_check.ModeEvidence`), or None where no finite value was found.

    The k-means++/EM starts and their quasi-Newton refinement see ``settings.search_rows`` rows drawn
    without replacement (a mode that is worse on all rows is worse on most subsamples of them, by a share of
    the gap); the best of ``particles`` on all rows joins the starts, so the search never returns a mode
    poorer than the run's own. The subsample's best fit and that particle are then refined on every row.
    """
    X, y = rows
    n_rows = len(X)
    chosen = np.sort(rng.choice(n_rows, size=min(settings.search_rows, n_rows), replace=False))
    X_sub, y_sub = X[chosen], None if y is None else y[chosen]
    with np.errstate(all="ignore"):
        log_joint = model.log_prior(particles) + log_lik_sum(model, particles, X, y, allow_nan=True)
    best_particle = particles[int(np.argmax(np.where(np.isnan(log_joint), -np.inf, log_joint)))]
    starts = np.vstack([model.mode_starts(rng, X_sub, settings.n_starts), best_particle[None]])
    sub_mode = best_mode(negative_log_joint(model, X_sub, y_sub), starts, settings.same_fit)
    objective = negative_log_joint(model, X, y)
    mode = best_mode(objective, [best_particle] if sub_mode is None else [sub_mode, best_particle],
                     settings.same_fit)
    try:
        evidence = importance_at_mode(model, rows, rng, (objective, mode), settings, settings.gate_draws)
    except (np.linalg.LinAlgError, ValueError):  # a degenerate mode (a scale that is not positive definite)
        return None
    if evidence is None or not (np.isfinite(evidence.log_evidence) and np.isfinite(evidence.std)):
        return None
    return evidence


def fell_behind(check, groups, standing_gap, settings):
    """Whether a run whose :class:`~._mode_check.ModeCheck` is ``check`` fell behind the mode's value since its
    last check, which left ``standing_gap`` (nats; 0 where that check passed or none ran).

    The pooled estimate fell behind when its gap grew by more than ``settings.gap_sigmas`` combined standard
    deviations (its own and the mode value's). A replicate group fell behind the others when it sits below the
    pool by more than ``gap_sigmas`` of the groups' own errors (:func:`~._state.group_left_behind`): the pooled
    error holds the groups' spread, which such a group widens by as much as it fell behind, while the pooled
    estimate follows the better groups. ``groups`` is ``(log_evidence, log_evidence_variance)``, each of shape
    ``(n_groups,)``: the groups' estimates after the chunk and the variances of their logs. A deficit all groups
    share (their first chunk's annealing from the prior) leaves the groups level.

    Examples
    --------
    >>> from evidence_select.sgais._mode_check import ModeCheck, ModeEvidence
    >>> from evidence_select.sgais._settings import ModeCheckSettings
    >>> check = ModeCheck(evidence=ModeEvidence(0.0, 0.05), log_evidence=-1.2, std=900.0, gap=1.2, failed=False)
    >>> fell_behind(check, ([-0.5, -1800.0], [1.0, 1.0]), 0.0, ModeCheckSettings())  # the second group fell
    True
    >>> fell_behind(check, ([-0.5, -1.5], [1.0, 1.0]), 0.0, ModeCheckSettings())
    False
    """
    if check.gap - standing_gap > settings.gap_sigmas * math.hypot(check.std, check.evidence.std):
        return True
    return group_left_behind(*groups, settings.gap_sigmas)
