"""Softmax (multinomial logistic) regression (paper Appendix B.2).

``p(y = k | x, theta) = softmax_k(W x + b)`` with ``W`` of shape ``(n_classes,
n_features)`` and standard Gaussian priors (scales configurable). ``theta`` is
``W`` flattened row by row followed by ``b``. Binary problems use K = 2 (the
over-parameterised softmax, as in the paper) so that one code path serves all K.
"""

import numpy as np

from ._protocol import Model, design_step_scales

__all__ = ["SoftmaxRegressionModel"]

_LOG_2PI = np.log(2.0 * np.pi)


class SoftmaxRegressionModel(Model):
    """Bayesian softmax regression with Gaussian priors.

    Parameters
    ----------
    n_features : int
        Number of input features ``d``.
    n_classes : int
        Number of classes ``K >= 2``; targets are integer codes ``0..K-1``.
    prior_scale : float, default=1.0
        Prior standard deviation of each weight.
    intercept_scale : float, default=1.0
        Prior standard deviation of each intercept.
    fit_intercept : bool, default=True
        If False the intercepts are fixed at 0.

    Examples
    --------
    >>> import numpy as np
    >>> model = SoftmaxRegressionModel(n_features=3, n_classes=4)
    >>> model.n_params
    16
    """

    def __init__(self, n_features, n_classes, *, prior_scale=1.0, intercept_scale=1.0, fit_intercept=True):
        self.n_features = int(n_features)
        self.n_classes = int(n_classes)
        self.prior_scale = float(prior_scale)
        self.intercept_scale = float(intercept_scale)
        self.fit_intercept = bool(fit_intercept)

    @property
    def n_params(self):
        return self.n_classes * (self.n_features + int(self.fit_intercept))

    @property
    def prior_variances(self):
        """Prior variance of each parameter, shape ``(n_params,)``."""
        n_weights = self.n_classes * self.n_features
        variances = np.full(self.n_params, self.prior_scale**2)
        variances[n_weights:] = self.intercept_scale**2
        return variances

    def sample_prior(self, rng, n_samples):
        return rng.standard_normal((n_samples, self.n_params)) * np.sqrt(self.prior_variances)

    def log_prior(self, theta):
        variances = self.prior_variances
        return -0.5 * (np.sum(theta**2 / variances, axis=1) + np.sum(np.log(variances)) + self.n_params * _LOG_2PI)

    def grad_log_prior(self, theta):
        return -theta / self.prior_variances

    def step_scales(self, X):
        """Inverse per-datum Fisher diagonal bound ``4 / E[a_j^2]`` (``p(1-p) <= 1/4``), per class."""
        scales = design_step_scales(X, self.fit_intercept, 0.25)
        n_features = self.n_features
        weights = np.tile(scales[:n_features], self.n_classes)
        return np.concatenate([weights, np.full(self.n_classes, scales[-1])]) if self.fit_intercept else weights

    def _logits_by_row(self, theta, X):
        """Logits in the layout ``(n_batch, n_particles, n_classes)`` (contiguous).

        One ``(n_batch, d) @ (d, M*K)`` product serves all particles; keeping the
        batch axis first avoids strided passes in the elementwise work after it.
        """
        n_particles, n_classes, n_features = len(theta), self.n_classes, self.n_features
        weights = theta[:, : n_classes * n_features].reshape(n_particles * n_classes, n_features)
        logits = (np.asarray(X, dtype=float) @ weights.T).reshape(len(X), n_particles, n_classes)
        if self.fit_intercept:
            logits += theta[None, :, n_classes * n_features:]
        return logits

    def _log_proba_by_row(self, theta, X):
        """Max-shifted log-softmax, ``(n_batch, n_particles, n_classes)``."""
        log_proba = self._logits_by_row(theta, X)
        log_proba -= _max_over_classes(log_proba)
        log_proba -= np.log(_sum_over_classes(np.exp(log_proba)))
        return log_proba

    def _proba_by_row(self, theta, X):
        """Softmax probabilities, ``(n_batch, n_particles, n_classes)``: two passes fewer than exp(log-softmax)."""
        proba = self._logits_by_row(theta, X)
        proba -= _max_over_classes(proba)
        np.exp(proba, out=proba)
        proba /= _sum_over_classes(proba)
        return proba

    def logits(self, theta, X):
        """Class logits, shape ``(n_particles, n_batch, n_classes)``."""
        return self._logits_by_row(theta, X).transpose(1, 0, 2)

    def log_proba(self, theta, X):
        """Log class probabilities by a max-shifted log-softmax, ``(n_particles, n_batch, n_classes)``."""
        return self._log_proba_by_row(theta, X).transpose(1, 0, 2)

    def log_likelihood(self, theta, X, y=None):
        log_proba = self._log_proba_by_row(theta, X)
        return log_proba[np.arange(len(X)), :, np.asarray(y, dtype=np.intp)].T

    def grad_log_likelihood(self, theta, X, y, weights):
        n_particles, n_classes, n_batch = len(theta), self.n_classes, len(X)
        X = np.asarray(X, dtype=float)
        # d log p(y|x) / d logits = onehot(y) - proba, weighted per particle and datum.
        residual = self._proba_by_row(theta, X)
        np.negative(residual, out=residual)
        residual[np.arange(n_batch), :, np.asarray(y, dtype=np.intp)] += 1.0
        residual *= np.broadcast_to(weights, (n_particles, n_batch)).T[:, :, None]
        grad = (residual.reshape(n_batch, n_particles * n_classes).T @ X).reshape(n_particles, -1)
        if self.fit_intercept:
            grad = np.hstack([grad, residual.sum(axis=0)])
        return grad


# numpy reductions over a short trailing axis (a handful of classes) are several times slower
# than elementwise operations over the class slices, so these loop over classes, not data.
def _max_over_classes(values):
    out = values[..., 0].copy()
    for k in range(1, values.shape[-1]):
        np.maximum(out, values[..., k], out=out)
    return out[..., None]


def _sum_over_classes(values):
    out = values[..., 0].copy()
    for k in range(1, values.shape[-1]):
        out += values[..., k]
    return out[..., None]
