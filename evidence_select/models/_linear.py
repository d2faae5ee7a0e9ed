"""Linear-Gaussian regression with known noise variance (paper Appendix B.1).

``y = w . x + b + eps``, ``eps ~ N(0, noise_variance)``, ``w ~ N(0, prior_scale^2 I)``,
``b ~ N(0, intercept_scale^2)``. Parameters ``theta = (w_1..w_d, b)`` are already
unconstrained. The evidence is analytic and computed here from sufficient
statistics in O(N d^2) (:class:`LinearEvidenceStats`), never from an N x N matrix.
"""

from typing import NamedTuple

import numpy as np
from scipy.linalg import LinAlgError, cho_solve
from scipy.linalg.lapack import dpotrf, dpotrs, dtrtrs

from ._protocol import (Model, design_step_scales, diagonal_prior_variances, gaussian_prior_cdf,
                        gaussian_prior_transform, weighted_total)

__all__ = ["LinearGaussianModel", "LinearEvidenceStats"]

_LOG_2PI = np.log(2.0 * np.pi)
_EPS = np.finfo(float).eps
#: Largest rounding error (nats) accepted from the moment expansion of the residual sum of squares.
_MAX_CANCELLATION = 1e-9


class LinearGaussianModel(Model):
    """Bayesian linear regression with Gaussian priors and known noise.

    Parameters
    ----------
    n_features : int
        Number of input features ``d``.
    noise_variance : float, default=1.0
        Known variance of the observation noise.
    prior_scale : float, default=1.0
        Prior standard deviation of each weight.
    intercept_scale : float, default=1.0
        Prior standard deviation of the intercept.
    fit_intercept : bool, default=True
        If False the intercept is fixed at 0 and ``theta`` holds weights only.

    Examples
    --------
    >>> import numpy as np
    >>> model = LinearGaussianModel(n_features=2)
    >>> theta = model.sample_prior(np.random.default_rng(0), 4)
    >>> model.log_likelihood(theta, np.ones((3, 2)), np.zeros(3)).shape
    (4, 3)
    """

    def __init__(self, n_features, *, noise_variance=1.0, prior_scale=1.0, intercept_scale=1.0,
                 fit_intercept=True):
        self.n_features = int(n_features)
        self.noise_variance = float(noise_variance)
        self.prior_scale = float(prior_scale)
        self.intercept_scale = float(intercept_scale)
        self.fit_intercept = bool(fit_intercept)

    @property
    def n_params(self):
        return self.n_features + int(self.fit_intercept)

    @property
    def prior_variances(self):
        """Prior variance of each parameter, shape ``(n_params,)`` (a cached, read-only array)."""
        return diagonal_prior_variances(self.n_features, int(self.fit_intercept), self.prior_scale,
                                        self.intercept_scale)

    def _design(self, X):
        X = np.asarray(X, dtype=float)
        return np.hstack([X, np.ones((len(X), 1))]) if self.fit_intercept else X

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
        """Inverse per-datum Fisher diagonal ``noise_variance / E[a_j^2]`` (see :class:`Model`)."""
        return design_step_scales(X, self.fit_intercept, 1.0 / self.noise_variance)

    def predict_mean(self, theta, X):
        """Noise-free mean ``w . x + b`` per particle, shape ``(n_particles, n_batch)``."""
        d = self.n_features
        mean = theta[:, :d] @ np.asarray(X, dtype=float).T
        if self.fit_intercept:
            mean += theta[:, d:]
        return mean

    def log_likelihood(self, theta, X, y=None):
        # In place on the (particles, rows) array predict_mean allocated: one large array per call, not five.
        out = self.predict_mean(theta, X)
        np.subtract(np.asarray(y, dtype=float), out, out=out)
        np.square(out, out=out)
        out /= self.noise_variance
        out += np.log(self.noise_variance)
        out += _LOG_2PI
        out *= -0.5
        return out

    def grad_log_likelihood(self, theta, X, y, weights):
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        if np.ndim(weights) <= 1:
            # Weights shared by all particles: the gradient is linear in theta,
            # sum_j w_j (y_j - theta.a_j) a_j = s_ay - S_aa theta, from the weighted moments
            # (O(n d^2), no particles x rows residual matrix): this runs several times per chunk.
            moments = self._weighted_moments(X, y, weights)
            return self.grad_from_statistics(theta, moments)
        # No design-matrix copy on this hot path: the intercept column is handled apart.
        weighted = y - self.predict_mean(theta, X)
        weighted *= weights
        weighted /= self.noise_variance
        grad = weighted @ np.asarray(X, dtype=float)
        return np.hstack([grad, weighted.sum(axis=1, keepdims=True)]) if self.fit_intercept else grad

    def log_likelihood_sum(self, theta, X, y=None):
        # From the rows' moments, O(n d^2) once and O(d^2) per particle, where there are more particles than
        # the moments have columns (an SGAIS population); the rows' residuals, O(n d) per particle, for fewer
        # (a backend's few points on many rows).
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        total = (self._total_from_moments(theta, self._weighted_moments(X, y, 1.0), float(len(X)))
                 if len(theta) > self.n_params + 1 else None)
        return super().log_likelihood_sum(theta, X, y) if total is None else total

    def log_likelihood_and_grad(self, theta, X, y, weights):
        if np.ndim(weights) > 1:
            return super().log_likelihood_and_grad(theta, X, y, weights)
        # Weights shared by all particles: both come from the weighted moments, O(n d^2) once and
        # O(d^2) per particle.
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        weights = np.broadcast_to(np.asarray(weights, dtype=float), (len(X),))
        moments = self._weighted_moments(X, y, weights)
        grad = self.grad_from_statistics(theta, moments)
        total = self._total_from_moments(theta, moments, float(np.sum(weights)))
        return (weighted_total(self.log_likelihood(theta, X, y), weights) if total is None else total), grad

    def _total_from_moments(self, theta, moments, total_weight):
        """``sum_j w_j log p(y_j | a_j, theta)`` per particle from the weighted moments ``M``, through
        ``sum_j w_j (y_j - theta.a_j)^2 = [-theta, 1] M [-theta, 1]^T``; None where that expansion's cancellation
        could cost more than ``_MAX_CANCELLATION`` nats (a badly scaled target), for the caller to sum the rows'
        residuals directly."""
        n_design = self.n_params
        cross, gram = moments[:n_design, -1], moments[:n_design, :n_design]
        terms = (moments[-1, -1], 2.0 * theta @ cross, np.einsum("ij,ij->i", theta @ gram, theta))
        # The expansion's rounding error is eps times its largest term.
        if _EPS * np.max(np.abs(terms[0]) + np.abs(terms[1]) + terms[2]) / self.noise_variance > _MAX_CANCELLATION:
            return None
        squares = terms[0] - terms[1] + terms[2]
        return -0.5 * (squares / self.noise_variance + total_weight * (np.log(self.noise_variance) + _LOG_2PI))

    def sample_tempered_posterior(self, rng, n_samples, X, y, weights):
        """Independent exact draws from ``p(theta) prod_j p(y_j | x_j, theta)^{w_j}``, a Gaussian.

        Its precision is the prior's plus ``sum_j w_j a_j a_j^T / noise_variance``
        for the design rows ``a_j``; one pass over the rows (their weighted
        moments) and a Cholesky factor give every draw. SGAIS's exact moves use
        it in place of HMC (:func:`~evidence_select.sgais._moves.exact_draw_kernel`).

        Parameters
        ----------
        rng : numpy.random.Generator
        n_samples : int
        X : ndarray of shape (n_rows, n_features)
        y : ndarray of shape (n_rows,)
        weights : float or ndarray of shape (n_rows,)
            Each row's likelihood power, shared by all draws.

        Returns
        -------
        theta : ndarray of shape (n_samples, n_params)

        Examples
        --------
        >>> import numpy as np
        >>> model = LinearGaussianModel(n_features=1, fit_intercept=False, prior_scale=1e3)
        >>> X, y = np.ones((100, 1)), np.full(100, 2.0)
        >>> draws = model.sample_tempered_posterior(np.random.default_rng(0), 20000, X, y, 1.0)
        >>> round(float(draws.mean()), 2), round(float(draws.var() * 100), 1)  # N(2, 1 / 100)
        (2.0, 1.0)
        """
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        moments = self._weighted_moments(X, y, np.broadcast_to(np.asarray(weights, dtype=float), (len(X),)))
        return self.sample_tempered_posterior_from_statistics(rng, n_samples, moments)

    def sample_tempered_posterior_from_statistics(self, rng, n_samples, statistics):
        """:meth:`sample_tempered_posterior` from the rows' weighted :meth:`gradient_statistics`, summed.

        ``statistics`` is ``sum_j w_j [a_j, y_j]^T [a_j, y_j]``: the tempered
        posterior depends on the rows only through it, so SGAIS keeps the sum over
        every row seen and draws exactly at any ``n`` with no pass over the rows.

        Parameters
        ----------
        rng : numpy.random.Generator
        n_samples : int
        statistics : ndarray of shape (n_params + 1, n_params + 1)

        Returns
        -------
        theta : ndarray of shape (n_samples, n_params)
        """
        n_design = self.n_params
        factor, mean = _posterior_factor(self, statistics[:n_design, :n_design], statistics[:n_design, -1])
        # With precision L L^T, L^-T z for z ~ N(0, I) has covariance (L L^T)^-1.
        if n_design == 0:
            return np.empty((n_samples, 0))
        deviations, _ = dtrtrs(factor[0], rng.standard_normal((n_design, n_samples)), lower=1, trans=1)
        return mean + deviations.T

    def gradient_statistics(self, X, y):
        """``sum_j [a_j, y_j]^T [a_j, y_j]`` over the rows of ``X`` (its second-to-last axis).

        The gradient of a weighted log-likelihood is linear in these moments
        (:meth:`grad_from_statistics`), so SGAIS sums them once per chunk and
        once per mini-batch rather than passing every row for every particle and
        step. Leading axes of ``X`` and ``y`` are kept (one sum per mini-batch).

        Parameters
        ----------
        X : ndarray of shape (..., n_rows, n_features)
        y : ndarray of shape (..., n_rows)

        Returns
        -------
        statistics : ndarray of shape (..., n_params + 1, n_params + 1)
        """
        augmented = self._augmented(X, y)
        return np.swapaxes(augmented, -1, -2) @ augmented

    def grad_from_statistics(self, theta, statistics):
        """``(s_ay - S_aa theta) / noise_variance``: the gradient of ``sum_j w_j log p(y_j | x_j, theta)``.

        ``statistics`` is ``sum_j w_j`` times the rows' :meth:`gradient_statistics`
        (they add over rows and scale with the weights).
        """
        n_design = self.n_params
        grad = statistics[:n_design, -1] - theta @ statistics[:n_design, :n_design]
        grad /= self.noise_variance
        return grad

    def _augmented(self, X, y):
        """The rows ``[a_j, y_j]``: the design row (with the intercept's 1) and the target."""
        X = np.asarray(X, dtype=float)
        augmented = np.empty(X.shape[:-1] + (self.n_params + 1,))
        augmented[..., : self.n_features] = X
        if self.fit_intercept:
            augmented[..., self.n_features] = 1.0
        augmented[..., -1] = y
        return augmented

    def _weighted_moments(self, X, y, weights):
        """``sum_j w_j [a_j, y_j]^T [a_j, y_j]`` for the design rows ``a_j`` and weights shared by all particles.

        One product of the augmented rows gives every moment the likelihood and its gradient need.
        """
        augmented = self._augmented(X, y)
        weights = np.asarray(weights, dtype=float)
        return (augmented * (weights[:, None] if weights.ndim else weights)).T @ augmented

    def exact_log_evidence(self, X, y):
        """Analytic ``log p(y | X)``, O(N d^2) through :class:`LinearEvidenceStats`."""
        return LinearEvidenceStats.empty(self).update(self, X, y).log_evidence(self)


class LinearEvidenceStats(NamedTuple):
    """Sufficient statistics of the linear-Gaussian model, updatable chunk by chunk.

    With design ``A = [X, 1]`` the statistics are ``A^T A``, ``A^T y``,
    ``y^T y`` and the count; chunk updates add them, so streaming 1e6 rows costs
    O(N d^2) time and O(d^2) memory.

    Examples
    --------
    >>> import numpy as np
    >>> model = LinearGaussianModel(n_features=1)
    >>> X, y = np.arange(4.0)[:, None], np.arange(4.0)
    >>> stats = LinearEvidenceStats.empty(model).update(model, X[:2], y[:2])
    >>> stats = stats.update(model, X[2:], y[2:])
    >>> bool(np.isclose(stats.log_evidence(model), model.exact_log_evidence(X, y)))
    True
    """

    gram: np.ndarray  # (n_params, n_params), A^T A
    cross: np.ndarray  # (n_params,), A^T y
    sum_sq: float  # y^T y
    n_samples: int

    @classmethod
    def empty(cls, model):
        """Statistics of no data for ``model``."""
        d = model.n_params
        return cls(np.zeros((d, d)), np.zeros(d), 0.0, 0)

    def update(self, model, X, y):
        """Return the statistics with the chunk ``(X, y)`` of ``model`` added."""
        design = model._design(X)
        y = np.asarray(y, dtype=float)
        return LinearEvidenceStats(self.gram + design.T @ design, self.cross + design.T @ y,
                                   self.sum_sq + float(y @ y), self.n_samples + len(y))

    def log_evidence(self, model):
        """``log p(y | X)`` of all data added so far, by Woodbury and Cholesky.

        ``log Z = -N/2 log(2 pi s2) - 1/2 log|S0| - 1/2 log|P| - 1/2 (y'y/s2 - m' P m)``
        with posterior precision ``P = S0^-1 + A'A / s2`` and mean ``m = P^-1 A'y / s2``.
        """
        s2 = model.noise_variance
        prior_var = model.prior_variances
        factor, mean = _posterior_factor(model, self.gram, self.cross)
        b = self.cross / s2
        log_det_precision = 2.0 * np.sum(np.log(np.diag(factor[0])))
        quad = self.sum_sq / s2 - b @ mean
        return float(-0.5 * self.n_samples * (np.log(s2) + _LOG_2PI) - 0.5 * np.sum(np.log(prior_var))
                     - 0.5 * log_det_precision - 0.5 * quad)

    def posterior(self, model):
        """Exact posterior mean and covariance of ``theta``."""
        factor, mean = _posterior_factor(model, self.gram, self.cross)
        return mean, cho_solve(factor, np.eye(len(mean)))

    def posterior_mean(self, model):
        """Exact posterior mean of ``theta`` (no covariance)."""
        return _posterior_factor(model, self.gram, self.cross)[1]


def _posterior_factor(model, gram, cross):
    """Cholesky factor of the posterior precision ``diag(1 / prior_variances) + gram / noise_variance``, and the
    posterior mean ``precision^-1 cross / noise_variance``, from the (weighted) moments of the design rows."""
    precision = np.diag(1.0 / model.prior_variances) + gram / model.noise_variance
    cross = cross / model.noise_variance
    if not (np.isfinite(precision).all() and np.isfinite(cross).all()):
        raise ValueError("array must not contain infs or NaNs")  # scipy's check and words
    if precision.size == 0:  # no parameters: LAPACK takes no empty matrix
        return (precision, True), cross
    # LAPACK's potrf and potrs directly, as scipy's cho_factor and cho_solve call them (the same bits) without
    # the rest of their input handling: SGAIS draws from this factor at every annealing step.
    lower, info = dpotrf(precision, lower=1, clean=0)
    if info != 0:
        raise LinAlgError(f"the posterior precision is not positive definite (LAPACK potrf info {info})")
    mean, _ = dpotrs(lower, cross, lower=1)
    return (lower, True), mean
