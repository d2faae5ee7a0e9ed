"""Small models with data whose evidence is exact: conjugate pairs and a tiny mixture.

Each column of ``X`` is one group (Poisson-gamma, beta-binomial) or one feature
(the mixture); the parameters are unconstrained (log rate, logit probability,
component means) and the log prior carries the log-Jacobian of that map.
"""

import itertools

import numpy as np
from scipy.special import betainc, betaincinv, betaln, expit, gammainc, gammaincinv, gammaln, log_expit, logit

from ..utils import logsumexp
from ..models._protocol import Model, gaussian_prior_cdf, gaussian_prior_transform

__all__ = ["BetaBinomialModel", "PoissonGammaModel", "TinyMixtureModel"]

_LOG_2PI = np.log(2.0 * np.pi)


def _positive(**values):
    for name, value in values.items():
        if not float(value) > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


def _weighted_column_sums(weights, n_particles, values):
    """``sum_j weights[i, j] values[j, k]``, shape ``(n_particles, n_columns)``."""
    return np.broadcast_to(weights, (n_particles, len(values))) @ values


class PoissonGammaModel(Model):
    """Counts ``X[j, k] ~ Poisson(lambda_k)`` with ``lambda_k ~ Gamma(shape, rate)``, ``theta = log lambda``.

    Parameters
    ----------
    n_groups : int
        Number of rates (columns of ``X``).
    shape, rate : float, default=2.0, 1.0
        Gamma prior of each rate.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[3.0, 0.0], [5.0, 1.0]])
    >>> round(PoissonGammaModel(2).exact_log_evidence(X), 4)
    -7.3662
    """

    is_density_model = True

    def __init__(self, n_groups, *, shape=2.0, rate=1.0):
        _positive(shape=shape, rate=rate)
        self.n_groups, self.shape, self.rate = int(n_groups), float(shape), float(rate)

    @property
    def n_params(self):
        return self.n_groups

    def sample_prior(self, rng, n_samples):
        return np.log(rng.gamma(self.shape, 1.0 / self.rate, size=(n_samples, self.n_groups)))

    def log_prior(self, theta):
        a, b = self.shape, self.rate
        return np.sum(a * np.log(b) - gammaln(a) + a * theta - b * np.exp(theta), axis=1)

    def grad_log_prior(self, theta):
        return self.shape - self.rate * np.exp(theta)

    def prior_transform(self, u):
        return np.log(gammaincinv(self.shape, np.asarray(u, dtype=float)) / self.rate)

    def prior_cdf(self, theta):
        return gammainc(self.shape, self.rate * np.exp(np.asarray(theta, dtype=float)))

    def log_likelihood(self, theta, X, y=None):
        X = np.asarray(X, dtype=float)
        return theta @ X.T - np.exp(theta).sum(axis=1, keepdims=True) - gammaln(X + 1.0).sum(axis=1)

    def grad_log_likelihood(self, theta, X, y, weights):
        X = np.asarray(X, dtype=float)
        w_rows = np.broadcast_to(weights, (len(theta), len(X)))
        return _weighted_column_sums(weights, len(theta), X) - w_rows.sum(axis=1, keepdims=True) * np.exp(theta)

    def exact_log_evidence(self, X, y=None):
        """Gamma-Poisson conjugacy, group by group."""
        X = np.asarray(X, dtype=float)
        a, b, n, s = self.shape, self.rate, len(X), X.sum(axis=0)
        return float(np.sum(a * np.log(b) - gammaln(a) + gammaln(a + s) - (a + s) * np.log(b + n))
                     - gammaln(X + 1.0).sum())


class BetaBinomialModel(Model):
    """Successes ``X[j, k] ~ Binomial(n_trials, p_k)`` with ``p_k ~ Beta(a, b)``, ``theta = logit p``.

    Parameters
    ----------
    n_groups : int
    n_trials : int
        Trials per observation.
    a, b : float, default=1.0, 1.0
        Beta prior of each probability.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[3.0], [4.0]])
    >>> round(BetaBinomialModel(1, 5).exact_log_evidence(X), 4)
    -3.2734
    """

    is_density_model = True

    def __init__(self, n_groups, n_trials, *, a=1.0, b=1.0):
        _positive(n_trials=n_trials, a=a, b=b)
        self.n_groups, self.n_trials, self.a, self.b = int(n_groups), int(n_trials), float(a), float(b)

    @property
    def n_params(self):
        return self.n_groups

    def sample_prior(self, rng, n_samples):
        p = rng.beta(self.a, self.b, size=(n_samples, self.n_groups))
        return np.log(p) - np.log1p(-p)

    def log_prior(self, theta):
        # Beta(p) dp/dtheta = p^a (1 - p)^b / B(a, b) with p = sigmoid(theta).
        return np.sum(self.a * log_expit(theta) + self.b * log_expit(-theta), axis=1) - self.n_groups * betaln(
            self.a, self.b)

    def grad_log_prior(self, theta):
        return self.a - (self.a + self.b) * expit(theta)

    def prior_transform(self, u):
        return logit(betaincinv(self.a, self.b, np.asarray(u, dtype=float)))

    def prior_cdf(self, theta):
        return betainc(self.a, self.b, expit(np.asarray(theta, dtype=float)))

    def _log_choose(self, X):
        n = self.n_trials
        return (gammaln(n + 1.0) - gammaln(X + 1.0) - gammaln(n - X + 1.0)).sum(axis=1)

    def log_likelihood(self, theta, X, y=None):
        X = np.asarray(X, dtype=float)
        return (log_expit(theta) @ X.T + log_expit(-theta) @ (self.n_trials - X).T) + self._log_choose(X)

    def grad_log_likelihood(self, theta, X, y, weights):
        X = np.asarray(X, dtype=float)
        w_total = np.broadcast_to(weights, (len(theta), len(X))).sum(axis=1, keepdims=True)
        return _weighted_column_sums(weights, len(theta), X) - w_total * self.n_trials * expit(theta)

    def exact_log_evidence(self, X, y=None):
        """Beta-binomial conjugacy, group by group."""
        X = np.asarray(X, dtype=float)
        s, n_total = X.sum(axis=0), len(X) * self.n_trials
        return float(np.sum(betaln(self.a + s, self.b + n_total - s) - betaln(self.a, self.b))
                     + self._log_choose(X).sum())


class TinyMixtureModel(Model):
    """Mixture of ``K`` spherical Gaussians with known weights and noise; unknown means.

    ``x_j ~ sum_k w_k N(mu_k, noise_scale^2 I)``, ``mu_k ~ N(0, prior_scale^2 I)``,
    ``theta = (mu_1, ..., mu_K)`` flattened (``K * n_features`` parameters). The
    evidence is exact by enumerating all ``K^n`` assignments of the ``n`` rows
    (each a product of conjugate Gaussian evidences), so keep ``K^n`` small.

    Parameters
    ----------
    n_components : int
    n_features : int
    noise_scale : float, default=1.0
    prior_scale : float, default=3.0
    weights : array-like of shape (n_components,) or None, default=None
        Known mixture weights; None = equal.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-2.0], [-1.5], [2.0]])
    >>> round(TinyMixtureModel(2, 1).exact_log_evidence(X), 4)
    -7.0794
    """

    is_density_model = True

    def __init__(self, n_components, n_features, *, noise_scale=1.0, prior_scale=3.0, weights=None):
        _positive(noise_scale=noise_scale, prior_scale=prior_scale)
        self.n_components, self.n_features = int(n_components), int(n_features)
        self.noise_scale, self.prior_scale = float(noise_scale), float(prior_scale)
        w = np.full(self.n_components, 1.0 / self.n_components) if weights is None else np.asarray(weights, float)
        if w.shape != (self.n_components,) or np.any(w <= 0) or not np.isclose(w.sum(), 1.0):
            raise ValueError(f"weights must be {self.n_components} positive numbers summing to 1, got {weights!r}")
        self.weights = tuple(float(v) for v in w)

    @property
    def n_params(self):
        return self.n_components * self.n_features

    def sample_prior(self, rng, n_samples):
        return self.prior_scale * rng.standard_normal((n_samples, self.n_params))

    def log_prior(self, theta):
        s2 = self.prior_scale**2
        return -0.5 * (np.sum(theta**2, axis=1) / s2 + self.n_params * (np.log(s2) + _LOG_2PI))

    def grad_log_prior(self, theta):
        return -theta / self.prior_scale**2

    def prior_transform(self, u):
        return gaussian_prior_transform(u, self.prior_scale**2)

    def prior_cdf(self, theta):
        return gaussian_prior_cdf(theta, self.prior_scale**2)

    def _component_terms(self, theta, X):
        """``log w_k + log N(x_j; mu_k, s^2 I)``, shape ``(n_particles, n_batch, K)``."""
        means = theta.reshape(len(theta), self.n_components, self.n_features)
        sq = np.sum((np.asarray(X, dtype=float)[None, :, None, :] - means[:, None]) ** 2, axis=3)
        s2 = self.noise_scale**2
        return np.log(self.weights) - 0.5 * (sq / s2 + self.n_features * (np.log(s2) + _LOG_2PI))

    def log_likelihood(self, theta, X, y=None):
        return logsumexp(self._component_terms(theta, X), axis=2)

    def grad_log_likelihood(self, theta, X, y, weights):
        X = np.asarray(X, dtype=float)
        terms = self._component_terms(theta, X)
        resp = np.exp(terms - logsumexp(terms, axis=2, keepdims=True))
        resp *= np.broadcast_to(weights, (len(theta), len(X)))[:, :, None]  # (n, batch, K)
        means = theta.reshape(len(theta), self.n_components, self.n_features)
        pulled = np.einsum("nbk,bf->nkf", resp, X) - resp.sum(axis=1)[:, :, None] * means
        return (pulled / self.noise_scale**2).reshape(len(theta), -1)

    def exact_log_evidence(self, X, y=None):
        """Sum over every assignment of rows to components of the conjugate evidences."""
        X = np.asarray(X, dtype=float)
        n, K = len(X), self.n_components
        assign = np.array(list(itertools.product(range(K), repeat=n)))  # (K^n, n)
        one_hot = assign[:, :, None] == np.arange(K)  # (K^n, n, K)
        counts = one_hot.sum(axis=1)  # (K^n, K)
        sums = np.einsum("ank,nf->akf", one_hot, X)  # (K^n, K, F)
        s2, t2 = self.noise_scale**2, self.prior_scale**2
        # log N(x_S; 0, s2 I + t2 1 1^T) for each component and feature, summed.
        quad = np.sum(X**2) / s2 - t2 / s2 * np.sum(sums**2 / (s2 + counts[:, :, None] * t2), axis=(1, 2))
        log_det = self.n_features * np.sum(np.log1p(counts * t2 / s2), axis=1) + n * self.n_features * np.log(s2)
        log_given = -0.5 * (quad + log_det + n * self.n_features * _LOG_2PI)
        log_prior_assign = np.log(self.weights)[assign].sum(axis=1)
        return float(logsumexp(log_prior_assign + log_given))
