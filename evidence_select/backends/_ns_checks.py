"""The checks of a nested-sampling run: insertion ranks, the replacements' memory of their start, the runs'
agreement, and the verdict on what longer moves would remove (measured by :mod:`._ns_probe`)."""

import numpy as np
from scipy import stats
from scipy.linalg import solve_triangular

from .._result import check


def _rank_correlation(a, b):
    """Spearman correlation of the start and new log-likelihoods of one batch (NaN below 3 points).

    Replacements independent of their starting points give ~0; a positive value
    means the constrained moves are too short and ``log Z`` is biased high.
    """
    if len(a) < 3:
        return float("nan")
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = np.sqrt(np.sum(ra**2) * np.sum(rb**2))
    return float(np.sum(ra * rb) / denom) if denom > 0 else float("nan")


def replacement_memory(start, new, centre, factor):
    """How much of where the replacements started survives in where they ended (``nan`` without spread).

    The pooled correlation ``sum(z_start * z_new) / sqrt(sum(z_start^2) sum(z_new^2))``
    of the start and new positions, ``(n_replace, n_params)``, about ``centre``
    in the frame whitened by ``factor`` (the other live points' covariance
    factor). A replacement independent of its start (the constrained prior's
    exact draw) gives ~0 up to noise of order ``1 / sqrt(n_replace n_params)``;
    moves too short for the posterior's shape (along a curved ridge, say)
    leave it well above 0, the live points cluster around their ancestors, and
    ``log Z`` reads high while the insertion ranks stay uniform. A replacement
    that stays in its start's mode of a multimodal posterior, as local moves
    do and should, counts as memory too (the mode's offset from ``centre``).

    Examples
    --------
    >>> import numpy as np
    >>> start = np.random.default_rng(0).normal(size=(500, 2))
    >>> round(replacement_memory(start, start, np.zeros(2), np.eye(2)), 3)
    1.0
    """
    terms = _memory_terms(start, new, centre, factor)
    return float(np.mean(terms)) if terms is not None else float("nan")


def _memory_terms(start, new, centre, factor):
    """Per-replacement terms whose mean is :func:`replacement_memory` (None without spread)."""
    factor = np.diag(factor) if np.ndim(factor) == 1 else factor
    z_start = solve_triangular(factor, (start - centre).T, lower=True)
    z_new = solve_triangular(factor, (new - centre).T, lower=True)
    denom = np.sqrt(np.sum(z_start**2) * np.sum(z_new**2))
    return len(start) * np.sum(z_start * z_new, axis=0) / denom if denom > 0 else None


def insertion_rank_pvalue(ranks, n_others):
    """KS p-value of the insertion-rank test (Fowlie, Handley and Su, 2020).

    A replacement drawn from the constrained prior, independently of the live
    points, lands at a rank uniform on ``0..n_others`` among the ``n_others``
    surviving live points' likelihoods. Moves that remember where they started
    (too short), or that cannot reach part of the constrained prior (lost modes),
    skew the ranks; a tiny p-value means the run's ``log Z`` is not to be trusted.

    Parameters
    ----------
    ranks : ndarray of int
        Number of surviving live points with a lower likelihood than each new point.
    n_others : int
        Number of surviving live points each rank was taken among.

    Returns
    -------
    pvalue : float
        NaN for fewer than 10 ranks.

    Examples
    --------
    >>> import numpy as np
    >>> ranks = np.random.default_rng(0).integers(0, 51, size=2000)
    >>> bool(insertion_rank_pvalue(ranks, 50) > 0.01)
    True
    >>> bool(insertion_rank_pvalue(np.full(2000, 50), 50) < 1e-6)
    True
    """
    ranks = np.asarray(ranks, dtype=float)
    if len(ranks) < 10:
        return float("nan")
    # Discrete uniform ranks mapped to a continuous uniform by spreading each over its cell.
    offsets = (np.arange(len(ranks)) * 0.6180339887498949) % 1.0  # fixed, low-discrepancy
    return float(stats.kstest((ranks + offsets) / (n_others + 1), "uniform").pvalue)


#: Smallest p-values of the insertion-rank test and of the runs' agreement that pass.
MIN_INSERTION_PVALUE = 0.01
MIN_RUNS_PVALUE = 0.01


#: The ``"move_memory"`` check fails when moves ``PROBE_LENGTH`` times longer remove more than this much of the
#: replacements' memory of their start, and more than ``PROBE_SIGMAS`` standard errors of the probe's own noise.
MAX_MEMORY_REMOVED = 0.1
PROBE_SIGMAS = 4.0


def _diagnostics(config, runs, run_log_z, run_std, n_params, memory_removed):
    """Convergence checks of a set of NS runs (see
    :func:`~._ns.nested_sampling_log_evidence`, Notes).

    ``memory_removed`` holds the runs' probes
    (:func:`~._ns_probe.memory_removed_by_longer_moves`), concatenated.
    """
    ranks = np.concatenate([r.insertion_ranks for r in runs])
    p_insertion = insertion_rank_pvalue(ranks, config.n_live - config.n_replace)
    n_iterations = max(r.n_iterations for r in runs)
    out = {
        "insertion_rank": check(p_insertion, MIN_INSERTION_PVALUE, not p_insertion < MIN_INSERTION_PVALUE),
        "iterations": check(n_iterations, config.max_iterations, all(r.finished for r in runs)),
        "live_points": check(config.n_live, n_params + 1, config.n_live > n_params),
    }
    if len(runs) > 1:
        # Do the runs agree within their simulated errors? chi^2 with n_runs - 1 degrees of freedom.
        weights = 1.0 / np.asarray(run_std) ** 2
        mean = np.sum(weights * run_log_z) / np.sum(weights)
        chi2 = float(np.sum(weights * (run_log_z - mean) ** 2))
        p_runs = float(stats.chi2.sf(chi2, len(runs) - 1))
        out["runs_agreement"] = check(p_runs, MIN_RUNS_PVALUE, p_runs >= MIN_RUNS_PVALUE)
    if len(memory_removed) > 1:
        removed = float(np.mean(memory_removed))
        noise = float(np.std(memory_removed, ddof=1) / np.sqrt(len(memory_removed)))
        threshold = max(MAX_MEMORY_REMOVED, PROBE_SIGMAS * noise)
        out["move_memory"] = check(removed, threshold, removed <= threshold)
    return out
