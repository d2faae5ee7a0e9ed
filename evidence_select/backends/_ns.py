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
:func:`replacement_memory`, :func:`adapt_move_length`). Removing the ``k`` lowest of ``n`` live points is the same as removing
them one at a time with ``n, n-1, ..., n-k+1`` live points (the maximum order
statistic of the survivors), so the expected log-volume decrements are
``1/n, 1/(n-1), ..., 1/(n-k+1)`` and the quadrature stays exact in
expectation; the new points are drawn above the highest removed likelihood.

The evidence is the log-space quadrature ``Z = sum_i L_i (X_{i-1} - X_i)``
(Eq. 3.26) with ``log X_i = -sum 1/n_j`` and ``log(X_{i-1} - X_i)`` from
``log1mexp``, plus the live points, each with ``X_final / n_live``, at the end.
"""

import logging
import time
from dataclasses import asdict, dataclass, replace
from typing import NamedTuple

import numpy as np
from scipy import stats
from scipy.linalg import solve_triangular

from ..kernels._constrained import ConstrainedPoints, LikelihoodConstraint
from ..kernels._cube import CubeEllipsoids, cube_ellipsoid_sample, cube_ellipsoids
from ..kernels._ellipsoid import (MAX_CANDIDATES, EllipsoidInfo, PriorProposal, adapt_efficiency,
                                  bounding_ellipsoids, ellipsoid_sample, n_candidates)
from ..kernels._galilean import GalileanInfo, GalileanSettings, adapt_galilean_step, galilean_sample
from ..kernels._hmc import preconditioner_from_samples
from ..kernels._slice import SliceInfo, SliceSettings, adapt_slice_width, constrained_slice_sample
from ..kernels._symmetric import symmetric_bounding_ellipsoids
from ..utils._likelihood import (approximate_total, check_data, check_fraction, check_positive_int, grad_lik_sum,
                                 log_lik_and_grad, log_lik_sum)
from ..utils._logspace import log1mexp, logsumexp
from ..utils._progress import progress_bar
from ..utils._settings import merge_settings
from ..utils._random import make_generator
from ..utils._threads import single_threaded_blas
from .._result import EvidenceResult, check, warn_not_converged

__all__ = ["NSConfig", "nested_sampling_log_evidence", "ns_quadrature", "simulate_ns_log_evidence",
           "merge_ns_runs", "insertion_rank_pvalue"]

logger = logging.getLogger(__name__)


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


MOVES = ("galilean", "slice")


@dataclass(frozen=True)
class NSConfig:
    """Settings of :func:`nested_sampling_log_evidence`, validated on construction.

    Parameters
    ----------
    n_live : int, default=250
        Live points of each run.
    n_runs : int, default=2
        Independent runs, merged into one with ``n_runs * n_live`` live points.
        With two or more, the reported error is the larger of the simulated
        spread and the spread of the runs' own estimates over ``sqrt(n_runs)``,
        which also sees what the simulation cannot: live points that local moves
        cannot carry between the separated pieces of a multimodal constrained
        prior, or moves that remember their start.
    dlogz : float, default=0.5
        Stop when ``X * max(L_live)``, dynesty's estimate of the evidence
        left, would change ``log Z`` by less than this. The final live points
        then join the dead ones in order of likelihood, each with its
        simulated volume. The estimate takes the best live point, not their
        mean: where the likelihood keeps rising by orders of magnitude into a
        small volume (a funnel's neck), the live points' mean understates
        what is left, and a run stopped on it reads ``log Z`` low. Lowering it
        from the default costs about ``n_runs * n_live * log(0.5 / dlogz)``
        more replacements for a barely smaller error (dynesty's default with
        500 live points is 0.509).
    n_replace : int or None, default=None
        Live points replaced per iteration (all moved in one vectorised batch);
        None means ``max(1, n_live // 4)`` (the volume bookkeeping stays exact for
        any batch). At most ``n_live // 2``.
    moves : {"galilean", "slice"}, default="galilean"
        The replacement kernel. ``"galilean"``: ``n_galilean_steps`` Galilean
        Monte Carlo steps (straight whitened moves that reflect off the
        likelihood constraint, :mod:`evidence_select.kernels._galilean`; needs
        the model's gradients), then ``round(axis_fraction * n_slice_steps)``
        slice moves along coordinate axes. ``"slice"``: ``n_slice_steps`` slice
        moves, a fraction ``axis_fraction`` of them along axes and the rest
        along whitened random directions. Along the slow directions of a curved
        ridge or a badly conditioned target in many dimensions, random-direction
        slice moves carry each coordinate only a little and in a random
        direction, and the replacements keep a memory of their start that lets
        ``log Z`` read high; Galilean trajectories keep going.
    n_slice_steps : int or None, default=None
        Slice moves per replacement; None means ``max(10, 3 * n_params)``: with
        fewer, a replacement still remembers its starting live point and
        ``log Z`` comes out high.
    n_galilean_steps : int or None, default=None
        Galilean steps per replacement (``moves="galilean"``); None means
        ``4 * n_slice_steps``. A step costs one likelihood-and-gradient
        evaluation (for a model with a ``fast_gradient``, the likelihood, and
        that gradient alone where the step lands outside), and one likelihood
        evaluation more where it reflects off the constraint; its length adapts
        between iterations towards a quarter of the steps reversing at the
        constraint.
    trajectory_length : int, default=3
        Galilean steps between fresh velocities.
    max_step_out : int, default=10
        Stepping-out budget of each slice move.
    axis_fraction : float, default=0.5
        Share of slice moves along a random coordinate axis (scaled by the
        coordinate's spread given the others, under the live points'
        covariance; see :mod:`evidence_select.kernels._slice`); with
        ``moves="slice"`` the rest run along whitened random directions. Random
        directions and Galilean steps keep correlated and curved posteriors in
        reach, axis moves the spikes and separate modes of each coordinate.
    n_simulations : int, default=200
        Simulated-volume replicates for the uncertainty.
    max_iterations : int, default=100000
        Cap on iterations of each run (reaching it fails the ``"iterations"`` check).
    max_move_length : float, default=1.0
        Largest factor by which the Markov chain moves per replacement
        (Galilean and slice steps alike) may grow, at least 1 (1: never).
        Between iterations the factor grows by 1.25 while the second half of
        the moves removes more than ``DECAY_HIGH`` (0.15) of the memory of their
        start that the first half removes (:func:`adapt_move_length`), and
        shrinks by it, down to ``MIN_MOVE_LENGTH`` (1/8), while it removes
        less than ``DECAY_LOW`` (0.05): moves much longer than the posterior's
        shape needs cost calls for nothing. Worth raising (e.g. to 4 or 8) for a
        curved or badly conditioned posterior with one mode in many
        dimensions, where the default moves remember their start and ``log Z``
        can read high (the ``"move_memory"`` check fails there, and the run is
        made again with it 4 times larger: ``retry_longer_moves``). Not the
        default, so that a run whose moves forget their start spends no more
        than the configured moves.
    retry_longer_moves : bool, default=True
        Where the ``"move_memory"`` check fails (the moves remember their
        start), run again once with ``max_move_length`` ``RETRY_LENGTH_FACTOR``
        (4) times larger and report that run: its estimate, its checks, and,
        where its own ``"move_memory"`` check still fails, its error widened
        by how far the estimate moved between the two (:func:`with_longer_moves`),
        so that a flagged interval reaches about as far as the bias that remains.
        The first run's estimate is in ``info["shorter_moves"]``; the calls and
        seconds are both runs'. False: report the first run, flagged.
    ellipsoid : bool, default=True
        Before the Markov chain moves, an exact independent-proposal move
        (:mod:`evidence_select.kernels._ellipsoid`): candidates from the prior
        while the expected prior mass above the bound is at least
        ``PRIOR_PROPOSALS_VOLUME`` (0.1), and below it while a valid one costs
        fewer calls than the Markov chain moves spend on a replacement and the
        ellipsoids' candidates do not pay (:func:`prior_pays`); otherwise
        uniform in the bounding ellipsoids of the live points other than the
        starts (one ellipsoid, split in two by 2-means while the parts'
        covariances take much less volume, so that a curved ridge or separate
        modes are bounded tightly:
        :func:`~evidence_select.kernels._ellipsoid.bounding_ellipsoids`; each
        ``ELLIPSOID_ENLARGE`` times its smallest volume), the first inside the
        constraint in a prior-weighted random order taken; where the model
        offers its prior transform, the same ellipsoids around the live
        points' unit-cube coordinates instead, if they hold less prior mass
        (:mod:`evidence_select.kernels._cube`: there the prior is uniform and
        the candidates need no weight). While a valid candidate costs fewer
        calls than the Markov chain moves spend on a replacement (at first
        ``n_slice_steps``), the candidates drawn leave at most 3% of the
        chains at their start, and at most 10% of the replacements' starts lie
        outside the ellipsoids (a running share: :func:`ellipsoid_pays`), it
        replaces the Markov chain moves (chains outside the ellipsoids after
        it take those moves instead, kept outside them: a quarter of them
        outside one ellipsoid, all of them outside split ones); below,
        each chain tries one candidate (which keeps both shares measured) and
        the Markov chain moves follow. On a constrained prior that a few
        ellipsoids cover (one mode or a few, straight or curved) in up to ~16
        dimensions it makes each replacement an independent draw for a few
        likelihood calls; from ~32 dimensions a few hundred live points no
        longer bound where the next draw lands, and the Markov chain moves
        take over.
    """

    n_live: int = 250
    n_runs: int = 2
    dlogz: float = 0.5
    n_replace: int = None
    moves: str = "galilean"
    n_slice_steps: int = None
    n_galilean_steps: int = None
    trajectory_length: int = 3
    max_step_out: int = 10
    axis_fraction: float = 0.5
    n_simulations: int = 200
    max_iterations: int = 100_000
    max_move_length: float = 1.0
    retry_longer_moves: bool = True
    ellipsoid: bool = True

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen dataclass)
        set_("n_live", check_positive_int(self.n_live, "n_live", minimum=2))
        set_("n_runs", check_positive_int(self.n_runs, "n_runs"))
        set_("dlogz", check_fraction(self.dlogz, "dlogz", high=np.inf))
        if self.n_replace is not None:
            n_replace = check_positive_int(self.n_replace, "n_replace")
            if n_replace > self.n_live // 2:
                raise ValueError(f"n_replace must be at most n_live // 2 = {self.n_live // 2}, got {n_replace}")
            set_("n_replace", n_replace)
        if self.moves not in MOVES:
            raise ValueError(f"moves must be one of {MOVES}, got {self.moves!r}")
        if self.n_slice_steps is not None:
            set_("n_slice_steps", check_positive_int(self.n_slice_steps, "n_slice_steps"))
        if self.n_galilean_steps is not None:
            set_("n_galilean_steps", check_positive_int(self.n_galilean_steps, "n_galilean_steps"))
        set_("trajectory_length", check_positive_int(self.trajectory_length, "trajectory_length"))
        set_("max_step_out", check_positive_int(self.max_step_out, "max_step_out", minimum=0))
        set_("axis_fraction", check_fraction(self.axis_fraction, "axis_fraction", high=1.0 + 1e-12, closed_low=True))
        set_("n_simulations", check_positive_int(self.n_simulations, "n_simulations", minimum=2))
        set_("max_iterations", check_positive_int(self.max_iterations, "max_iterations"))
        for name in ("ellipsoid", "retry_longer_moves"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        set_("max_move_length", check_fraction(self.max_move_length, "max_move_length", low=1.0, high=np.inf,
                                               closed_low=True))

    def resolved(self, n_params):
        """A copy with the ``None`` defaults filled in for a model of ``n_params`` parameters."""
        n_slice_steps = self.n_slice_steps or max(10, 3 * n_params)
        return replace(self, n_replace=self.n_replace or max(1, self.n_live // 4), n_slice_steps=n_slice_steps,
                       n_galilean_steps=self.n_galilean_steps or 4 * n_slice_steps)


MIN_INSERTION_PVALUE = 0.01
MIN_RUNS_PVALUE = 0.01
def _mean_over_iterations(runs, field):
    """The per-iteration ``field`` of :class:`_Run` averaged over every iteration of ``runs`` (``nan`` when none
    has a value)."""
    values = np.concatenate([getattr(r, field) for r in runs])
    return float(np.nanmean(values)) if np.any(np.isfinite(values)) else float("nan")


def _diagnostics(config, runs, run_log_z, run_std, n_params, memory_removed):
    """Convergence checks of a set of NS runs (see :func:`nested_sampling_log_evidence`, Notes).

    ``memory_removed`` holds the runs' probes, :func:`memory_removed_by_longer_moves`, concatenated.
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
        Fields of :class:`NSConfig` (e.g. ``n_live=500``), overriding ``config``.

    Returns
    -------
    result : EvidenceResult
        ``log_evidence_std`` is the larger of the simulated-volume spread and
        (with ``n_runs >= 2``) the runs' spread over ``sqrt(n_runs)``;
        ``diagnostics``/``converged`` hold the checks below; ``info`` holds
        ``"std_simulated"``, ``"std_between_runs"``, ``"std_information"``
        (``sqrt(H / n_live)``), ``"information"``, ``"n_iterations"``,
        ``"insertion_pvalue"``, ``"replacement_memory"`` (:func:`replacement_memory`
        averaged over the iterations; read it with ``max_move_length``),
        ``"memory_removed"`` (the ``"move_memory"`` check's value),
        ``"probe_calls"`` (that check's likelihood calls, part of
        ``n_likelihood_calls``), ``"final_move_length"``, ``"final_outside_share"`` (the running share of the
        replacements' starts outside the ellipsoids, :func:`ellipsoid_pays`) and the moves' statistics (``"slice"``,
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
      (:func:`memory_removed_by_longer_moves`), at most 0.1 (or 4 of the
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


def _whitening_factor(points):
    """Lower-triangular factor of the covariance of ``points``, shrunk towards its diagonal only if they are few for
    the dimension (:func:`~evidence_select.kernels._hmc.auto_shrinkage`).

    For a rotated, badly conditioned target, shrinking widens the thin directions in the whitened frame, and
    the replacements then forget their start along the long ones more slowly (``log Z`` reads high).
    """
    return preconditioner_from_samples(points, dense=True, shrinkage="auto")


class _MoveScales(NamedTuple):
    """The replacement kernel's scales, adapted between iterations of a run."""

    width: float  # slice bracket, in units of the whitening factor's scale
    step_size: float  # Galilean step, in whitened units
    length: float = 1.0  # factor on the configured moves per replacement
    first_half: float = float("nan")  # running mean of the memory the first half of the moves removes, 1 - m(L/2)
    second_half: float = float("nan")  # running mean of the memory the second half removes, m(L/2) - m(L)
    # Running fraction of the ellipsoid's visited candidates inside the constraint; from 0, so that the first
    # ellipsoid moves try one candidate per chain and measure it before hundreds are drawn.
    efficiency: float = 0.0
    # Running likelihood calls per replacement of the Markov chain moves; nan until they have run.
    markov_calls: float = float("nan")
    # Running share of the replacements' starts that lie outside the bounding ellipsoids; nan until measured.
    outside_share: float = float("nan")


#: Bounds on ``q``, the running ratio of the memory the second half of the moves removes to what the first half
#: removes: the moves lengthen above ``DECAY_HIGH`` (up to ``max_move_length``) and shorten below ``DECAY_LOW``
#: (down to ``MIN_MOVE_LENGTH``), by ``LENGTH_STEP``. Running means weigh a new value by ``MEMORY_SMOOTHING`` (a
#: mean over ~10 iterations: one iteration's memory is noise of order 1 / sqrt(n_replace n_params)).
DECAY_LOW = 0.05
DECAY_HIGH = 0.15
MIN_MOVE_LENGTH = 0.125
MEMORY_SMOOTHING = 0.1
LENGTH_STEP = 1.25


def _running_mean(running, value):
    """``running`` updated by one iteration's ``value`` (weight ``MEMORY_SMOOTHING``); ``value`` itself while
    ``running`` is nan (nothing measured yet)."""
    if not np.isfinite(running):
        return float(value)
    return float((1.0 - MEMORY_SMOOTHING) * running + MEMORY_SMOOTHING * value)


def adapt_move_length(scales, memory_half, memory_full, max_length):
    """``scales`` with ``length`` adapted to how the replacements' memory of their start decayed along the moves.

    ``memory_half`` and ``memory_full`` are :func:`replacement_memory` after half
    and all of the moves. If memory decays as ``c + (1 - c) exp(-k / tau)``
    over ``k`` steps, ``c`` what no length removes (a replacement held in its
    start's mode of a multimodal posterior), the ratio of what the second half
    removes to what the first half removes, ``q = (m(L/2) - m(L)) / (1 - m(L/2))``,
    is ``exp(-L / (2 tau))`` whatever ``c`` is: moves long for the
    posterior's shape give a small ``q``, short ones (a curved ridge, thin
    directions) a ``q`` near 1. The running ``q`` (a ratio of running means)
    within ``[DECAY_LOW, DECAY_HIGH]`` leaves of the decaying memory at most
    ``DECAY_HIGH^2`` (0.02) of ``1 - c``; above it ``length`` grows by
    ``LENGTH_STEP`` up to ``max_length``, below it shrinks down to
    ``MIN_MOVE_LENGTH``. A ``nan`` memory (no spread to measure) changes nothing.

    Examples
    --------
    >>> s = _MoveScales(1.0, 0.5)
    >>> for _ in range(30):  # the second half removes as much as the first: too short
    ...     s = adapt_move_length(s, 0.5, 0.25, max_length=4.0)
    >>> s.length
    4.0
    >>> for _ in range(60):  # a plateau at 0.5 (modes): the second half removes nothing
    ...     s = adapt_move_length(s, 0.5, 0.5, max_length=4.0)
    >>> s.length
    0.125
    """
    if not (np.isfinite(memory_half) and np.isfinite(memory_full)):
        return scales
    first = _running_mean(scales.first_half, 1.0 - memory_half)
    second = _running_mean(scales.second_half, memory_half - memory_full)
    ratio = second / max(first, 1e-12)
    length = scales.length
    if ratio > DECAY_HIGH:
        length = min(length * LENGTH_STEP, max_length)
    elif ratio < DECAY_LOW:
        length = max(length / LENGTH_STEP, MIN_MOVE_LENGTH)
    return scales._replace(length=length, first_half=first, second_half=second)


class _Frame(NamedTuple):
    """What shapes the replacement moves, built from live points other than their starts."""

    factor: np.ndarray  # lower-triangular whitening factor
    centre: np.ndarray  # the points' mean
    ellipsoid: object = None  # the bounding EllipsoidUnion, or None without ellipsoid moves
    volume: float = 0.0  # the expected prior mass above the likelihood bound


#: Volume factor of each bounding ellipsoid over the smallest one that holds its share of the other live points.
ELLIPSOID_ENLARGE = 2.0
#: Factor on the configured Markov chain moves of the chains outside the ellipsoids. Outside one ellipsoid a chain
#: sits in the tails beyond it and only needs to leave its start (a quarter); split ellipsoids also leave gaps
#: along a ridge and between modes, where the moves, kept outside them, are the only way such a chain's
#: replacement forgets where it started (a replacement left near its start makes ``log Z`` read high): there the
#: chain takes the whole moves.
OUTSIDE_LENGTH = 0.25
SPLIT_OUTSIDE_LENGTH = 1.0
#: Above this prior mass the independent proposals come from the prior itself (at most ~10 calls per valid one).
PRIOR_PROPOSALS_VOLUME = 0.1


def _frame(rng, model, points, config, log_volume=-np.inf):
    """The :class:`_Frame` of ``points`` (the live points other than the moves' starts) at ``log_volume``."""
    factor = _whitening_factor(points)
    return _Frame(factor, np.mean(points, axis=0), _bounding_proposal(rng, model, points, factor, config),
                  float(np.exp(log_volume)))


#: Prior draws for the Monte Carlo prior masses of the kinds of bounding ellipsoids (:func:`_bounding_proposal`).
MASS_DRAWS = 1024
#: Most mode symmetries (``K!`` of a mixture: five components) whose images the bounding ellipsoids take.
MAX_SYMMETRIES = 120


def _bounding_proposal(rng, model, points, factor, config):
    """The ellipsoid move's proposal around ``points``, or None without ellipsoid moves.

    The live points' bounding ellipsoids in the parameters (shaped by ``factor``, candidates weighted by the prior)
    and, where the model offers its prior transform and the points sit inside the cube's faces, in the prior's
    unit cube (:mod:`evidence_select.kernels._cube`). A valid draw costs about ``P(E) / P(E & constraint)``
    likelihood calls, the prior masses of the proposal's support ``E``; all hold the same constrained region, so
    the one of least prior mass is taken. The cube's wins where the prior falls steeply across the ellipsoids (a
    box prior through the sigmoid map, an informative prior); the parameters' where the transform bends a thin
    posterior (a Gaussian prior's tail). For a model with mode symmetries, the points' ellipsoids in one copy of
    the modes, mapped to every copy (:func:`_symmetric_ellipsoids`), compete too.
    """
    if not config.ellipsoid:
        return None
    dense = factor if factor.ndim == 2 else np.diag(factor)
    cube = None
    if model.capabilities().prior_transform:
        cube = cube_ellipsoids(points, model.prior_transform, model.prior_cdf, ELLIPSOID_ENLARGE)
    # The masses are estimated in this order (it fixes the random draws each takes).
    return _least_prior_mass(rng, model, (cube, bounding_ellipsoids(points, ELLIPSOID_ENLARGE, factor=dense),
                                          _symmetric_ellipsoids(model, points)))


def _symmetric_ellipsoids(model, points):
    """The bounding ellipsoids of ``points`` gathered in one copy of the posterior's modes and mapped to every
    copy (:mod:`evidence_select.kernels._symmetric`), for a model with 2 to ``MAX_SYMMETRIES`` mode symmetries
    (a mixture's relabellings); None otherwise."""
    if not 1 < model.n_mode_symmetries <= MAX_SYMMETRIES:
        return None
    return symmetric_bounding_ellipsoids(points, model.mode_symmetries(), ELLIPSOID_ENLARGE)


def _least_prior_mass(rng, model, unions):
    """The one of ``unions`` (bounding the same points; None where a kind does not apply) that holds the least
    prior mass, each mass estimated once (none for a lone one)."""
    unions = [union for union in unions if union is not None]
    if len(unions) == 1:
        return unions[0]
    masses = [union.log_prior_mass(rng, model.log_prior, MASS_DRAWS) for union in unions]
    return unions[int(np.argmin(masses))]


#: Most expected share of chains that keep their start in an ellipsoid move replacing the Markov chain moves,
#: with the candidates :func:`~evidence_select.kernels._ellipsoid.n_candidates` draws. A kept point is a copy of
#: a surviving live point chosen uniformly, itself a draw from the constrained prior: copies leave ``log Z``
#: unbiased and widen its spread only a little at this share (``test_ns``'s volume-space simulation).
MAX_KEPT_SHARE = 0.03
#: Most running share of the replacements' starts outside the bounding ellipsoids for the ellipsoid move to
#: replace the Markov chain moves (:func:`ellipsoid_pays`).
MAX_OUTSIDE_SHARE = 0.1


def _markov_cost(markov_calls, n_slice_steps):
    """Likelihood calls the Markov chain moves spend per replacement: their running mean, ``n_slice_steps`` until
    they have run (what an independent move must undercut to replace them)."""
    return markov_calls if np.isfinite(markov_calls) else n_slice_steps


def ellipsoid_pays(efficiency, markov_calls, n_slice_steps, outside_share=float("nan")):
    """Whether the ellipsoid move replaces the Markov chain moves at this running ``efficiency``.

    A valid ellipsoid draw costs about ``1 / efficiency`` likelihood calls and is
    independent of its start; the Markov chain moves cost ``markov_calls`` per
    replacement (their running mean; ``n_slice_steps`` until they have run) and
    leave some memory of it. The ellipsoid is taken while it is the cheaper,
    while the chains that find no valid candidate among those drawn (and keep
    their start) are at most ``MAX_KEPT_SHARE`` of them, and while the running
    share of starts outside the ellipsoids is at most ``MAX_OUTSIDE_SHARE``
    (nan: not measured yet). The starts are draws like the live points that
    shape the ellipsoids but not among them, so that share is the part of the
    constrained region the ellipsoids miss; a chain there takes only the
    short moves kept outside them (``OUTSIDE_LENGTH``), and its replacement
    stays near its start (``log Z`` reads high where many do). In many
    dimensions a few hundred points' covariance and largest radius understate
    where the next draw lands, and that share grows from a few percent to a
    large part of the starts.

    Examples
    --------
    >>> ellipsoid_pays(0.05, float("nan"), 48), ellipsoid_pays(0.015, float("nan"), 48)
    (True, False)
    >>> ellipsoid_pays(0.015, 300.0, 48), ellipsoid_pays(0.005, 300.0, 48)
    (True, False)
    >>> ellipsoid_pays(0.05, float("nan"), 48, outside_share=0.04), ellipsoid_pays(0.05, 300.0, 48, 0.4)
    (True, False)
    """
    cost = _markov_cost(markov_calls, n_slice_steps)
    kept_share = 1.0 / (1.0 + n_candidates(efficiency) * efficiency)
    covers = not outside_share > MAX_OUTSIDE_SHARE  # nan: not measured yet
    return bool(efficiency * cost >= 1.0 and kept_share <= MAX_KEPT_SHARE and covers)


def prior_pays(volume, markov_calls, n_slice_steps):
    """Whether candidates from the prior replace the Markov chain moves below ``PRIOR_PROPOSALS_VOLUME``, at the
    expected prior mass ``volume`` above the likelihood bound, where the ellipsoid move does not pay.

    A valid prior draw costs about ``1 / volume`` calls and is independent of its start: it is taken while that
    is at most what the Markov chain moves spend per replacement (their running mean ``markov_calls``;
    ``n_slice_steps`` until they have run) and while ``MAX_CANDIDATES`` prior candidates leave at most
    ``MAX_KEPT_SHARE`` of the chains at their start. Where the prior falls steeply across the live points'
    ellipsoids (a mixture's, past a tenth of the prior mass), the ellipsoid's candidates, weighted by the
    prior, rank below the chains' own points and are rarely visited; the prior's need no weight.

    Examples
    --------
    >>> prior_pays(0.01, 300.0, 42), prior_pays(0.001, 300.0, 42), prior_pays(0.01, float("nan"), 42)
    (True, False, False)
    """
    cost = _markov_cost(markov_calls, n_slice_steps)
    return bool(volume * cost >= 1.0 and (1.0 - volume) ** MAX_CANDIDATES <= MAX_KEPT_SHARE)


def _independent_move(proposal):
    """The exact independent-proposal move for ``proposal``."""
    return cube_ellipsoid_sample if isinstance(proposal, CubeEllipsoids) else ellipsoid_sample


def _ellipsoid_stage(rng, model, log_lik_fn, config, points, log_lik_min, frame, scales):
    """The ellipsoid move before the Markov chain moves; returns the points, its info, the scales and whether it
    replaces those moves (where :func:`ellipsoid_pays`, or where candidates from the prior do: above
    ``PRIOR_PROPOSALS_VOLUME``, or below it where :func:`prior_pays`).

    Below that efficiency each chain tries one candidate only, which keeps the efficiency measured.
    """
    if frame.ellipsoid is None:
        return points, EllipsoidInfo(0, 0, 0, 0), scales, False
    constraint = LikelihoodConstraint(log_lik_min, model.log_prior, log_lik_fn)
    enough = ellipsoid_pays(scales.efficiency, scales.markov_calls, config.n_slice_steps, scales.outside_share)
    if frame.volume >= PRIOR_PROPOSALS_VOLUME or (
            not enough and prior_pays(frame.volume, scales.markov_calls, config.n_slice_steps)):
        points, info = ellipsoid_sample(rng, points, constraint, PriorProposal(model.sample_prior),
                                        n_candidates(frame.volume))
        # One ellipsoid candidate per chain as well (another exact move): the ellipsoid's efficiency is then
        # measured by the time the prior's falls, and the first ellipsoid iterations need no Markov moves.
        points, probe = _independent_move(frame.ellipsoid)(rng, points, constraint, frame.ellipsoid, 1)
        scales = scales._replace(efficiency=adapt_efficiency(scales.efficiency, probe))
        return points, EllipsoidInfo(*np.add(info, probe)), scales, True
    points, info = _independent_move(frame.ellipsoid)(rng, points, constraint, frame.ellipsoid,
                                                      n_candidates(scales.efficiency) if enough else 1)
    return points, info, scales._replace(efficiency=adapt_efficiency(scales.efficiency, info)), enough


def _replace_points(rng, model, likelihood, config, start, log_lik_min, frame, scales):
    """Move copies of the ``start`` points ``(position, log_prior, log_lik)`` under ``log L > log_lik_min``.

    Returns the new points, the slice, Galilean and ellipsoid totals and the scales adapted from them.
    While an independent move replaces the Markov chain moves, the chains that lie outside the ellipsoid
    after it take the Markov chain moves instead, kept outside it: the ellipsoid move leaves a chain that
    starts outside where it is, and the prior's candidates may land anywhere. Each of the two kernels leaves
    the constrained prior restricted to its side invariant, so together they leave the whole of it
    invariant, and no replacement is a copy of its start for want of a move. (A chain inside the ellipsoid
    moved by kept-outside moves could only leave it, never enter it again: the replacements would lean to
    the outside, where the likelihood is lower, and ``log Z`` would read low.)
    """
    points, ellipsoid, scales, enough = _ellipsoid_stage(rng, model, likelihood.log_lik, config,
                                                         ConstrainedPoints(*start), log_lik_min, frame, scales)
    if frame.ellipsoid is not None:
        starts_outside = np.mean(~frame.ellipsoid.contains(start[0]))
        scales = scales._replace(outside_share=_running_mean(scales.outside_share, starts_outside))
    if not enough:
        points, sliced, galilean, scales = _markov_halves(rng, model, likelihood, config, points, log_lik_min,
                                                          frame, scales)
        return tuple(points), sliced, galilean, ellipsoid, scales
    sliced, galilean = SliceInfo(0, 0, 0, 0), GalileanInfo(0, 0, 0, 0)
    outside = np.flatnonzero(~frame.ellipsoid.contains(points.position))
    if len(outside):
        outside_length = OUTSIDE_LENGTH if len(frame.ellipsoid.ellipsoids) == 1 else SPLIT_OUTSIDE_LENGTH
        kept_out = likelihood.outside_of(frame.ellipsoid)
        moved, sliced, galilean = _markov_moves(rng, model, kept_out, config,
                                                ConstrainedPoints(*(a[outside] for a in points)), log_lik_min,
                                                frame.factor, scales, _move_counts(config, outside_length))
        points = ConstrainedPoints(*(np.array(a, dtype=float) for a in points))
        for whole, part in zip(points, moved):
            whole[outside] = part
    return tuple(points), sliced, galilean, ellipsoid, scales


def _markov_halves(rng, model, likelihood, config, points, log_lik_min, frame, scales):
    """The Markov chain moves in two halves, ``length`` adapted to the memory each half removed
    (:func:`adapt_move_length`)."""
    start = points.position
    n_galilean, n_slice = _move_counts(config, scales.length)
    memories, totals = [], np.zeros((2, 4), dtype=np.int64)
    # Both halves move with the same scales: adapted within an iteration from the chains' own moves, the second
    # half's kernel would depend on where the chains are, and would not leave the constrained prior invariant.
    for counts in ((n_galilean // 2, n_slice // 2), (n_galilean - n_galilean // 2, n_slice - n_slice // 2)):
        points, sliced, galilean = _markov_moves(rng, model, likelihood, config, points, log_lik_min, frame.factor,
                                                 scales, counts)
        memories.append(replacement_memory(start, points.position, frame.centre, frame.factor))
        totals += np.array([sliced, galilean])
    sliced, galilean = SliceInfo(*totals[0]), GalileanInfo(*totals[1])
    calls_per_replacement = _move_calls(sliced, galilean) / len(start)
    scales = scales._replace(width=adapt_slice_width(scales.width, sliced),
                             markov_calls=_running_mean(scales.markov_calls, calls_per_replacement))
    if n_galilean:
        scales = scales._replace(step_size=adapt_galilean_step(scales.step_size, galilean))
    return points, sliced, galilean, adapt_move_length(scales, *memories, config.max_move_length)


def _move_counts(config, length):
    """Galilean steps and slice moves per replacement for moves ``length`` times the configured ones (at least
    one of each kind asked for)."""
    n_slice = config.n_slice_steps * length
    if config.moves != "galilean":
        return 0, _n_steps(n_slice)
    return _n_steps(config.n_galilean_steps * length), _n_steps(config.axis_fraction * n_slice)


def _n_steps(steps):
    """``steps`` rounded, at least 1 unless 0."""
    return max(1, int(round(steps))) if steps > 0 else 0


class _Likelihood(NamedTuple):
    """The full-data functions of a run's moves (each ``(n, n_params) -> ...``).

    ``log_lik``: the log-likelihood; ``log_lik_and_grad``: it and its gradient (the Galilean straight proposals');
    ``reflected_log_lik``: the log-likelihood with a NaN allowed, outside the constraint (a Galilean reflection
    far out may overflow); ``gradient``: the gradient alone, for a model whose gradient alone is cheap
    (``fast_gradient``: the straight proposals then take the likelihood alone and this gradient only where they
    land outside), else None.
    """

    log_lik: object
    log_lik_and_grad: object
    reflected_log_lik: object
    gradient: object = None

    @classmethod
    def of(cls, model, X, y):
        """The functions of ``model`` on the rows ``(X, y)``.

        Where the gradient alone is cheap (``fast_gradient``), every log-likelihood value of the run comes from
        the likelihood alone, and the model's approximate sum gives them all where it declares one
        (:meth:`~evidence_select.models.Model.approximate_log_likelihood_sum`, the mixture's single-precision
        rows): one fixed function of the point throughout, each total within about ``1e-7 sqrt(n)`` of the rows'
        log-densities of the exact one, far below the run's error.
        """
        fast = bool(getattr(model, "fast_gradient", False))
        total = approximate_total(model) if fast else None

        def log_lik(theta):
            return log_lik_sum(model, theta, X, y, total=total)

        def log_lik_and_grad_fn(theta):
            return log_lik_and_grad(model, theta, X, y)

        def reflected_log_lik(theta):
            return log_lik_sum(model, theta, X, y, allow_nan=True, total=total)

        def gradient(theta):
            return grad_lik_sum(model, theta, X, y)

        return cls(log_lik, log_lik_and_grad_fn, reflected_log_lik, gradient if fast else None)

    def outside_of(self, ellipsoid):
        """The same functions with ``-inf`` (and a zero gradient) inside ``ellipsoid``, for the moves kept outside
        it: each evaluated only outside. The gradient stays the likelihood's there (the Galilean move reflects off
        the combined constraint along any normal: its reflection stays an involution)."""
        return _Likelihood(*(None if fn is None else _outside_of(ellipsoid, fn, kind)
                             for fn, kind in zip(self, ("values", "pair", "values", "gradient"))))


def _outside_of(ellipsoid, fn, kind):
    """``fn`` evaluated only outside ``ellipsoid``: inside, ``-inf`` for a log-likelihood (``kind`` ``"values"``),
    a zero gradient (``"gradient"``), or both (``"pair"``, a log-likelihood and its gradient)."""
    def wrapped(theta):
        outside = ~ellipsoid.contains(theta)
        out = fn(theta[outside]) if np.any(outside) else None
        values, grad = np.full(len(theta), -np.inf), np.zeros_like(theta)
        if out is not None and kind == "pair":
            values[outside], grad[outside] = out
        elif out is not None:
            (values if kind == "values" else grad)[outside] = out
        return {"values": values, "gradient": grad}.get(kind, (values, grad))
    return wrapped


def _markov_moves(rng, model, likelihood, config, points, log_lik_min, factor, scales, counts):
    """``counts = (n_galilean, n_slice)`` Galilean steps then slice moves of ``config`` (see :class:`NSConfig`)
    with ``scales``; returns the points and the moves' infos."""
    (n_galilean, n_slice), galilean = counts, GalileanInfo(0, 0, 0, 0)
    axis_fraction = 1.0 if config.moves == "galilean" else config.axis_fraction
    if n_galilean:
        dense = factor if factor.ndim == 2 else np.diag(factor)
        points, galilean = galilean_sample(
            rng, points, LikelihoodConstraint(log_lik_min, model.log_prior, likelihood.log_lik_and_grad),
            GalileanSettings(dense, scales.step_size, n_galilean, config.trajectory_length),
            log_lik_only=likelihood.reflected_log_lik, gradient=likelihood.gradient)
    points, sliced = constrained_slice_sample(
        rng, points, LikelihoodConstraint(log_lik_min, model.log_prior, likelihood.log_lik),
        SliceSettings(factor, width=scales.width, max_step_out=config.max_step_out, axis_fraction=axis_fraction),
        n_steps=n_slice)
    return points, sliced, galilean


def _move_calls(*infos):
    """Likelihood calls of the moves' infos."""
    return sum(info.n_likelihood_calls for info in infos)


#: The end-of-run probe (:func:`memory_removed_by_longer_moves`): at most this many final live points (at most
#: half of them), and the factor on the run's final moves per replacement that it compares them with.
PROBE_POINTS = 125
PROBE_LENGTH = 4.0
#: The ``"move_memory"`` check fails when moves ``PROBE_LENGTH`` times longer remove more than this much of the
#: replacements' memory of their start, and more than ``PROBE_SIGMAS`` standard errors of the probe's own noise.
MAX_MEMORY_REMOVED = 0.1
PROBE_SIGMAS = 4.0


def memory_removed_by_longer_moves(rng, model, likelihood, config, run):
    """Per-point memory of their start that longer moves remove, probed at a run's final live points.

    Copies of ``min(PROBE_POINTS, n_live // 2)`` final live points move under
    the run's last likelihood level with the run's final moves, then on for
    ``PROBE_LENGTH - 1`` times as many; the result holds, per point, its
    :func:`replacement_memory` term after the short moves minus its term after
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


def _ns_run(rng, model, likelihood, config, bar, verbose):
    """One nested-sampling run with ``config.n_live`` live points (see :func:`nested_sampling_log_evidence`).

    ``likelihood`` holds the moves' full-data functions (:class:`_Likelihood`).
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
