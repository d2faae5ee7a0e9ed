"""The Gaussian mixture's prior as a transform of the unit cube (a Rosenblatt transform) and its inverse.

With it nested sampling can also bound the live points in the cube, where the prior is uniform and candidates
need no weight (:mod:`evidence_select.kernels._cube`; each iteration takes the bound of least prior mass), and
peers that sample in the cube (dynesty, MultiNest) sample the same prior as our backends.

The coordinates of ``u`` follow ``theta``'s layout ``(eta (K - 1), means (K d), log variances (K d))``:

- weights ``beta ~ Dirichlet(alpha)`` by stick breaking, ``v_k ~ Beta(alpha, (K - k - 1) alpha)`` from
  ``u_k`` and ``beta_k = v_k prod_{j < k} (1 - v_j)``, then ``eta_k = log beta_k - log beta_K``;
- each variance ``sigma2 ~ InvGamma(a, b)``: ``b / sigma2`` is ``Gamma(a)``, whose upper tail ``u`` is;
- each mean given its variance, ``mu ~ N(m0, c sigma2)``: ``u = Phi((mu - m0) / sqrt(c sigma2))``.

Back to the cube, a stick piece ``v`` above 1/2 takes its upper tail from the complementary function of the
remainder ``1 - v`` (summed in log space from the later weights), so that ``u`` near 1 keeps its digits.
"""

from typing import NamedTuple

import numpy as np
from scipy.special import betainc, betaincinv, gammaincc, gammainccinv, ndtr, ndtri

from ..utils import logsumexp

__all__ = ["MixturePrior", "mixture_prior_cdf", "mixture_prior_transform"]


class MixturePrior(NamedTuple):
    """The mixture's shape and prior hyperparameters (see :class:`~evidence_select.models.GaussianMixtureModel`)."""

    n_components: int
    n_features: int
    weight_concentration: float  # alpha
    variance_shape: float  # a
    variance_scale: float  # b
    mean_prior_loc: float  # m0
    mean_variance_factor: float  # c


def mixture_prior_transform(u, prior):
    """Parameters ``theta`` ``(n, n_params)`` of unit-cube points ``u`` (same shape) under ``prior``.

    Examples
    --------
    >>> import numpy as np
    >>> prior = MixturePrior(2, 1, 1.0, 1.0, 1.0, 0.0, 4.0)
    >>> u = np.array([[0.5, 0.5, 0.5, 0.3, 0.8]])
    >>> bool(np.allclose(mixture_prior_cdf(mixture_prior_transform(u, prior), prior), u))
    True
    """
    u = np.asarray(u, dtype=float)
    K, d = prior.n_components, prior.n_features
    u_eta, u_means, u_vars = u[:, :K - 1], u[:, K - 1:K - 1 + K * d], u[:, K - 1 + K * d:]
    with np.errstate(divide="ignore"):
        log_variances = np.log(prior.variance_scale) - np.log(gammainccinv(prior.variance_shape, u_vars))
    scale = np.sqrt(prior.mean_variance_factor * np.exp(log_variances))
    means = prior.mean_prior_loc + scale * ndtri(u_means)
    return np.hstack([_stick_log_ratios(u_eta, prior), means, log_variances])


def mixture_prior_cdf(theta, prior):
    """Unit-cube points of parameters ``theta`` ``(n, n_params)``, the inverse of :func:`mixture_prior_transform`."""
    theta = np.asarray(theta, dtype=float)
    K, d = prior.n_components, prior.n_features
    eta, means, log_variances = theta[:, :K - 1], theta[:, K - 1:K - 1 + K * d], theta[:, K - 1 + K * d:]
    u_vars = gammaincc(prior.variance_shape, prior.variance_scale * np.exp(-log_variances))
    u_means = ndtr((means - prior.mean_prior_loc) / np.sqrt(prior.mean_variance_factor * np.exp(log_variances)))
    return np.hstack([_stick_cdf(eta, prior), u_means, u_vars])


def _stick_log_ratios(u, prior):
    """``eta_k = log beta_k - log beta_K`` ``(n, K - 1)`` of the stick-breaking uniforms ``u`` ``(n, K - 1)``."""
    K, alpha = prior.n_components, prior.weight_concentration
    log_weights = np.empty((len(u), K))
    log_rest = np.zeros(len(u))
    with np.errstate(divide="ignore"):
        for k in range(K - 1):
            beta = (K - k - 1) * alpha
            v = betaincinv(alpha, beta, u[:, k])
            log_weights[:, k] = log_rest + np.log(v)
            log_rest = log_rest + np.log1p(-v)
    log_weights[:, K - 1] = log_rest
    return log_weights[:, :K - 1] - log_weights[:, K - 1:]


def _stick_cdf(eta, prior):
    """The stick-breaking uniforms ``(n, K - 1)`` of log-ratios ``eta`` ``(n, K - 1)``, the inverse of
    :func:`_stick_log_ratios`."""
    K, alpha = prior.n_components, prior.weight_concentration
    log_weights = np.hstack([eta, np.zeros((len(eta), 1))])
    log_weights -= logsumexp(log_weights, axis=1)[:, None]
    # log of the stick left before piece k: the weights from k on, summed in log space.
    log_rest = np.logaddexp.accumulate(log_weights[:, ::-1], axis=1)[:, ::-1]
    u = np.empty((len(eta), K - 1))
    for k in range(K - 1):
        beta = (K - k - 1) * alpha
        v = np.exp(log_weights[:, k] - log_rest[:, k])
        remainder = np.exp(log_rest[:, k + 1] - log_rest[:, k])  # 1 - v, exact where v is near 1
        u[:, k] = np.where(v <= 0.5, betainc(alpha, beta, v), 1.0 - betainc(beta, alpha, remainder))
    return u
