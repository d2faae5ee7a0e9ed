"""Linear regression with the noise variance and the weights' prior scale learned by integration.

The math (closed forms given ``g``, one-dimensional quadrature over ``log g``) is in :mod:`._linear_hyper_math`;
this module is the protocol model over it and the online accumulator of its exact evidence.
"""

from typing import NamedTuple

import numpy as np

from ._linear_hyper_math import (DEFAULT_INTERCEPT_SCALE, NOISE_VARIANCE_BOUNDS, augmented_moments, draw_parameters,
                                 log_evidence_and_error, predictive_moments, reduce_statistics)
from ._protocol import Model, design_step_scales

__all__ = ["LinearHyperModel", "LinearHyperStats"]

_LOG_2PI = np.log(2.0 * np.pi)


class LinearHyperModel(Model):
    """Bayesian linear regression whose noise variance and weights' scale are integrated out.

    ``y = w . x + b + N(0, sigma2)`` with

    - ``w | sigma2, g ~ N(0, g sigma2 I)``: the weights' prior in units of the noise (Zellner's convention),
      so that Bayes factors do not depend on the scale of ``y``; with ``prior_scale=None`` (default)
      ``g ~ InvGamma(1/2, 1/2)``, the Zellner-Siow prior, under which ``w | sigma2`` is a multivariate Cauchy
      of scale ``sigma``; a float fixes ``g = prior_scale^2``;
    - ``b | sigma2 ~ N(0, intercept_scale^2 sigma2)``, by default 1000 noise standard deviations: nearly flat,
      so that shifting ``y`` leaves the evidence (nearly) unchanged;
    - with ``noise_variance=None`` (default), ``sigma2`` log-uniform on ``[1e-20, 1e20]``
      (:data:`NOISE_VARIANCE_BOUNDS`): Jeffreys' ``1 / sigma2`` made proper; a float fixes it.

    Every prior is proper, so evidences compare across feature subsets and numbers of features. The evidence is
    exact: closed form given ``g``, and a one-dimensional quadrature over ``log g`` whose error is bounded
    (:meth:`LinearHyperStats.log_evidence_error`). The unconstrained parameters are
    ``theta = (w_1..w_d, [b], [log sigma2], [log g])`` (the bracketed ones when present or learned).

    Parameters
    ----------
    n_features : int
        Number of input features ``d``.
    noise_variance : float or None, default=None
        Known noise variance, or None to integrate it over its log-uniform prior.
    prior_scale : float or None, default=None
        The weights' prior standard deviation in noise standard deviations (``sqrt(g)``), or None for the
        Zellner-Siow hyperprior on ``g``.
    intercept_scale : float, default=1000.0
        The intercept's prior standard deviation in noise standard deviations.
    fit_intercept : bool, default=True
        If False the intercept is fixed at 0.

    See Also
    --------
    LinearGaussianModel : The same likelihood with every prior fixed and absolute.
    LinearHyperStats : Its exact evidence, updated chunk by chunk.

    Notes
    -----
    Liang, Paulo, Molina, Clyde and Berger (2008) put the Zellner-Siow prior on
    ``w ~ N(0, g sigma2 (X^T X)^-1)`` with ``g ~ InvGamma(1/2, n/2)`` and flat
    priors on ``b`` and ``log sigma2``. That prior depends on every row of ``X``,
    so it changes as rows arrive and the online evidence would not be one model's;
    and its flat priors are improper. Here the unit-information matrix
    ``X^T X / n`` is the identity (standardised features: standardise ``X``; the
    estimator warns when its columns are far from unit scale), which gives
    ``g ~ InvGamma(1/2, 1/2)``, and the flat priors are made proper by wide bounds
    whose cost is the same for every model of the same ``y``.

    References
    ----------
    .. [1] F. Liang, R. Paulo, G. Molina, M. A. Clyde, J. O. Berger, "Mixtures of
       g priors for Bayesian variable selection", JASA 103 (2008) 410-423.
    .. [2] A. Zellner, A. Siow, "Posterior odds ratios for selected regression
       hypotheses", Trabajos de Estadistica 31 (1980) 585-603.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models import LinearHyperModel
    >>> model = LinearHyperModel(n_features=2)
    >>> model.n_params  # w_1, w_2, b, log sigma2, log g
    5
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = X @ [1.0, -2.0] + 3.0 + rng.normal(size=50)
    >>> round(model.exact_log_evidence(X, y), 4)
    -88.4171
    >>> # Rescaling y moves the evidence by the Jacobian alone: -n log(100).
    >>> round(model.exact_log_evidence(X, 100 * y) + 50 * float(np.log(100.0)), 4)
    -88.4171
    """

    def __init__(self, n_features, *, noise_variance=None, prior_scale=None, intercept_scale=DEFAULT_INTERCEPT_SCALE,
                 fit_intercept=True):
        self.n_features = int(n_features)
        self.noise_variance = None if noise_variance is None else float(noise_variance)
        self.prior_scale = None if prior_scale is None else float(prior_scale)
        self.intercept_scale = float(intercept_scale)
        self.fit_intercept = bool(fit_intercept)

    @property
    def n_params(self):
        return self.n_design + (self.noise_variance is None) + (self.prior_scale is None)

    @property
    def n_design(self):
        """Number of regression coefficients, ``n_features`` plus the intercept."""
        return self.n_features + int(self.fit_intercept)

    def _split(self, theta):
        """``(coefficients (n, n_design), log sigma2 (n,), log g (n,))`` of ``theta``, fixed values broadcast."""
        theta = np.asarray(theta, dtype=float)
        column = self.n_design
        if self.noise_variance is None:
            log_noise = theta[:, column]
            column += 1
        else:
            log_noise = np.full(len(theta), np.log(self.noise_variance))
        log_g = theta[:, column] if self.prior_scale is None else np.full(len(theta), 2.0 * np.log(self.prior_scale))
        return theta[:, :self.n_design], log_noise, log_g

    # -- prior -------------------------------------------------------------------------
    def sample_prior(self, rng, n_samples):
        columns = []
        if self.prior_scale is None:  # g = 1 / chi2_1
            log_g = -2.0 * np.log(np.abs(rng.standard_normal(n_samples)))
        else:
            log_g = np.full(n_samples, 2.0 * np.log(self.prior_scale))
        if self.noise_variance is None:
            lo, hi = NOISE_VARIANCE_BOUNDS
            log_noise = rng.uniform(np.log(lo), np.log(hi), size=n_samples)
        else:
            log_noise = np.full(n_samples, np.log(self.noise_variance))
        scales = np.exp(0.5 * (log_noise[:, None] + np.where(np.arange(self.n_design) < self.n_features,
                                                              log_g[:, None], 2.0 * np.log(self.intercept_scale))))
        columns.append(rng.standard_normal((n_samples, self.n_design)) * scales)
        if self.noise_variance is None:
            columns.append(log_noise[:, None])
        if self.prior_scale is None:
            columns.append(log_g[:, None])
        return np.hstack(columns)

    def _prior_terms(self, theta):
        """``(coefficients, log sigma2, log g, log prior variances, standardised squares)``, the last two of shape
        ``(n, n_design)``: the variances ``g sigma2`` (weights) and ``kappa2 sigma2`` (intercept), and the squares
        ``w^2 / (g sigma2)`` and ``b^2 / (kappa2 sigma2)``."""
        beta, log_noise, log_g = self._split(theta)
        log_variance = log_noise[:, None] + np.where(np.arange(self.n_design) < self.n_features, log_g[:, None],
                                                     2.0 * np.log(self.intercept_scale))
        return beta, log_noise, log_g, log_variance, beta**2 * np.exp(-log_variance)

    def log_prior(self, theta):
        beta, log_noise, log_g, log_variance, squares = self._prior_terms(theta)
        total = -0.5 * np.sum(_LOG_2PI + log_variance + squares, axis=1)
        if self.noise_variance is None:
            lo, hi = NOISE_VARIANCE_BOUNDS
            inside = (log_noise >= np.log(lo)) & (log_noise <= np.log(hi))
            total = np.where(inside, total - np.log(np.log(hi / lo)), -np.inf)
        if self.prior_scale is None:
            total = total - 0.5 * (_LOG_2PI + log_g + np.exp(-log_g))
        return total

    def grad_log_prior(self, theta):
        beta, log_noise, log_g, log_variance, squares = self._prior_terms(theta)
        columns = [-beta * np.exp(-log_variance)]
        if self.noise_variance is None:  # the uniform's own gradient is 0 inside its support
            columns.append((0.5 * np.sum(squares - 1.0, axis=1))[:, None])
        if self.prior_scale is None:
            weights = squares[:, :self.n_features]
            columns.append((0.5 * np.sum(weights - 1.0, axis=1) - 0.5 + 0.5 * np.exp(-log_g))[:, None])
        return np.hstack(columns)

    # -- likelihood --------------------------------------------------------------------
    def predict_mean(self, theta, X):
        """Noise-free mean ``w . x + b`` per particle, shape ``(n_particles, n_batch)``."""
        d = self.n_features
        theta = np.asarray(theta, dtype=float)
        mean = theta[:, :d] @ np.asarray(X, dtype=float).T
        if self.fit_intercept:
            mean += theta[:, d:d + 1]
        return mean

    def log_likelihood(self, theta, X, y=None):
        _, log_noise, _ = self._split(theta)
        residual = np.asarray(y, dtype=float) - self.predict_mean(theta, X)
        return -0.5 * (residual**2 * np.exp(-log_noise)[:, None] + log_noise[:, None] + _LOG_2PI)

    def grad_log_likelihood(self, theta, X, y, weights):
        if np.ndim(weights) <= 1:  # shared by the particles: from the rows' weighted moments
            weights = np.broadcast_to(np.asarray(weights, dtype=float), (len(X),))
            return self.grad_from_statistics(theta, augmented_moments(X, y, weights))
        _, log_noise, _ = self._split(theta)
        precision = np.exp(-log_noise)[:, None]
        residual = np.asarray(y, dtype=float) - self.predict_mean(theta, X)
        weighted = weights * residual * precision
        columns = [weighted @ np.asarray(X, dtype=float)]
        if self.fit_intercept:
            columns.append(weighted.sum(axis=1, keepdims=True))
        if self.noise_variance is None:
            columns.append(np.sum(weights * (residual**2 * precision - 1.0), axis=1, keepdims=True) * 0.5)
        if self.prior_scale is None:
            columns.append(np.zeros((len(theta), 1)))
        return np.hstack(columns)

    def gradient_statistics(self, X, y):
        """``sum_j [x_j, 1, y_j]^T [x_j, 1, y_j]`` over the rows of ``X`` (its second-to-last axis).

        The weighted log-likelihood's gradient, its value and the tempered posterior depend on the rows
        only through these moments (the ``1`` column counts the rows, whose weight the noise variance's
        terms need), so SGAIS sums them once per chunk and keeps their sum over every row seen.

        Parameters
        ----------
        X : ndarray of shape (..., n_rows, n_features)
        y : ndarray of shape (..., n_rows)

        Returns
        -------
        statistics : ndarray of shape (..., n_features + 2, n_features + 2)
        """
        return augmented_moments(X, y)

    def _design_moments(self, statistics):
        """``(A^T W A, A^T W y, y^T W y, sum w)`` of the design ``A = [x, 1]`` (or ``x``) from the moments."""
        p = self.n_features
        index = np.arange(self.n_design)
        return (statistics[np.ix_(index, index)], statistics[index, p + 1], statistics[p + 1, p + 1],
                statistics[p, p])

    def grad_from_statistics(self, theta, statistics):
        """The gradient of ``sum_j w_j log p(y_j | x_j, theta)`` from the rows' weighted :meth:`gradient_statistics`."""
        beta, log_noise, _ = self._split(theta)
        gram, cross, sum_sq, count = self._design_moments(np.asarray(statistics, dtype=float))
        precision = np.exp(-log_noise)
        gram_beta = beta @ gram
        columns = [(cross - gram_beta) * precision[:, None]]
        if self.noise_variance is None:
            squares = sum_sq - 2.0 * beta @ cross + np.einsum("ij,ij->i", gram_beta, beta)
            columns.append((0.5 * (squares * precision - count))[:, None])
        if self.prior_scale is None:
            columns.append(np.zeros((len(beta), 1)))
        return np.hstack(columns)

    def step_scales(self, X):
        """SGHMC step scales for standardised ``y``: the design's Jacobi scales at unit noise, 2 for ``log sigma2``
        (half a unit of information per row) and 1 for ``log g`` (no row informs it alone).

        SGAIS draws this model's particles exactly (:meth:`sample_tempered_posterior_from_statistics`); these
        scales serve only runs that ask for SGHMC (``exact_move_rows``).
        """
        scales = [design_step_scales(X, self.fit_intercept, 1.0)]
        if self.noise_variance is None:
            scales.append([2.0])
        if self.prior_scale is None:
            scales.append([1.0])
        return np.concatenate(scales)

    # -- exact pieces ------------------------------------------------------------------
    def reduce(self, statistics):
        """The :class:`~._linear_hyper_math.ReducedStatistics` of summed (weighted) :meth:`gradient_statistics`."""
        return reduce_statistics(statistics, self.fit_intercept, self.intercept_scale**2)

    def sample_tempered_posterior(self, rng, n_samples, X, y, weights):
        """Independent exact draws from ``p(theta) prod_j p(y_j | x_j, theta)^{w_j}`` (see
        :meth:`sample_tempered_posterior_from_statistics`).

        Parameters
        ----------
        rng : numpy.random.Generator
        n_samples : int
        X : ndarray of shape (n_rows, n_features)
        y : ndarray of shape (n_rows,)
        weights : float or ndarray of shape (n_rows,)

        Returns
        -------
        theta : ndarray of shape (n_samples, n_params)
        """
        weights = np.broadcast_to(np.asarray(weights, dtype=float), (len(X),))
        return self.sample_tempered_posterior_from_statistics(rng, n_samples, augmented_moments(X, y, weights))

    def sample_tempered_posterior_from_statistics(self, rng, n_samples, statistics):
        """Independent draws from the tempered posterior given the rows' weighted, summed :meth:`gradient_statistics`.

        ``log g`` from its posterior on a fine grid (piecewise exponential between
        nodes, whose spacing is 1/512 of the posterior's support), then ``sigma2 | g``
        from its truncated inverse gamma, ``w | sigma2, g`` and ``b | w, sigma2``
        from their Gaussians: exact but for the grid's interpolation of the density
        of ``log g``. SGAIS's exact moves use them at any ``n``.

        Parameters
        ----------
        rng : numpy.random.Generator
        n_samples : int
        statistics : ndarray of shape (n_features + 2, n_features + 2)

        Returns
        -------
        theta : ndarray of shape (n_samples, n_params)

        Examples
        --------
        >>> import numpy as np
        >>> from evidence_select.models import LinearHyperModel
        >>> model = LinearHyperModel(n_features=1, fit_intercept=False, prior_scale=10.0)
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(400, 1)); y = 2.0 * X[:, 0] + 0.5 * rng.normal(size=400)
        >>> draws = model.sample_tempered_posterior(rng, 20000, X, y, 1.0)
        >>> round(float(draws[:, 0].mean()), 1), round(float(np.exp(draws[:, 1]).mean()), 2)  # w, sigma2
        (2.0, 0.25)
        """
        theta = draw_parameters(rng, self.reduce(statistics), n_samples, self.noise_variance, self.prior_scale,
                                self.fit_intercept)
        return theta

    def log_evidence_from_statistics(self, statistics):
        """``(log p(y | X), quadrature error bound)`` from the rows' summed :meth:`gradient_statistics`."""
        return log_evidence_and_error(self.reduce(statistics), self.noise_variance, self.prior_scale)

    def exact_log_evidence(self, X, y):
        """Exact ``log p(y | X)`` (see :class:`LinearHyperStats`)."""
        return self.exact_log_evidence_and_error(X, y)[0]

    def exact_log_evidence_and_error(self, X, y):
        """``(log p(y | X), bound on its quadrature error)`` (see :class:`LinearHyperStats`)."""
        return self.log_evidence_from_statistics(self.gradient_statistics(X, np.asarray(y, dtype=float)))

    def predictive_from_statistics(self, statistics, X):
        """Posterior-predictive mean and standard deviation of ``y`` at ``X`` given the rows' summed statistics.

        A Student-t given ``g`` (a Gaussian for a known noise variance), mixed over the posterior of ``g``.

        Returns
        -------
        mean, std : ndarray of shape (n_samples,) each
        """
        mean, variance = predictive_moments(self.reduce(statistics), X, self.noise_variance, self.prior_scale,
                                            self.fit_intercept)
        return mean, np.sqrt(variance)


class LinearHyperStats(NamedTuple):
    """The exact evidence of :class:`LinearHyperModel`, updatable chunk by chunk.

    Holds ``sum_j [x_j, 1, y_j]^T [x_j, 1, y_j]``; a chunk adds its moments at
    O(chunk d^2), and the evidence at any point costs one ``d x d``
    eigendecomposition and a quadrature over ``log g`` at O(d) per node.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models import LinearHyperModel, LinearHyperStats
    >>> model = LinearHyperModel(n_features=1)
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 1)); y = X[:, 0] + rng.normal(size=40)
    >>> stats = LinearHyperStats.empty(model).update(model, X[:25], y[:25]).update(model, X[25:], y[25:])
    >>> bool(np.isclose(stats.log_evidence(model), model.exact_log_evidence(X, y), rtol=1e-12))
    True
    >>> stats.log_evidence_error(model) < 1e-9
    True
    """

    moments: np.ndarray  # (n_features + 2, n_features + 2)
    n_samples: int

    @classmethod
    def empty(cls, model):
        """Statistics of no data for ``model``."""
        return cls(np.zeros((model.n_features + 2, model.n_features + 2)), 0)

    def update(self, model, X, y):
        """Return the statistics with the chunk ``(X, y)`` added."""
        return LinearHyperStats(self.moments + model.gradient_statistics(X, np.asarray(y, dtype=float)),
                                self.n_samples + len(y))

    def log_evidence(self, model):
        """``log p(y | X)`` of every row added so far."""
        return model.log_evidence_from_statistics(self.moments)[0]

    def log_evidence_error(self, model):
        """A bound on the quadrature error of :meth:`log_evidence` (nats; 0 for a fixed ``prior_scale``)."""
        return model.log_evidence_from_statistics(self.moments)[1]
