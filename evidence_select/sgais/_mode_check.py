"""A check of an evidence estimate against the posterior's best mode: importance sampling there.

Particles that anneal into a poorer cluster configuration of a mixture, in every
replicate group alike, read the evidence low by nats, and neither their weights
nor the groups' spread can see it. Optimisation sees it: EM from several
k-means++ starts and a quasi-Newton refinement find the best mode, and
importance sampling with a multivariate t at that mode (scale the inverse
Hessian, symmetrised over the posterior's label symmetries) estimates the mass
the proposal reaches. That is at most the whole evidence (up to its own small
error), and close to it when one configuration dominates, as it does on most
data: an estimate reading below it by several standard deviations has missed
mass. The check costs a few passes over the rows for the search and one
likelihood evaluation per row and draw, so it runs only while the rows are few
(:data:`MODE_CHECK_ROWS`).
"""

import math
from typing import NamedTuple

import numpy as np
from scipy import optimize, stats
from scipy.linalg import solve_triangular
from scipy.special import gammaln

from ..exceptions import EvidenceConvergenceWarning
from ._reservoir import reservoir_data
from ..utils import logsumexp, make_generator
from ..utils._likelihood import log_lik_sum
from ..utils._warnings import warn
from ..utils._workspace import Workspace
from ._policy import crossed_checkpoint
from ._state import evidence_estimate

__all__ = ["ModeEvidence", "mode_importance_log_evidence", "check_against_mode", "mode_check_due",
           "apply_mode_check", "symmetrised_t", "symmetrised_log_density", "SymmetrisedT", "MODE_CHECK_ROWS",
           "MODE_GAP_SIGMAS"]

#: Rows seen up to which the online estimators check (all of them must be stored), and their checkpoints
#: ``floor(MODE_CHECK_UNIT * MODE_CHECK_GROWTH**j)`` (100, 141, 200, 282, ...): a chunk that crosses one is checked,
#: so a stream's checks cost about 3.4 times its last one however small its chunks, and its last check is
#: at most a factor sqrt(2) of rows behind its end.
MODE_CHECK_ROWS = 5000
MODE_CHECK_UNIT = 100
MODE_CHECK_GROWTH = math.sqrt(2.0)
#: Label symmetries up to which a model is checked (``K!`` of a mixture: five components). The proposal's
#: density sums over all of them for every draw.
MAX_MODE_SYMMETRIES = 120
#: The check fails when the estimate reads below the mode's value by more than this many combined standard
#: deviations: a run whose own 2-sigma interval misses the mass the mode alone holds.
MODE_GAP_SIGMAS = 2.0
#: Draws of the importance sampler, k-means++ starts of the mode search, the t proposal's degrees of freedom
#: and the factor on its scale (heavier tails than the posterior's, so the weights stay bounded).
MODE_CHECK_DRAWS = 4000
MODE_CHECK_STARTS = 16
_DF, _INFLATE = 5.0, 1.2
_DRAW_BLOCK = 200  # draws per block of proposal draws
# Point-row pairs per likelihood call: a mixture's (K, points, rows) block then stays within its reusable
# buffers at any row count (K of them per pair, 4 MiB each).
_CELLS_PER_CALL = 2**19
_MAPS_PER_CALL = 16  # draws moved by their symmetries at once
_HESSIAN_STEP = 1e-5


class ModeEvidence(NamedTuple):
    """Importance-sampling ``log Z`` at the best posterior mode found, and its standard error."""

    log_evidence: float
    std: float


def _negative_log_joint(model, X, y):
    """``theta -> (-log p(theta, X), its gradient)`` for one point, in double precision."""
    def value_and_grad(theta):
        point = theta[None]
        log_lik, grad = model.log_likelihood_and_grad(point, X, y, 1.0)
        return -(model.log_prior(point)[0] + log_lik[0]), -(model.grad_log_prior(point)[0] + grad[0])
    return value_and_grad


#: Starts whose objective values (negative log joint, nats) lie this close are taken for one fit.
_SAME_FIT = 1e-3


def _distinct_starts(objective, starts):
    """``starts`` with one kept per distinct fit (objective values within ``_SAME_FIT``), in their order.

    EM from different k-means++ starts mostly converges to the same few fits, up to a relabelling that leaves
    the objective unchanged; refining each copy again would find the same minimum.
    """
    values, kept = [], []
    for start in starts:
        with np.errstate(all="ignore"):
            value = float(objective(start)[0])
        if np.isfinite(value) and all(abs(value - other) > _SAME_FIT for other in values):
            values.append(value)
            kept.append(start)
    return kept


def _best_mode(objective, starts):
    """The lowest of the quasi-Newton minima reached from the distinct ``starts`` (None if none is finite)."""
    best = None
    for start in _distinct_starts(objective, starts):
        with np.errstate(all="ignore"):
            result = optimize.minimize(objective, start, jac=True, method="L-BFGS-B",
                                       options={"maxiter": 2000, "gtol": 1e-8})
        if np.isfinite(result.fun) and (best is None or result.fun < best.fun):
            best = result
    return None if best is None else best.x


def _scale_at(objective, mode):
    """Inverse Hessian of the negative log joint at ``mode`` (central differences), or None if not positive."""
    n = len(mode)
    hessian = np.empty((n, n))
    for j in range(n):
        step = np.zeros(n)
        step[j] = _HESSIAN_STEP
        hessian[:, j] = (objective(mode + step)[1] - objective(mode - step)[1]) / (2 * _HESSIAN_STEP)
    hessian = 0.5 * (hessian + hessian.T)
    if not np.all(np.isfinite(hessian)) or np.linalg.eigvalsh(hessian)[0] <= 0:
        return None
    return np.linalg.inv(hessian)


def mode_importance_log_evidence(model, X, y, rng, *, n_draws=MODE_CHECK_DRAWS, n_starts=MODE_CHECK_STARTS):
    """``log Z`` by importance sampling at the best posterior mode found, symmetrised over label symmetries.

    The model supplies ``mode_starts(rng, X, n_starts)`` (points to refine into
    modes) and optionally ``mode_symmetries()`` (linear maps ``A`` under which the
    posterior is invariant, e.g. a mixture's relabellings; their number is
    ``n_mode_symmetries``). The proposal is the
    equal mixture over the maps of a multivariate t (5 degrees of freedom, scale
    1.2 times the inverse Hessian) at the mode. The estimate is unbiased for the
    mass the proposal reaches, so with separated modes it reads low rather than
    high; its standard error is the delta-method ``sd(w) / (mean(w) sqrt(S))``.

    Parameters
    ----------
    model : Model
        A model with ``mode_starts``.
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or None
    rng : numpy.random.Generator
    n_draws, n_starts : int
        Importance draws and starting points of the mode search.

    Returns
    -------
    ModeEvidence or None
        None when no mode with a positive-definite Hessian was found.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models import GaussianMixtureModel
    >>> X = np.random.default_rng(0).normal(size=(200, 1))
    >>> model = GaussianMixtureModel(1, 1)
    >>> check = mode_importance_log_evidence(model, X, None, np.random.default_rng(0))
    >>> bool(abs(check.log_evidence - model.exact_log_evidence(X)) < 5 * check.std + 0.01)
    True
    """
    objective = _negative_log_joint(model, X, y)
    mode = _best_mode(objective, model.mode_starts(rng, X, n_starts))
    scale = None if mode is None else _scale_at(objective, mode)
    if scale is None:
        return None
    symmetries = model.mode_symmetries() if hasattr(model, "mode_symmetries") else np.eye(len(mode))[None]
    proposal = symmetrised_t(mode, _INFLATE * scale, _DF, symmetries)
    log_weights = np.concatenate([_block_log_weights(model, X, y, rng, proposal, size)
                                  for size in np.diff(np.r_[0:n_draws:_DRAW_BLOCK, n_draws])])
    top = float(np.max(log_weights))
    if not np.isfinite(top):
        return ModeEvidence(top, float("nan"))
    # Exactly rounded sums: numpy's vectorised reductions can differ in the last bit with the array's memory
    # alignment, and a check's numbers must be the same whichever thread or worker ran it.
    ratios = np.exp(log_weights - top)
    mean = math.fsum(ratios) / len(ratios)
    std = math.sqrt(math.fsum((ratios - mean) ** 2) / len(ratios))
    return ModeEvidence(top + math.log(mean), std / mean / math.sqrt(len(ratios)))


class SymmetrisedT(NamedTuple):
    """A multivariate t at a mode and the equal mixture of its images under the maps ``A`` (see
    :func:`symmetrised_t`).

    The density is evaluated in whitened coordinates: with ``shape = L L^T``,
    ``t(A theta)`` needs ``|L^{-1} (A theta - loc)|^2``, and the rows
    ``theta^T A^T L^{-T}`` of every map come from one matrix product.
    """

    distribution: object  # the frozen scipy.stats.multivariate_t at the mode (its draws)
    maps: np.ndarray  # (n_maps, n_params, n_params), the A's
    whitened_maps: np.ndarray  # (n_params, n_maps * n_params): A^T L^{-T} side by side
    whitened_loc: np.ndarray  # (n_params,): L^{-1} loc
    log_norm: float  # the t density's log normalising constant
    df: float
    workspace: Workspace  # scratch for the density's blocks, reused by every block of draws


def symmetrised_t(loc, shape, df, maps):
    """The :class:`SymmetrisedT` of ``multivariate_t(loc, shape, df)`` and the linear ``maps``.

    Raises
    ------
    numpy.linalg.LinAlgError
        When ``shape`` is not positive definite.
    """
    n = len(loc)
    chol = np.linalg.cholesky(shape)
    inverse_chol_t = solve_triangular(chol, np.eye(n), lower=True).T
    whitened_maps = np.concatenate([A.T @ inverse_chol_t for A in maps], axis=1)
    log_norm = (gammaln(0.5 * (df + n)) - gammaln(0.5 * df) - 0.5 * n * math.log(df * math.pi)
                - float(np.sum(np.log(np.diag(chol)))))
    return SymmetrisedT(stats.multivariate_t(loc=loc, shape=shape, df=df), np.asarray(maps), whitened_maps,
                        loc @ inverse_chol_t, log_norm, float(df), Workspace())


def symmetrised_log_density(proposal, theta):
    """``log mean_A t(A theta)`` of a :class:`SymmetrisedT` at the rows of ``theta`` ``(n, n_params)``.

    The maps run in blocks that keep the whitened points within ``_CELLS_PER_CALL`` numbers, written into the
    proposal's workspace: fresh blocks of that size would each cost an ``mmap`` and a page fault per page.
    """
    n_points, n_params = theta.shape
    n_maps = len(proposal.maps)
    per_call = max(1, _CELLS_PER_CALL // (n_points * n_params))
    log_t = proposal.workspace.get("log_t", (n_points, n_maps))
    for start in range(0, n_maps, per_call):
        stop = min(start + per_call, n_maps)
        whitened = np.matmul(theta, proposal.whitened_maps[:, start * n_params: stop * n_params],
                             out=proposal.workspace.get("whitened", (n_points, (stop - start) * n_params)))
        whitened = whitened.reshape(n_points, stop - start, n_params)
        whitened -= proposal.whitened_loc
        np.einsum("ijk,ijk->ij", whitened, whitened, out=log_t[:, start:stop])
    # log_norm - (df + n_params) / 2 * log1p(|whitened|^2 / df), in place
    df = proposal.df
    log_t /= df
    np.log1p(log_t, out=log_t)
    log_t *= 0.5 * (df + n_params)
    np.subtract(proposal.log_norm, log_t, out=log_t)
    return logsumexp(log_t, axis=1, overwrite_input=True) - math.log(n_maps)


def _block_log_weights(model, X, y, rng, proposal, size):
    """Importance log-weights of ``size`` draws: a t draw at the mode, moved by a random symmetry."""
    base = proposal.distribution.rvs(size=size, random_state=rng).reshape(size, -1)
    which = rng.integers(len(proposal.maps), size=size)
    # A few draws' maps at a time: all of a block's (size, n_params, n_params) at once would be allocated afresh.
    theta = np.concatenate([np.einsum("nij,nj->ni", proposal.maps[which[start:start + _MAPS_PER_CALL]],
                                      base[start:start + _MAPS_PER_CALL])
                            for start in range(0, size, _MAPS_PER_CALL)])
    # q(theta) = mean over the maps A of t(A theta): the set of maps is closed under inversion, |det A| = 1.
    log_q = symmetrised_log_density(proposal, theta)
    with np.errstate(all="ignore"):
        log_joint = model.log_prior(theta) + log_lik_sum(model, theta, X, y, allow_nan=True,
                                                            max_cells=_CELLS_PER_CALL)
    return np.where(np.isfinite(log_joint), log_joint - log_q, -np.inf)


def _checkable(model, state):
    """Whether the online state can be checked: a model with mode starts, few symmetries, every row stored."""
    if not hasattr(model, "mode_starts") or state.n_samples_seen > MODE_CHECK_ROWS:
        return False
    if state.reservoir.n_stored != state.n_samples_seen:
        return False
    return getattr(model, "n_mode_symmetries", 1) <= MAX_MODE_SYMMETRIES


def mode_check_due(n_seen_before, n_seen, *, surprised=False):
    """Whether the chunk that took the rows seen from ``n_seen_before`` to ``n_seen`` is checked.

    After the chunks that cross a checkpoint ``floor(MODE_CHECK_UNIT *
    MODE_CHECK_GROWTH**j)`` and after the chunks that ``surprised`` the
    particles (a restart or an excursion ran): a chunk whose rows the particles
    did not foresee, such as a cluster arriving late, is where they most likely
    settle in a poorer configuration, and the check costs little next to the
    replay it follows. The chunks alone decide, so ``fit`` and ``partial_fit``
    over the same chunks check the same ones.
    """
    return surprised or crossed_checkpoint(n_seen_before, n_seen, MODE_CHECK_UNIT, MODE_CHECK_GROWTH)


def check_against_mode(state, model, n_seen_before, estimator_name, *, surprised=False):
    """Check an online state's evidence against its posterior's best mode after a chunk, when due.

    ``n_seen_before`` is the rows seen before the chunk; :func:`mode_check_due`
    decides whether the chunk is checked, :func:`apply_mode_check` checks it.

    Returns
    -------
    state : SGAISState
        With ``mode_gap_variance`` updated when the check ran.
    check : ModeEvidence or None
        None when no check ran.
    """
    if not mode_check_due(n_seen_before, state.n_samples_seen, surprised=surprised):
        return state, None
    return apply_mode_check(state, model, estimator_name)


def apply_mode_check(state, model, estimator_name):
    """Check an online state's evidence against its posterior's best mode, now.

    The check runs for a model with ``mode_starts`` and at most
    :data:`MAX_MODE_SYMMETRIES` label symmetries, while every row is stored and
    there are at most :data:`MODE_CHECK_ROWS`. Its generator is a copy of the
    state's, so the run's own draws do not change, and checking the same state
    twice gives the same numbers. When ``log Z`` reads below the mode's value by
    more than :data:`MODE_GAP_SIGMAS` combined standard deviations the gap is
    kept as ``SGAISState.mode_gap_variance`` (``log_evidence_std`` includes it)
    and an :class:`EvidenceConvergenceWarning` names the cure; a check that
    passes clears it. The warning names the user's line that called.

    Returns
    -------
    state : SGAISState
        With ``mode_gap_variance`` updated when the check ran.
    check : ModeEvidence or None
        None when no check ran (the state cannot be checked, or no mode was found).
    """
    if not _checkable(model, state):
        return state, None
    n_seen = state.n_samples_seen
    X, y = reservoir_data(state.reservoir)
    try:
        check = mode_importance_log_evidence(model, X, y, make_generator(state.rng))
    except (np.linalg.LinAlgError, ValueError):  # a degenerate mode (e.g. a scale that is not positive definite)
        check = None
    if check is None or not (np.isfinite(check.log_evidence) and np.isfinite(check.std)):
        return state, None
    log_z, std = evidence_estimate(state._replace(mode_gap_variance=0.0))
    gap = check.log_evidence - log_z
    failed = gap > MODE_GAP_SIGMAS * math.hypot(std, check.std)
    if failed:
        warn(
            f"{estimator_name}: importance sampling at the best posterior mode that optimisation finds on the "
            f"{n_seen} rows gives log Z = {check.log_evidence:.2f} +/- {check.std:.2g}, {gap:.2f} nats above "
            f"the SGAIS estimate {log_z:.2f} +/- {std:.2g}: the particles missed posterior mass (e.g. a better "
            "cluster configuration). The reported standard error now includes the gap and evidence_checks_ names "
            "'posterior_mode'; ChunkRecord.mode_log_evidence records the checks made after chunks. Cure: more "
            "n_mcmc_steps or n_particles, or a reference evidence "
            "on the rows (log_evidence with method='ais' and more n_chains and n_mcmc_steps than its defaults)",
            EvidenceConvergenceWarning)
    return state._replace(mode_gap_variance=gap**2 if failed else 0.0), check
