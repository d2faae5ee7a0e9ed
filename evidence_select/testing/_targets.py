"""Test targets with analytic evidence that implement the :class:`Model` protocol.

They let every evidence backend (AIS, NS, bridge sampling, SGAIS) be checked
against a known ``log Z`` in any dimension, through exactly the code path used
for real models.

The data ``X`` carries no information here: a target's total log-likelihood
``log L(theta)`` is a fixed function of ``theta``, split evenly over the rows of
``X`` (each column of :meth:`log_likelihood` is ``log L(theta) / n_batch``), so
``log_likelihood_sum`` and the per-datum gradient weights keep their meaning
whatever ``X`` is. Pass a dummy ``X = np.zeros((1, 1))`` and ``y=None``;
``exact_log_evidence(X, y)`` does not depend on them.
"""

import numpy as np
from scipy.special import expit, log_ndtr, logit

from ..models._protocol import Model, gaussian_prior_cdf, gaussian_prior_transform

__all__ = ["GaussianTarget", "BoxGaussianTarget", "BimodalTarget", "SkewedKickTarget", "correlated_gaussian_target"]

_LOG_2PI = np.log(2.0 * np.pi)


def _split(total, X):
    """Spread ``total`` of shape ``(n_particles,)`` evenly over the ``n_batch`` rows of X."""
    n_batch = len(X)
    return np.repeat(total[:, None] / n_batch, n_batch, axis=1)


def _grad_weight(weights, n_particles, X):
    """Per-particle total weight ``sum_j weights[i, j] / n_batch``, shape ``(n_particles, 1)``."""
    n_batch = len(X)
    return np.broadcast_to(weights, (n_particles, n_batch)).sum(axis=1, keepdims=True) / n_batch


def _mvn_logpdf(x, mean, cov_chol):
    """Log density of ``N(mean, L L^T)`` at rows of ``x`` from the lower Cholesky factor ``L``."""
    diff = np.atleast_2d(x) - mean
    z = np.linalg.solve(cov_chol, diff.T).T
    return (-0.5 * np.sum(z**2, axis=1) - np.sum(np.log(np.diag(cov_chol)))
            - 0.5 * len(mean) * _LOG_2PI)


class _GaussianPriorMixin:
    """Isotropic Gaussian prior ``N(0, prior_scale^2 I)`` on ``theta``."""

    def sample_prior(self, rng, n_samples):
        return self.prior_scale * rng.standard_normal((n_samples, self.n_params))

    def log_prior(self, theta):
        s2 = self.prior_scale**2
        return -0.5 * (np.sum(np.asarray(theta) ** 2, axis=1) / s2 + self.n_params * (np.log(s2) + _LOG_2PI))

    def grad_log_prior(self, theta):
        return -np.asarray(theta, dtype=float) / self.prior_scale**2

    def prior_transform(self, u):
        return gaussian_prior_transform(u, self.prior_scale**2)

    def prior_cdf(self, theta):
        return gaussian_prior_cdf(theta, self.prior_scale**2)


class GaussianTarget(_GaussianPriorMixin, Model):
    """Gaussian likelihood ``L(theta) = N(mean; theta, cov)`` under ``N(0, prior_scale^2 I)``.

    The evidence is ``Z = N(mean; 0, cov + prior_scale^2 I)``. With a full
    ``cov`` this is the correlated-Gaussian target (see
    :func:`correlated_gaussian_target`).

    Parameters
    ----------
    mean : array-like of shape (n_params,)
        Centre of the likelihood.
    cov : float or array-like of shape (n_params,) or (n_params, n_params), default=1.0
        Likelihood covariance: a scalar variance, a diagonal, or a full matrix.
    prior_scale : float, default=1.0
        Prior standard deviation of each coordinate.

    Examples
    --------
    >>> import numpy as np
    >>> target = GaussianTarget(np.zeros(2), cov=0.01, prior_scale=1.0)
    >>> round(target.exact_log_evidence(np.zeros((1, 1)), None), 4)
    -1.8478
    """

    def __init__(self, mean, cov=1.0, *, prior_scale=1.0):
        self.mean = np.asarray(mean, dtype=float).ravel()
        d = len(self.mean)
        cov = np.asarray(cov, dtype=float)
        if cov.ndim == 0:
            cov = np.eye(d) * cov
        elif cov.ndim == 1:
            cov = np.diag(cov)
        if cov.shape != (d, d):
            raise ValueError(f"cov must be a scalar, a ({d},) diagonal or a ({d}, {d}) matrix, got shape {cov.shape}")
        self.cov = cov
        self.prior_scale = float(prior_scale)
        if not self.prior_scale > 0:
            raise ValueError(f"prior_scale must be positive, got {prior_scale!r}")
        self._chol = np.linalg.cholesky(cov)
        self._precision = np.linalg.inv(cov)

    @property
    def n_params(self):
        return len(self.mean)

    def _total(self, theta):
        return _mvn_logpdf(np.asarray(theta, dtype=float), self.mean, self._chol)

    def log_likelihood(self, theta, X, y=None):
        return _split(self._total(theta), X)

    def grad_log_likelihood(self, theta, X, y, weights):
        theta = np.asarray(theta, dtype=float)
        grad = (self.mean - theta) @ self._precision
        return _grad_weight(weights, len(theta), X) * grad

    def exact_log_evidence(self, X=None, y=None):
        """Analytic ``log Z = log N(mean; 0, cov + prior_scale^2 I)``."""
        marginal = self.cov + self.prior_scale**2 * np.eye(self.n_params)
        return float(_mvn_logpdf(self.mean[None], np.zeros(self.n_params), np.linalg.cholesky(marginal))[0])

    def posterior(self):
        """Exact posterior mean and covariance of ``theta``."""
        post_cov = np.linalg.inv(self._precision + np.eye(self.n_params) / self.prior_scale**2)
        return post_cov @ self._precision @ self.mean, post_cov


class SkewedKickTarget(GaussianTarget):
    """:class:`GaussianTarget` whose gradient alone is deliberately wrong (``factor`` times the exact one, plus
    ``offset`` in every coordinate) and declared a ``fast_gradient``; ``log_likelihood_and_grad`` keeps the exact
    gradient.

    A sampler that kicks its trajectories with the fast gradient and corrects them with the exact density must
    still read the exact evidence: the kicks only steer (see :class:`~evidence_select.kernels._hmc.KickedTarget`).

    Examples
    --------
    >>> import numpy as np
    >>> target = SkewedKickTarget(np.zeros(2))
    >>> X = np.zeros((1, 1))
    >>> target.grad_log_likelihood(np.ones((1, 2)), X, None, 1.0)
    array([[-0.1, -0.1]])
    """

    fast_gradient = True

    def __init__(self, mean, cov=1.0, *, prior_scale=1.0, factor=0.6, offset=0.5):
        super().__init__(mean, cov, prior_scale=prior_scale)
        self.factor, self.offset = float(factor), float(offset)

    def grad_log_likelihood(self, theta, X, y, weights):
        return self.factor * super().grad_log_likelihood(theta, X, y, weights) + self.offset

    def log_likelihood_and_grad(self, theta, X, y, weights):
        return (np.sum(self.log_likelihood(theta, X, y), axis=1),
                super().grad_log_likelihood(theta, X, y, weights))


def correlated_gaussian_target(n_params, *, correlation=0.9, scale=0.1, offset=0.5, prior_scale=1.0):
    """Correlated-Gaussian target: equicorrelated likelihood covariance.

    ``cov = scale^2 ((1 - rho) I + rho 1 1^T)``, centred at ``offset * 1``.

    Parameters
    ----------
    n_params : int
        Dimension.
    correlation : float, default=0.9
        Pairwise correlation ``rho`` in ``(-1 / (n_params - 1), 1)``.
    scale : float, default=0.1
        Marginal likelihood standard deviation.
    offset : float, default=0.5
        Every coordinate of the likelihood centre.
    prior_scale : float, default=1.0

    Returns
    -------
    target : GaussianTarget

    Examples
    --------
    >>> target = correlated_gaussian_target(3)
    >>> target.n_params
    3
    """
    d = int(n_params)
    if not -1.0 / max(d - 1, 1) < correlation < 1.0:
        raise ValueError(f"correlation must be in (-1/(n_params-1), 1), got {correlation!r}")
    cov = scale**2 * ((1.0 - correlation) * np.eye(d) + correlation * np.ones((d, d)))
    return GaussianTarget(np.full(d, float(offset)), cov, prior_scale=prior_scale)


class BoxGaussianTarget(Model):
    """Gaussian likelihood inside a uniform prior box ``[-half_width, half_width]^d``.

    The box is handled by the unconstrained map ``x = half_width (2 sigmoid(u) - 1)``;
    the prior density of ``u`` is the uniform density times the Jacobian,
    ``prod_j sigmoid(u_j) sigmoid(-u_j)`` (a standard logistic per coordinate).
    The likelihood is ``L = N(x; mean, scale^2 I)`` (normalised in ``x``), so
    ``Z = prod_j [Phi((a - m_j)/s) - Phi((-a - m_j)/s)] / (2a)``.

    Parameters
    ----------
    mean : array-like of shape (n_params,)
    scale : float, default=0.1
    half_width : float, default=1.0

    Examples
    --------
    >>> import numpy as np
    >>> target = BoxGaussianTarget(np.zeros(2), scale=0.1, half_width=1.0)
    >>> round(target.exact_log_evidence(), 4)
    -1.3863
    """

    def __init__(self, mean, scale=0.1, *, half_width=1.0):
        self.mean = np.asarray(mean, dtype=float).ravel()
        self.scale = float(scale)
        self.half_width = float(half_width)
        if not (self.scale > 0 and self.half_width > 0):
            raise ValueError(f"scale and half_width must be positive, got {scale!r}, {half_width!r}")

    @property
    def n_params(self):
        return len(self.mean)

    def to_box(self, theta):
        """Constrained coordinates ``x`` in the box, same shape as ``theta``."""
        return self.half_width * (2.0 * expit(np.asarray(theta, dtype=float)) - 1.0)

    def sample_prior(self, rng, n_samples):
        uniform = rng.uniform(size=(n_samples, self.n_params))
        return np.log(uniform) - np.log1p(-uniform)

    def log_prior(self, theta):
        theta = np.asarray(theta, dtype=float)
        # log sigmoid(u) + log sigmoid(-u) = -|u| - 2 log(1 + exp(-|u|)), stable for any u.
        return np.sum(-np.abs(theta) - 2.0 * np.log1p(np.exp(-np.abs(theta))), axis=1)

    def grad_log_prior(self, theta):
        return 1.0 - 2.0 * expit(np.asarray(theta, dtype=float))

    def prior_transform(self, u):
        return logit(np.asarray(u, dtype=float))

    def prior_cdf(self, theta):
        return expit(np.asarray(theta, dtype=float))

    def _total(self, theta):
        x = self.to_box(theta)
        s2 = self.scale**2
        return -0.5 * (np.sum((x - self.mean) ** 2, axis=1) / s2 + self.n_params * (np.log(s2) + _LOG_2PI))

    def log_likelihood(self, theta, X, y=None):
        return _split(self._total(theta), X)

    def grad_log_likelihood(self, theta, X, y, weights):
        theta = np.asarray(theta, dtype=float)
        sig = expit(theta)
        dx_du = 2.0 * self.half_width * sig * (1.0 - sig)
        grad = -(self.to_box(theta) - self.mean) / self.scale**2 * dx_du
        return _grad_weight(weights, len(theta), X) * grad

    def exact_log_evidence(self, X=None, y=None):
        """Analytic ``log Z`` (the box mass of the Gaussian over the box volume)."""
        a, s, m = self.half_width, self.scale, self.mean
        upper, lower = log_ndtr((a - m) / s), log_ndtr((-a - m) / s)
        log_mass = upper + np.log(-np.expm1(lower - upper))
        return float(np.sum(log_mass) - self.n_params * np.log(2.0 * a))


class BimodalTarget(_GaussianPriorMixin, Model):
    """Two-component Gaussian-mixture likelihood under ``N(0, prior_scale^2 I)``.

    ``L(theta) = w N(theta; mu_1, s^2 I) + (1 - w) N(theta; mu_2, s^2 I)`` with
    ``mu_1 = +separation/2 * 1``, ``mu_2 = -separation/2 * 1`` (normalised in
    ``theta``), so ``Z = w N(mu_1; 0, (s^2 + p^2) I) + (1 - w) N(mu_2; 0, (s^2 + p^2) I)``.

    Parameters
    ----------
    n_params : int
    separation : float, default=2.0
        Per-coordinate distance between the two modes.
    scale : float, default=0.1
        Standard deviation ``s`` of each mode.
    weight : float, default=0.3
        Weight ``w`` of the first mode.
    prior_scale : float, default=1.0

    Examples
    --------
    >>> target = BimodalTarget(2)
    >>> round(target.exact_log_evidence(), 4)
    -2.8379
    """

    def __init__(self, n_params, *, separation=2.0, scale=0.1, weight=0.3, prior_scale=1.0):
        self.dim = int(n_params)
        self.separation = float(separation)
        self.scale = float(scale)
        self.weight = float(weight)
        self.prior_scale = float(prior_scale)
        if not 0.0 < self.weight < 1.0:
            raise ValueError(f"weight must be in (0, 1), got {weight!r}")

    @property
    def n_params(self):
        return self.dim

    @property
    def modes(self):
        """The two likelihood centres, shape ``(2, n_params)``."""
        half = 0.5 * self.separation * np.ones(self.dim)
        return np.stack([half, -half])

    def _component_terms(self, theta):
        theta = np.asarray(theta, dtype=float)
        s2 = self.scale**2
        sq = np.sum((theta[:, None, :] - self.modes[None]) ** 2, axis=2)
        log_w = np.log([self.weight, 1.0 - self.weight])
        return log_w - 0.5 * (sq / s2 + self.dim * (np.log(s2) + _LOG_2PI))  # (n_particles, 2)

    def _total(self, theta):
        terms = self._component_terms(theta)
        return np.logaddexp(terms[:, 0], terms[:, 1])

    def log_likelihood(self, theta, X, y=None):
        return _split(self._total(theta), X)

    def grad_log_likelihood(self, theta, X, y, weights):
        theta = np.asarray(theta, dtype=float)
        terms = self._component_terms(theta)
        resp = np.exp(terms - np.logaddexp(terms[:, :1], terms[:, 1:]))
        grad = -(theta - resp @ self.modes) / self.scale**2
        return _grad_weight(weights, len(theta), X) * grad

    def exact_log_evidence(self, X=None, y=None):
        """Analytic ``log Z``: mixture of the two Gaussian-Gaussian evidences."""
        var = self.scale**2 + self.prior_scale**2
        sq = np.sum(self.modes**2, axis=1)
        log_each = -0.5 * (sq / var + self.dim * (np.log(var) + _LOG_2PI))
        return float(np.logaddexp(np.log(self.weight) + log_each[0], np.log1p(-self.weight) + log_each[1]))
