"""The calibration suite's models with data, rebuilt with make_model: same parameterisation, same numbers.

``made_model(case, backend)`` gives, for a case of :func:`~evidence_select.testing.calibration_cases` in
``MADE_FAMILIES``, the make_model twin of ``case.model``: NumPy functions with their gradients (``"numpy"``, all
particles at once), the same log-likelihood in ``jax.numpy`` of one parameter set with gradients by JAX (``"jax"``), or
the NumPy log-likelihood with finite differences (``"finite"``). Its unconstrained ``theta`` is laid out as the
hand-written model's (weights then intercept; log rates; logit probabilities; component means row by row), so both
give the same log prior, likelihood and gradients at the same points. The benchmark ``bench_make_model.py`` and the
tests use them.
"""

import numpy as np
from scipy import stats
from scipy.special import gammaln, logsumexp

from evidence_select.models import make_model

__all__ = ["MADE_FAMILIES", "made_model"]

_LOG_2PI = np.log(2.0 * np.pi)


# -- linear-Gaussian regression: y ~ N(X w + b, 1), w ~ N(0, I), b ~ N(0, 1) --------------------------------------
def _linear_mean(params, X):
    return params["w"] @ X.T + params["b"][:, None]


def linear_log_lik(params, X, y):
    return -0.5 * (y - _linear_mean(params, X)) ** 2 - 0.5 * _LOG_2PI


def linear_grad(params, X, y, weights):
    residual = weights * (y - _linear_mean(params, X))
    return {"w": residual @ X, "b": residual.sum(axis=1)}


def linear_log_lik_jax(params, X, y):
    import jax.numpy as jnp

    return -0.5 * (y - X @ params["w"] - params["b"]) ** 2 - 0.5 * jnp.log(2.0 * jnp.pi)


# -- Poisson-gamma: X[j, k] ~ Poisson(rate_k), rate_k ~ Gamma(2, 1) ------------------------------------------------
def poisson_gamma_log_lik(params, X):
    rate = params["rate"]
    return np.log(rate) @ X.T - rate.sum(axis=1, keepdims=True) - gammaln(X + 1.0).sum(axis=1)


def poisson_gamma_grad(params, X, weights):
    rate = params["rate"]
    return {"rate": (weights @ X) / rate - weights.sum(axis=1, keepdims=True)}


def poisson_gamma_log_lik_jax(params, X):
    import jax.numpy as jnp
    from jax.scipy.special import gammaln as jax_gammaln

    rate = params["rate"]
    return X @ jnp.log(rate) - rate.sum() - jax_gammaln(X + 1.0).sum(axis=1)


# -- beta-binomial: X[j, k] ~ Binomial(10, p_k), p_k ~ Beta(1, 1) -------------------------------------------------
_N_TRIALS = 10


def beta_binomial_log_lik(params, X):
    p = params["p"]
    log_choose = (gammaln(_N_TRIALS + 1.0) - gammaln(X + 1.0) - gammaln(_N_TRIALS - X + 1.0)).sum(axis=1)
    return np.log(p) @ X.T + np.log1p(-p) @ (_N_TRIALS - X).T + log_choose


def beta_binomial_grad(params, X, weights):
    p = params["p"]
    successes, failures = weights @ X, weights @ (_N_TRIALS - X)
    return {"p": successes / p - failures / (1.0 - p)}


def beta_binomial_log_lik_jax(params, X):
    import jax.numpy as jnp
    from jax.scipy.special import gammaln as jax_gammaln

    p = params["p"]
    log_choose = (jax_gammaln(_N_TRIALS + 1.0) - jax_gammaln(X + 1.0) - jax_gammaln(_N_TRIALS - X + 1.0)).sum(axis=1)
    return X @ jnp.log(p) + (_N_TRIALS - X) @ jnp.log1p(-p) + log_choose


# -- two-component mixture with known weights [0.4, 0.6] and unit noise, means ~ N(0, 3^2) --------------------------
_WEIGHTS = np.array([0.4, 0.6])


def _component_terms(params, X):
    """``log w_k + log N(x_j; mu_k, I)``, ``(n_particles, n_rows, 2)``."""
    squares = np.sum((X[None, :, None, :] - params["means"][:, None]) ** 2, axis=3)
    return np.log(_WEIGHTS) - 0.5 * (squares + X.shape[1] * _LOG_2PI)


def mixture_log_lik(params, X):
    return logsumexp(_component_terms(params, X), axis=2)


def mixture_grad(params, X, weights):
    terms = _component_terms(params, X)
    resp = np.exp(terms - logsumexp(terms, axis=2, keepdims=True)) * weights[:, :, None]
    return {"means": np.einsum("pnk,nf->pkf", resp, X) - resp.sum(axis=1)[:, :, None] * params["means"]}


def mixture_log_lik_jax(params, X):
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp as jax_logsumexp

    squares = jnp.sum((X[:, None, :] - params["means"][None]) ** 2, axis=2)
    terms = jnp.log(jnp.asarray(_WEIGHTS)) - 0.5 * (squares + X.shape[1] * jnp.log(2.0 * jnp.pi))
    return jax_logsumexp(terms, axis=1)


def _priors(case):
    model = case.model
    if case.family == "linear":
        return {"w": (stats.norm(0.0, 1.0), model.n_features), "b": stats.norm(0.0, 1.0)}
    if case.family == "poisson_gamma":
        return {"rate": (stats.gamma(model.shape, scale=1.0 / model.rate), model.n_groups)}
    if case.family == "beta_binomial":
        return {"p": (stats.beta(model.a, model.b), model.n_groups)}
    return {"means": (stats.norm(0.0, model.prior_scale), (model.n_components, model.n_features))}


#: family -> (NumPy log-likelihood, its gradient, the JAX log-likelihood of one parameter set).
_FUNCTIONS = {
    "linear": (linear_log_lik, linear_grad, linear_log_lik_jax),
    "poisson_gamma": (poisson_gamma_log_lik, poisson_gamma_grad, poisson_gamma_log_lik_jax),
    "beta_binomial": (beta_binomial_log_lik, beta_binomial_grad, beta_binomial_log_lik_jax),
    "tiny_mixture": (mixture_log_lik, mixture_grad, mixture_log_lik_jax),
}
#: The calibration families with data that :func:`made_model` rebuilds.
MADE_FAMILIES = tuple(_FUNCTIONS)


def made_model(case, backend="numpy"):
    """The make_model twin of ``case.model`` (see the module docstring); ``backend`` in numpy, jax, finite."""
    log_lik, grad, log_lik_jax = _FUNCTIONS[case.family]
    density = case.y is None
    if case.family == "linear" or case.family == "tiny_mixture":
        # Guard the hand-written models' hyperparameters these twins assume.
        assert getattr(case.model, "noise_variance", 1.0) == 1.0 and getattr(case.model, "noise_scale", 1.0) == 1.0
    if case.family == "tiny_mixture":
        assert np.allclose(case.model.weights, _WEIGHTS)
    if backend == "jax":
        return make_model(log_lik_jax, _priors(case), gradient="jax", density=density)
    if backend == "finite":
        return make_model(log_lik, _priors(case), gradient="finite", density=density, vectorized=True)
    return make_model(log_lik, _priors(case), gradient=grad, density=density, vectorized=True)


