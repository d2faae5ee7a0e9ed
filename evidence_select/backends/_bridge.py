"""Gaussianized bridge sampling of the evidence (Jia and Seljak, AABI 2019).

1. **Posterior draws.** ``n_chains`` HMC chains start from the final
   particles of a short tempered run from the prior to the posterior,
   resampled by weight, so spread over the modes that run found in
   proportion to their mass (:mod:`._bridge_init`; ``init="prior"`` starts
   them at prior draws), adapt their step size and mass matrix during warm-up only
   (:func:`~evidence_select.kernels._adaptive_hmc.sample_chains`) and keep
   ``n_draws`` iterations each, every kept transition at a step shortened by a
   random factor down to ``step_jitter`` (so that regions curved more sharply
   than the bulk are entered too); while more than 1% of the kept transitions
   diverge, they adapt and run again at a target acceptance of 0.95, then
   0.99 (:func:`~._bridge_chains._chains_without_divergences`). Rank-normalised split R-hat
   and bulk ESS are checked on every parameter and on the log density.
2. **Proposal.** The kept iterations are split in two halves in time. An
   iterative Gaussianization (:mod:`evidence_select.backends._gaussianize`), a
   normalised density ``q``, is fitted to the first half.
3. **Optimal bridge.** With ``p`` the unnormalised posterior, ``n_p`` draws of
   the second half and ``n_q`` draws of ``q``, the ratio ``r = Z`` solves
   Meng and Wong's score equation (the excerpt's Eq. 3), solved by a bracketed
   root search (:func:`~._bridge_equation.solve_bridge_equation`). Its relative mean-square error
   is the excerpt's Eq. (9), whose posterior term carries the integrated
   autocorrelation time of ``f2`` along the chains. ``n_q`` follows the excerpt's adaptive rule: start
   at ``n_p``, then grow so that the proposal's share of Eq. (9) is
   ``error_fraction``, with at most ``evaluation_fraction`` of the likelihood
   evaluations (the sampling's and its own) spent on this half's proposal draws.
4. **Halves swapped.** The same is done with the roles of the halves swapped;
   the estimate is the mean of the two and its error the mean of their errors
   (an upper bound for any correlation between them). Two halves that disagree
   beyond their errors are a failed check and widen the error to cover both.
5. **Sandwich.** The same ``log p - log q`` values give importance sampling
   from ``q`` and reciprocal importance sampling from the posterior draws, a
   stochastic lower and upper bound of ``log Z`` (:func:`~._bridge_equation._sandwich`), recorded
   in ``info["log_evidence_bounds"]``. Eq. (9) is an average over the draws
   where ``q`` and the posterior overlap (:func:`~._bridge_equation._overlap_draws`); with too few
   of them, or when the bridge equation's solve fails, the error is widened
   until ``+- 3`` errors span the sandwich: a bridge without overlap can sit
   anywhere between the loose bounds (summed over cells, only the thin cells
   reach to theirs, :func:`_reach_of_cells`). A run whose stuck chains left the
   bridge is widened too (below). A proposal that overlaps the posterior only
   a little (``proposal_overlap``) is flagged, but keeps Eq. (9)'s error as
   long as enough draws lie in the overlap.

Modes the chains did not connect. Chains that never moved (a tenth or fewer
distinct draws) leave the bridge, since one repeated point would weigh a whole
chain's share, and fail the ``stuck_chains`` check; the draws left may miss
the region where those chains stuck (a thin tip where the step is too long),
which Eq. (9) cannot see. Tempered starts are draws from the posterior, so the
stuck chains' share of them measures the mass such places may hold, and the
error is widened to cover the bias of missing it (:func:`~._bridge_errors._stuck_share_std`);
with starts from the prior, or no chain moving, it spans the sandwich. The
remaining chains are grouped by mode (pairwise split R-hat at most ``mode_rhat``,
:mod:`._bridge_modes`). With 2 to ``max_modes`` groups (and not for a mixture
with ``K > 7``, whose label copies ``log K!`` already counts), each group gets
its own proposal, every point belongs to the cell of the proposal densest
there, and ``Z`` is the sum of one bridge per cell, over the posterior draws in
the cell and the proposal draws that fall in it. The relative number of chains
per mode, which follows the modes' basins of attraction rather than their
masses, then no longer matters; R-hat and ESS are checked within the groups,
and ``cells_separate`` asks that each group keep at least 90% of its draws in
its own cell (else chains that explore parts of one mode without mixing would
weigh those parts by their numbers). ``mode_census`` fails when more than
``max_unseen_modes`` of the chains are alone in their mode (the Good-Turing
chance that another chain would find a mode none found). With more than
``max_modes`` groups (more modes than chains, as in a product of two-peak
coordinates), ``mixing_rounds`` rounds of independence Metropolis from
proposals fitted to all chains' draws (:mod:`._bridge_mixing`) connect the
chains; their last round replaces the draws when it leaves at most
``max_modes`` groups and no stuck chain, and the bridge's proposal is then the
last round's mixture of the Gaussianization and the draws' marginal product:
it was fitted to the round before's draws, so to neither half of the draws it
bridges, and both halves use it as it is. Where the
rounds leave the chains unconnected, the bridge's posterior side is a few
modes out of many and its estimate misses the rest; each round's proposals
are then an importance sampler, ``Z = E_q[p / q]`` over every mode the
proposal reaches, and the last round's estimate (with at least
``min_importance_ess`` effective draws, ``importance_ess``, and not for
label-switching mixtures) is reported instead, its error widened to its distance from the round before
when they disagree (``importance_rounds_agree``); with fewer effective draws
the bridge's estimate stays, its error at least the importance estimate's
lead over it. The mode census still fails such a run. A mode no chain
reached and no proposal reaches stays invisible: that is what many chains
started from a tempered population are for.

Every failed check (R-hat, ESS, mode census, stuck chains, cells separate,
autocorrelation-time reliability, bridge iterations, proposal overlap, halves
agreeing) raises
:class:`~evidence_select.exceptions.EvidenceConvergenceWarning` and sets
``EvidenceResult.converged`` to False; the checks are in
``EvidenceResult.diagnostics``.

Label switching. A mixture posterior has ``K!`` symmetric label modes. For
:class:`GaussianMixtureModel` the draws are first put in a canonical labelling
(components sorted by their first mean coordinate, a linear map with
``|det| = 1`` that leaves ``p`` unchanged), ``q`` is fitted to them and then
*symmetrised*, ``q_sym(theta) = (1/K!) sum_sigma q(A_sigma theta)``, where
``A_sigma`` relabels the components in the unconstrained parameters (a
permutation of means and log-variances and, for the additive log-ratio weights,
``eta'_k = eta_sigma(k) - eta_sigma(K)``). ``q_sym`` is a normalised density
over all modes for any overlap between them. Because ``p`` and ``q_sym`` are
both label-invariant, un-relabelled proposal draws give the same ratios
``p / q_sym`` as relabelled ones would. For ``K > 7`` the estimate is corrected
by ``+log K!`` instead, which assumes the modes do not overlap. Other models
with ``n_components`` need not be label-symmetric (known unequal weights, for
example) and get no correction; chains that settle in different label modes
fail R-hat. The choice is recorded in ``info["label_switching"]``.
"""

import itertools
import logging
import math
import time
from typing import NamedTuple

import numpy as np

from ..kernels._hmc import KickedTarget
from ..models._mixture import mixture_relabel_maps
from ..utils._diagnostics import integrated_autocorrelation_time
from ._gaussianize import fit_gaussianization, settled_settings
from ..utils._likelihood import grad_lik_sum
from ..utils._logspace import logsumexp
from ..utils._random import make_generator
from ..utils._threads import single_threaded_blas
from ._ais import _check_data, _log_lik_and_grad, _log_lik_sum
from ._bridge_mixing import (FlowProposal, ImportanceEstimate, connect_modes, fit_mixture_proposal,
                             mixing_estimate)
from ._bridge_modes import cell_of, chain_mode_groups
from .._result import EvidenceResult, check, warn_not_converged
from ._bridge_chains import MAX_DIVERGENT_SHARE, _chain_checks, _drop_stuck_chains, _posterior_draws
from ._bridge_equation import (_f_terms, _overlap, _overlap_draws, _sandwich, bridge_relative_error,
                               solve_bridge_equation)
from ._bridge_errors import _combined_std, _log_z_bounds, _widened_std
from ._bridge_settings import BridgeSettings, _make_settings

__all__ = ["BridgeSettings", "bridge_log_evidence", "solve_bridge_equation", "bridge_relative_error",
           "mixture_relabel_maps", "integrated_autocorrelation_time"]

logger = logging.getLogger(__name__)

_MAX_PERMUTED_COMPONENTS = 7
_MIN_CELL_DRAWS = 50  # distinct draws to fit a group's proposal; posterior draws for a cell's bridge
_MIN_SEPARATION = 0.9  # share of each group's draws in its own cell for the cells to count as separate
_NEGLIGIBLE_SHARE = 1e-3  # a cell with less of Z moves log Z by less than this (nats)


# -- the unnormalised posterior, with an evaluation counter ---------------------------------
class _Posterior:
    """``log p(theta) = log prior + full-data log-likelihood``; NaN (overflow far out) counts as ``-inf``.

    :meth:`kicked` is the target of the HMC chains: for a model with a ``fast_gradient``, trajectories that kick
    with that gradient and read the exact density at their ends (exact, see
    :class:`~evidence_select.kernels._hmc.KickedTarget`).
    """

    def __init__(self, model, X, y):
        self.model, self.X, self.y = model, X, y
        self.n_calls = 0

    def kicked(self):
        """``with_grad``, or with a ``fast_gradient`` a KickedTarget on it (one call per leapfrog step either way)."""
        if not getattr(self.model, "fast_gradient", False):
            return self.with_grad
        return KickedTarget(self.with_grad, self._kick_gradient, self._density_at_kick)

    def _kick_gradient(self, theta):
        self.n_calls += len(theta)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return (np.asarray(self.model.grad_log_prior(theta), dtype=float)
                    + grad_lik_sum(self.model, theta, self.X, self.y))

    def _density_at_kick(self, theta):
        return self._log_density(theta), None  # counted with the kick at the same position

    def with_grad(self, theta):
        self.n_calls += len(theta)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            log_lik, grad_lik = _log_lik_and_grad(self.model, theta, self.X, self.y)
            value = np.asarray(self.model.log_prior(theta), dtype=float) + log_lik
            grad = np.asarray(self.model.grad_log_prior(theta), dtype=float) + grad_lik
        return np.where(np.isnan(value), -np.inf, value), grad, None

    def value(self, theta):
        self.n_calls += len(theta)
        return self._log_density(theta)

    def _log_density(self, theta):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            value = (np.asarray(self.model.log_prior(theta), dtype=float)
                     + _log_lik_sum(self.model, theta, self.X, self.y, allow_nan=True))
        return np.where(np.isnan(value), -np.inf, value)


# -- label symmetry ------------------------------------------------------------------------
def _label_strategy(model, label_permutations):
    """How to count the ``K!`` label modes: only :class:`GaussianMixtureModel` is known to have them.

    Other models with ``n_components`` (e.g. known, unequal weights) need not be
    label-symmetric, so nothing is assumed for them: chains started at prior
    draws that settle in different label modes fail the R-hat check instead.
    """
    from ..models._mixture import GaussianMixtureModel

    K = getattr(model, "n_components", None)
    if not label_permutations or not isinstance(model, GaussianMixtureModel) or K < 2:
        return "none", None, 0.0
    if K <= _MAX_PERMUTED_COMPONENTS:
        return "symmetrised", mixture_relabel_maps(model), 0.0
    return "log_k_factorial", None, float(math.lgamma(K + 1))


def _canonical_labels(model, draws):
    """Relabel each draw so that the components' first mean coordinates increase (``p`` unchanged)."""
    K, d = model.n_components, model.n_features
    order = np.argsort(draws[:, K - 1 + np.arange(K) * d], axis=1)
    index = {perm: i for i, perm in enumerate(itertools.permutations(range(K)))}
    which = np.array([index[tuple(row)] for row in order])
    maps = mixture_relabel_maps(model)
    out = np.empty_like(draws)
    for i in np.unique(which):
        rows = which == i
        out[rows] = draws[rows] @ maps[i].T
    return out


def _fit_proposal(rng, posterior, fit_draws, settings):
    """The bridge's proposal (``sample``, ``log_density``, ``layers``): the Gaussianization of ``fit_draws``, or
    with ``settings.proposal == "mixture"`` its mixture with their marginal product
    (:func:`~._bridge_mixing.fit_mixture_proposal`)."""
    if settings.proposal == "mixture":
        return fit_mixture_proposal(rng, posterior, fit_draws, settings.gaussianization)
    return FlowProposal(fit_gaussianization(rng, fit_draws, settings.gaussianization))


def _proposal_log_density(flow, maps, theta):
    """``log q`` of the fitted proposal, symmetrised over the relabelling maps when given."""
    if maps is None:
        return flow.log_density(theta)
    values = np.stack([flow.log_density(theta @ A.T) for A in maps])
    return logsumexp(values, axis=0) - np.log(len(maps))


# -- one bridge: fit q on one half, solve on the other -----------------------------------------
class _HalfResult(NamedTuple):
    log_z: float
    std: float
    n_iter: int
    converged: bool
    tau: float
    n_proposal: int
    overlap: float
    proposal_term: float
    posterior_term: float
    n_layers: int
    lower: float  # the sandwich of :func:`~._bridge_equation._sandwich`
    upper: float
    overlap_draws: float  # :func:`~._bridge_equation._overlap_draws`
    reach_lower: float  # how far off the estimate may be where Eq. (9) fails: the sandwich, or for a sum of cells
    reach_upper: float  # the cells' own +- 3 errors where they rest on enough overlap draws (:func:`_sum_of_cells`)


def _solve_adaptive(l1, more, tau_of, n_q_max, settings):
    """The bridge with the excerpt's adaptive ``n_q``: start at ``min(n_p, n_q_max)`` proposal draws, then grow
    to the number that makes the proposal's share of Eq. (9) ``error_fraction``, and solve again.

    ``more(n)`` returns ``log p - log q`` at ``n`` fresh proposal draws; ``tau_of(f2_post)`` the integrated
    autocorrelation time of ``f2`` at the posterior draws. Returns ``(log_r, std, n_iter, converged, tau, l2,
    proposal_term, posterior_term)``.
    """
    l2 = more(min(len(l1), n_q_max))
    for _ in range(2):  # the adaptive rule, then the final solve
        log_r, n_bridge, converged = solve_bridge_equation(l1, l2, settings.tol, settings.max_iter)
        f2_post, _ = _f_terms(l1, l2, log_r)
        tau = tau_of(f2_post)
        proposal_term, posterior_term = bridge_relative_error(l1, l2, log_r, tau)
        if not np.isfinite(proposal_term):
            # No proposal draw where p > 0 (a cell its own proposal does not reach): try the cap; if none lands
            # there either, there is no finite root and the error stays unbounded.
            wanted = n_q_max
        elif posterior_term > 0:
            wanted = proposal_term * len(l2) * (1.0 - settings.error_fraction) / (settings.error_fraction
                                                                                 * posterior_term)
        else:
            wanted = len(l2)
        n_q = int(min(np.ceil(wanted), n_q_max))
        if n_q <= len(l2):
            break
        l2 = np.concatenate([l2, more(n_q - len(l2))])
    std = float(np.sqrt(proposal_term + posterior_term))
    return float(log_r), std, n_bridge, converged, float(tau), l2, proposal_term, posterior_term


def _proposal_cap(n_p, n_eval_sampling, settings):
    """``f_eva``: one half's proposal draws at most ``evaluation_fraction`` of the sampling's evaluations and
    their own (the first ``n_p`` always)."""
    share = settings.evaluation_fraction / (1.0 - settings.evaluation_fraction)
    return max(min(settings.max_proposal, int(share * n_eval_sampling)), min(n_p, settings.max_proposal))


def _bridge_half(rng, posterior, fit_draws, eval_draws, eval_log_p, maps, n_eval_sampling, settings,
                 proposal=None):
    """Gaussianize ``fit_draws`` (or take ``proposal``, fitted to other draws); bridge with ``eval_draws``
    ``(n_chains, n_iter, d)`` and adaptive ``n_q``. Returns the :class:`_HalfResult` and the proposal."""
    n_chains, n_iter, d = eval_draws.shape
    flow = _fit_proposal(rng, posterior, fit_draws, settings) if proposal is None else proposal
    l1 = eval_log_p.ravel() - _proposal_log_density(flow, maps, eval_draws.reshape(-1, d))

    def more(n):
        if maps is None:
            draws, log_q = flow.sample_and_log_density(rng, n)
        else:
            draws = flow.sample(rng, n)
            log_q = _proposal_log_density(flow, maps, draws)
        return posterior.value(draws) - log_q

    def tau_of(f2_post):
        return integrated_autocorrelation_time(f2_post.reshape(n_chains, n_iter)) if n_iter >= 4 else 1.0

    log_r, std, n_bridge, converged, tau, l2, proposal_term, posterior_term = _solve_adaptive(
        l1, more, tau_of, _proposal_cap(len(l1), n_eval_sampling, settings), settings)
    bounds = _sandwich(l1, l2)
    return _HalfResult(log_r, std, n_bridge, converged, tau, len(l2), _overlap(l1, l2, log_r), proposal_term,
                       posterior_term, len(flow.layers), *bounds, _overlap_draws(l1, l2, log_r, tau), *bounds), flow


def _cells_half(rng, posterior, fit_draws, eval_draws, eval_log_p, groups, maps, n_eval_sampling, settings,
                cell_gaussianization=None):
    """The bridge over the cells of chains that sit in different modes (:mod:`._bridge_modes`).

    One proposal per group is fitted to that group's ``fit_draws`` ``(n_chains, n_iter, d)`` (with group
    ``m``'s Gaussianization settings ``cell_gaussianization[m]`` when given); each point belongs
    to the cell of the proposal densest there, and ``Z`` is the sum of one bridge per cell between
    ``p 1[cell]`` and its proposal, using every posterior draw in the cell (from any chain) and the proposal
    draws that fall in it (the others count with ``p = 0``); a cell holding fewer than ``_MIN_CELL_DRAWS``
    posterior draws gets importance sampling from its proposal instead (:func:`_importance_cell`). Returns one
    :class:`_HalfResult` per cell, each group's share of its draws in its own cell and each group's settings
    for further fits to its mode (:func:`~._gaussianize.settled_settings`), or None when a group's fitting
    draws hold fewer than ``_MIN_CELL_DRAWS`` distinct points.

    The sum is exact for any cells as long as the draws inside each cell follow ``p``. Chains that explore
    different parts of one mode without mixing (a funnel's neck and mouth) break that where their cells
    overlap, hence the separation check.
    """
    n_chains, n_iter, d = eval_draws.shape
    fits = [fit_draws[chains].reshape(-1, d) for chains in groups]
    if any(len(np.unique(fit, axis=0)) < _MIN_CELL_DRAWS for fit in fits):
        return None  # chains that barely moved: a sampler failure (R-hat says so), not a mode to fit
    cell_gaussianization = cell_gaussianization or [settings.gaussianization] * len(groups)
    flows = [_fit_proposal(rng, posterior, fit, settings._replace(gaussianization=gaussianization))
             for fit, gaussianization in zip(fits, cell_gaussianization)]

    def log_q_all(theta):
        return np.stack([_proposal_log_density(flow, maps, theta) for flow in flows])

    log_q_eval = log_q_all(eval_draws.reshape(-1, d)).reshape(len(flows), n_chains, n_iter)
    cells = cell_of(log_q_eval)
    # Each group's share of its own draws that fall in its own cell (1 when the cells separate the modes).
    separation = np.array([np.mean(cells[chains] == m) for m, chains in enumerate(groups)])
    cap = max(_proposal_cap(n_chains * n_iter, n_eval_sampling, settings) // len(flows), 2)
    parts = []
    for m, (flow, chains) in enumerate(zip(flows, groups)):
        inside = cells == m
        l1 = (eval_log_p - log_q_eval[m])[inside]

        def more(n, flow=flow, m=m):
            draws = flow.sample(rng, n)
            log_q = log_q_all(draws)
            mine = cell_of(log_q) == m
            out = np.full(n, -np.inf)
            if mine.any():  # a user's model need not accept an empty batch
                out[mine] = posterior.value(draws[mine]) - log_q[m, mine]
            return out

        def tau_of(f2_post, inside=inside, chains=chains):
            series = np.zeros((n_chains, n_iter))
            series[inside] = f2_post  # a chain's draws outside the cell add nothing to its mean
            return integrated_autocorrelation_time(series[chains]) if n_iter >= 4 else 1.0

        if np.count_nonzero(inside) < _MIN_CELL_DRAWS:
            parts.append(_importance_cell(more(cap), len(flow.layers), settings.min_importance_ess))
            continue
        log_r, std, n_bridge, converged, tau, l2, proposal_term, posterior_term = _solve_adaptive(
            l1, more, tau_of, cap, settings)
        bounds = _sandwich(l1, l2)
        parts.append(_HalfResult(log_r, std, n_bridge, converged, tau, len(l2), _overlap(l1, l2, log_r),
                                 proposal_term, posterior_term, len(flow.layers), *bounds,
                                 _overlap_draws(l1, l2, log_r, tau), *bounds))
    settled = [settled_settings(g, flow.gaussianization) for g, flow in zip(cell_gaussianization, flows)]
    return parts, separation, settled


def _importance_cell(l2, n_layers, min_ess):
    """A cell too few posterior draws reached: ``Z_m = E_q[p 1[cell] / q]`` from its proposal's draws alone.

    ``l2`` is ``log p - log q`` at the draws (``-inf`` outside the cell). Its
    error is the proposal term of Eq. (9) for importance sampling, and its
    ``overlap`` the weights' effective sample size fraction (1 when ``q`` is
    ``p`` restricted to the cell). Its ``overlap_draws`` is that effective
    sample size, counted as none below ``min_ess``: unbounded importance
    weights can hide a heavier tail than the bridge's bounded ones, so they
    need the importance estimate's own ``min_importance_ess``. With too few
    posterior draws for reciprocal importance sampling, the estimate stands
    for both ends of the sandwich.
    """
    n = len(l2)
    est = ImportanceEstimate.from_log_weights(l2)
    if not np.isfinite(est.log_z):  # no proposal draw in the cell: nothing there the proposal can see
        return _HalfResult(-np.inf, 0.0, 0, True, 1.0, n, 0.0, 0.0, 0.0, n_layers, -np.inf, -np.inf, 0.0, -np.inf,
                           -np.inf)
    return _HalfResult(est.log_z, est.std, 0, True, 1.0, n, est.ess / n, est.std**2, 0.0, n_layers, est.log_z,
                       est.log_z, float(est.ess) if est.ess >= min_ess else 0.0, est.log_z, est.log_z)


def _cell_shares(parts):
    """Each cell's share ``Z_m / Z`` of one half's sum."""
    log_zs = np.array([p.log_z for p in parts])
    return np.exp(log_zs - logsumexp(log_zs))


def _sum_of_cells(parts, counted, min_overlap_draws):
    """One :class:`_HalfResult` for ``Z = sum_m Z_m``; relative errors add in quadrature, weighted by ``Z_m / Z``.

    Every cell's ``Z_m`` enters the sum, but only the ``counted`` cells' bridge
    iterations, autocorrelation times, overlaps and overlap draws enter its checks.
    Its sandwich is the sum of the cells'. Its reach, how far the sum may be off
    when a cell rests on fewer than ``min_overlap_draws`` overlap draws, sums
    the reach of those cells and the ``+- 3`` errors of the others, whose Eq. (9)
    errors hold: a thin cell widens the sum by its share, not by the loose
    sandwich of every cell.
    """
    share2 = _cell_shares(parts) ** 2
    proposal_term = float(np.sum(share2 * [p.proposal_term for p in parts]))
    posterior_term = float(np.sum(share2 * [p.posterior_term for p in parts]))
    kept = [p for p, keep in zip(parts, counted) if keep]
    return _HalfResult(float(logsumexp([p.log_z for p in parts])), float(np.sqrt(proposal_term + posterior_term)),
                       max(p.n_iter for p in kept), all(p.converged for p in kept), max(p.tau for p in kept),
                       sum(p.n_proposal for p in parts), min(p.overlap for p in kept), proposal_term,
                       posterior_term, max(p.n_layers for p in parts), float(logsumexp([p.lower for p in parts])),
                       float(logsumexp([p.upper for p in parts])), min(p.overlap_draws for p in kept),
                       *_reach_of_cells(parts, min_overlap_draws))


def _reach_of_cells(parts, min_overlap_draws):
    """``(lower, upper)`` of a sum of cells: each cell's reach, or its ``+- 3`` errors where it holds."""
    held = [p.overlap_draws >= min_overlap_draws for p in parts]
    lower = [p.log_z - 3 * p.std if ok else p.reach_lower for p, ok in zip(parts, held)]
    upper = [p.log_z + 3 * p.std if ok else p.reach_upper for p, ok in zip(parts, held)]
    return float(logsumexp(lower)), float(logsumexp(upper))


def _bridge_checks(halves, n_iter_half, settings):
    a, b = halves
    gap = abs(a.log_z - b.log_z) / max(np.hypot(a.std, b.std), 1e-300)
    draws_per_tau = n_iter_half / max(a.tau, b.tau)
    overlap = min(a.overlap, b.overlap)
    overlap_draws = min(a.overlap_draws, b.overlap_draws)
    return {"bridge_iterations": check(max(a.n_iter, b.n_iter), settings.max_iter, a.converged and b.converged),
            # The value is draws per autocorrelation time (more is better), so the name says so.
            "draws_per_autocorrelation_time": check(draws_per_tau, settings.min_draws_per_tau,
                                                    draws_per_tau >= settings.min_draws_per_tau),
            "proposal_overlap": check(overlap, settings.min_overlap, overlap >= settings.min_overlap),
            "overlap_draws": check(overlap_draws, settings.min_overlap_draws,
                                   overlap_draws >= settings.min_overlap_draws),
            "halves_agree": check(gap, 3.0, gap <= 3.0)}


def _bridge_halves(rng, posterior, draws, log_p, groups, maps, n_eval_sampling, settings, proposal=None):
    """Both halves' bridges (fit on one half in time, solve on the other), over the cells of ``groups`` when
    given and every cell holds enough draws, else over the pooled draws. A pooled bridge with ``proposal``
    (fitted to none of ``draws``) solves each half with it instead of fitting.

    Returns the two :class:`_HalfResult`, ``"cells"`` or ``"pooled"``, which groups count in the checks (all
    of them, except cells holding less than ``_NEGLIGIBLE_SHARE`` of ``Z`` in both halves: a chain stuck in
    such a mode moves ``log Z`` by less than that share, however badly it mixes) and the smallest share of a
    counted group's draws in its own cell (None when pooled).
    """
    half = draws.shape[1] // 2
    first, second = (draws[:, :half], log_p[:, :half]), (draws[:, half:2 * half], log_p[:, half:2 * half])
    pairs = ((first, second), (second, first))
    if groups is not None:
        cells, cell_gaussianization = [], None
        for fit, other in pairs:  # the second half fits each cell along the path the first half's fit chose
            result = _cells_half(rng, posterior, fit[0], *other, groups, maps, n_eval_sampling, settings,
                                 cell_gaussianization)
            if result is None:
                break
            parts, separation, cell_gaussianization = result
            cells.append((parts, separation))
        if len(cells) == len(pairs):
            counted = np.max([_cell_shares(parts) for parts, _ in cells], axis=0) >= _NEGLIGIBLE_SHARE
            separation = float(min(np.min(sep[counted]) for _, sep in cells))
            return ([_sum_of_cells(parts, counted, settings.min_overlap_draws) for parts, _ in cells], "cells",
                    counted, separation)
    d = draws.shape[2]
    halves = []
    for fit, other in pairs:  # the second half fits only the path the first half's fit chose
        result, fitted = _bridge_half(rng, posterior, fit[0].reshape(-1, d), *other, maps, n_eval_sampling,
                                      settings, proposal)
        halves.append(result)
        settings = settings._replace(gaussianization=settled_settings(settings.gaussianization,
                                                                      fitted.gaussianization))
    return halves, "pooled", None, None


class _Chains(NamedTuple):
    """Chains ready for the bridge: ``draws`` ``(n_chains, n_iter, d)``, ``log_p``, the ``stuck_chains`` check
    (None for draws the caller passed), the ``series`` R-hat reads (draws and ``log p``) and the mode ``groups``."""

    draws: np.ndarray
    log_p: np.ndarray
    stuck_check: dict
    series: np.ndarray
    groups: list


def _chains_and_modes(model, draws, log_p, strategy, ran_chains, settings):
    """:class:`_Chains`: draws in canonical labels, without stuck chains, and their mode groups.

    For draws the caller passed (``ran_chains`` False) no chain is dropped and
    there are no groups (their chains' starts are unknown).
    """
    if strategy == "symmetrised":
        n_chains, n_iter, d = draws.shape
        draws = _canonical_labels(model, draws.reshape(-1, d)).reshape(n_chains, n_iter, d)
    stuck_check = None
    if ran_chains:
        draws, log_p, stuck_check = _drop_stuck_chains(draws, log_p)
    series = np.concatenate([draws, log_p[..., None]], axis=2)
    groups = chain_mode_groups(series, settings.mode_rhat) if ran_chains else None
    return _Chains(draws, log_p, stuck_check, series, groups)


def _mixed_chains(rng, model, posterior, chains, strategy, settings, info):
    """The :class:`_Chains` after :func:`~._bridge_mixing.connect_modes` when that connected them, else ``chains``
    (the HMC draws); the settings; and the last round's proposal when the mixed draws are used, else None.

    The mixed draws replace them when they form at most ``max_modes`` mode groups
    and no chain is stuck (a proposal too poor for independence Metropolis
    leaves chains at their start); otherwise the HMC draws stay and the mode
    census flags the run as before. HMC chains that were stuck keep the
    ``stuck_chains`` check failed either way: the region that stopped them
    may hold mass the mixed chains never reach either. ``info`` records each
    round's acceptance and whether the mixed draws were used. The returned ``settings`` carry the
    Gaussianization settings the rounds' fits settled on (:func:`~._gaussianize.settled_settings`). The last
    round's proposal was fitted to the round before's draws, not to the mixed draws, so the bridge over them
    can use it as it is (the chains' last states link the rounds, one state per chain).
    """
    mixing = connect_modes(rng, posterior, chains.draws, chains.log_p, settings.mixing_rounds,
                           settings.gaussianization)
    settings = settings._replace(gaussianization=mixing.gaussianization)
    candidate = _chains_and_modes(model, mixing.draws, mixing.log_p, strategy, True, settings)
    used = len(candidate.groups) <= settings.max_modes and candidate.stuck_check["passed"]
    estimate = mixing_estimate(mixing.estimates)
    info.update(mixing_acceptance=mixing.acceptance, mixing_used=bool(used),
                mode_groups_before_mixing=len(chains.groups),
                mixing_importance=None if estimate is None else estimate._asdict())
    if not used:
        return chains, settings, None
    if not chains.stuck_check["passed"]:
        candidate = candidate._replace(stuck_check=chains.stuck_check)
    return candidate, settings, mixing.proposal


def _importance_instead(info, strategy, settings, log_z, std, diagnostics):
    """``(log_z, std, estimator)``: the bridge's estimate, or the mixing rounds' importance estimate
    (``info["mixing_importance"]``) where that stands for it.

    Where the rounds ran and left the chains unconnected (``mixing_used``
    False), the bridge's posterior draws cover the few modes the chains sit
    in, and its estimate misses the mass of the others, whereas ``E_q[p / q]``
    counts every mode the rounds' proposals reach (all combinations of the
    coordinates' peaks, :mod:`._bridge_mixing`). With at least
    ``min_importance_ess`` effective draws in the last round's weights
    (``importance_ess``) its importance estimate is reported, its error
    widened to the distance from the round before when they disagree
    (``importance_rounds_agree``). With fewer, its own error is not to be
    trusted (weights that missed a heavy tail read low, and so does their
    spread); the bridge's estimate stays, with an error at least as wide as
    the importance estimate's lead over it. Only a lead counts: ``E_q[p / q] =
    Z``, so the importance estimate's log overshoots ``log Z`` by more than
    ``t`` nats with probability at most ``exp(-t)`` (Markov's inequality),
    while with few effective draws it may fall short by any amount and say
    nothing about the bridge. Not for label-switching
    mixtures: their draws are relabelled, so the proposals cover one
    labelling of the ``K!``. ``diagnostics`` gains the checks it used.
    """
    mixing = info.get("mixing_importance")
    if info.get("mixing_used", True) or mixing is None or strategy != "none":
        return log_z, std, "bridge"
    enough = mixing["ess"] >= settings.min_importance_ess
    diagnostics["importance_ess"] = check(mixing["ess"], settings.min_importance_ess, enough)
    if not enough:
        return log_z, max(std, mixing["log_z"] - log_z), "bridge"
    diagnostics["importance_rounds_agree"] = check(mixing["gap"], 3.0, mixing["gap"] <= 3.0)
    return mixing["log_z"], mixing["std"], "mixing_importance"


def bridge_log_evidence(model, X=None, y=None, *, posterior_samples=None, settings=None, random_state=None,
                        verbose=0, **kwargs):
    """Gaussianized bridge-sampling estimate of ``log p(y | X)`` (or of a target's normaliser).

    Parameters
    ----------
    model : Model
        Any object implementing the model protocol, gradients included.
    X : ndarray of shape (n_samples, n_features), default=None
        Data; None for a model without data (a density known up to its normaliser).
    y : ndarray of shape (n_samples,), default=None
    posterior_samples : ndarray of shape (n_draws, n_params) or (n_chains, n_iter, n_params), default=None
        Posterior draws to use instead of running HMC (a 2-d array is one chain).
    settings : BridgeSettings, default=None
        All settings at once; keywords in ``kwargs`` override single fields.
    random_state : int, numpy.random.Generator or None, default=None
    verbose : int, default=0
        Log progress at INFO level when positive.
    **kwargs
        Any field of :class:`~._bridge_settings.BridgeSettings`, e.g. ``n_chains=8, n_draws=2000``.

    Returns
    -------
    result : EvidenceResult
        ``log_evidence_std`` from Eq. (9) (widened when the halves disagree,
        to span ``info["log_evidence_bounds"]`` when too few draws lie where
        the proposal overlaps the posterior or the bridge iteration fails, and
        to cover the mass stuck chains may stand for when they were dropped);
        ``diagnostics`` holds ``rhat``,
        ``ess_bulk``, ``bridge_iterations``, ``draws_per_autocorrelation_time``,
        ``proposal_overlap``, ``overlap_draws`` and ``halves_agree``,
        and for chains it ran itself ``mode_census``, ``stuck_chains`` and
        ``divergent_transitions`` (the kept share, at most 1%) (and
        ``cells_separate`` when summed over cells);
        ``info`` the per-half estimates, errors, ``tau``, ``n_q``, flow layers,
        the stochastic bounds ``log_evidence_bounds`` (``[lower, upper]``),
        ``bridged_over`` (``"cells"`` or ``"pooled"``), ``mode_groups`` (chains
        per mode group), the sampler's step size, acceptance, ``target_accept``,
        ``n_divergent`` and ``divergent_share`` and, when the
        chains sat in more than ``max_modes`` groups, ``mixing_acceptance``
        (per independence Metropolis round), ``mixing_used``,
        ``mode_groups_before_mixing`` and ``mixing_importance`` (the last
        round's importance estimate: ``log_z``, ``std``, ``ess``, and ``gap``
        to the round before).
        ``info["estimator"]`` is ``"bridge"``, or ``"mixing_importance"`` where
        the rounds left the chains unconnected and their importance estimate
        is reported instead (``diagnostics["importance_ess"]`` and
        ``["importance_rounds_agree"]`` then check it; with too few effective
        draws the bridge's estimate stays, its error at least the importance
        estimate's lead over it); ``info["bridge_estimate"]`` keeps the
        bridge's own value and error either way.
        ``settings["proposal"]`` says which proposal the bridge used.

    Raises
    ------
    ValueError, TypeError
        For a bad setting (named in the message) or bad data.

    Warns
    -----
    EvidenceConvergenceWarning
        When any check fails (``result.converged`` is then False).

    Notes
    -----
    Jia and Seljak, "Normalizing constant estimation with Gaussianized bridge
    sampling" (AABI 2019), Eqs. (3) and (9) and its Appendix B.4; Meng and
    Wong (1996); Vehtari et al. (2021) for R-hat and ESS.
    ``n_likelihood_calls`` counts every full-data evaluation: the tempered
    run that places the chains' starts, HMC gradients during warm-up and
    sampling, and the proposal draws. BLAS runs single-threaded, as in
    :func:`~._ais.ais_log_evidence`, so a seed gives the same result whatever
    the process's thread settings.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.testing._targets import GaussianTarget
    >>> target = GaussianTarget(np.zeros(2), cov=0.1)
    >>> res = bridge_log_evidence(target, n_chains=4, n_warmup=200, n_draws=1000, random_state=0)
    >>> bool(abs(res.log_evidence - target.exact_log_evidence()) < 4 * res.log_evidence_std), res.converged
    (True, True)
    """
    start_time = time.perf_counter()
    X, y = _check_data(np.zeros((1, 1)) if X is None else X, y)
    settings = _make_settings(settings, kwargs)
    rng = make_generator(random_state)
    with single_threaded_blas():
        return _run_bridge(rng, model, _Posterior(model, X, y), posterior_samples, settings, verbose, start_time)


def _run_bridge(rng, model, posterior, posterior_samples, settings, verbose, start_time):
    """:func:`bridge_log_evidence` after its arguments were checked: chains, modes, both halves, checks, result."""
    strategy, maps, log_correction = _label_strategy(model, settings.label_permutations)
    draws, log_p, sampler_info = _posterior_draws(rng, model, posterior, posterior_samples, settings)
    ran_chains = posterior_samples is None
    chains = _chains_and_modes(model, draws, log_p, strategy, ran_chains, settings)
    mixing_proposal = None
    if ran_chains and len(chains.groups) > settings.max_modes and settings.mixing_rounds:
        chains, settings, mixing_proposal = _mixed_chains(rng, model, posterior, chains, strategy, settings,
                                                          sampler_info)
    draws, log_p, stuck_check, series, groups = chains
    if settings.proposal == "auto":
        settings = settings._replace(proposal="mixture" if sampler_info.get("mixing_used") else "gaussianization")
    if settings.proposal != "mixture":
        mixing_proposal = None
    n_eval_sampling = posterior.n_calls
    # Label copies of one mode are not separate mass when log K! already counts them (K > 7).
    cells = groups is not None and 1 < len(groups) <= settings.max_modes and strategy != "log_k_factorial"
    halves, bridged_over, counted, separation = _bridge_halves(rng, posterior, draws, log_p,
                                                               groups if cells else None, maps, n_eval_sampling,
                                                               settings, mixing_proposal)
    diagnostics = _chain_checks(series, groups, counted, settings)
    if separation is not None:
        diagnostics["cells_separate"] = check(separation, _MIN_SEPARATION, separation >= _MIN_SEPARATION)
    if stuck_check is not None:
        diagnostics["stuck_chains"] = stuck_check
    if "divergent_share" in sampler_info:
        share = sampler_info["divergent_share"]
        diagnostics["divergent_transitions"] = check(share, MAX_DIVERGENT_SHARE, share <= MAX_DIVERGENT_SHARE)
    if verbose:
        logger.info("bridge: %d chains x %d draws, %d evaluations; rhat %.3f, ess %.0f, bridged over %s",
                    *draws.shape[:2], n_eval_sampling, diagnostics["rhat"]["value"],
                    diagnostics["ess_bulk"]["value"], bridged_over)
    half = draws.shape[1] // 2
    diagnostics.update(_bridge_checks(halves, half, settings))
    log_z = float(np.mean([h.log_z for h in halves])) + log_correction
    std = _combined_std(halves, diagnostics["halves_agree"]["passed"])
    bounds = _log_z_bounds([h.lower for h in halves], [h.upper for h in halves], log_correction)
    reach = _log_z_bounds([h.reach_lower for h in halves], [h.reach_upper for h in halves], log_correction)
    std = _widened_std(std, log_z, bounds, reach, diagnostics, sampler_info.get("init") == "tempered",
                       settings.n_chains)
    bridge_estimate = dict(log_evidence=log_z, log_evidence_std=std)
    log_z, std, estimator = _importance_instead(sampler_info, strategy, settings, log_z, std, diagnostics)
    converged = warn_not_converged("bridge", diagnostics)
    info = dict(halves=[h._asdict() for h in halves], label_switching=strategy, log_label_correction=log_correction,
                log_evidence_bounds=bounds, estimator=estimator, bridge_estimate=bridge_estimate,
                n_evaluations_sampling=n_eval_sampling, bridged_over=bridged_over,
                mode_groups=None if groups is None else [len(g) for g in groups], **sampler_info)
    return EvidenceResult(log_z, std, "bridge", float(posterior.n_calls), int(posterior.n_calls * len(posterior.X)),
                          time.perf_counter() - start_time, settings._asdict(), draws.reshape(-1, draws.shape[2]),
                          None, info, diagnostics, converged)
