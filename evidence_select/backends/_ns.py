"""Nested sampling on any model of the protocol (thesis Ch. 3.2, Algorithm 5).

Live points are drawn from the prior; at each iteration the ``n_replace`` worst
are removed at once and replaced by constrained-prior moves (independent
candidates from the prior or the live points' bounding ellipsoids, in the parameters,
:mod:`evidence_select.kernels._ellipsoid`, or in the prior's unit cube, :mod:`evidence_select.kernels._cube`,
while they are efficient; Galilean steps,
:mod:`evidence_select.kernels._galilean`, and slice moves,
:mod:`evidence_select.kernels._slice`) started from distinct surviving live
points (shortened between iterations while their second half removes little of the replacements' memory of
where they started, and lengthened back, up to ``max_move_length``, while it removes much:
:func:`~._ns_checks.replacement_memory`, :func:`~._ns_moves.adapt_move_length`). Removing the ``k`` lowest
of ``n`` live points is the same as removing
them one at a time with ``n, n-1, ..., n-k+1`` live points (the maximum order
statistic of the survivors), so the expected log-volume decrements are
``1/n, 1/(n-1), ..., 1/(n-k+1)`` and the quadrature stays exact in
expectation; the new points are drawn above the highest removed likelihood.

The evidence is the log-space quadrature ``Z = sum_i L_i (X_{i-1} - X_i)``
(Eq. 3.26) with ``log X_i = -sum 1/n_j`` and ``log(X_{i-1} - X_i)`` from
``log1mexp``, plus the live points, each with ``X_final / n_live``, at the end.

This module runs the estimate (the runs, their merge, the run again with longer moves); the pieces are
:mod:`._ns_config` (the settings), :mod:`._ns_proposals` (the frame, the bounding ellipsoids and when an
independent move pays), :mod:`._ns_moves` (the replacement moves and their length), :mod:`._ns_checks` (the
convergence checks), :mod:`._ns_probe` (the end-of-run probe of the ``"move_memory"`` check) and
:mod:`._ns_quadrature` (``log Z`` of a run, its simulated spread, merged runs).
"""

import logging
import time
from dataclasses import asdict, replace
from typing import NamedTuple

import numpy as np

from ..kernels._ellipsoid import EllipsoidInfo
from ..kernels._galilean import GalileanInfo
from ..kernels._slice import SliceInfo
from ..utils._likelihood import check_data
from ..utils._logspace import log1mexp, logsumexp
from ..utils._progress import progress_bar
from ..utils._random import make_generator
from ..utils._settings import merge_settings
from ..utils._threads import single_threaded_blas
from .._result import EvidenceResult, warn_not_converged
from ._ns_checks import _diagnostics, _rank_correlation, insertion_rank_pvalue, replacement_memory
from ._ns_config import NSConfig
from ._ns_moves import _Likelihood, _move_calls, _MoveScales, _replace_points
from ._ns_probe import memory_removed_by_longer_moves
from ._ns_proposals import _frame
from ._ns_quadrature import merge_ns_runs, ns_quadrature, simulate_ns_log_evidence

__all__ = ["NSConfig", "nested_sampling_log_evidence", "ns_quadrature", "simulate_ns_log_evidence",
           "merge_ns_runs", "insertion_rank_pvalue"]

logger = logging.getLogger(__name__)


def nested_sampling_log_evidence(model, X, y=None, *, config=None, random_state=None, verbose=0, **settings):
    """Nested-sampling estimate of ``log p(y | X)`` for any protocol model.

    Parameters
    ----------
    model : Model
        Any object implementing the model protocol (prior sampler, log prior,
        per-datum log-likelihood).
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), default=None
    config : NSConfig, default=None
        The settings as one object; None means the defaults.
    random_state : int, numpy.random.Generator or None, default=None
    verbose : int, default=0
        ``>= 1`` shows a progress bar (tqdm, if installed) and logs progress.
    **settings
        Fields of :class:`~._ns_config.NSConfig` (e.g. ``n_live=500``), overriding ``config``.

    Returns
    -------
    result : EvidenceResult
        ``log_evidence_std`` is the larger of the simulated-volume spread and
        (with ``n_runs >= 2``) the runs' spread over ``sqrt(n_runs)``;
        ``diagnostics``/``converged`` hold the checks below; ``info`` holds
        ``"std_simulated"``, ``"std_between_runs"``, ``"std_information"``
        (``sqrt(H / n_live)``), ``"information"``, ``"n_iterations"``,
        ``"insertion_pvalue"``, ``"replacement_memory"``
        (:func:`~._ns_checks.replacement_memory` averaged over the iterations; read it
        with ``max_move_length``),
        ``"memory_removed"`` (the ``"move_memory"`` check's value),
        ``"probe_calls"`` (that check's likelihood calls, part of
        ``n_likelihood_calls``), ``"final_move_length"``, ``"final_outside_share"`` (the running share of the
        replacements' starts outside the ellipsoids,
        :func:`~._ns_proposals.ellipsoid_pays`) and the moves' statistics (``"slice"``,
        ``"galilean"``, ``"final_slice_width"``, ``"final_galilean_step"``); ``samples`` and
        ``log_weights`` are the dead and final live points with their posterior
        importance weights (logsumexp equals ``log_evidence``).
        After a run again with longer moves (``retry_longer_moves``), the
        result is that run's, with both runs' calls and seconds,
        ``info["shorter_moves"]`` (the first run's estimate, error, calls, probe
        and ``max_move_length``) and ``info["longer_moves_widening"]``.

    Warns
    -----
    EvidenceConvergenceWarning
        When a check fails (``result.converged`` is then False).

    Notes
    -----
    Skilling, "Nested sampling for general Bayesian computation" (2006); the
    thesis "Evidence Estimation Using Stochastic Likelihood Approximations",
    Sec. 3.2, Eq. (3.21)-(3.27) and Algorithm 5. Replacements are whitened
    Galilean and slice moves under the likelihood constraint (``moves``); the
    whitening comes from the surviving live points *other than* the moves'
    start points, so no move's kernel depends on where it started.

    The checks (``result.diagnostics``):

    - ``"insertion_rank"``: the KS p-value of the ranks at which replacements
      land among the surviving live points (Fowlie, Handley and Su, "Nested
      sampling cross-checks using order statistics", 2020), at least 0.01;
    - ``"iterations"``: every run reached ``dlogz`` before ``max_iterations``;
    - ``"live_points"``: ``n_live > n_params``; with fewer, the live points'
      covariance that shapes the slice moves is rank-deficient, and separated
      modes are easily lost for good;
    - ``"runs_agreement"`` (``n_runs >= 2``): the chi-square p-value of the runs'
      estimates against their simulated errors, at least 0.01;
    - ``"move_memory"``: the memory of their start that moves ``PROBE_LENGTH``
      times longer remove, probed at each run's final live points
      (:func:`~._ns_probe.memory_removed_by_longer_moves`), at most 0.1 (or 4 of the
      probe's standard errors, when its noise is larger). Moves too short for a
      curved ridge or a thin direction leave the live points clustered around
      their ancestors, and ``log Z`` reads high while the runs agree and the
      insertion ranks stay uniform; moves that stay in their start's mode of a
      multimodal posterior pass. Where it fails, the estimate is run again once
      with moves 4 times longer (``retry_longer_moves``): the result is that
      run's, and where its check still fails, its error is widened by how far
      the estimate moved (:func:`with_longer_moves`). Cure beyond that:
      ``max_move_length`` of 8 or more, or more ``n_galilean_steps``. The probe
      costs a few iterations' moves and has its own random stream, so the
      estimate and its error are those of the runs alone.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.testing._targets import GaussianTarget
    >>> target = GaussianTarget(np.zeros(2), cov=0.1)
    >>> res = nested_sampling_log_evidence(target, np.zeros((1, 1)), n_live=50, random_state=0)
    >>> abs(res.log_evidence - target.exact_log_evidence()) < 4 * res.log_evidence_std
    True
    """
    X, y = check_data(X, y)
    config = merge_settings(NSConfig, config, settings, "NS").resolved(model.n_params)
    rng = make_generator(random_state)
    result = _nested_sampling(model, X, y, config, rng, verbose)
    if config.retry_longer_moves and not _moves_forgot(result):
        longer = replace(config, max_move_length=RETRY_LENGTH_FACTOR * config.max_move_length)
        result = with_longer_moves(result, _nested_sampling(model, X, y, longer, rng, verbose))
    return replace(result, converged=warn_not_converged("ns", result.diagnostics))


#: The factor on ``max_move_length`` of the run again after a failed ``"move_memory"`` check
#: (``NSConfig.retry_longer_moves``).
RETRY_LENGTH_FACTOR = 4.0


def with_longer_moves(shorter, longer):
    """The result of a run again with longer moves (``longer``) after ``shorter`` failed its ``"move_memory"``
    check: ``longer``'s estimate and checks, both runs' calls and seconds, ``shorter``'s estimate in
    ``info["shorter_moves"]``.

    Where ``longer``'s own ``"move_memory"`` check passes, its error stands. Where it still fails, the moves still
    remember their start and the bias that remains is unmeasured; it shrinks as the moves lengthen, so it is
    taken to be at most the distance ``d`` the estimate moved (the bias it lost), and the error is widened to
    ``sqrt(std**2 + d**2)`` (``info["longer_moves_widening"]`` holds ``d``, 0 where the check passed).
    """
    moved = abs(shorter.log_evidence - longer.log_evidence)
    widening = 0.0 if _moves_forgot(longer) else moved
    info = dict(longer.info, longer_moves_widening=widening, shorter_moves=dict(
        log_evidence=shorter.log_evidence, log_evidence_std=shorter.log_evidence_std,
        n_likelihood_calls=shorter.n_likelihood_calls, memory_removed=shorter.info["memory_removed"],
        max_move_length=shorter.settings["max_move_length"]))
    return replace(
        longer, log_evidence_std=float(np.hypot(longer.log_evidence_std, widening)),
        n_likelihood_calls=shorter.n_likelihood_calls + longer.n_likelihood_calls,
        n_datum_evaluations=shorter.n_datum_evaluations + longer.n_datum_evaluations,
        seconds=shorter.seconds + longer.seconds, info=info)


def _moves_forgot(result):
    """Whether ``result``'s ``"move_memory"`` check passed (or did not run: no spread to probe)."""
    return result.diagnostics.get("move_memory", {"passed": True})["passed"]


def _nested_sampling(model, X, y, config, rng, verbose):
    """One estimate of :func:`nested_sampling_log_evidence` with the resolved ``config``: its runs merged, its
    checks (not yet warned about: ``converged`` is set by the caller)."""
    start_time = time.perf_counter()
    bar = progress_bar(verbose, total=None, desc="NS", leave=False)
    likelihood = _Likelihood.of(model, X, y)
    # The probe draws from its own generator (spawning leaves rng's state alone): the runs' estimates and errors
    # are the same with it as without.
    probe_rng = rng.spawn(1)[0]
    with single_threaded_blas():
        runs = [_ns_run(rng, model, likelihood, config, bar, verbose) for _ in range(config.n_runs)]
        probes = [memory_removed_by_longer_moves(probe_rng, model, likelihood, config, run) for run in runs]
    if bar is not None:
        bar.close()
    memory_removed = np.concatenate([removed for removed, _ in probes])
    if config.n_runs == 1:
        run = runs[0]
        dead_log_lik, dead_n_live, live_log_lik = run.dead_log_lik, run.dead_n_live, run.live_log_lik
        samples = np.vstack([run.dead_points, run.live])
    else:
        dead_log_lik, dead_n_live, samples, live_log_lik = merge_ns_runs(runs)
    log_z, log_weights, information = ns_quadrature(dead_log_lik, dead_n_live, live_log_lik)
    std_simulated = float(np.std(simulate_ns_log_evidence(rng, dead_log_lik, dead_n_live, live_log_lik,
                                                          config.n_simulations), ddof=1))
    run_log_z = np.array([ns_quadrature(r.dead_log_lik, r.dead_n_live, r.live_log_lik)[0] for r in runs])
    run_std = [float(np.std(simulate_ns_log_evidence(rng, r.dead_log_lik, r.dead_n_live, r.live_log_lik,
                                                     config.n_simulations), ddof=1)) for r in runs]
    # The runs are independent, so their spread sees every source of error, including what the volume
    # simulation cannot (lost modes, replacements that remember their start).
    n_runs = config.n_runs
    std_between_runs = float(np.std(run_log_z, ddof=1) / np.sqrt(n_runs)) if n_runs > 1 else float("nan")
    std = std_simulated if n_runs == 1 else max(std_simulated, std_between_runs)
    diagnostics = _diagnostics(config, runs, run_log_z, run_std, model.n_params, memory_removed)
    info = dict(std_simulated=std_simulated, std_information=float(np.sqrt(information / (config.n_live * n_runs))),
                information=information, std_between_runs=std_between_runs, log_evidence_runs=run_log_z.tolist(),
                std_simulated_runs=run_std, n_iterations=int(sum(r.n_iterations for r in runs)),
                n_dead=len(dead_log_lik), insertion_pvalue=diagnostics["insertion_rank"]["value"],
                probe_calls=int(sum(calls for _, calls in probes)), **_move_info(runs, memory_removed))
    n_calls = sum(r.n_calls for r in runs) + info["probe_calls"]
    return EvidenceResult(log_z, std, "ns", float(n_calls), int(n_calls * len(X)), time.perf_counter() - start_time,
                          asdict(config), samples, log_weights, info, diagnostics, False)


def _mean_over_iterations(runs, field):
    """The per-iteration ``field`` of :class:`_Run` averaged over every iteration of ``runs`` (``nan`` when none has a
    value)."""
    values = np.concatenate([getattr(r, field) for r in runs])
    return float(np.nanmean(values)) if np.any(np.isfinite(values)) else float("nan")


def _move_info(runs, memory_removed):
    """The replacement moves' entries of the result's ``info``: final scales, totals and memory, over ``runs``."""
    def totals(info_type, field):
        return info_type(*(int(t) for t in np.sum([getattr(r, field) for r in runs], axis=0)))._asdict()

    return dict(final_slice_width=float(np.mean([r.scales.width for r in runs])),
                final_galilean_step=float(np.mean([r.scales.step_size for r in runs])),
                final_move_length=float(np.mean([r.scales.length for r in runs])),
                slice=totals(SliceInfo, "slice_totals"), galilean=totals(GalileanInfo, "galilean_totals"),
                ellipsoid=totals(EllipsoidInfo, "ellipsoid_totals"),
                final_efficiency=float(np.mean([r.scales.efficiency for r in runs])),
                final_outside_share=float(np.mean([r.scales.outside_share for r in runs])),
                start_correlation=_mean_over_iterations(runs, "start_correlations"),
                replacement_memory=_mean_over_iterations(runs, "memories"),
                memory_removed=float(np.mean(memory_removed)) if len(memory_removed) else float("nan"))


class _Run(NamedTuple):
    """One finished nested-sampling run: dead points in removal order, then the final live points."""

    dead_points: np.ndarray
    dead_log_lik: np.ndarray
    dead_n_live: np.ndarray
    live: np.ndarray
    live_log_lik: np.ndarray
    n_calls: int
    n_iterations: int
    slice_totals: np.ndarray
    galilean_totals: np.ndarray
    start_correlations: np.ndarray
    scales: "_MoveScales"
    insertion_ranks: np.ndarray = np.empty(0, dtype=int)
    finished: bool = True
    memories: np.ndarray = np.empty(0)  # replacement_memory per iteration
    ellipsoid_totals: np.ndarray = np.zeros(4, dtype=np.int64)


def _remove_worst(live_log_lik, n_replace, log_volume):
    """Indices of the ``n_replace`` worst live points, their live counts and log shells, the new log volume.

    Removing the ``k`` lowest of ``n`` at once is removing them one at a time with
    ``n, n-1, ..., n-k+1`` live points.
    """
    n_live = len(live_log_lik)
    order = np.argsort(live_log_lik, kind="stable")
    counts = n_live - np.arange(n_replace)
    volume_steps = -1.0 / counts
    log_volumes = log_volume + np.cumsum(volume_steps)
    log_prev = np.concatenate([[log_volume], log_volumes[:-1]])
    return order[:n_replace], order[n_replace:], counts, log_prev + log1mexp(volume_steps), float(log_volumes[-1])


def _ns_run(rng, model, likelihood, config, bar, verbose):
    """One nested-sampling run with ``config.n_live`` live points (see :func:`nested_sampling_log_evidence`).

    ``likelihood`` holds the moves' full-data functions (:class:`~._ns_moves._Likelihood`).
    """
    n_live, n_replace = config.n_live, config.n_replace
    live = np.asarray(model.sample_prior(rng, n_live), dtype=float)
    live_log_prior = np.asarray(model.log_prior(live), dtype=float)
    live_log_lik = likelihood.log_lik(live)
    n_calls = n_live
    dead_points, dead_log_lik, dead_n_live, ranks, start_corr, memories = [], [], [], [], [], []
    log_volume, log_z = 0.0, -np.inf
    scales = _MoveScales(width=np.sqrt(model.n_params), step_size=0.5)
    totals = np.zeros((3, 4), dtype=np.int64)  # slice, Galilean and ellipsoid moves
    iteration, finished = 0, False
    for iteration in range(1, config.max_iterations + 1):
        worst, survivors, counts, log_shells, log_volume = _remove_worst(live_log_lik, n_replace, log_volume)
        log_z = np.logaddexp(log_z, logsumexp(live_log_lik[worst] + log_shells))
        dead_points.append(live[worst])
        dead_log_lik.append(live_log_lik[worst])
        dead_n_live.append(counts)
        log_lik_min = live_log_lik[worst[-1]]

        # Replace by moves from distinct surviving points (all satisfy the new bound). The whitening
        # comes from the other survivors: a kernel shaped by its own start point is not invariant,
        # and the replacements drift.
        start = rng.choice(survivors, size=n_replace, replace=False)
        others = np.setdiff1d(survivors, start)
        frame = _frame(rng, model, live[others if len(others) > 1 else survivors], config, log_volume)
        (new, new_log_prior, new_log_lik), sliced, galilean, ellipsoid, scales = _replace_points(
            rng, model, likelihood, config, (live[start], live_log_prior[start], live_log_lik[start]),
            log_lik_min, frame, scales)
        n_calls += _move_calls(sliced, galilean, ellipsoid)
        ranks.append(np.searchsorted(np.sort(live_log_lik[survivors]), new_log_lik))
        start_corr.append(_rank_correlation(live_log_lik[start], new_log_lik))
        memories.append(replacement_memory(live[start], new, np.mean(live[others], axis=0), frame.factor)
                        if len(others) > 1 else np.nan)
        totals += np.array([sliced, galilean, ellipsoid])
        live[worst], live_log_prior[worst], live_log_lik[worst] = new, new_log_prior, new_log_lik

        log_remaining = log_volume + np.max(live_log_lik)  # not the mean: see NSConfig.dlogz
        delta = np.logaddexp(log_z, log_remaining) - log_z
        if bar is not None:
            bar.update(1)
            bar.set_postfix(logz=f"{log_z:.3f}", dlogz=f"{delta:.3g}")
        if verbose >= 2 and iteration % 100 == 0:
            logger.info("NS iteration %d: log Z = %.4f, remaining dlogz = %.3g, %s",
                        iteration, log_z, delta, scales)
        if delta < config.dlogz:
            finished = True
            break
    return _Run(np.vstack(dead_points), np.concatenate(dead_log_lik), np.concatenate(dead_n_live), live, live_log_lik,
                n_calls, iteration, totals[0], totals[1], np.array(start_corr), scales,
                np.concatenate(ranks), finished, np.array(memories), totals[2])
