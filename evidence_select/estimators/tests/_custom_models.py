"""Models built by make_model for the generic shells' tests: all particles at once, with their gradients.

Module-level functions, so that the models pickle (check_estimator pickles estimators, the selector ships them to
workers).
"""

import numpy as np
from scipy import stats
from scipy.special import log_softmax

from evidence_select.models import make_model

_HALF_LOG_2PI = 0.5 * np.log(2.0 * np.pi)


def gaussian_log_lik(params, X, y):
    """``log N(y | X w + b, sigma^2)``, ``(n_particles, n_rows)``."""
    sigma = params["sigma"][:, None]
    return -0.5 * ((y - gaussian_mean(params, X)) / sigma) ** 2 - np.log(sigma) - _HALF_LOG_2PI


def gaussian_grad(params, X, y, weights):
    sigma = params["sigma"][:, None]
    z = (y - gaussian_mean(params, X)) / sigma
    pull = weights * z / sigma
    return {"w": pull @ X, "b": pull.sum(axis=1), "sigma": np.sum(weights * (z**2 - 1.0) / sigma, axis=1)}


def gaussian_mean(params, X):
    return params["w"] @ X.T + params["b"][:, None]


def gaussian_variance(params, X):
    return np.broadcast_to(params["sigma"][:, None] ** 2, (len(params["sigma"]), len(X)))


def gaussian_regression():
    """Linear regression with unknown noise scale (half-normal prior): a positive parameter under its transform."""
    return make_model(gaussian_log_lik, {"w": (stats.norm(0, 1), "n_features"), "b": stats.norm(0, 1),
                                         "sigma": stats.halfnorm(0, 2)},
                      gradient=gaussian_grad, mean=gaussian_mean, variance=gaussian_variance, vectorized=True)


def _log_proba(params, X):
    logits = np.einsum("pkd,nd->pnk", params["W"], X) + params["b"][:, None, :]
    return log_softmax(logits, axis=2)


def softmax_log_lik(params, X, y):
    return np.take_along_axis(_log_proba(params, X), np.asarray(y, dtype=np.intp)[None, :, None], axis=2)[..., 0]


def softmax_grad(params, X, y, weights):
    proba = np.exp(_log_proba(params, X))
    residual = -proba
    residual[:, np.arange(len(X)), np.asarray(y, dtype=np.intp)] += 1.0
    residual *= weights[:, :, None]
    return {"W": np.einsum("pnk,nd->pkd", residual, X), "b": residual.sum(axis=1)}


def softmax_classifier():
    """Softmax regression sized by the data's classes and features."""
    return make_model(softmax_log_lik, {"W": (stats.norm(0, 1), ("n_classes", "n_features")),
                                        "b": (stats.norm(0, 1), "n_classes")},
                      gradient=softmax_grad, vectorized=True)


def gaussian_density_log_lik(params, X):
    sigma = params["sigma"][:, None]
    squares = ((X[None] - params["mu"][:, None, :]) ** 2).sum(axis=2)
    return -0.5 * squares / sigma**2 - X.shape[1] * (np.log(sigma) + _HALF_LOG_2PI)


def gaussian_density_grad(params, X, weights):
    sigma = params["sigma"]
    residual = X[None] - params["mu"][:, None, :]
    squares = (residual**2).sum(axis=2)
    return {"mu": np.einsum("pn,pnf->pf", weights, residual) / sigma[:, None] ** 2,
            "sigma": np.sum(weights * (squares / sigma[:, None] ** 3 - X.shape[1] / sigma[:, None]), axis=1)}


def gaussian_density():
    """A spherical Gaussian with unknown mean (per feature) and scale."""
    return make_model(gaussian_density_log_lik, {"mu": (stats.norm(0, 3), "n_features"),
                                                 "sigma": stats.lognorm(1.0)},
                      gradient=gaussian_density_grad, density=True, vectorized=True)
