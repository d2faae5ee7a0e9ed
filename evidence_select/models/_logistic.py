"""Softmax (multinomial logistic) regression (paper Appendix B.2).

``p(y = k | x, theta) = softmax_k(W x + b)`` with ``W`` of shape ``(n_classes,
n_features)`` and standard Gaussian priors (scales configurable). ``theta`` is
``W`` flattened row by row followed by ``b``. Binary problems use K = 2 (the
over-parameterised softmax, as in the paper) so that one code path serves all K.

The log-likelihood and its gradient are compiled kernels
(:mod:`~evidence_select.models._compiled_softmax`, imported on their first call); the
numpy code here serves the public logits and probabilities and the curvature ratio.
"""

import functools

import numpy as np

from ..utils._workspace import Workspace, workspace_buffer
from ._protocol import (Model, design_step_scales, diagonal_prior_variances, gaussian_prior_cdf,
                        gaussian_prior_transform, kernel_array, kernel_row_weights, weighted_total)

__all__ = ["SoftmaxRegressionModel"]


@functools.cache
def _kernels():
    """The numba kernels' module, imported on first use so that importing the package neither imports numba nor
    compiles (cached: an import statement on every SGHMC step costs as much as a small kernel call)."""
    from . import _compiled_softmax as module
    return module


_LOG_2PI = np.log(2.0 * np.pi)
#: Floor of :meth:`SoftmaxRegressionModel.curvature_ratio`: the step it lengthens stays finite (the engine caps
#: it at the prior's scale anyway).
_MIN_CURVATURE_RATIO = 1e-6


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

    #: The gradient alone is single precision, about a third of the fused call's cost (see
    #: :func:`~evidence_select.models._compiled_softmax.softmax_gradient`).
    fast_gradient = True

    def __init__(self, n_features, n_classes, *, prior_scale=1.0, intercept_scale=1.0, fit_intercept=True):
        self.n_features = int(n_features)
        self.n_classes = int(n_classes)
        self.prior_scale = float(prior_scale)
        self.intercept_scale = float(intercept_scale)
        self.fit_intercept = bool(fit_intercept)
        # Scratch buffers of the gradient's logits, reused across SGHMC steps and chunks (see Workspace).
        self._workspace = Workspace()

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_workspace", Workspace())  # pickled before models had a workspace

    @property
    def n_params(self):
        return self.n_classes * (self.n_features + int(self.fit_intercept))

    @property
    def prior_variances(self):
        """Prior variance of each parameter, shape ``(n_params,)`` (a cached, read-only array)."""
        return diagonal_prior_variances(self.n_classes * self.n_features, self.n_classes * int(self.fit_intercept),
                                        self.prior_scale, self.intercept_scale)

    def sample_prior(self, rng, n_samples):
        return rng.standard_normal((n_samples, self.n_params)) * np.sqrt(self.prior_variances)

    def log_prior(self, theta):
        variances = self.prior_variances
        return -0.5 * (np.sum(theta**2 / variances, axis=1) + np.sum(np.log(variances)) + self.n_params * _LOG_2PI)

    def grad_log_prior(self, theta):
        return -theta / self.prior_variances

    def prior_transform(self, u):
        return gaussian_prior_transform(u, self.prior_variances)

    def prior_cdf(self, theta):
        return gaussian_prior_cdf(theta, self.prior_variances)

    def step_scales(self, X):
        """Inverse per-datum Fisher diagonal bound ``4 / E[a_j^2]`` (``p(1-p) <= 1/4``), per class."""
        scales = design_step_scales(X, self.fit_intercept, 0.25)
        n_features = self.n_features
        weights = np.tile(scales[:n_features], self.n_classes)
        return np.concatenate([weights, np.full(self.n_classes, scales[-1])]) if self.fit_intercept else weights

    def curvature_ratio(self, theta, X, sample_weight=None):
        """Per parameter, the rows' mean Fisher information at ``theta`` over the bound :meth:`step_scales` assumes.

        ``sum_i w_i mean_m p_k (1 - p_k) a_ij^2 / (sum_i w_i a_ij^2 / 4)``, in
        ``(0, 1]``: 1 where the classes are uncertain, far below where the
        posterior separates them (most rows then have ``p_k`` near 0 or 1).
        """
        design = self._design(X)
        weights = np.ones(len(design)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        theta, X, _ = self._kernel_inputs(theta, X, np.zeros(len(X), dtype=np.intp))
        spread = _kernels().softmax_class_spread(theta, X, self.n_classes, self.fit_intercept,
                                                 np.empty((len(X), self.n_classes)))
        weighted_squares = weights[:, None] * design**2
        fisher = spread.T @ weighted_squares  # (K, d [+ 1])
        bound = 0.25 * weighted_squares.sum(axis=0)
        ratio = np.ones_like(fisher)
        np.divide(fisher, bound, out=ratio, where=bound > 0)
        return self._theta_layout(np.clip(ratio, _MIN_CURVATURE_RATIO, 1.0)[None])[0]

    def _design(self, X):
        """``[X, 1]`` (or ``X``): one product then gives logits with intercepts, and gradients with theirs."""
        X = np.asarray(X, dtype=float)
        if not self.fit_intercept:
            return X
        design = np.empty((len(X), self.n_features + 1))
        design[:, :-1] = X
        design[:, -1] = 1.0
        return design

    def _coefficients(self, theta):
        """Per class and particle ``[w_k, b_k]``, shape ``(n_classes, n_particles, n_features [+ 1])``.

        Class-major, so the logits' class slices are contiguous runs over the particles (see
        :meth:`_logits_by_row`).
        """
        n_particles, n_classes, n_features = len(theta), self.n_classes, self.n_features
        weights = theta[:, : n_classes * n_features].reshape(n_particles, n_classes, n_features)
        coefficients = np.empty((n_classes, n_particles, n_features + int(self.fit_intercept)))
        coefficients[:, :, :n_features] = weights.transpose(1, 0, 2)
        if self.fit_intercept:
            coefficients[:, :, -1] = theta[:, n_classes * n_features:].T
        return coefficients

    def _logits_by_row(self, theta, design):
        """Logits in the layout ``(n_batch, n_classes, n_particles)``: one ``(n_batch, d + 1) @ (d + 1, K*M)``
        product serves all particles."""
        coefficients = self._coefficients(theta).reshape(self.n_classes * len(theta), -1)
        return (design @ coefficients.T).reshape(len(design), self.n_classes, len(theta))

    def _log_proba_by_row(self, theta, X):
        """Log-softmax, ``(n_batch, n_classes, n_particles)``, shifted by each row's largest logit (no overflow,
        and the largest term is 1, so the sum never underflows)."""
        log_proba = self._logits_by_row(theta, self._design(X))
        log_proba -= np.max(log_proba, axis=1, keepdims=True)
        log_proba -= np.log(np.sum(np.exp(log_proba), axis=1, keepdims=True))
        return log_proba

    def logits(self, theta, X):
        """Class logits, shape ``(n_particles, n_batch, n_classes)``."""
        return self._logits_by_row(theta, self._design(X)).transpose(2, 0, 1)

    def log_proba(self, theta, X):
        """Log class probabilities (log-softmax), ``(n_particles, n_batch, n_classes)``."""
        return self._log_proba_by_row(theta, X).transpose(2, 0, 1)

    def log_likelihood(self, theta, X, y=None):
        return self._compiled_log_likelihood(theta, X, y)

    def log_likelihood_sum(self, theta, X, y=None):
        # The rows' values in the workspace (no (n_particles, n_rows) array afresh on every call), summed by numpy:
        # the same bits as log_likelihood(...).sum(axis=1).
        return self._compiled_log_likelihood(theta, X, y, self._workspace).sum(axis=1)

    def _compiled_log_likelihood(self, theta, X, y, workspace=None):
        """:func:`~evidence_select.models._compiled_softmax.softmax_log_likelihood`, ``(n_particles, n_rows)``. With
        a ``workspace``, in its buffer (valid until its next use)."""
        theta, X, y = self._kernel_inputs(theta, X, y)
        out = workspace_buffer(workspace, "log_lik", (len(theta), len(X)))
        if out is None:
            out = np.empty((len(theta), len(X)))
        return _kernels().softmax_log_likelihood(theta, X, y, self.n_classes, self.fit_intercept, out)

    def grad_log_likelihood(self, theta, X, y, weights):
        """The weighted log-likelihood's gradient in single precision (see
        :func:`~evidence_select.models._compiled_softmax.softmax_gradient`): SGHMC's mini-batch gradient, and the
        kicks of exact HMC moves (:class:`~evidence_select.kernels._hmc.KickedTarget`), whose Metropolis-Hastings
        decisions use the double-precision log-likelihood."""
        theta, X, y = self._kernel_inputs(theta, X, y)
        row_weights = kernel_row_weights(weights, len(theta), len(X))
        return _kernels().softmax_gradient(theta, X, y, row_weights, self.n_classes, self.fit_intercept,
                                           np.empty(theta.shape))

    def log_likelihood_and_grad(self, theta, X, y, weights):
        # One compiled pass for both, in double precision; the rows' log-likelihoods are the same bits as
        # log_likelihood's, so the weighted total is too.
        theta, X, y = self._kernel_inputs(theta, X, y)
        log_lik = workspace_buffer(self._workspace, "log_lik", (len(theta), len(X)))
        if log_lik is None:
            log_lik = np.empty((len(theta), len(X)))
        grad = np.empty(theta.shape)
        row_weights = kernel_row_weights(weights, len(theta), len(X))
        _kernels().softmax_log_likelihood_and_gradient(theta, X, y, row_weights, self.n_classes, self.fit_intercept,
                                                       log_lik, grad)
        return weighted_total(log_lik, np.asarray(weights, dtype=float)), grad

    def _kernel_inputs(self, theta, X, y):
        """``theta``, ``X`` as floats and ``y`` as integer codes for the kernels (:func:`kernel_array`), checked
        against the model's shapes (the kernels index with them)."""
        theta, X, y = kernel_array(theta), kernel_array(X), kernel_array(y, np.intp)
        if theta.ndim != 2 or theta.shape[1] != self.n_params:
            raise ValueError(f"theta must have shape (n_particles, {self.n_params}), got {theta.shape}")
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have shape (n_rows, {self.n_features}), got {X.shape}")
        if y.shape != (len(X),):
            raise ValueError(f"y must have shape ({len(X)},), got {y.shape}")
        return theta, X, y

    def _theta_layout(self, grad):
        """The particles' ``(K, d + 1)`` gradient blocks reordered to theta's layout ``[W row by row, b]``."""
        n_particles, n_classes = len(grad), self.n_classes
        if not self.fit_intercept:
            return grad.reshape(n_particles, -1)
        out = np.empty((n_particles, self.n_params))
        out[:, : n_classes * self.n_features] = grad[:, :, :-1].reshape(n_particles, -1)
        out[:, n_classes * self.n_features:] = grad[:, :, -1]
        return out
