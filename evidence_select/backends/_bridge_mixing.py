"""Connecting chains that sit in different modes: independence Metropolis with proposals fitted to them.

HMC chains settle in the modes nearest their starts.
With more modes than chains (a product of ``d`` two-peak coordinates has
``2^d``) they never meet, and a bridge over their draws sees only the modes
they found. Each round here fits two normalised densities to all chains'
draws and proposes from a mixture of them (:func:`fit_mixture_proposal`):

- the iterative Gaussianization (:func:`~._gaussianize.fit_gaussianization`),
  which follows dependence between coordinates and the modes the chains found;
- the product of the draws' marginals (:class:`DefensiveProduct`, kernel
  bandwidths by cross-validation between chains), which proposes every
  combination of the coordinates' modes, also those no chain visited. In
  each coordinate a small share of it is a broad Gaussian, so that it also
  reaches, now and then, a peak next to those the draws show (a defensive
  mixture, Hesterberg 1995): when every chain sits in the same peak of one
  coordinate, the fitted marginal alone would never propose the other.

Each density's weight in the mixture is the effective sample size of the
importance weights ``p / q`` of a few hundred of its own draws (at least
``_MIN_COMPONENT_WEIGHT``), so a density that fits badly, such as the
Gaussianization of a few clusters in many dimensions, does not waste the
chains' proposals.

Every chain then takes ``n_iter`` independence Metropolis-Hastings steps
(:func:`~..kernels._independence.independence_metropolis`) from its last
state. That kernel leaves the posterior invariant for any proposal that is
positive wherever the posterior is. The proposal changes only between rounds,
fitted to the previous round's draws, never while a chain runs, so the last
round's draws are an ordinary Markov chain and R-hat, ESS, the mode groups and
the bridge judge them as any other chain. Early rounds find the peaks; a peak
found late is underweighted by that round's proposal and holds the chains that
reach it, which the next round's fit corrects. A round whose proposal fits
badly leaves the chains where they were: stuck chains, R-hat and the mode
census then say so.

Each round's proposals are also an importance sampler of ``Z``:
``Z = E_q[p / q]`` for any ``q`` positive wherever ``p`` is, whichever modes the
chains found (:class:`ImportanceEstimate`). Where the rounds leave the chains
unconnected, so that the bridge's posterior side is a few modes out of many,
the bridge reports the last round's estimate (:func:`mixing_estimate`)
instead of its own.
"""

from typing import NamedTuple

import numpy as np

from ..kernels._independence import independence_metropolis
from ._gaussianize import (fit_gaussianization, fit_marginal_product, gaussianization_log_density,
                                  gaussianization_sample, gaussianization_sample_and_log_density,
                                  marginal_log_densities, settled_settings)
from ..utils._logspace import ess_from_log_weights, log_mean_exp

__all__ = ["FlowProposal", "DefensiveProduct", "MixtureProposal", "fit_mixture_proposal", "ImportanceEstimate",
           "MixingEstimate", "mixing_estimate", "MixingResult", "connect_modes"]

_MAX_FIT_DRAWS = 4000  # draws each round fits to (thinned evenly over the chains); the fit's cost grows with them
_PILOT_DRAWS = 500  # draws of each density whose importance weights set its share of the mixture
_MIN_COMPONENT_WEIGHT = 0.05
_BROAD_SCALE = 3.0  # the broad part of each coordinate: N(mean, (3 sd)^2)
_LOG_2PI = np.log(2.0 * np.pi)


class FlowProposal(NamedTuple):
    """A fitted :class:`~._gaussianize.Gaussianization` as a proposal (``sample``, ``log_density``)."""

    flow: object

    @property
    def n_params(self):
        return len(self.flow.mean)

    @property
    def layers(self):
        return self.flow.layers

    @property
    def gaussianization(self):
        return self.flow

    def sample(self, rng, n):
        return gaussianization_sample(self.flow, rng, n)

    def sample_and_log_density(self, rng, n):
        return gaussianization_sample_and_log_density(self.flow, rng, n)

    def log_density(self, theta):
        return gaussianization_log_density(self.flow, theta)


class DefensiveProduct(NamedTuple):
    """``q(x) = prod_j [(1 - eps) q_j(x_j) + eps N(x_j; m_j, (3 s_j)^2)]``.

    ``q_j`` are the draws' smoothed marginals
    (:func:`~._gaussianize.fit_marginal_product`), ``m_j`` and ``s_j``
    their means and standard deviations, and ``eps = 1 / (2 d)``, so that about
    60% of the draws have no broad coordinate in any dimension.
    """

    product: object
    broad_scale: np.ndarray
    broad_share: float

    @classmethod
    def fit(cls, draws, gaussianization):
        product = fit_marginal_product(draws, gaussianization)
        return cls(product, _BROAD_SCALE * np.diag(product.chol), 0.5 / draws.shape[1])

    @property
    def n_params(self):
        return len(self.product.mean)

    @property
    def layers(self):
        return self.product.layers

    def sample(self, rng, n):
        x = gaussianization_sample(self.product, rng, n)
        broad = rng.uniform(size=x.shape) < self.broad_share
        x[broad] = (self.product.mean + self.broad_scale * rng.standard_normal(x.shape))[broad]
        return x

    def log_density(self, theta):
        fitted = marginal_log_densities(self.product, theta)
        broad = -0.5 * ((theta - self.product.mean) / self.broad_scale) ** 2 - np.log(self.broad_scale) - 0.5 * _LOG_2PI
        return np.sum(np.logaddexp(np.log1p(-self.broad_share) + fitted, np.log(self.broad_share) + broad), axis=1)


class MixtureProposal(NamedTuple):
    """A mixture of proposals (each with ``sample`` and ``log_density``), weights summing to 1."""

    components: tuple
    weights: np.ndarray

    @property
    def n_params(self):
        return self.components[0].n_params

    @property
    def layers(self):
        """The first component's spline layers."""
        return self.components[0].layers

    @property
    def gaussianization(self):
        """The first component's :class:`~._gaussianize.Gaussianization`."""
        return self.components[0].gaussianization

    def sample(self, rng, n):
        which = rng.choice(len(self.components), size=n, p=self.weights)
        out = np.empty((n, self.components[0].n_params))
        for k, component in enumerate(self.components):
            rows = which == k
            out[rows] = component.sample(rng, int(rows.sum()))
        return out

    def sample_and_log_density(self, rng, n):
        draws = self.sample(rng, n)
        return draws, self.log_density(draws)

    def log_density(self, theta):
        values = np.stack([np.log(w) + c.log_density(theta) for c, w in zip(self.components, self.weights)])
        return np.logaddexp.reduce(values, axis=0)


def fit_mixture_proposal(rng, posterior, draws, gaussianization):
    """The Gaussianization and the defensive marginal product fitted to ``draws`` ``(n, d)``, each weighted by
    the Kish effective sample size of ``p / q`` at ``_PILOT_DRAWS`` of its own draws (at least
    ``_MIN_COMPONENT_WEIGHT``).

    ``posterior.value(theta)`` is the unnormalised log posterior.
    """
    components = (FlowProposal(fit_gaussianization(rng, draws, gaussianization)),
                  DefensiveProduct.fit(draws, gaussianization))
    ess = []
    for component in components:
        pilot = component.sample(rng, _PILOT_DRAWS)
        ess.append(float(np.nan_to_num(ess_from_log_weights(posterior.value(pilot) - component.log_density(pilot)))))
    weights = np.maximum(np.asarray(ess) / max(sum(ess), 1e-300), _MIN_COMPONENT_WEIGHT)
    return MixtureProposal(components, weights / weights.sum())


class ImportanceEstimate(NamedTuple):
    """Draws of a proposal as an importance sampler: ``log Z = log mean(p / q)`` over its ``n`` draws.

    ``std`` is the delta-method error of ``log Z``, ``sd(w) / (sqrt(n) mean(w))``
    for the weights ``w = p / q``, and ``ess`` their Kish effective sample size.
    """

    log_z: float
    std: float
    ess: float

    @classmethod
    def from_log_weights(cls, log_w):
        """The estimate from ``log w = log p - log q`` (``-inf`` where ``p = 0``); an infinite error and no
        effective draws when no weight is positive."""
        log_w = np.asarray(log_w, dtype=float).ravel()
        log_z = float(log_mean_exp(log_w))
        if not np.isfinite(log_z):
            return cls(log_z, float("inf"), 0.0)
        std = float(np.std(np.exp(log_w - log_z)) / np.sqrt(log_w.size))
        return cls(log_z, std, float(np.nan_to_num(ess_from_log_weights(log_w))))


class MixingEstimate(NamedTuple):
    """The rounds' importance estimate of ``Z`` (:func:`mixing_estimate`).

    ``gap`` is the distance of the last round's ``log Z`` from the previous
    round's in units of their combined error (at most 3 when they agree;
    0 with one round), and ``std`` already spans that distance when they do
    not.
    """

    log_z: float
    std: float
    ess: float
    gap: float


def mixing_estimate(estimates):
    """The last round's :class:`ImportanceEstimate`, checked against the round before it.

    Every round's ``mean(p / q_r)`` is unbiased for ``Z``, but the early
    rounds' proposals are fitted to chains that sit in few modes: their
    weights are heavy-tailed, they read low with errors that read small too,
    and averaging them in would pull the estimate down. The last round's
    proposal is fitted to the most mixed draws. When it lies more than 3
    combined errors from the previous round's, at least one of them missed a
    tail its error does not show, and the error is widened to their distance.
    None when the last round has no finite estimate.

    Examples
    --------
    >>> est = [ImportanceEstimate(-10.4, 0.2, 60.0), ImportanceEstimate(-10.0, 0.05, 900.0)]
    >>> mixing_estimate(est)
    MixingEstimate(log_z=-10.0, std=0.05, ess=900.0, gap=1.94...)
    """
    if not estimates or not (np.isfinite(estimates[-1].log_z) and np.isfinite(estimates[-1].std)):
        return None
    last = estimates[-1]
    if len(estimates) == 1:
        return MixingEstimate(last.log_z, last.std, last.ess, 0.0)
    previous = estimates[-2]
    distance = abs(last.log_z - previous.log_z) if np.isfinite(previous.log_z) else np.inf
    gap = float(distance / max(np.hypot(last.std, previous.std), 1e-300))
    std = last.std if gap <= 3.0 else max(last.std, distance)
    return MixingEstimate(last.log_z, float(std), last.ess, gap)


class MixingResult(NamedTuple):
    """What :func:`connect_modes` returns.

    Attributes
    ----------
    draws : ndarray of shape (n_chains, n_iter, n_params)
        The last round's draws.
    log_p : ndarray of shape (n_chains, n_iter)
    acceptance : list of float
        Each round's share of accepted proposals.
    gaussianization : GaussianizationSettings
        The settings after the first round's fit (:func:`~._gaussianize.settled_settings`), which the later
        rounds used and further fits to the same target may use.
    estimates : list of ImportanceEstimate
        Each round's proposals as an importance sampler of ``Z``.
    proposal : MixtureProposal or None
        The last round's proposal, fitted to the round before's draws (not to the returned ones); None after
        no round.
    """

    draws: np.ndarray
    log_p: np.ndarray
    acceptance: list
    gaussianization: object
    estimates: list
    proposal: object = None


def connect_modes(rng, posterior, draws, log_p, n_rounds, gaussianization):
    """``n_rounds`` rounds of independence Metropolis from the chains' last states.

    Parameters
    ----------
    rng : numpy.random.Generator
    posterior : object
        ``posterior.value(theta) -> log p`` (unnormalised), counting its evaluations.
    draws : ndarray of shape (n_chains, n_iter, n_params)
        The chains' draws so far; each round keeps ``n_iter`` steps per chain.
    log_p : ndarray of shape (n_chains, n_iter)
    n_rounds : int
    gaussianization : GaussianizationSettings

    Returns
    -------
    MixingResult
    """
    n_chains, n_iter, d = draws.shape
    stride = max(1, (n_chains * n_iter) // _MAX_FIT_DRAWS)
    acceptance, estimates, proposal = [], [], None
    for round_index in range(n_rounds):
        proposal = fit_mixture_proposal(rng, posterior, draws[:, ::stride].reshape(-1, d), gaussianization)
        if round_index == 0:
            gaussianization = settled_settings(gaussianization, proposal.gaussianization)
        z = proposal.sample(rng, n_chains * n_iter)
        z_log_p = posterior.value(z)
        z_log_w = z_log_p - proposal.log_density(z)
        estimates.append(ImportanceEstimate.from_log_weights(z_log_w))
        start, start_log_p = draws[:, -1], log_p[:, -1]
        out = independence_metropolis(rng, start, start_log_p, start_log_p - proposal.log_density(start),
                                      z.reshape(n_chains, n_iter, d), z_log_p.reshape(n_chains, n_iter),
                                      z_log_w.reshape(n_chains, n_iter))
        draws, log_p = out.draws, out.log_density
        acceptance.append(out.acceptance)
    return MixingResult(draws, log_p, acceptance, gaussianization, estimates, proposal)
