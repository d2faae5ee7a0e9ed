"""The end-of-run probe of the ``"move_memory"`` check: how much of their start's memory moves longer than the
run's would remove from its final live points."""

import numpy as np

from ._ns_checks import _memory_terms
from ._ns_moves import _move_calls, _replace_points
from ._ns_proposals import _frame


#: The end-of-run probe (:func:`memory_removed_by_longer_moves`): at most this many final live points (at most
#: half of them), and the factor on the run's final moves per replacement that it compares them with.
PROBE_POINTS = 125
PROBE_LENGTH = 4.0


def memory_removed_by_longer_moves(rng, model, likelihood, config, run):
    """Per-point memory of their start that longer moves remove, probed at a run's final live points.

    Copies of ``min(PROBE_POINTS, n_live // 2)`` final live points move under
    the run's last likelihood level with the run's final moves, then on for
    ``PROBE_LENGTH - 1`` times as many; the result holds, per point, its
    :func:`~._ns_checks.replacement_memory` term after the short moves minus its term after
    the long ones (their mean is the memory the longer moves remove). Moves too
    short for a curved ridge or a thin direction leave memory that longer ones
    remove, and ``log Z`` reads high; a replacement that stays in its start's
    mode of a multimodal posterior, as it should, keeps its memory however far
    it moves. The run's own memory cannot tell the two apart; this can. The
    whitening comes from the final live points that are not moved, as in the
    run. ``rng`` should be the probe's own: the run is left as it was.

    Returns
    -------
    removed : ndarray of shape (n_probe,)
        Empty when the live points have no spread to measure.
    n_calls : int
        Likelihood evaluations the probe made.
    """
    live, log_lik = run.live, run.live_log_lik
    n_probe = min(PROBE_POINTS, len(live) // 2)
    order = rng.permutation(len(live))
    start, others = order[:n_probe], order[n_probe:]
    if n_probe < 2 or len(others) < 2:
        return np.empty(0), 0
    frame = _frame(rng, model, live[others], config)
    centre = np.mean(live[others], axis=0)
    bound = np.nextafter(np.min(log_lik), -np.inf)  # every start lies strictly above it
    points = (live[start], np.asarray(model.log_prior(live[start]), dtype=float), log_lik[start])
    short, *infos, _ = _replace_points(rng, model, likelihood, config, points, bound, frame, run.scales)
    n_calls = _move_calls(*infos)
    longer = run.scales._replace(length=run.scales.length * (PROBE_LENGTH - 1.0))
    long, *infos, _ = _replace_points(rng, model, likelihood, config, short, bound, frame, longer)
    n_calls += _move_calls(*infos)
    terms_short = _memory_terms(live[start], short[0], centre, frame.factor)
    terms_long = _memory_terms(live[start], long[0], centre, frame.factor)
    if terms_short is None or terms_long is None:
        return np.empty(0), n_calls
    return terms_short - terms_long, n_calls
