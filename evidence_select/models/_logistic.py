"""Softmax (multinomial logistic) regression (paper Appendix B.2).

``p(y = k | x, theta) = softmax_k(W x + b)`` with ``W`` of shape ``(n_classes,
n_features)`` and standard Gaussian priors (scales configurable). ``theta`` is
``W`` flattened row by row followed by ``b``. Binary problems use K = 2 (the
over-parameterised softmax, as in the paper) so that one code path serves all K.
"""

import numpy as np

from ..utils._workspace import Workspace, workspace_buffer
from ._protocol import Model, design_step_scales, diagonal_prior_variances, weighted_total

__all__ = ["SoftmaxRegressionModel"]

_LOG_2PI = np.log(2.0 * np.pi)
#: Bound on |logit| below which exp needs no max shift (exp(200) ~ 7e86, exp(-200) ~ 1e-87).
_SAFE_LOGIT = 200.0
#: The same bound for single-precision exponentials (exp(80) ~ 6e34, exp(-80) ~ 2e-35, both normal floats).
_SAFE_SINGLE_LOGIT = 80.0
#: Floor of the shifted logits before a single-precision exp: numpy's float32 exp leaves its vector path
#: for results below the normal range, and exp(-80) is 2e-35 of the largest term.
_SINGLE_EXP_FLOOR = -80.0
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

    #: The gradient alone is single precision, about half the fused call's cost (see :meth:`_proba_by_row`).
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
        proba = self._proba_by_row(theta, design).astype(float)  # (n_rows, K, M)
        spread = np.mean(proba * (1.0 - proba), axis=2)  # (n_rows, K)
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

    def _logits_by_row(self, theta, design, workspace=None, limit=_SAFE_LOGIT, dtype=np.float64):
        """Logits in the layout ``(n_batch, n_classes, n_particles)`` (contiguous), and whether exp is safe.

        One ``(n_batch, d + 1) @ (d + 1, K*M)`` product serves all particles; with
        the batch axis first and the particles last, the per-class passes of the
        elementwise work after it (max, sum, the normalising division) run over
        contiguous rows of particles rather than with a stride of K.
        The flag bounds every logit by ``max |a| * max ||c||_1`` (Hoelder): below
        ``limit`` (:data:`_SAFE_LOGIT`, or :data:`_SAFE_SINGLE_LOGIT` for
        single-precision exponentials) the softmax needs no max shift (no overflow, no underflow
        to an all-zero row), which saves two passes over the largest array. With a
        ``workspace`` the logits are that workspace's buffer (valid until its next use).
        ``dtype`` is the product's precision (the bound is computed in double precision).
        """
        coefficients = self._coefficients(theta).reshape(self.n_classes * len(theta), -1)
        bound = np.max(np.abs(design)) * np.max(np.sum(np.abs(coefficients), axis=1)) if len(design) else 0.0
        dtype = np.dtype(dtype)
        out = workspace_buffer(workspace, f"logits_{dtype.char}", (len(design), len(coefficients)), dtype)
        logits = np.matmul(design.astype(dtype, copy=False), coefficients.T.astype(dtype, copy=False), out=out)
        return logits.reshape(len(design), self.n_classes, len(theta)), bound < limit

    def _log_proba_by_row(self, theta, X):
        """Log-softmax, ``(n_batch, n_classes, n_particles)``."""
        log_proba, safe = self._logits_by_row(theta, self._design(X))
        log_proba -= self._log_normaliser(log_proba, safe)
        return log_proba

    def _log_normaliser(self, logits, safe, workspace=None):
        """``log sum_k exp(logits_k)``, shape ``(n_batch, 1, n_particles)`` (``logits`` is not modified).

        With a ``workspace`` the exponentials are written into its buffers; the result is a new array.
        """
        _, total, shift = self._shifted_exp(logits, safe, workspace)
        return _log_sum(total, shift)

    def _shifted_exp(self, logits, safe, workspace=None):
        """``exp(logits - shift)`` and its sum over classes ``(n_batch, 1, n_particles)``, and the shift.

        The shift is the largest logit per row and particle, or None when the
        logits are safe to exponentiate as they are (see :meth:`_logits_by_row`).
        With a ``workspace`` the first two are its buffers.
        """
        exp = workspace_buffer(workspace, "exp", logits.shape)
        total = workspace_buffer(workspace, "total", _without_classes(logits))
        if safe:
            exp = np.exp(logits, out=exp)
            return exp, _sum_over_classes(exp, total), None
        shift = _max_over_classes(logits, workspace_buffer(workspace, "top", _without_classes(logits)))
        exp = np.exp(np.subtract(logits, shift, out=exp), out=exp)
        return exp, _sum_over_classes(exp, total), shift

    def _proba_by_row(self, theta, design, workspace=None):
        """Single-precision softmax probabilities, ``(n_batch, n_classes, n_particles)``.

        The stochastic gradient alone uses them: logits, exponentials,
        normalisation and the gradient's products in float32 halve the memory
        traffic of the SGHMC step, whose elementwise passes over the
        ``(n_batch, K, M)`` block dominate it; the gradient is then accurate to
        ~1e-6 relative, far below the mini-batch's own noise. Weights and
        Metropolis-Hastings decisions use the float64 log-likelihood; the exact
        HMC moves kick with this gradient, which keeps them exact (see
        :class:`~evidence_select.kernels._hmc.KickedTarget`). With a
        ``workspace`` the result is that workspace's buffer (valid until its next use).
        """
        proba, safe = self._logits_by_row(theta, design, workspace, limit=_SAFE_SINGLE_LOGIT, dtype=np.float32)
        if not safe:
            proba -= _max_over_classes(proba, workspace_buffer(workspace, "top_f", _without_classes(proba), np.float32))
            np.maximum(proba, _SINGLE_EXP_FLOOR, out=proba)
        np.exp(proba, out=proba)
        proba /= _sum_over_classes(proba, workspace_buffer(workspace, "total_f", _without_classes(proba), np.float32))
        return proba

    def logits(self, theta, X):
        """Class logits, shape ``(n_particles, n_batch, n_classes)``."""
        return self._logits_by_row(theta, self._design(X))[0].transpose(2, 0, 1)

    def log_proba(self, theta, X):
        """Log class probabilities (log-softmax), ``(n_particles, n_batch, n_classes)``."""
        return self._log_proba_by_row(theta, X).transpose(2, 0, 1)

    def log_likelihood(self, theta, X, y=None):
        logits, safe = self._logits_by_row(theta, self._design(X), self._workspace)
        return _observed_log_proba(logits, y, self._log_normaliser(logits, safe, self._workspace))

    def grad_log_likelihood(self, theta, X, y, weights):
        design = self._design(X)
        return self._grad_from_proba(self._proba_by_row(theta, design, self._workspace), design, y, weights)

    def log_likelihood_and_grad(self, theta, X, y, weights):
        # One product for the logits and one pass of double-precision exponentials serve both: the
        # log normaliser is the log of their sum, the probabilities their ratio to it.
        design = self._design(X)
        logits, safe = self._logits_by_row(theta, design, self._workspace)
        exp, total, shift = self._shifted_exp(logits, safe, self._workspace)
        log_normaliser = _log_sum(total, shift)
        weights = np.asarray(weights, dtype=float)
        if np.ndim(weights) > 1:
            weighted = weighted_total(_observed_log_proba(logits, y, log_normaliser), weights)
            exp /= total
            return weighted, self._grad_from_proba(exp, design, y, weights)
        # Weights shared by the particles: the observed classes' weighted logits sum to the coefficients
        # times each class's weighted design total, the (K, d + 1) block the gradient needs anyway, so no
        # per-row gather of the observed logits.
        weighted_design, class_totals = _shared_weight_totals(design, y, weights, self.n_classes)
        # Particle-major coefficients: einsum then sums in the same order as before the layout change.
        coefficients = np.ascontiguousarray(self._coefficients(theta).transpose(1, 0, 2))
        weighted = (np.einsum("pkj,kj->p", coefficients, class_totals)
                    - np.broadcast_to(weights, (len(design),)) @ log_normaliser.reshape(len(design), len(theta)))
        exp /= total
        return weighted, self._theta_layout(class_totals - self._proba_products(exp, weighted_design))

    def _grad_from_proba(self, proba, design, y, weights):
        """The weighted log-likelihood's gradient from the probabilities ``(n_batch, K, n_particles)``.

        ``proba`` may be overwritten.
        """
        n_batch, n_classes, n_particles = proba.shape
        # d log p(y|x) / d logits = onehot(y) - proba, weighted per particle and datum.
        if np.ndim(weights) <= 1:
            # Weights shared by all particles: scale the design rows rather than the (batch, particles, K)
            # array, and the onehot part, which does not depend on the particle, is one small product.
            weighted_design, class_totals = _shared_weight_totals(design, y, weights, n_classes)
            return self._theta_layout(class_totals - self._proba_products(proba, weighted_design))
        residual = np.negative(proba, out=proba)
        residual[np.arange(n_batch), np.asarray(y, dtype=np.intp), :] += 1.0
        residual *= np.broadcast_to(weights, (n_particles, n_batch)).T[:, None, :]
        return self._theta_layout(self._proba_products(residual, design))

    @staticmethod
    def _proba_products(proba, design):
        """``sum_j proba[j, k, i] * design[j]`` per particle and class, ``(n_particles, K, n_design_columns)``.

        In ``proba``'s precision (single-precision probabilities: a float32 product), returned as float64.
        """
        n_batch, n_classes, n_particles = proba.shape
        products = proba.reshape(n_batch, n_classes * n_particles).T @ design.astype(proba.dtype, copy=False)
        return products.astype(np.float64, copy=False).reshape(n_classes, n_particles, -1).transpose(1, 0, 2)

    def _theta_layout(self, grad):
        """The particles' ``(K, d + 1)`` gradient blocks reordered to theta's layout ``[W row by row, b]``."""
        n_particles, n_classes = len(grad), self.n_classes
        if not self.fit_intercept:
            return grad.reshape(n_particles, -1)
        out = np.empty((n_particles, self.n_params))
        out[:, : n_classes * self.n_features] = grad[:, :, :-1].reshape(n_particles, -1)
        out[:, n_classes * self.n_features:] = grad[:, :, -1]
        return out


def _shared_weight_totals(design, y, weights, n_classes):
    """The design rows times their weights, and their totals per observed class ``(K, n_design_columns)``."""
    n_batch = len(design)
    weighted_design = design * np.broadcast_to(np.asarray(weights, dtype=float), (n_batch,))[:, None]
    onehot = np.zeros((n_batch, n_classes))
    onehot[np.arange(n_batch), np.asarray(y, dtype=np.intp)] = 1.0
    return weighted_design, onehot.T @ weighted_design


def _log_sum(total, shift):
    """``log sum_k exp(logits_k)`` from :meth:`SoftmaxRegressionModel._shifted_exp`'s sum and shift."""
    return np.log(total) if shift is None else np.log(total) + shift


def _observed_log_proba(logits, y, log_normaliser):
    """``log p(y_j | x_j, theta_i)``, ``(n_particles, n_batch)``: the observed class's logit minus the log normaliser.

    No pass over the other classes' log-probabilities: one contiguous row of particles per datum.
    """
    observed = logits[np.arange(len(logits)), np.asarray(y, dtype=np.intp)]
    observed -= log_normaliser[:, 0]
    return observed.T


# numpy reductions over a short axis (a handful of classes) are several times slower than
# elementwise operations over the class slices, so these loop over classes, not data. ``values``
# is ``(n_batch, K, n_particles)``; ``out`` (shape ``(n_batch, n_particles)``), when given,
# receives the result instead of a new array, returned as ``(n_batch, 1, n_particles)``.
def _without_classes(values):
    return values.shape[:1] + values.shape[2:]


def _max_over_classes(values, out=None):
    out = values[:, 0].copy() if out is None else _copy_into(out, values[:, 0])
    for k in range(1, values.shape[1]):
        np.maximum(out, values[:, k], out=out)
    return out[:, None]


def _sum_over_classes(values, out=None):
    out = values[:, 0].copy() if out is None else _copy_into(out, values[:, 0])
    for k in range(1, values.shape[1]):
        out += values[:, k]
    return out[:, None]


def _copy_into(out, values):
    np.copyto(out, values)
    return out
