"""Change points from an online evidence history (paper Sec. 5 and 7.2, Fig. 5).

SGAIS factorises the evidence into predictive terms, so every chunk's record
carries its per-datum log predictive ``(log Z_t - log Z_{t-1}) / |chunk_t|``
and the number of annealing steps it needed. When the data-generating
distribution shifts, the new chunk is poorly predicted by the posterior of
the past: the per-datum log predictive drops below its recent level, and
annealing the chunk in needs many more steps (the particles' likelihoods of
the chunk disagree). Both are read here from the history; nothing is refitted.
"""

import numpy as np

__all__ = ["detect_change_points"]

_MAD_TO_STD = 1.4826  # MAD of a normal sample times this estimates its standard deviation


def _series(history):
    """``(starts, stops, log_predictive, n_steps)`` arrays of one candidate's chunk records."""
    stops = np.array([r.n_samples_seen for r in history], dtype=np.int64)
    starts = np.concatenate([[0], stops[:-1]]).astype(np.int64)
    log_predictive = np.array([r.log_predictive_per_datum for r in history], dtype=float)
    n_steps = np.array([r.n_annealing_steps for r in history], dtype=float)
    return starts, stops, log_predictive, n_steps


def _candidate_histories(history_or_estimator):
    """One list of chunk records per candidate, from an estimator, a selector or a history."""
    history = getattr(history_or_estimator, "evidence_history_", history_or_estimator)
    if not isinstance(history, (list, tuple)):
        raise TypeError("detect_change_points needs a fitted online estimator or selector, or its "
                        f"evidence_history_ (a list of records); got {type(history_or_estimator).__name__}")
    if len(history) and hasattr(history[0], "candidate_records"):  # a selector's SelectionRecords
        n_candidates = len(history[0].candidate_records)
        return [[record.candidate_records[k] for record in history] for k in range(n_candidates)]
    for record in history[:1]:
        if not all(hasattr(record, name) for name in ("n_samples_seen", "log_predictive_per_datum",
                                                      "n_annealing_steps")):
            raise TypeError(f"history records need n_samples_seen, log_predictive_per_datum and "
                            f"n_annealing_steps; got {type(record).__name__}")
    return [list(history)]


def _single_history_change_points(history, window, level_window, threshold, min_drop, step_factor):
    """Indices of the chunks flagged as change points in one candidate's history.

    Only chunks since the last change point count, and never the stream's
    first chunk (its predictive is the prior's). The level is the median per-datum
    log predictive of the last ``level_window`` of them; the spread is
    ``1.4826 * MAD / sqrt(2)`` of the chunk-to-chunk differences over the last
    ``window``, which is blind to the slow rise of a posterior that is still
    learning. A chunk is flagged when it falls below the level by more than
    ``max(threshold * spread, min_drop)`` and, if ``step_factor`` is set, needs
    at least ``step_factor`` times the median annealing steps of the level's chunks.
    """
    _, _, log_predictive, n_steps = _series(history)
    if np.any(np.isnan(log_predictive)):
        raise ValueError("the evidence history contains NaN log predictive values")
    use_steps = step_factor is not None and np.all(n_steps[1:] > 0)
    flagged = []
    segment_start = 1  # the first chunk is predicted by the prior: never part of a level
    for t in range(segment_start + 1, len(log_predictive)):
        level_chunks = slice(max(segment_start, t - level_window), t)
        level = np.median(log_predictive[level_chunks])
        differences = np.diff(log_predictive[max(segment_start, t - window):t])
        spread = (_MAD_TO_STD / np.sqrt(2.0) * np.median(np.abs(differences - np.median(differences)))
                  if len(differences) >= 3 else 0.0)
        dropped = level - log_predictive[t] > max(threshold * spread, min_drop)
        spiked = not use_steps or n_steps[t] >= step_factor * np.median(n_steps[level_chunks])
        if dropped and spiked:
            flagged.append(t)
            segment_start = t  # the new regime's level starts here
    return flagged


def detect_change_points(history_or_estimator, *, window=10, level_window=3, threshold=6.0, min_drop=0.3,
                         step_factor=2.0, min_agreement=0.5):
    """Sample positions where an online evidence history shows a distribution shift.

    A chunk is a change point when its per-datum log predictive,
    ``(log Z_t - log Z_{t-1}) / |chunk|``, drops below its recent level by
    more than ``max(threshold * spread, min_drop)`` nats per datum *and* its
    number of annealing steps spikes to at least ``step_factor`` times their
    recent median (paper Sec. 7.2, Fig. 5). The level is the median of the
    last ``level_window`` chunks, the spread a robust (MAD) estimate of the
    chunk-to-chunk noise over the last ``window`` chunks, both counted only
    since the previous change point, so a detected shift starts a new level
    rather than firing again while the posterior adapts.

    Parameters
    ----------
    history_or_estimator : estimator, EvidenceModelSelector or list of records
        A fitted online estimator (its ``evidence_history_`` of
        :class:`~evidence_select.ChunkRecord`), a fitted
        :class:`~evidence_select.EvidenceModelSelector` (every candidate's
        history is examined), or either's ``evidence_history_``.
    window : int, default=10
        Number of recent chunks whose chunk-to-chunk differences estimate the noise.
    level_window : int, default=3
        Number of recent chunks whose median is the level (and whose median
        annealing steps are the baseline of a spike).
    threshold : float, default=6.0
        Drop, in units of the recent spread, that counts as a shift.
    min_drop : float, default=0.3
        Smallest drop in nats per datum that counts as a shift (the spread of
        a few chunks is a poor estimate; 0.3 nats per datum over a chunk of
        hundreds of rows is a likelihood ratio of ``exp(-100)`` or smaller).
    step_factor : float or None, default=2.0
        Required spike of annealing steps relative to their recent median;
        None ignores the steps (also ignored when the history has none, as
        with the reference backends).
    min_agreement : float, default=0.5
        With several candidates, the fraction of them that must flag a shift
        within one chunk of each other for it to be reported.

    Returns
    -------
    change_points : ndarray of shape (n_change_points,), dtype=int64
        Sample positions (the first sample of each flagged chunk), increasing.

    See Also
    --------
    EvidenceModelSelector : Its ``evidence_history_`` holds every candidate's records.

    Notes
    -----
    The per-datum log predictive of a stationary stream fluctuates by about
    ``sd(log p(x)) / sqrt(|chunk|)`` around a slowly rising level; after a
    shift the new data are poorly predicted by the old posterior, and the
    conditional ESS of annealing them in collapses, so the annealing schedule
    needs many more steps. Requiring both signals keeps false alarms rare on
    stationary data. A flagged chunk contains the shift, so the reported
    position is within one chunk of it.

    References
    ----------
    .. [1] S. A. Cameron, H. C. Eggers, S. Kroon, "Stochastic Gradient Annealed
       Importance Sampling for Efficient Online Marginal Likelihood Estimation",
       Entropy 21 (2019) 1109, Sec. 5 and 7.2.

    Examples
    --------
    >>> from evidence_select import ChunkRecord, detect_change_points
    >>> lp = [-4.0, -3.8, -3.8, -3.9, -3.8, -5.6, -5.0, -4.8]
    >>> steps = [40, 12, 8, 8, 7, 50, 25, 15]
    >>> history = [ChunkRecord(250 * (i + 1), 0.0, 0.1, s, 9.0, v, 0, 0.01) for i, (v, s) in enumerate(zip(lp, steps))]
    >>> detect_change_points(history).tolist()
    [1250]
    """
    for name, value in (("window", window), ("level_window", level_window)):
        if not (isinstance(value, (int, np.integer)) and value >= 1):
            raise ValueError(f"{name} must be an int >= 1; got {value!r}")
    for name, value in (("threshold", threshold), ("min_drop", min_drop)):
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    if step_factor is not None and not (np.isfinite(step_factor) and step_factor > 0):
        raise ValueError(f"step_factor must be a positive number or None; got {step_factor!r}")
    if not 0 < min_agreement <= 1:
        raise ValueError(f"min_agreement must be in (0, 1]; got {min_agreement!r}")
    histories = _candidate_histories(history_or_estimator)
    per_candidate = []  # (start, stop) of each flagged chunk, per candidate
    for history in histories:
        starts, stops, _, _ = _series(history)
        flagged = _single_history_change_points(history, window, level_window, threshold, min_drop, step_factor)
        per_candidate.append([(int(starts[t]), int(stops[t])) for t in flagged])
    needed = max(1, int(np.ceil(min_agreement * len(histories) - 1e-9)))
    events = sorted(event for events in per_candidate for event in events)
    reported = []
    for start, stop in events:
        # Supporters: candidates whose own flagged chunk overlaps or touches this one.
        support = sum(any(s <= stop and start <= e for s, e in events_k) for events_k in per_candidate)
        if support >= needed and not (reported and start <= reported[-1][1]):
            reported.append((start, stop))
    return np.array([start for start, _ in reported], dtype=np.int64)
