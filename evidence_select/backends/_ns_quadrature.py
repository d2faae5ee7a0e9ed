"""The nested-sampling quadrature (thesis Sec. 3.2, Eq. 3.26): ``log Z`` of a finished run, the spread of its
simulated volumes, and independent runs merged into one."""

import numpy as np

from ..utils._logspace import log1mexp, logsumexp


def ns_quadrature(log_lik_dead, n_live_dead, log_lik_live):
    """Log-space NS quadrature of a finished run.

    Parameters
    ----------
    log_lik_dead : ndarray of shape (n_dead,)
        Log-likelihoods of the dead points in removal order (non-decreasing).
    n_live_dead : ndarray of shape (n_dead,)
        Number of live points at the moment each dead point was removed.
    log_lik_live : ndarray of shape (n_live,)
        Final live points (may be empty, e.g. after :func:`merge_ns_runs`).

    Returns
    -------
    log_evidence : float
    log_weights : ndarray of shape (n_dead + n_live,)
        Log importance weights ``log L_i + log w_i`` of dead then live points;
        their logsumexp is ``log_evidence``.
    information : float
        ``H = sum_i p_i log(L_i / Z)``, the KL divergence from prior to posterior, in nats.

    Examples
    --------
    >>> import numpy as np
    >>> log_z, log_w, h = ns_quadrature(np.zeros(3), np.full(3, 2), np.zeros(2))
    >>> round(abs(log_z), 6)
    0.0
    """
    log_lik_dead = np.asarray(log_lik_dead, dtype=float)
    n_live_dead = np.asarray(n_live_dead, dtype=float)
    log_lik_live = np.asarray(log_lik_live, dtype=float)
    log_volume = -np.cumsum(1.0 / n_live_dead)
    log_volume_prev = np.concatenate([[0.0], log_volume[:-1]])
    log_shell = log_volume_prev + log1mexp(log_volume - log_volume_prev)
    log_final = log_volume[-1] if len(log_volume) else 0.0
    log_live_shell = np.full(len(log_lik_live), log_final - np.log(max(len(log_lik_live), 1)))
    log_weights = np.concatenate([log_lik_dead + log_shell, log_lik_live + log_live_shell])
    log_z = logsumexp(log_weights)
    log_lik_all = np.concatenate([log_lik_dead, log_lik_live])
    post = np.exp(log_weights - log_z)
    finite = post > 0
    information = float(np.sum(post[finite] * (log_lik_all[finite] - log_z)))
    return float(log_z), log_weights, max(information, 0.0)


def simulate_ns_log_evidence(rng, log_lik_dead, n_live_dead, log_lik_live, n_simulations=100):
    """Spread of ``log Z`` over simulated shrinkage factors ``t_i ~ Beta(n_i, 1)``.

    Each simulation draws ``log t_i = log(U_i) / n_i`` for every dead point,
    accumulates the log-volumes and redoes the quadrature; the spread of the
    results is the statistical uncertainty of the volumes for *this* run's
    likelihood sequence (including its varying live-point counts).

    Returns
    -------
    log_evidences : ndarray of shape (n_simulations,)

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> simulate_ns_log_evidence(rng, np.zeros(3), np.full(3, 2), np.zeros(2), 5).shape
    (5,)
    """
    log_lik_dead = np.asarray(log_lik_dead, dtype=float)
    n_live_dead = np.asarray(n_live_dead, dtype=float)
    log_lik_live = np.asarray(log_lik_live, dtype=float)
    out = np.empty(n_simulations)
    # Chunk the simulations so the (chunk, n_dead) arrays stay small.
    chunk = max(1, int(2**22 // max(len(log_lik_dead), 1)))
    for start in range(0, n_simulations, chunk):
        n_sim = min(chunk, n_simulations - start)
        log_t = np.log(rng.uniform(size=(n_sim, len(log_lik_dead)))) / n_live_dead
        log_volume = np.cumsum(log_t, axis=1)
        log_volume_prev = np.hstack([np.zeros((n_sim, 1)), log_volume[:, :-1]])
        log_dead = logsumexp(log_lik_dead + log_volume_prev + log1mexp(log_t), axis=1)
        if len(log_lik_live):
            log_dead = np.logaddexp(log_dead, log_volume[:, -1] + logsumexp(log_lik_live) - np.log(len(log_lik_live)))
        out[start: start + n_sim] = log_dead
    return out


def merge_ns_runs(runs):
    """Merge independent runs into one run with their live points summed (Skilling 2006; dynesty's ``merge_runs``).

    Each run's final live points are removed in order of likelihood with
    counts ``m, m-1, ..., 1``; at every point of the merged sequence the live
    count is the sum over runs of the count each run had at that likelihood
    level (0 once a run is exhausted). The merged run ends with no live points.

    Returns
    -------
    log_lik : ndarray of shape (n_points,)
    n_live : ndarray of shape (n_points,)
    samples : ndarray of shape (n_points, n_params)
    log_lik_live : ndarray of shape (0,)

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.backends._ns import _Run
    >>> run = _Run(np.zeros((1, 1)), np.array([0.0]), np.array([2]), np.ones((2, 1)), np.array([1.0, 2.0]),
    ...            0, 0, np.zeros(4), np.zeros(4), np.array([]), None)
    >>> log_lik, n_live, _, _ = merge_ns_runs([run, run])
    >>> n_live.tolist()
    [4.0, 4.0, 4.0, 4.0, 2.0, 2.0]
    """
    sequences = []
    for run in runs:
        order = np.argsort(run.live_log_lik, kind="stable")
        log_lik = np.concatenate([run.dead_log_lik, run.live_log_lik[order]])
        counts = np.concatenate([run.dead_n_live, np.arange(len(order), 0, -1)]).astype(float)
        sequences.append((log_lik, counts, np.vstack([run.dead_points, run.live[order]])))
    all_log_lik = np.concatenate([seq[0] for seq in sequences])
    merged_counts = np.zeros(len(all_log_lik))
    for log_lik, counts, _ in sequences:  # each run's live count at every merged level
        position = np.searchsorted(log_lik, all_log_lik, side="left")
        merged_counts += np.where(position < len(log_lik), counts[np.minimum(position, len(log_lik) - 1)], 0.0)
    order = np.argsort(all_log_lik, kind="stable")
    samples = np.vstack([seq[2] for seq in sequences])[order]
    return all_log_lik[order], merged_counts[order], samples, np.empty(0)
