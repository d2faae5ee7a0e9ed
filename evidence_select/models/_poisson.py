"""Poisson regression with a log link: counts ``y ~ Poisson(exp(w . x + b))`` with Gaussian priors.

Two forms of the same model, with the same parameterisation (``theta = (w, b)``, no transform) and so the same
numbers: :func:`poisson_regression_model`, built by :func:`~evidence_select.models.make_model` from the per-datum
log-likelihood and its gradient in a few lines (what a user writes), and :class:`PoissonRegressionModel`, written
against the protocol by hand, which shares the rates between the likelihood and its gradient, has per-feature step
scales and prior variances (the estimators' scale checks read them), and is the built-in estimator's model.
``benchmarks/bench_make_model.py`` compares their evidences and speed.
"""

import numpy as np
from scipy import stats
from scipy.special import gammaln

from ._make_model import make_model
from ._protocol import (Model, design_step_scales, diagonal_prior_variances, gaussian_prior_cdf,
                        gaussian_prior_transform, weighted_total)

__all__ = ["PoissonRegressionModel", "poisson_regression_model"]

# log-rates are clipped here before exp: exp(700) is near float64's largest value, and a particle that far out has
# log-likelihood -inf for any count anyway.
_MAX_LOG_RATE = 700.0


def _log_rate(params, X):
    """``w . x + b`` per particle and row, ``(n_particles, n_rows)``, for all particles at once."""
    log_rate = params["w"] @ X.T
    if "b" in params:
        log_rate += params["b"][:, None]
    return log_rate


def poisson_log_likelihood(params, X, y):
    """``log Poisson(y_j | exp(w . x_j + b))`` per particle and row (vectorised over particles)."""
    log_rate = np.minimum(_log_rate(params, X), _MAX_LOG_RATE)
    return y * log_rate - np.exp(log_rate) - gammaln(y + 1.0)


def poisson_gradient(params, X, y, weights):
    """Gradient of ``sum_j weights[:, j] * log p(y_j | x_j)`` in ``w`` and ``b``, per particle."""
    residual = weights * (y - np.exp(np.minimum(_log_rate(params, X), _MAX_LOG_RATE)))
    grads = {"w": residual @ X}
    if "b" in params:
        grads["b"] = residual.sum(axis=1)
    return grads


def poisson_mean(params, X):
    """The rate ``exp(w . x + b)``, the count's mean (and variance), per particle and row."""
    return np.exp(np.minimum(_log_rate(params, X), _MAX_LOG_RATE))


def poisson_regression_model(n_features="n_features", *, prior_scale=1.0, intercept_scale=1.0, fit_intercept=True):
    """Poisson regression built by :func:`~evidence_select.models.make_model` from its log-likelihood and gradient.

    Parameters
    ----------
    n_features : int or "n_features", default="n_features"
        Number of weights; the default leaves it to the data (a template).
    prior_scale, intercept_scale : float, default=1.0
        Prior standard deviations of the weights and the intercept.
    fit_intercept : bool, default=True

    Returns
    -------
    model : CustomModel

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models import PoissonRegressionModel, poisson_regression_model
    >>> made, by_hand = poisson_regression_model(2), PoissonRegressionModel(2)
    >>> X = np.random.default_rng(0).normal(size=(5, 2)); y = np.array([0.0, 1.0, 3.0, 0.0, 2.0])
    >>> theta = by_hand.sample_prior(np.random.default_rng(1), 3)
    >>> bool(np.allclose(made.log_likelihood(theta, X, y), by_hand.log_likelihood(theta, X, y)))
    True
    """
    priors = {"w": (stats.norm(0.0, prior_scale), n_features)}
    if fit_intercept:
        priors["b"] = stats.norm(0.0, intercept_scale)
    return make_model(poisson_log_likelihood, priors, gradient=poisson_gradient, mean=poisson_mean,
                      variance=poisson_mean, vectorized=True)


class PoissonRegressionModel(Model):
    """Poisson regression with a log link, written against the protocol.

    ``y_j ~ Poisson(exp(w . x_j + b))``, ``w ~ N(0, prior_scale^2 I)``, ``b ~ N(0, intercept_scale^2)``;
    ``theta = (w, b)``.

    Parameters
    ----------
    n_features : int
    prior_scale : float, default=1.0
    intercept_scale : float, default=1.0
    fit_intercept : bool, default=True

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models import PoissonRegressionModel, check_model
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 2)); y = rng.poisson(np.exp(X @ [0.5, -0.3] + 0.2)).astype(float)
    >>> check_model(PoissonRegressionModel(2), X, y)
    """

    def __init__(self, n_features, *, prior_scale=1.0, intercept_scale=1.0, fit_intercept=True):
        for name, value in (("prior_scale", prior_scale), ("intercept_scale", intercept_scale)):
            if not float(value) > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        self.n_features, self.fit_intercept = int(n_features), bool(fit_intercept)
        self.prior_scale, self.intercept_scale = float(prior_scale), float(intercept_scale)

    @property
    def n_params(self):
        return self.n_features + self.fit_intercept

    @property
    def prior_variances(self):
        """Prior variances of ``theta``, ``(n_params,)``."""
        return diagonal_prior_variances(self.n_features, int(self.fit_intercept), self.prior_scale,
                                        self.intercept_scale)

    def sample_prior(self, rng, n_samples):
        return rng.standard_normal((n_samples, self.n_params)) * np.sqrt(self.prior_variances)

    def log_prior(self, theta):
        variances = self.prior_variances
        return -0.5 * (np.sum(theta**2 / variances, axis=1) + np.sum(np.log(2.0 * np.pi * variances)))

    def grad_log_prior(self, theta):
        return -theta / self.prior_variances

    def prior_transform(self, u):
        return gaussian_prior_transform(u, self.prior_variances)

    def prior_cdf(self, theta):
        return gaussian_prior_cdf(theta, self.prior_variances)

    def step_scales(self, X):
        """Inverse per-datum Fisher diagonal at unit rate (``design_step_scales`` with curvature 1)."""
        return design_step_scales(X, self.fit_intercept, 1.0)

    def _params(self, theta):
        params = {"w": theta[:, :self.n_features]}
        if self.fit_intercept:
            params["b"] = theta[:, self.n_features]
        return params

    def log_likelihood(self, theta, X, y=None):
        return poisson_log_likelihood(self._params(theta), np.asarray(X, dtype=float), y)

    def _grad_from_rates(self, rates, X, y, weights):
        residual = weights * (y - rates)
        grad = residual @ X
        return np.hstack([grad, residual.sum(axis=1, keepdims=True)]) if self.fit_intercept else grad

    def grad_log_likelihood(self, theta, X, y, weights):
        X = np.asarray(X, dtype=float)
        rates = poisson_mean(self._params(theta), X)
        return self._grad_from_rates(rates, X, y, np.broadcast_to(weights, rates.shape))

    def log_likelihood_and_grad(self, theta, X, y, weights):
        X = np.asarray(X, dtype=float)
        log_rate = np.minimum(_log_rate(self._params(theta), X), _MAX_LOG_RATE)
        rates = np.exp(log_rate)
        log_lik = y * log_rate - rates - gammaln(y + 1.0)
        weights = np.asarray(weights, dtype=float)
        total = weighted_total(log_lik, weights)
        return total, self._grad_from_rates(rates, X, y, np.broadcast_to(weights, rates.shape))

    def predict_mean(self, theta, X):
        """The rate ``exp(w . x + b)`` per particle and row, ``(n_particles, n_rows)``."""
        return poisson_mean(self._params(theta), np.asarray(X, dtype=float))

    def predict_variance(self, theta, X):
        """A Poisson count's variance equals its mean."""
        return self.predict_mean(theta, X)
