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
(``ModeCheckSettings.max_rows``; its numbers are a :class:`~._settings.ModeCheckSettings`).
"""

import dataclasses
import math
from typing import NamedTuple

import numpy as np
from scipy import optimize, stats
from scipy.linalg import solve_triangular
from scipy.special import gammaln

from ._reservoir import reservoir_data
from ..utils import logsumexp, make_generator
from ..utils._likelihood import approximate_total, log_lik_sum
from ..utils._workspace import Workspace
from ._policy import crossed_checkpoint
from ._settings import ModeCheckSettings
from ._state import evidence_estimate, standing_groups

__all__ = ["ModeCheck", "central_hessian", "checked_widening", "compare_with_mode", "importance_at_mode",
           "importance_estimate", "importance_log_weights",
           "negative_log_joint", "best_mode", "local_modes", "ModeEvidence", "mode_importance_log_evidence",
           "mode_check_due", "apply_mode_check", "search_starts", "remembered_modes", "model_checkable",
           "mode_proposal", "rows_checkable",
           "rows_mode_evidence", "finite_evidence", "DEGENERATE_MODE_ERRORS", "symmetrised_draws",
           "symmetrised_t", "symmetrised_log_density", "SymmetrisedT"]

# Point-row pairs per likelihood call: a mixture's (K, points, rows) block then stays within its reusable
# buffers at any row count (K of them per pair, 4 MiB each).
_CELLS_PER_CALL = 2**19
_MAPS_PER_CALL = 16  # draws moved by their symmetries at once
#: What a degenerate mode raises in the search or the importance sampling (e.g. a scale that is not positive
#: definite): the check then has no value.
DEGENERATE_MODE_ERRORS = (np.linalg.LinAlgError, ValueError)


@dataclasses.dataclass(frozen=True)
class ModeEvidence:
    """Importance-sampling ``log Z`` at the best posterior mode found, and its standard error.

    ``proposal`` is the :class:`SymmetrisedT` the draws came from, where the value was just taken (a restart
    draws from it again, :mod:`._mode_restart`), and ``modes`` the lowest distinct minima the search found,
    ``(n, n_params)``, the best first (the run's next search starts from them, ``SGAISState.known_modes``); they
    take no part in comparisons and are never pickled with the value.
    """

    log_evidence: float
    std: float
    mode_objective: float = math.nan  # the negative log joint at the mode on the same rows (NaN: not known)
    n_draws: int = 0  # the importance draws behind the value (0: not known)
    laplace_log_evidence: float = math.nan  # the Laplace approximation at the same mode, symmetrised (NaN: none)
    fit_spread: float = math.nan  # the truncated weights' relative standard deviation (NaN: not known)
    proposal: object = dataclasses.field(default=None, compare=False, repr=False)
    modes: object = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def weight_spread(self):
        """The importance weights' relative standard deviation, ``sd(w) / mean(w)``: how far the proposal is
        from the posterior, whatever the number of draws (NaN where that is not known). Heavy-tailed weights make
        it swing with a few heavy draws; ``fit_spread`` is the same measure robust to them."""
        return self.std * math.sqrt(self.n_draws) if self.n_draws else math.nan

    def _replace(self, **changes):
        """A copy with ``changes`` (as a named tuple's ``_replace``)."""
        return dataclasses.replace(self, **changes)

    def without_proposal(self):
        """The same value without its proposal and the search's modes (what travels to a worker process or into
        a pickle)."""
        return dataclasses.replace(self, proposal=None, modes=None)

    def __getstate__(self):
        return {**self.__dict__, "proposal": None, "modes": None}

    def __setstate__(self, state):
        # A value pickled before a field was added takes that field's default.
        self.__dict__.update({field.name: field.default for field in dataclasses.fields(self)}, **state)


class ModeCheck(NamedTuple):
    """One posterior-mode check of a run's evidence (:func:`apply_mode_check`)."""

    evidence: ModeEvidence  # the mode's value on the rows
    log_evidence: float  # the run's log evidence and its std without a posterior-mode gap
    std: float
    gap: float  # evidence.log_evidence - log_evidence
    failed: bool  # the gap exceeds gap_sigmas combined standard deviations


def negative_log_joint(model, X, y, tempering=1.0):
    """``theta -> (-log p(theta) - tempering log L(theta), its gradient)`` for one point, in double precision
    (``tempering=1``: the negative log joint ``-log p(theta, X)``)."""
    def value_and_grad(theta):
        point = theta[None]
        log_lik, grad = model.log_likelihood_and_grad(point, X, y, tempering)
        return -(model.log_prior(point)[0] + log_lik[0]), -(model.grad_log_prior(point)[0] + grad[0])
    return value_and_grad


def _distinct_starts(objective, starts, same_fit):
    """``starts`` with one kept per distinct fit (objective values within ``same_fit`` nats), in their order.

    EM from different k-means++ starts mostly converges to the same few fits, up to a relabelling that leaves
    the objective unchanged; refining each copy again would find the same minimum.
    """
    values, kept = [], []
    for start in starts:
        with np.errstate(all="ignore"):
            value = float(objective(start)[0])
        if np.isfinite(value) and all(abs(value - other) > same_fit for other in values):
            values.append(value)
            kept.append(start)
    return kept


def local_modes(objective, starts, same_fit):
    """The distinct finite quasi-Newton minima reached from the distinct ``starts``, lowest first (in the starts'
    order where they tie); minima whose values lie within ``same_fit`` nats of a lower one kept are one."""
    minima = []
    for start in _distinct_starts(objective, starts, same_fit):
        with np.errstate(all="ignore"):
            result = optimize.minimize(objective, start, jac=True, method="L-BFGS-B",
                                       options={"maxiter": 2000, "gtol": 1e-8})
        if np.isfinite(result.fun):
            minima.append(result)
    distinct = []
    for result in sorted(minima, key=lambda result: result.fun):
        if not distinct or result.fun - distinct[-1].fun > same_fit:
            distinct.append(result)
    return [result.x for result in distinct]


def search_starts(model, X, rng, settings, known_modes=None):
    """A mode search's starts on the rows ``X``: the ``known_modes`` an earlier search of the run found (None:
    none), then the model's ``settings.n_fresh_starts`` k-means++ starts where there are known modes, else
    ``settings.n_starts``."""
    if known_modes is None or len(known_modes) == 0:
        return model.mode_starts(rng, X, settings.n_starts)
    return np.vstack([known_modes, model.mode_starts(rng, X, settings.n_fresh_starts)])


def best_mode(objective, starts, same_fit):
    """The lowest of the quasi-Newton minima reached from the distinct ``starts`` (None if none is finite)."""
    minima = local_modes(objective, starts, same_fit)
    return minima[0] if minima else None


def central_hessian(gradient, point, step):
    """The symmetrised Hessian at ``point`` by central differences of ``gradient`` (``theta -> grad``) of
    half-width ``step`` along each coordinate."""
    n = len(point)
    hessian = np.empty((n, n))
    for j in range(n):
        offset = np.zeros(n)
        offset[j] = step
        hessian[:, j] = (gradient(point + offset) - gradient(point - offset)) / (2 * step)
    return 0.5 * (hessian + hessian.T)


def _scale_at(objective, mode, hessian_step):
    """Inverse Hessian of the negative log joint at ``mode`` (central differences), or None if not positive."""
    hessian = central_hessian(lambda theta: objective(theta)[1], mode, hessian_step)
    if not np.all(np.isfinite(hessian)) or np.linalg.eigvalsh(hessian)[0] <= 0:
        return None
    return np.linalg.inv(hessian)


def mode_importance_log_evidence(model, X, y, rng, settings=ModeCheckSettings(), known_modes=None, loose_std=0.0):
    """``log Z`` by importance sampling at the best posterior mode found, symmetrised over label symmetries.

    The model supplies ``mode_starts(rng, X, n_starts)`` (points to refine into
    modes) and optionally ``mode_symmetries()`` (linear maps ``A`` under which the
    posterior is invariant, e.g. a mixture's relabellings; their number is
    ``n_mode_symmetries``). The proposal is the
    equal mixture over the maps of a multivariate t (``settings.df`` degrees of
    freedom, scale ``settings.inflate`` times the inverse Hessian) at the mode.
    The estimate is unbiased for the
    mass the proposal reaches, so with separated modes it reads low rather than
    high; its standard error is the delta-method ``sd(w) / (mean(w) sqrt(S))``.

    Parameters
    ----------
    model : Model
        A model with ``mode_starts``.
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or None
    rng : numpy.random.Generator
    settings : ModeCheckSettings, default=ModeCheckSettings()
        Importance draws, starting points of the mode search, the proposal's shape.
    known_modes : ndarray of shape (n_modes, n_params), optional
        Minima an earlier search found (on fewer rows): the search starts from them and from
        ``settings.n_fresh_starts`` new points (:func:`search_starts`).
    loose_std : float, default=0.0
        Where the proposal does not fit the posterior, the draws also stop once the value's standard error is at
        most this (:func:`importance_at_mode`).

    Returns
    -------
    ModeEvidence or None
        None when no mode with a positive-definite Hessian was found; its ``modes`` are the search's lowest
        ``settings.n_known_modes`` distinct minima.

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
    objective = negative_log_joint(model, X, y)
    modes = local_modes(objective, search_starts(model, X, rng, settings, known_modes), settings.same_fit)
    evidence = importance_at_mode(model, (X, y), rng, (objective, modes[0] if modes else None), settings,
                                  loose_std=loose_std)
    return None if evidence is None else evidence._replace(modes=np.array(modes[:settings.n_known_modes]))


def importance_at_mode(model, rows, rng, objective_and_mode, settings, n_draws=None, loose_std=0.0):
    """The importance-sampling step of :func:`mode_importance_log_evidence` at a mode already found.

    ``objective_and_mode`` is ``(objective, mode)``: the negative log joint on ``rows`` ``(X, y)``
    (:func:`negative_log_joint`) and the point it is minimised at (None: no mode). With ``n_draws`` the sampler
    draws that many points; by default it draws ``settings.draw_block`` at a time until the estimate's standard
    error is at most ``settings.target_std``, with between ``settings.min_draws`` and ``settings.n_draws`` draws,
    or at most ``loose_std`` where the proposal does not fit the posterior (its truncated weights spread by more
    than ``settings.restart_spread``: no restart will draw from it, and the value serves a comparison whose
    error the caller's estimate dominates). Each draw costs a likelihood evaluation of every row, so the draws
    are most of the check's cost. Returns a :class:`ModeEvidence` (with the objective at the mode), or None
    without a mode or a positive-definite Hessian.
    """
    objective, mode = objective_and_mode
    X, y = rows
    scale = None if mode is None else _scale_at(objective, mode, settings.hessian_step)
    if scale is None:
        return None
    proposal = mode_proposal(model, mode, settings.inflate * scale, settings)
    adaptive = n_draws is None and settings.target_std > 0
    n_draws = settings.n_draws if n_draws is None else n_draws
    mode_objective = float(objective(mode)[0])
    known = dict(mode_objective=mode_objective, proposal=proposal,
                 laplace_log_evidence=_laplace_log_evidence(mode_objective, scale, proposal.n_symmetries))
    log_weights = np.empty(0)
    for size in np.diff(np.r_[0:n_draws:settings.draw_block, n_draws]):
        log_weights = np.concatenate([log_weights, _block_log_weights(model, X, y, rng, proposal, size)])
        if adaptive and settings.min_draws <= len(log_weights) < n_draws:
            estimate = importance_estimate(log_weights)
            if estimate.std <= max(settings.target_std,
                                   loose_std if estimate.fit_spread > settings.restart_spread else 0.0):
                return estimate._replace(**known)
    return importance_estimate(log_weights)._replace(**known)


def _laplace_log_evidence(mode_objective, scale, n_symmetries):
    """The Laplace approximation of ``log Z`` at a mode (``scale`` the inverse Hessian there), times its
    ``n_symmetries`` copies: what the evidence would be if the posterior were Gaussian around each copy."""
    n_params = len(scale)
    return (-mode_objective + 0.5 * n_params * math.log(2 * math.pi) + 0.5 * np.linalg.slogdet(scale)[1]
            + math.log(n_symmetries))


def importance_estimate(log_weights):
    """The :class:`ModeEvidence` of importance ``log_weights``: ``log mean w``, its delta-method error, and the
    proposal's fit (``fit_spread``: the relative standard deviation of the weights truncated at ``sqrt(S)``
    times their mean, ``S`` draws, as in truncated importance sampling; Ionides 2008).

    Where the weights are heavy-tailed, a single heavy draw among thousands moves their plain spread from 2 to 4
    and back between draw sets; truncated, it stays within a few tenths, so a decision on the proposal's fit
    (:func:`~._mode_restart.restarts_at_mode`) does not turn on one draw. The estimate keeps every weight whole.
    """
    top = float(np.max(log_weights))
    if not np.isfinite(top):
        return ModeEvidence(top, float("nan"), n_draws=len(log_weights))
    ratios = np.exp(log_weights - top)
    mean, std = _mean_and_std(ratios)
    truncated_mean, truncated_std = _mean_and_std(np.minimum(ratios, mean * math.sqrt(len(ratios))))
    return ModeEvidence(top + math.log(mean), std / mean / math.sqrt(len(ratios)), n_draws=len(ratios),
                        fit_spread=truncated_std / truncated_mean)


def _mean_and_std(values):
    """``(mean, standard deviation)`` of ``values`` by exactly rounded sums: numpy's vectorised reductions can
    differ in the last bit with the array's memory alignment, and a check's numbers must be the same whichever
    thread or worker ran it."""
    mean = math.fsum(values) / len(values)
    return mean, math.sqrt(math.fsum((values - mean) ** 2) / len(values))


def mode_proposal(model, mode, shape, settings):
    """The importance sampler's proposal at ``mode``: a multivariate t of scale ``shape`` and ``settings.df``
    degrees of freedom, symmetrised over the model's label symmetries (a :class:`SymmetrisedT`).

    With at most ``settings.max_symmetries`` symmetries its density sums over all of them. With more (a mixture
    of six or seven components has 720 or 5040), the sum keeps the maps whose copy of the mode lies within
    ``settings.copy_radius * sqrt(n_params)`` whitened units of the mode (the t's own draws lie about
    ``1.3 sqrt(n_params)`` from it), and the draws come from the mode's own copy: the posterior and the full sum
    take the same value at every copy of a point, so these weights are distributed as those of draws from every
    copy. Copies of a mode whose components differ lie many posterior widths apart, and the terms left out are
    then negligible at the draws; the estimate reads high by their share of the density, where the check treats
    it as the mass at the mode, below the evidence. Components that nearly coincide bring their swaps' copies
    near the mode, and those maps are kept.
    """
    maps = model.mode_symmetries()
    if len(maps) <= settings.max_symmetries:
        return symmetrised_t(mode, shape, settings.df, maps)
    chol = np.linalg.cholesky(shape)
    offsets = solve_triangular(chol, (maps @ mode - mode).T, lower=True)  # (n_params, n_maps), whitened
    near = np.einsum("ij,ij->j", offsets, offsets) <= settings.copy_radius**2 * len(mode)
    return symmetrised_t(mode, shape, settings.df, maps[near], n_symmetries=len(maps))


class SymmetrisedT(NamedTuple):
    """A multivariate t at a mode and the equal mixture of its images under the maps ``A`` (see
    :func:`symmetrised_t`), of all ``n_symmetries`` of them or of those near the mode (:func:`mode_proposal`).

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
    n_symmetries: int  # the symmetries' number: len(maps), or more where only the maps near the mode are listed


def symmetrised_t(loc, shape, df, maps, n_symmetries=None):
    """The :class:`SymmetrisedT` of ``multivariate_t(loc, shape, df)`` and the linear ``maps``; ``n_symmetries``
    (default ``len(maps)``) is the number of symmetries whose mean the density is, where ``maps`` lists only the
    terms that matter (:func:`mode_proposal`).

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
                        loc @ inverse_chol_t, log_norm, float(df), Workspace(),
                        len(maps) if n_symmetries is None else int(n_symmetries))


def symmetrised_log_density(proposal, theta):
    """``log mean_A t(A theta)`` of a :class:`SymmetrisedT` at the rows of ``theta`` ``(n, n_params)`` (the sum over
    the listed maps, over ``n_symmetries``).

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
    return logsumexp(log_t, axis=1, overwrite_input=True) - math.log(proposal.n_symmetries)


def symmetrised_draws(proposal, rng, size):
    """``size`` draws of a :class:`SymmetrisedT`: a t draw at the mode, moved by a random symmetry (where the
    proposal lists them all; else at the mode's own copy, see :func:`mode_proposal`), shape ``(size, n_params)``."""
    theta = proposal.distribution.rvs(size=size, random_state=rng).reshape(size, -1)
    if len(proposal.maps) == proposal.n_symmetries:
        which = rng.integers(len(proposal.maps), size=size)
        # A few draws' maps at a time: all of a block's (size, n_params, n_params) at once would be allocated.
        theta = np.concatenate([np.einsum("nij,nj->ni", proposal.maps[which[start:start + _MAPS_PER_CALL]],
                                          theta[start:start + _MAPS_PER_CALL])
                                for start in range(0, size, _MAPS_PER_CALL)])
    return theta


def _block_log_weights(model, X, y, rng, proposal, size):
    """Importance log-weights of ``size`` draws of the proposal (:func:`symmetrised_draws`)."""
    return importance_log_weights(model, (X, y), proposal, symmetrised_draws(proposal, rng, size))


def importance_log_weights(model, rows, proposal, theta):
    """``log p(theta, rows) - log q(theta)`` of draws ``theta`` of the :class:`SymmetrisedT` ``proposal`` on the
    rows ``(X, y)`` (``-inf`` where the joint is not finite), the likelihood by the model's
    :meth:`~evidence_select.models.Model.approximate_log_likelihood_sum`: each draw costs a pass over every row."""
    X, y = rows
    # q(theta) = mean over the maps A of t(A theta): the set of maps is closed under inversion, |det A| = 1 (the
    # listed maps' sum over all symmetries' number, where mode_proposal left out the far ones).
    log_q = symmetrised_log_density(proposal, theta)
    with np.errstate(all="ignore"):
        log_joint = model.log_prior(theta) + log_lik_sum(model, theta, X, y, allow_nan=True,
                                                            max_cells=_CELLS_PER_CALL, total=approximate_total(model))
    return np.where(np.isfinite(log_joint), log_joint - log_q, -np.inf)


def model_checkable(model, settings):
    """Whether the check can value ``model``'s posterior: a declared mode search, and at most
    ``settings.max_symmetries`` label symmetries, or at most ``settings.max_listed_symmetries`` whose maps hold at
    most ``settings.max_listed_entries`` numbers (:func:`mode_proposal` builds them all to list the near ones)."""
    if not model.capabilities().mode_search:
        return False
    n_symmetries = model.n_mode_symmetries
    if n_symmetries <= settings.max_symmetries:
        return True
    return (n_symmetries <= settings.max_listed_symmetries
            and n_symmetries * model.n_params**2 <= settings.max_listed_entries)


def rows_checkable(model, n_rows, settings):
    """Whether ``n_rows`` rows of ``model`` can be checked: a checkable model (:func:`model_checkable`), few rows."""
    return n_rows <= settings.max_rows and model_checkable(model, settings)


def rows_mode_evidence(model, X, y, rng, settings, known_modes=None, loose_std=0.0):
    """The check's value on the rows ``(X, y)``: :func:`mode_importance_log_evidence` (its search also from
    ``known_modes``, its draws stopping at ``loose_std`` where the proposal does not fit), or None where no finite
    value was found (no mode with a positive-definite Hessian, or a degenerate one)."""
    try:
        evidence = mode_importance_log_evidence(model, X, y, rng, settings, known_modes, loose_std)
    except DEGENERATE_MODE_ERRORS:
        return None
    return finite_evidence(evidence)


def finite_evidence(evidence):
    """``evidence`` (a :class:`ModeEvidence` or None), or None where its value or error is not finite."""
    if evidence is None or not (np.isfinite(evidence.log_evidence) and np.isfinite(evidence.std)):
        return None
    return evidence


def mode_check_due(n_seen_before, n_seen, settings, *, surprised=False):
    """Whether the chunk that took the rows seen from ``n_seen_before`` to ``n_seen`` is due a check.

    The chunks that cross a checkpoint ``floor(settings.unit *
    settings.growth**j)`` and the chunks that ``surprised`` the particles or
    restarted: a chunk whose rows the particles did not
    foresee, such as a cluster arriving late, is where they most likely settle
    in a poorer configuration, and the check costs little next to the replay
    a surprise asks for. (The engine also checks the last chunk of every call, see
    :func:`~._engine.sgais_update`.)
    """
    return surprised or crossed_checkpoint(n_seen_before, n_seen, settings.unit, settings.growth)


def apply_mode_check(state, model, settings, evidence=None):
    """Check an online state's evidence against its posterior's best mode, now.

    The check runs for a model it can value (:func:`model_checkable`: a mode
    search, and label symmetries it can list), while every row is stored. The mode's value is ``evidence`` where the caller computed it on the
    same rows (a restart's replays share one; past ``settings.max_rows`` rows
    only the replay gate, :mod:`._replay_gate`, computes one), else, with at
    most ``settings.max_rows`` rows, :func:`rows_mode_evidence` with a copy of the
    state's generator, so the run's own draws do not change, and checking the
    same state twice gives the same numbers. When ``log Z`` reads below the mode's value by
    more than ``settings.gap_sigmas`` combined standard deviations the gap is
    kept as ``SGAISState.widening.mode_gap_variance`` (``log_evidence_std``
    includes it) until a later check passes, which clears it; either way the
    gap replaces the degraded chunks' widening (:func:`checked_widening`). Where
    replicate groups were left behind in a poorer mode, the estimate is
    checked with the spread of the others (:func:`groups_to_check`), which
    then stands for the groups' until a restart or the next check.

    Returns
    -------
    state : SGAISState
        With ``widening.mode_gap_variance`` updated when the check ran.
    check : ModeCheck or None
        None when no check ran (the state cannot be checked, or no mode was found).
    """
    n_seen = state.n_samples_seen
    if state.reservoir.n_stored != n_seen or (evidence is None and not rows_checkable(model, n_seen, settings)):
        return state, None
    unchecked = state._replace(widening=state.widening._replace(
        mode_gap_variance=0.0, checked_groups=groups_to_check(state, settings), checked_variance=0.0))
    estimate = evidence_estimate(unchecked)
    check = evidence
    if check is None:
        loose_std = settings.relative_std * estimate[1] if np.isfinite(estimate[1]) else 0.0
        check = rows_mode_evidence(model, *reservoir_data(state.reservoir), make_generator(state.rng), settings,
                                   state.known_modes, loose_std)
    if check is None:
        return state, None
    result = compare_with_mode(estimate, check, settings)
    return state._replace(widening=checked_widening(unchecked.widening, result)), result


def groups_to_check(state, settings):
    """The replicate groups whose estimate a posterior-mode check measures (``ErrorWidening.checked_groups``):
    those that stand with the pool where others were left behind in a poorer mode by more than
    ``settings.gap_sigmas`` of their own errors (:func:`~._state.standing_groups`), else ``()``, all of them.

    The pooled estimate follows the better groups; checked against the mode's value with their own spread, the
    check measures whether they missed mass, where the spread of all groups would measure the gap between the
    groups' modes and pass any estimate.
    """
    standing = standing_groups(state.log_evidence, state.log_evidence_variance, settings.gap_sigmas)
    return () if standing.all() else tuple(int(g) for g in np.flatnonzero(standing))


def compare_with_mode(estimate, evidence, settings):
    """The :class:`ModeCheck` of an ``estimate`` ``(log_evidence, std)`` against the mode's value ``evidence``
    (a :class:`ModeEvidence`): failed when it reads below it by more than ``settings.gap_sigmas`` combined
    standard deviations."""
    log_z, std = estimate
    gap = evidence.log_evidence - log_z
    failed = bool(gap > settings.gap_sigmas * math.hypot(std, evidence.std))
    return ModeCheck(evidence=evidence, log_evidence=log_z, std=std, gap=gap, failed=failed)


def checked_widening(widening, check):
    """The :class:`~._state.ErrorWidening` after a posterior-mode ``check`` (a :class:`ModeCheck`) that measured
    ``check.gap`` (nats, the mode's value minus the estimate) and failed or passed.

    The measured gap replaces what degraded chunks added: a failed check keeps ``gap**2`` as the mode-gap
    variance and drops the degraded variance (the gap is the miss it guessed at); a passing check clears the
    mode gap and caps the degraded variance at ``gap**2``, the distance the check found between the estimate and
    the mode's value. Where the check measured some groups only (``widening.checked_groups``), a passing check
    keeps what it could vouch for as the least the checked groups' spread stands for (``checked_variance``): its
    gap where the estimate reads below the mode's value, and the mode value's own variance.
    """
    gap = check.gap
    if check.failed:
        return widening._replace(mode_gap_variance=gap**2, degraded_variance=0.0)
    checked_variance = max(gap, 0.0)**2 + check.evidence.std**2 if widening.checked_groups else 0.0
    return widening._replace(mode_gap_variance=0.0, degraded_variance=min(widening.degraded_variance, gap**2),
                             checked_variance=checked_variance)


def remembered_modes(state, check):
    """``state`` with the modes the posterior-mode ``check`` (a :class:`ModeCheck`, or None) found as its
    ``known_modes``, the next search's starts (the state unchanged where the check took no search)."""
    modes = None if check is None else check.evidence.modes
    return state if modes is None or len(modes) == 0 else state._replace(known_modes=modes)
