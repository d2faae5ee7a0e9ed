"""Diagonal Gaussian mixture in unconstrained parameters (paper Appendix B.3).

``p(x | theta) = sum_k beta_k prod_j N(x_j; mu_kj, sigma2_kj)`` with
``beta ~ Dirichlet(alpha)``, ``sigma2_kj ~ InvGamma(a, b)`` and
``mu_kj | sigma2_kj ~ N(m0, c * sigma2_kj)`` (the paper uses alpha = 1, a = b = 1,
c = 4, m0 = 0). Latent labels are marginalised with a logsumexp.

Unconstrained parameters ``theta = (eta_1..eta_{K-1}, mu (K*d, row per component),
log sigma2 (K*d))``. The weights use the additive log-ratio map
``beta = softmax(eta_1, .., eta_{K-1}, 0)``, whose Jacobian determinant is
``prod_k beta_k``; the variances use ``sigma2 = exp(s)`` with Jacobian ``sigma2``.
So ``theta`` has ``K - 1 + 2 K d`` entries (24 for the paper's K = 5, d = 2).
"""

import functools
import itertools
import math

import numpy as np
from scipy.special import gammaln

from ..utils import categorical_draws, logsumexp
from ..utils._workspace import Workspace, workspace_buffer
from ._mixture_moves import ConfigurationProposal, kmeans_plus_plus_centres
from ._mixture_prior import MixturePrior, mixture_prior_cdf, mixture_prior_transform
from ._protocol import Model, kernel_array, kernel_row_weights, weighted_total

__all__ = ["GaussianMixtureModel", "mixture_relabel_maps"]


@functools.cache
def _kernels():
    """The numba kernels' module, imported on first use so that importing the package neither imports numba nor
    compiles (cached: an import statement on every SGHMC step costs as much as a small kernel call)."""
    from . import _compiled_mixture as module
    return module


_LOG_2PI = np.log(2.0 * np.pi)
_EXP_FLOOR = -80.0  # floor of the responsibilities' log-ratios before their single-precision exponential
# Refit proposals: EM starts per group, and past rows the fits see at most (a uniform sample).
_REFIT_EM_STARTS = 3
_REFIT_PAST_ROWS = 500
# EM iterations behind each start of the posterior-mode search (refined by a quasi-Newton search afterwards).
_MODE_EM_ITERATIONS = 100
# A start whose EM iteration moves no parameter by more than this has converged (the quasi-Newton search refines
# it to its minimum; its objective then lies far within the search's same_fit of the converged fit's).
_MODE_EM_TOLERANCE = 1e-6


class GaussianMixtureModel(Model):
    """Bayesian diagonal-covariance Gaussian mixture, labels marginalised.

    Parameters
    ----------
    n_components : int
        Number of components ``K``.
    n_features : int
        Dimension ``d`` of the observations.
    weight_concentration : float, default=1.0
        Symmetric Dirichlet concentration ``alpha`` of the weights.
    variance_shape : float, default=1.0
        Shape ``a`` of the inverse-gamma prior on each variance.
    variance_scale : float, default=1.0
        Scale ``b`` of the inverse-gamma prior on each variance.
    mean_prior_loc : float, default=0.0
        Prior mean ``m0`` of every component mean.
    mean_variance_factor : float, default=4.0
        ``c`` in ``mu | sigma2 ~ N(m0, c sigma2)``.

    Examples
    --------
    >>> import numpy as np
    >>> model = GaussianMixtureModel(n_components=5, n_features=2)
    >>> model.n_params
    24
    """

    is_density_model = True
    #: The gradient alone takes its rows' terms in single precision, well under half the cost of the fused call,
    #: whose exponentials and logarithm are double precision (see
    #: :func:`~evidence_select.models._compiled_mixture.mixture_gradient`).
    fast_gradient = True

    def __init__(self, n_components, n_features, *, weight_concentration=1.0, variance_shape=1.0,
                 variance_scale=1.0, mean_prior_loc=0.0, mean_variance_factor=4.0):
        self.n_components = int(n_components)
        self.n_features = int(n_features)
        self.weight_concentration = float(weight_concentration)
        self.variance_shape = float(variance_shape)
        self.variance_scale = float(variance_scale)
        self.mean_prior_loc = float(mean_prior_loc)
        self.mean_variance_factor = float(mean_variance_factor)
        # Scratch buffers of the gradient's densities, reused across SGHMC steps and chunks (see Workspace).
        self._workspace = Workspace()

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_workspace", Workspace())  # pickled before models had a workspace

    @property
    def n_params(self):
        return self.n_components - 1 + 2 * self.n_components * self.n_features

    # -- parameter maps -------------------------------------------------------------
    def unpack(self, theta):
        """Split ``theta`` into ``(log_weights (M, K), means (M, K, d), log_variances (M, K, d))``."""
        theta = np.asarray(theta, dtype=float)
        n_particles, K, d = len(theta), self.n_components, self.n_features
        eta = np.empty((n_particles, K))
        eta[:, : K - 1] = theta[:, : K - 1]
        eta[:, K - 1] = 0.0
        log_weights = eta
        log_weights -= eta.max(axis=1, keepdims=True)
        log_weights -= np.log(np.exp(log_weights).sum(axis=1, keepdims=True))
        means = theta[:, K - 1: K - 1 + K * d].reshape(n_particles, K, d)
        log_variances = theta[:, K - 1 + K * d:].reshape(n_particles, K, d)
        return log_weights, means, log_variances

    def pack(self, weights, means, variances):
        """Inverse of :meth:`unpack` from natural parameters (weights on the simplex)."""
        weights = np.asarray(weights, dtype=float)
        n_particles = len(weights)
        log_weights = np.log(weights)  # of the whole array: numpy 1.x's SIMD log of a column view is not reproducible
        eta = log_weights[:, :-1] - log_weights[:, -1:]
        return self._join(eta, means, np.log(variances))

    def _join(self, eta, means, log_variances):
        """``theta`` rows ``[eta, means, log variances]`` from ``(M, K - 1)`` and two ``(M, K, d)`` blocks.

        Slice assignments into one array: ``np.hstack`` of the same blocks costs
        several times more in call overhead, paid on every gradient step.
        """
        n_particles, n_eta = eta.shape
        n_means = self.n_components * self.n_features
        theta = np.empty((n_particles, n_eta + 2 * n_means))
        theta[:, :n_eta] = eta
        theta[:, n_eta: n_eta + n_means] = np.reshape(means, (n_particles, n_means))
        theta[:, n_eta + n_means:] = np.reshape(log_variances, (n_particles, n_means))
        return theta

    # -- exact evidence (one component) -------------------------------------------------
    @property
    def exact_evidence_available(self):
        """Whether :meth:`exact_log_evidence` applies: only with one component."""
        return self.n_components == 1

    def exact_log_evidence(self, X, y=None):
        """Analytic ``log p(X)`` of the one-component model.

        With ``K = 1`` the features are independent normal-inverse-gamma models
        (``mu | sigma2 ~ N(m0, c sigma2)``, ``sigma2 ~ InvGamma(a, b)``), each with
        the conjugate evidence ``Gamma(a_n) b^a sqrt(kappa_0 / kappa_n) /
        (Gamma(a) b_n^{a_n} (2 pi)^{n/2})``, where ``kappa_0 = 1 / c``,
        ``kappa_n = kappa_0 + n``, ``a_n = a + n / 2`` and ``b_n = b + S / 2 +
        kappa_0 n (xbar - m0)^2 / (2 kappa_n)`` with ``S`` the sum of squared
        deviations from the mean ``xbar``. The exact reference for the mixture's
        estimators on real data (a ``K = 1`` candidate).

        Raises
        ------
        ValueError
            With more than one component (no analytic evidence).

        Examples
        --------
        >>> import numpy as np
        >>> X = np.array([[0.5], [-1.0], [2.0]])
        >>> round(GaussianMixtureModel(1, 1).exact_log_evidence(X), 4)
        -6.7233
        """
        if not self.exact_evidence_available:
            raise ValueError(f"the Gaussian mixture has an analytic evidence only with one component, not "
                             f"n_components={self.n_components}; use method='ais', 'ns', 'bridge' or 'sgais'")
        X = np.asarray(X, dtype=float)
        n = len(X)
        a, b, m0 = self.variance_shape, self.variance_scale, self.mean_prior_loc
        kappa_0 = 1.0 / self.mean_variance_factor
        kappa_n = kappa_0 + n
        mean = X.mean(axis=0) if n else np.zeros(self.n_features)
        squares = np.sum((X - mean) ** 2, axis=0)
        a_n = a + 0.5 * n
        b_n = b + 0.5 * squares + 0.5 * kappa_0 * n * (mean - m0) ** 2 / kappa_n
        per_feature = (gammaln(a_n) - gammaln(a) + a * np.log(b) - a_n * np.log(b_n)
                       + 0.5 * np.log(kappa_0 / kappa_n) - 0.5 * n * _LOG_2PI)
        return float(np.sum(per_feature))

    # -- prior -------------------------------------------------------------------------
    def sample_prior(self, rng, n_samples):
        K, d = self.n_components, self.n_features
        weights = rng.dirichlet(np.full(K, self.weight_concentration), size=n_samples)
        # Tiny Dirichlet draws can underflow to 0; clip so the log-ratio stays finite.
        weights = np.maximum(weights, np.finfo(float).tiny)
        variances = self.variance_scale / rng.gamma(self.variance_shape, size=(n_samples, K, d))
        noise = rng.standard_normal((n_samples, K, d))
        means = self.mean_prior_loc + np.sqrt(self.mean_variance_factor * variances) * noise
        return self.pack(weights, means, variances)

    def log_prior(self, theta):
        # Compiled (:func:`~evidence_select.models._compiled_mixture.mixture_log_prior`; the numpy form is kept in
        # the tests): the Dirichlet on the weights times the log-ratio map's Jacobian, the inverse gamma on each
        # variance times its Jacobian, and the normal on each mean given its variance.
        theta = kernel_array(theta)
        return _kernels().mixture_log_prior(theta, self.n_components, self.n_features, self._prior_constants(),
                                            self._prior_normalisers(), np.empty(len(theta)))

    def prior_transform(self, u):
        """Parameters of unit-cube points ``u`` ``(n, n_params)``: stick breaking for the weights, each
        variance's and each mean's inverse CDF (:mod:`._mixture_prior`), with which nested sampling bounds the
        live points where the prior is uniform."""
        return mixture_prior_transform(u, self._prior_hyperparameters())

    def prior_cdf(self, theta):
        """Unit-cube points of parameters ``theta``, the inverse of :meth:`prior_transform`."""
        return mixture_prior_cdf(theta, self._prior_hyperparameters())

    def _prior_hyperparameters(self):
        return MixturePrior(self.n_components, self.n_features, self.weight_concentration, self.variance_shape,
                            self.variance_scale, self.mean_prior_loc, self.mean_variance_factor)

    def grad_log_prior(self, theta):
        # Compiled: grad_log_joint adds the same compiled prior term to the likelihood's, so that the two calls
        # agree to the bit.
        theta = kernel_array(theta)
        return _kernels().mixture_prior_gradient(theta, self.n_components, self.n_features, self._prior_constants(),
                                                 np.empty(theta.shape))

    # -- likelihood --------------------------------------------------------------------
    def component_log_density(self, theta, X):
        """``log beta_k + log N(x_b; mu_k, diag sigma2_k)``, shape ``(n_particles, n_batch, K)``."""
        return self._stacked_component_log_density(theta, X).transpose(1, 2, 0)

    def _stacked_component_log_density(self, theta, X):
        """:meth:`component_log_density` laid out ``(K, n_particles, n_batch)``.

        Reductions over the components then run along the leading axis, which
        numpy vectorises over the other two. The Gaussian exponent expands into
        ``[x^2, x, 1] . [-tau / 2, mu tau, const]`` per component, so the whole
        ``(K M, n)`` block is one matrix product with an inner dimension of
        ``2 d + 1``: no full-size temporaries.
        """
        X = np.asarray(X, dtype=float)
        coefficients = self._density_coefficients(theta)  # (K * M, 2 d + 1)
        features = np.empty((len(X), coefficients.shape[1]))
        d = self.n_features
        np.square(X, out=features[:, :d])
        features[:, d: 2 * d] = X
        features[:, 2 * d] = 1.0
        return np.matmul(coefficients, features.T).reshape(self.n_components, len(theta), len(X))

    def _density_coefficients(self, theta):
        """Per particle and component, the coefficients of ``[x^2, x, 1]`` in ``log beta_k + log N(x; mu_k, sigma2_k)``.

        Rows ordered component-major (``k * M + m``), the layout of the stacked densities.
        """
        log_weights, means, log_variances = self.unpack(theta)
        precision = np.exp(-log_variances)
        n_particles, K, d = len(theta), self.n_components, self.n_features
        shifted = means * precision
        const = log_weights - 0.5 * ((log_variances + means * shifted).sum(axis=2) + d * _LOG_2PI)
        coefficients = np.empty((K, n_particles, 2 * d + 1))
        np.multiply(precision.transpose(1, 0, 2), -0.5, out=coefficients[:, :, :d])
        coefficients[:, :, d: 2 * d] = shifted.transpose(1, 0, 2)
        coefficients[:, :, 2 * d] = const.T
        return coefficients.reshape(K * n_particles, 2 * d + 1)

    def log_likelihood(self, theta, X, y=None):
        return self._compiled_log_likelihood(theta, X)

    def log_likelihood_sum(self, theta, X, y=None):
        # The rows' values in the workspace (no (n_particles, n_rows) array afresh on every call), summed by numpy:
        # the same bits as log_likelihood(...).sum(axis=1), which the mode check and nested sampling rely on.
        return self._compiled_log_likelihood(theta, X, self._workspace).sum(axis=1)

    def approximate_log_likelihood_sum(self, theta, X, y=None):
        # Single-precision rows (:func:`~evidence_select.models._compiled_mixture.mixture_log_likelihood_sum_single`):
        # the importance draws at a mode, each of them on every row seen.
        return _kernels().mixture_log_likelihood_sum_single(kernel_array(theta), kernel_array(X), self.n_components,
                                                            np.empty(len(theta)))

    def _compiled_log_likelihood(self, theta, X, workspace=None):
        """:func:`~evidence_select.models._compiled_mixture.mixture_log_likelihood`, ``(n_particles, n_rows)``: a
        log-sum-exp over :meth:`component_log_density`. With a ``workspace``, in its buffer (valid until its next use).
        """
        theta = kernel_array(theta)
        X = kernel_array(X)
        out = workspace_buffer(workspace, "log_lik", (len(theta), len(X)))
        if out is None:
            out = np.empty((len(theta), len(X)))
        return _kernels().mixture_log_likelihood(theta, X, self.n_components, out)

    def log_likelihood_and_grad(self, theta, X, y, weights):
        # One compiled pass for both (an exact HMC move needs both at every leapfrog step); the rows'
        # log-likelihoods are the same bits as log_likelihood's, so the weighted total is too.
        theta, X, row_weights = self._kernel_inputs(theta, X, weights)
        log_lik = workspace_buffer(self._workspace, "log_lik", (len(theta), len(X)))
        if log_lik is None:
            log_lik = np.empty((len(theta), len(X)))
        grad = np.empty(theta.shape)
        _kernels().mixture_log_likelihood_and_gradient(theta, X, row_weights, self.n_components, log_lik, grad)
        return weighted_total(log_lik, np.asarray(weights, dtype=float)), grad

    def _stacked_responsibilities(self, theta, X):
        """Label probabilities ``(K, M, n)``, in place on the densities' array."""
        comp = self._stacked_component_log_density(theta, X)
        comp -= np.max(comp, axis=0)
        # Single-precision exponentials (numpy vectorises them; float64 exp is scalar libm on AVX2), to ~1e-7
        # relative: predictions, not the evidence. Floored at _EXP_FLOOR (exp = 2e-35 of the largest term): numpy's
        # float32 exp leaves its vector path for results below float32's normal range. Rounded first, then
        # floored in single precision (the same bits as the other order: rounding is monotone and the floor exact);
        # the floor is a row of the last axis, not a scalar: numpy vectorises a broadcast array operand, not a scalar.
        single = comp.astype(np.float32)
        np.maximum(single, np.full(comp.shape[-1], _EXP_FLOOR, np.float32), out=single)
        np.exp(single, out=single)
        comp[...] = single
        comp *= np.reciprocal(np.sum(comp, axis=0))
        return comp

    def responsibilities(self, theta, X):
        """Posterior label probabilities per particle, shape ``(n_particles, n_batch, K)``, to single precision."""
        return self._stacked_responsibilities(theta, X).transpose(1, 2, 0)

    def grad_log_likelihood(self, theta, X, y, weights):
        return self._compiled_gradient(theta, X, weights, prior=False)

    def grad_log_likelihood_at(self, theta):
        # The compiled gradient derives the parameter maps per call at a cost of O(M K d), nothing to cache.
        return functools.partial(self.grad_log_likelihood, np.array(theta, dtype=float))

    def grad_log_joint(self, theta, X, y, weights):
        # One compiled pass for both terms (SGHMC calls this at every step).
        return self._compiled_gradient(theta, X, weights, prior=True)

    def _compiled_gradient(self, theta, X, weights, *, prior):
        """The weighted log-likelihood's gradient (plus the log prior's with ``prior``), ``(n_particles, n_params)``.

        :func:`~evidence_select.models._compiled_mixture.mixture_gradient`, the same math as
        the numpy one before it (kept in the tests) in one compiled pass; numba is imported and the
        kernel compiled (or loaded from numba's cache) on the first call only. ``weights`` is a scalar, one
        weight per row ``(n_rows,)`` or one per particle and row ``(n_particles, n_rows)``.
        """
        theta, X, row_weights = self._kernel_inputs(theta, X, weights)
        return _kernels().mixture_gradient(theta, X, row_weights, self.n_components, self._prior_constants(), prior,
                                           np.empty(theta.shape))

    @staticmethod
    def _kernel_inputs(theta, X, weights):
        """``theta`` and ``X`` as contiguous floats, and ``weights`` (scalar, ``(n_rows,)`` or ``(n_particles,
        n_rows)``) as the kernels' row weights: ``(1, n_rows)`` shared by every particle, or one row per particle."""
        theta = kernel_array(theta)
        X = kernel_array(X)
        return theta, X, kernel_row_weights(weights, len(theta), len(X))

    def _prior_constants(self):
        """``(alpha, a, b, c, m0)`` for :mod:`~evidence_select.models._compiled_mixture`'s kernels."""
        return (self.weight_concentration, self.variance_shape, self.variance_scale, self.mean_variance_factor,
                self.mean_prior_loc)

    def _prior_normalisers(self):
        """``(gammaln(K alpha) - K gammaln(alpha), a log b - gammaln(a))``, the log prior's constants."""
        alpha, K, a, b = self.weight_concentration, self.n_components, self.variance_shape, self.variance_scale
        return float(gammaln(K * alpha) - K * gammaln(alpha)), float(a * np.log(b) - gammaln(a))

    def _compiled_moments(self, theta, X, weights):
        """The responsibilities' weighted moments ``(M, K)``, ``(M, K, d)``, ``(M, K, d)`` (``sum_j w_j r_kj``,
        ``sum_j w_j r_kj x_j``, ``sum_j w_j r_kj x_j^2``): EM's statistics, by
        :func:`~evidence_select.models._compiled_mixture.mixture_moments` in one compiled pass. ``weights`` as in
        :meth:`_compiled_gradient`."""
        theta, X, row_weights = self._kernel_inputs(theta, X, weights)
        return _kernels().mixture_moments(theta, X, row_weights, self.n_components)

    def fit_em(self, rng, X, sample_weight, *, n_init=4, n_iter=20, tol=0.0):
        """Maximum-likelihood fits by EM to weighted rows, from ``n_init`` k-means++ starts (vectorised).

        The global refit move's candidates (:meth:`refit_proposal`) and the
        posterior-mode search's starts (:meth:`mode_starts`); each iteration's
        E-step and the statistics of its M-step are one compiled pass
        (:meth:`_compiled_moments`).

        Parameters
        ----------
        rng : numpy.random.Generator
        X : ndarray of shape (n_rows, n_features)
        sample_weight : ndarray of shape (n_rows,)
            Non-negative row weights (tempered counts); their sum is the data size.
        n_init, n_iter : int
            Starts, fitted side by side, and EM iterations.
        tol : float, default=0.0
            A start whose iteration moved no parameter by more than ``tol`` (means in units of the rows'
            standard deviation, weights and variances relative) has converged and iterates no further; 0 runs
            every start ``n_iter`` times.

        Returns
        -------
        weights : ndarray of shape (n_init, K)
        means, variances : ndarray of shape (n_init, K, n_features)
        """
        X = np.asarray(X, dtype=float)
        w = np.asarray(sample_weight, dtype=float)
        K = self.n_components
        means, scale = kmeans_plus_plus_centres(rng, X, w, K, n_init)
        floor = 1e-6 * scale  # a component on one row must not reach zero variance
        weights, variances = np.full((n_init, K), 1.0 / K), np.full(means.shape, scale / K)
        active = np.arange(n_init)
        for _ in range(n_iter):
            fit = (weights[active], means[active], variances[active])
            step = _em_step(self._compiled_moments(self.pack(*fit), X, w), w.sum(), floor)
            weights[active], means[active], variances[active] = step
            if tol > 0:
                active = active[_em_moved(fit, step, np.sqrt(scale)) > tol]
                if not len(active):
                    break
        return weights, means, variances

    # -- posterior-mode check ----------------------------------------------------------
    def mode_starts(self, rng, X, n_starts):
        """Starting points for a posterior-mode search: EM fits to the rows from ``n_starts`` k-means++ starts.

        Used by :func:`~evidence_select.sgais._mode_check.mode_importance_log_evidence`,
        which refines them to posterior modes.

        Returns
        -------
        theta : ndarray of shape (n_starts, n_params)
        """
        X = np.asarray(X, dtype=float)
        weights, means, variances = self.fit_em(rng, X, np.ones(len(X)), n_init=n_starts, n_iter=_MODE_EM_ITERATIONS,
                                                tol=_MODE_EM_TOLERANCE)
        return self.pack(weights, means, variances)

    @property
    def n_mode_symmetries(self):
        """Number of :meth:`mode_symmetries`: ``K!``."""
        return math.factorial(self.n_components)

    def mode_symmetries(self):
        """The linear maps ``A`` with ``p(A theta | X) = p(theta | X)``: the ``K!`` relabellings, ``(K!, P, P)``.

        The posterior has a copy of every mode under each of them, so a proposal
        built at one mode must be symmetrised over all (:func:`mixture_relabel_maps`).
        """
        return mixture_relabel_maps(self)

    # -- global moves ------------------------------------------------------------------
    def propose_jump(self, rng, theta, X, *, chunk_weight=1.0, past_X=None, past_weight=0.0, n_groups=1):
        """A global Metropolis-Hastings proposal: relocate one component, or redraw the whole configuration.

        Local gradient moves cannot carry a component across empty space to a
        cluster it does not yet cover, nor re-partition the clusters among the
        components when new data make another partition better. Each particle
        independently gets, with probability 1/2 each,

        - a *relocation*: one random component's mean is drawn from a kernel
          density over the rows of ``X`` (the new chunk), ``mu_k' ~ (1/n) sum_j
          N(x_j, diag sigma2_k)``, keeping weights and variances; the forward and
          reverse proposals have the same form, so the Hastings ratio is the
          ratio of the kernel densities at the old and new means;
        - a *refit*: a whole configuration drawn independently of the particle
          from approximations around EM fits to the target's weighted rows and
          around the other particles of its group
          (:class:`~evidence_select.models._mixture_moves.ConfigurationProposal`,
          symmetric in the component labels). Drawing from the population makes
          it an adaptive kernel, like the engine's adaptive schedule.

        Parameters
        ----------
        rng : numpy.random.Generator
        theta : ndarray of shape (n_particles, n_params)
            Particles, ``n_groups`` independent groups of equal size stacked.
        X : ndarray of shape (n_rows, n_features)
            The chunk being annealed in.
        chunk_weight : float, default=1.0
            The chunk's power in the target (its tempering).
        past_X : ndarray of shape (n_past_rows, n_features), optional
            A uniform sample of the earlier rows (the SGAIS reservoir).
        past_weight : float, default=0.0
            Weight per row of ``past_X`` in the target (its power times the
            number of earlier rows each stands for).
        n_groups : int, default=1
            Independent particle groups; a refit only draws on its own group.

        Returns
        -------
        proposal : ndarray of shape (n_particles, n_params)
        log_proposal_ratio : ndarray of shape (n_particles,)
            ``log q(theta | proposal) - log q(proposal | theta)``.

        Examples
        --------
        >>> import numpy as np
        >>> model = GaussianMixtureModel(n_components=2, n_features=1)
        >>> rng = np.random.default_rng(0)
        >>> theta = model.sample_prior(rng, 3)
        >>> proposal, log_ratio = model.propose_jump(rng, theta, np.array([[5.0], [6.0]]))
        >>> proposal.shape, log_ratio.shape
        ((3, 5), (3,))
        """
        X = np.asarray(X, dtype=float)
        theta = np.asarray(theta, dtype=float)
        rows, row_weights = self._target_rows(rng, X, chunk_weight, past_X, past_weight)
        # An untempered chunk and no past leave nothing to fit: relocations only.
        refit = (rng.random(len(theta)) < 0.5) & (row_weights.sum() > 0.0)
        proposal, log_ratio = np.array(theta), np.zeros(len(theta))
        # Each kernel is computed for its own particles only (the refit's densities are most of the cost).
        if not refit.all():
            proposal[~refit], log_ratio[~refit] = self.relocation_proposal(rng, theta[~refit], X)
        if refit.any():
            proposal[refit], log_ratio[refit] = self.refit_proposal(rng, theta, rows, row_weights, n_groups,
                                                                    selected=refit)
        return proposal, log_ratio

    @staticmethod
    def _target_rows(rng, X, chunk_weight, past_X, past_weight):
        """The chunk's rows and at most ``_REFIT_PAST_ROWS`` past rows, with their weights in the target."""
        row_weights = np.full(len(X), float(chunk_weight))
        if past_X is None or past_weight <= 0.0 or not len(past_X):
            return X, row_weights
        past_X = np.asarray(past_X, dtype=float)
        n_take = min(len(past_X), _REFIT_PAST_ROWS)
        take = rng.choice(len(past_X), size=n_take, replace=False) if n_take < len(past_X) else slice(None)
        return (np.vstack([X, past_X[take]]),
                np.concatenate([row_weights, np.full(n_take, past_weight * len(past_X) / n_take)]))

    def relocation_proposal(self, rng, theta, X):
        """Relocate one random component's mean per particle onto a kernel density of ``X``.

        Returns ``(proposal, log q(theta | proposal) - log q(proposal | theta))``;
        see :meth:`propose_jump`.
        """
        X = np.asarray(X, dtype=float)
        n_particles, K, d = len(theta), self.n_components, self.n_features
        _, means, log_variances = self.unpack(theta)
        rows = np.arange(n_particles)
        component = rng.integers(0, K, size=n_particles)
        scale = np.exp(0.5 * log_variances[rows, component])  # (M, d), unchanged by the move
        new_mean = X[rng.integers(0, len(X), size=n_particles)] + scale * rng.standard_normal((n_particles, d))
        old_mean = means[rows, component]

        def log_kernel_density(points):  # log (1/n) sum_j N(points; x_j, diag scale^2), per particle
            z = (points[:, None, :] - X[None]) / scale[:, None, :]
            log_terms = -0.5 * np.sum(z**2, axis=2)
            top = log_terms.max(axis=1, keepdims=True)
            return (top[:, 0] + np.log(np.mean(np.exp(log_terms - top), axis=1))
                    - np.sum(np.log(scale), axis=1) - 0.5 * d * _LOG_2PI)

        proposal = np.array(theta, dtype=float)
        start = K - 1 + component * d
        proposal[rows[:, None], start[:, None] + np.arange(d)] = new_mean
        return proposal, log_kernel_density(old_mean) - log_kernel_density(new_mean)

    def refit_proposal(self, rng, theta, X, sample_weight, n_groups=1, selected=None):
        """Independence proposal of whole configurations per group; see :meth:`propose_jump`.

        Half of the mass is on ``_REFIT_EM_STARTS`` EM fits to the weighted rows
        (fitted per group, so groups stay independent), half on the group's other
        particles (leave-one-out: a particle's proposal never depends on its own
        state). ``selected`` (boolean, one per particle; default all) names the
        particles to propose for; every particle of a group is a candidate all the
        same. Returns ``(proposal, log q(theta) - log q(proposal))`` for the
        selected particles, in order.
        """
        theta = np.asarray(theta, dtype=float)
        n_total = len(theta)
        if n_groups < 1 or n_total % n_groups:
            raise ValueError(f"n_groups={n_groups} must divide the {n_total} particles into equal groups")
        size = n_total // n_groups
        selected = np.ones(n_total, dtype=bool) if selected is None else np.asarray(selected, dtype=bool)
        n_effective = float(np.sum(sample_weight))
        log_weights, means, log_variances = self.unpack(theta)
        proposal = np.empty_like(theta)
        log_ratio = np.empty(n_total)
        n_fits = _REFIT_EM_STARTS
        # Candidate choice probabilities per particle: fits, then the group's particles (never itself).
        log_choice = np.full((size, n_fits + size), -np.inf)
        log_choice[:, :n_fits] = np.log((0.5 if size > 1 else 1.0) / n_fits)
        if size > 1:
            log_choice[:, n_fits:] = np.log(0.5 / (size - 1))
            log_choice[np.arange(size), n_fits + np.arange(size)] = -np.inf
        choice = np.exp(log_choice)
        # Every group's fits in one vectorised EM run; each group uses its own starts.
        fit_weights, fit_means, fit_variances = self.fit_em(rng, X, sample_weight, n_init=n_fits * n_groups)
        for group in range(n_groups):
            members = slice(group * size, (group + 1) * size)
            local = np.flatnonzero(selected[members])  # the group's selected particles
            if not len(local):
                continue
            chosen = group * size + local
            fits = slice(group * n_fits, (group + 1) * n_fits)
            candidates = ConfigurationProposal(
                np.vstack([fit_weights[fits], np.exp(log_weights[members])]),
                np.vstack([fit_means[fits], means[members]]),
                np.vstack([fit_variances[fits], np.exp(log_variances[members])]), n_effective)
            which = categorical_draws(rng.random(len(local)), choice[local])
            new_weights, new_means, new_log_variances = candidates.sample(rng, which)
            proposal[chosen] = self.pack(new_weights, new_means, np.exp(new_log_variances))
            # Densities at the current and the proposed particles, through the same parameter map.
            points = self.unpack(np.vstack([theta[chosen], proposal[chosen]]))
            log_q = logsumexp(candidates.log_density(*points) + np.vstack([log_choice[local], log_choice[local]]),
                              axis=1)
            log_ratio[chosen] = log_q[:len(local)] - log_q[len(local):]
        return proposal[selected], log_ratio[selected]


def mixture_relabel_maps(model):
    """Linear relabelling maps ``A_sigma`` of a :class:`GaussianMixtureModel`, shape ``(K!, P, P)``.

    ``theta' = A_sigma theta`` gives component ``k`` the parameters of component
    ``sigma(k)``; the additive log-ratio weights transform as
    ``eta'_k = eta_sigma(k) - eta_sigma(K)`` (with ``eta_K = 0``).

    Examples
    --------
    >>> mixture_relabel_maps(GaussianMixtureModel(2, 1)).shape
    (2, 5, 5)
    """
    return _relabel_maps(model.n_components, model.n_features)


@functools.lru_cache(maxsize=4)
def _relabel_maps(K, d):
    """:func:`mixture_relabel_maps` of ``K`` components in ``d`` dimensions, built once per process (seven
    components' 5040 maps take 47 MB and a tenth of a second) and read-only, since every caller shares it."""
    n_params = K - 1 + 2 * K * d
    perms = np.array(list(itertools.permutations(range(K))), dtype=np.intp).reshape(-1, K)  # (K!, K)
    which = np.arange(len(perms))[:, None]
    maps = np.zeros((len(perms), n_params, n_params))
    # eta_full = E theta[:K-1] with a zero last entry; eta'_k = eta_full[perm[k]] - eta_full[perm[K-1]].
    if K > 1:
        head, last = perms[:, :K - 1], perms[:, K - 1:]
        rows = np.broadcast_to(np.arange(K - 1), head.shape)
        maps[which, rows, np.minimum(head, K - 2)] += head < K - 1
        maps[which, rows, np.minimum(last, K - 2)] -= last < K - 1
    # Component k takes component perm[k]'s means and log variances, coordinate by coordinate.
    coordinate = np.arange(d)
    for block in (K - 1, K - 1 + K * d):
        dst = (block + np.arange(K)[:, None] * d + coordinate).ravel()  # (K d,)
        src = (block + perms[:, :, None] * d + coordinate).reshape(len(perms), -1)  # (K!, K d)
        maps[which, dst, src] = 1.0
    maps.flags.writeable = False
    return maps


def _em_step(moments, total_weight, floor):
    """One M-step from the responsibilities' weighted ``moments`` ``(mass, first, second)`` (shapes ``(M, K)``,
    ``(M, K, d)``, ``(M, K, d)``): ``(weights, means, variances)``, the variances at least ``floor``."""
    mass, first, second = moments
    mass = np.maximum(mass, 1e-300)
    means = first / mass[..., None]
    variances = np.maximum(second / mass[..., None] - means**2, floor)
    weights = np.maximum(mass / total_weight, 1e-12)
    weights /= weights.sum(axis=1, keepdims=True)
    return weights, means, variances


def _em_moved(before, after, row_std):
    """Per fit, the largest change of an EM iteration from ``before`` to ``after`` (each ``(weights, means,
    variances)``): the means' in units of ``row_std``, the weights' and variances' relative (log)."""
    (w0, m0, v0), (w1, m1, v1) = before, after
    return np.maximum.reduce([np.max(np.abs(m1 - m0) / row_std, axis=(1, 2)),
                              np.max(np.abs(np.log(v1 / v0)), axis=(1, 2)),
                              np.max(np.abs(np.log(w1 / w0)), axis=1)])
