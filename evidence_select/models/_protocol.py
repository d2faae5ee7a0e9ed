"""The model protocol: everything NS, AIS, bridge sampling and SGAIS may call.

A model is a frozen, picklable object that holds hyperparameters only (prior
scales, number of classes or components) and never data. Every method is
vectorised over particles: ``theta`` always has shape ``(n_particles, n_params)``
and lives in an *unconstrained* parameterisation (for example log variances),
so that samplers can move freely in ``R^n_params``. The log prior is the density
of the unconstrained parameters, i.e. it includes the log-Jacobian of the map to
the natural parameters.

To bring your own model, subclass :class:`Model` and implement the five
abstract members; :func:`check_model` verifies shapes and gradients against
finite differences.
"""

import functools
from abc import ABC, abstractmethod
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr, ndtri

__all__ = ["Model", "ModelCapabilities", "check_model", "design_step_scales", "finite_difference_gradient"]


class ModelCapabilities(NamedTuple):
    """The optional members a model offers the samplers, as :meth:`Model.capabilities` declares them.

    SGAIS chooses its kernels and shortcuts from this declaration alone: exact draws in place of exact HMC
    (``exact_draws``), from the rows' summed statistics at any number of rows (``statistics_draws``), gradients
    from additive row statistics (``gradient_statistics``), global Metropolis-Hastings jumps on surprising chunks
    (``global_jumps``), the posterior-mode check (``mode_search``), the model's fused gradient calls
    (``fused_joint_gradient``, ``fused_fixed_points``) in place of the protocol's sums of terms, and a reference
    evidence to name in its warnings (``exact_evidence``). Nested sampling draws in the prior's unit cube where the
    model declares its transform (``prior_transform``). The posterior-mode check's importance draws and nested
    sampling (with a fast gradient) take the model's approximate likelihood sum where it declares one
    (``approximate_sum``).

    Examples
    --------
    >>> from evidence_select.models import LinearGaussianModel
    >>> capabilities = LinearGaussianModel(2).capabilities()
    >>> capabilities.exact_draws, capabilities.global_jumps
    (True, False)
    """

    exact_draws: bool = False  # sample_tempered_posterior
    statistics_draws: bool = False  # sample_tempered_posterior_from_statistics (needs gradient_statistics)
    gradient_statistics: bool = False  # gradient_statistics and grad_from_statistics
    global_jumps: bool = False  # propose_jump
    mode_search: bool = False  # mode_starts (and mode_symmetries)
    fused_joint_gradient: bool = False  # grad_log_joint, written for the model's own prior and likelihood
    fused_fixed_points: bool = False  # grad_log_likelihood_at, written for the model's own likelihood
    exact_evidence: bool = False  # exact_log_evidence
    prior_transform: bool = False  # prior_transform and prior_cdf
    approximate_sum: bool = False  # approximate_log_likelihood_sum, written for the model's own likelihood


def _definer(model_class, name):
    """The class in ``model_class``'s MRO that defines ``name``, or None."""
    return next((cls for cls in model_class.__mro__ if name in cls.__dict__), None)


def declared_capabilities(model):
    """The :class:`ModelCapabilities` of the optional members ``model``'s class defines for its own terms.

    A member counts where the class that defines it also defines the terms it was written for, or derives from
    their definer: a subclass that overrides ``log_likelihood`` alone (another noise model, say) does not inherit
    conjugate draws or row statistics from a posterior that is no longer its own, and one that overrides a
    gradient term alone is not bypassed by a fused call it inherited. Members that depend on no term
    (``propose_jump``, ``mode_starts``, ``exact_log_evidence``) count wherever they are defined.
    """
    # The definers are the cache's key: a class patched after a first call is looked at afresh.
    definers = tuple(_definer(type(model), name) for name in _CLASS_MEMBERS)
    return _class_capabilities(definers)._replace(global_jumps=hasattr(model, "propose_jump"),
                                                  mode_search=hasattr(model, "mode_starts"),
                                                  exact_evidence=hasattr(model, "exact_log_evidence"))


#: The members whose definers decide the class part of :func:`declared_capabilities`.
_CLASS_MEMBERS = ("gradient_statistics", "log_likelihood", "sample_tempered_posterior",
                  "sample_tempered_posterior_from_statistics", "grad_log_joint", "grad_log_prior",
                  "grad_log_likelihood", "grad_log_likelihood_at", "prior_transform", "prior_cdf", "log_prior",
                  "approximate_log_likelihood_sum", "log_likelihood_sum")


# The cache holds its keys' classes alive (at most 256 sets of definers). Its answer goes stale only where a
# definer's own bases are reassigned after a first call (the same definers, related otherwise).
@functools.lru_cache(maxsize=256)
def _class_capabilities(definers):
    """The members of :func:`declared_capabilities` that the class decides, from the definers of
    :data:`_CLASS_MEMBERS` (in that order), computed once per set of definers: SGAIS asks on every chunk."""
    owner = dict(zip(_CLASS_MEMBERS, definers))

    def defined_for(member, terms):
        # The member's definer defines each term or subclasses its definer.
        defined = owner[member]
        return defined is not None and all(owner[t] is not None and issubclass(defined, owner[t]) for t in terms)

    statistics = defined_for("gradient_statistics", ("log_likelihood",))
    return ModelCapabilities(
        exact_draws=defined_for("sample_tempered_posterior", ("log_likelihood",)),
        statistics_draws=statistics and defined_for("sample_tempered_posterior_from_statistics", ("log_likelihood",)),
        gradient_statistics=statistics,
        fused_joint_gradient=defined_for("grad_log_joint", ("grad_log_prior", "grad_log_likelihood")),
        fused_fixed_points=defined_for("grad_log_likelihood_at", ("grad_log_likelihood",)),
        prior_transform=all(defined_for(name, ("log_prior",)) for name in ("prior_transform", "prior_cdf")),
        approximate_sum=defined_for("approximate_log_likelihood_sum", ("log_likelihood", "log_likelihood_sum")))


class Model(ABC):
    """Abstract base class of the model protocol.

    Subclasses implement:

    - ``n_params`` : int, the dimension of the unconstrained parameter vector;
    - ``sample_prior(rng, n_samples)`` -> ``(n_samples, n_params)``;
    - ``log_prior(theta)`` -> ``(n_particles,)`` (with the log-Jacobian);
    - ``grad_log_prior(theta)`` -> ``(n_particles, n_params)``;
    - ``log_likelihood(theta, X, y)`` -> ``(n_particles, n_batch)`` per-datum
      log-likelihoods ``log p(y_j | x_j, theta_i)`` (``y`` is ``None`` for
      density models);
    - ``grad_log_likelihood(theta, X, y, weights)`` -> ``(n_particles, n_params)``,
      the gradient of ``sum_j weights[i, j] * log p(y_j | x_j, theta_i)``;
      ``weights`` broadcasts to ``(n_particles, n_batch)``, so one call covers
      a tempered chunk and a rescaled mini-batch at once.

    Nothing may loop in Python over particles or data rows. Optional members:
    ``step_scales(X)`` (a per-parameter SGHMC step size), ``curvature_ratio(theta,
    X, sample_weight)`` (where those scales rest on a curvature bound: the
    curvature at the particles over the bound), ``log_likelihood_sum``
    (override when the total is cheaper than the matrix),
    ``log_likelihood_and_grad``, ``grad_log_joint`` and ``grad_log_likelihood_at`` (override when the terms
    share work, or when the points' own work can be done once), for an analytic
    evidence ``exact_log_evidence(X, y)``, and ``propose_jump(rng, theta, X, *,
    chunk_weight, past_X, past_weight, n_groups)`` returning ``(proposal,
    log q(theta | proposal) - log q(proposal | theta))``: a global
    Metropolis-Hastings proposal that SGAIS applies on surprising chunks
    (``reheat_after_steps``), given the chunk, a uniform sample of the past rows
    and their powers in the current target (see
    :meth:`~evidence_select.models.GaussianMixtureModel.propose_jump`);
    ``sample_tempered_posterior(rng, n_samples, X, y, weights)``: independent
    exact draws from ``p(theta) prod_j p(y_j | x_j, theta)^{w_j}`` (a conjugate
    model), which SGAIS's exact moves then use in place of HMC (see
    :meth:`~evidence_select.models.LinearGaussianModel.sample_tempered_posterior`);
    and ``gradient_statistics(X, y)`` with ``grad_from_statistics(theta, statistics)``:
    row statistics that add over rows and scale with the weights, from which the
    gradient follows (a linear-Gaussian model's moments), which SGHMC then sums
    once per chunk and mini-batch instead of reading the rows at every step (see
    :meth:`~evidence_select.models.LinearGaussianModel.gradient_statistics`);
    and ``prior_transform(u)`` with ``prior_cdf(theta)``: a map from points
    ``u`` ``(n_particles, n_params)`` of the unit cube to parameters that
    carries the uniform density to the prior (each coordinate's inverse CDF
    for independent priors, a Rosenblatt transform in general), and its
    inverse, with which nested sampling bounds the live points in the cube
    where the prior falls steeply across them (see
    :mod:`evidence_select.kernels._cube`; :func:`check_model` verifies the pair).

    Attributes
    ----------
    is_density_model : bool
        True for models of ``p(X)`` (no target ``y``), False for ``p(y | X)``.
    fast_gradient : bool
        True when ``grad_log_likelihood`` alone costs well under
        ``log_likelihood_and_grad`` (default False). The Metropolis-corrected
        samplers (SGAIS's exact moves, AIS, the bridge's chains) then kick their
        trajectories with it and NS's Galilean moves reflect along it; the
        results stay exact for any approximation (single precision, say) that
        is a fixed function of ``theta`` for given rows.

    See Also
    --------
    check_model : Verify shapes and gradients of an implementation.
    evidence_select.log_evidence : Every evidence method on any such model.

    Notes
    -----
    Models compare equal (and hash alike) when they are of the same type with
    the same hyperparameters, so a frozen model can key a cache.

    Examples
    --------
    A one-parameter model of a Gaussian mean with a standard normal prior and
    unit noise, ``x_j ~ N(mu, 1)``:

    >>> import numpy as np
    >>> from evidence_select import log_evidence
    >>> from evidence_select.models import Model, check_model
    >>> class GaussianMean(Model):
    ...     is_density_model = True
    ...     n_params = 1
    ...     def sample_prior(self, rng, n_samples):
    ...         return rng.standard_normal((n_samples, 1))
    ...     def log_prior(self, theta):
    ...         return -0.5 * theta[:, 0] ** 2 - 0.5 * np.log(2 * np.pi)
    ...     def grad_log_prior(self, theta):
    ...         return -theta
    ...     def log_likelihood(self, theta, X, y=None):
    ...         return -0.5 * (X[:, 0] - theta) ** 2 - 0.5 * np.log(2 * np.pi)
    ...     def grad_log_likelihood(self, theta, X, y, weights):
    ...         return np.sum(np.broadcast_to(weights, (len(theta), len(X))) * (X[:, 0] - theta),
    ...                       axis=1, keepdims=True)
    >>> X = np.random.default_rng(0).normal(0.5, 1.0, size=(100, 1))
    >>> check_model(GaussianMean(), X)
    >>> result = log_evidence(GaussianMean(), X, method="ns", n_live=50, random_state=0)

    Its exact evidence: ``x ~ N(0, I + 1 1^T)`` after integrating ``mu`` out.

    >>> from scipy.stats import multivariate_normal
    >>> exact = multivariate_normal(np.zeros(100), np.eye(100) + 1.0).logpdf(X[:, 0])
    >>> round(float(exact), 1)
    -140.7
    >>> bool(abs(result.log_evidence - exact) < 3 * result.log_evidence_std)
    True
    """

    #: True for models of ``p(X)`` (no target ``y``), False for ``p(y | X)``.
    is_density_model = False
    #: True when :meth:`grad_log_likelihood` costs well under :meth:`log_likelihood_and_grad` (a
    #: single-precision gradient): Metropolis-corrected HMC on an exact target then kicks with it and
    #: evaluates the log-likelihood only at each trajectory's end (:class:`~evidence_select.kernels._hmc.KickedTarget`).
    fast_gradient = False
    #: Prior variances of the parameters, shape ``(n_params,)``, for models with a diagonal Gaussian prior, else
    #: None: SGHMC caps its data-scaled step at ``learning_rate`` times them.
    prior_variances = None
    #: Number of :meth:`mode_symmetries` (linear maps that leave the posterior invariant).
    n_mode_symmetries = 1

    @property
    @abstractmethod
    def n_params(self):
        """Dimension of the unconstrained parameter vector."""

    @abstractmethod
    def sample_prior(self, rng, n_samples):
        """Draw ``(n_samples, n_params)`` unconstrained parameters from the prior."""

    @abstractmethod
    def log_prior(self, theta):
        """Log prior density of unconstrained ``theta``, shape ``(n_particles,)``."""

    @abstractmethod
    def grad_log_prior(self, theta):
        """Gradient of :meth:`log_prior`, shape ``(n_particles, n_params)``."""

    @abstractmethod
    def log_likelihood(self, theta, X, y=None):
        """Per-datum log-likelihood matrix, shape ``(n_particles, n_batch)``."""

    @abstractmethod
    def grad_log_likelihood(self, theta, X, y, weights):
        """Gradient of the weighted sum of per-datum log-likelihoods.

        Parameters
        ----------
        theta : ndarray of shape (n_particles, n_params)
        X : ndarray of shape (n_batch, n_features)
        y : ndarray of shape (n_batch,) or None
        weights : ndarray broadcastable to (n_particles, n_batch)

        Returns
        -------
        grad : ndarray of shape (n_particles, n_params)
        """

    def step_scales(self, X):
        """Optional: relative SGHMC step size per parameter, from a batch of data.

        Samplers multiply their scalar step (tuned for unit per-datum curvature)
        by these factors, i.e. a diagonal inverse mass matrix. Return the inverse
        of a typical per-datum Fisher information diagonal so that features on any
        scale mix alike; ``None`` (the default) means no preconditioning.

        Parameters
        ----------
        X : ndarray of shape (n_batch, n_features)

        Returns
        -------
        scales : ndarray of shape (n_params,) or None
        """
        return None

    def curvature_ratio(self, theta, X, sample_weight=None):
        """Optional: the rows' per-datum curvature at ``theta`` over the one :meth:`step_scales` assumes.

        Where :meth:`step_scales` comes from a bound on the curvature (the
        softmax's ``p (1 - p) <= 1/4``), the posterior can be far flatter than
        the bound once it settles (separable classes), and a step sized by the
        bound is then too short for the particles to follow the posterior as
        rows arrive. SGAIS measures the ratio at the particles on the chunk and
        a sample of the past rows before each chunk, and where it falls below
        1/4 lengthens the step by up to 1/4 over the ratio, less where the
        mini-batch's gradient noise would heat the particles, with more moves
        instead (see :ref:`the SGAIS guide <sgais>`).

        Parameters
        ----------
        theta : ndarray of shape (n_particles, n_params)
        X : ndarray of shape (n_rows, n_features)
        sample_weight : ndarray of shape (n_rows,) or None
            How many rows each row stands for.

        Returns
        -------
        ratio : ndarray of shape (n_params,) with values in (0, 1], or None
            None (the default): the step scales are exact, use them as they are.
        """
        return None

    def capabilities(self):
        """The optional members this model offers the samplers (:class:`ModelCapabilities`).

        SGAIS chooses its kernels from this declaration, never from the model's class. The default declares
        each optional member the model's class defines for its own terms (see
        :func:`~evidence_select.models._protocol.declared_capabilities`); override it to declare otherwise, for
        example to switch a member off.

        Returns
        -------
        capabilities : ModelCapabilities
        """
        return declared_capabilities(self)

    def mode_symmetries(self):
        """Linear maps ``A`` under which the posterior is invariant, shape ``(n_mode_symmetries, n_params,
        n_params)``; the default is the identity alone. The posterior-mode check symmetrises its proposal over
        them (a mixture's relabellings), and nested sampling bounds one copy of the modes and maps it to all.
        They must form a group (each map's inverse and every product among them) with ``|det A| = 1``."""
        return np.eye(self.n_params)[None]

    @property
    def n_mode_symmetries(self):
        """Number of :meth:`mode_symmetries` (override it where building them all to count them is costly)."""
        return len(self.mode_symmetries())

    def log_likelihood_sum(self, theta, X, y=None):
        """Total log-likelihood of a data set, shape ``(n_particles,)``.

        What SGAIS's tempering steps weigh the particles by (the rows' values one by one only where it watches a
        chunk for a shift), and what the reference backends and the posterior-mode check evaluate. The default
        sums :meth:`log_likelihood`; override it where the total is cheaper than the matrix (a linear model's
        from the rows' moments)."""
        return self.log_likelihood(theta, X, y).sum(axis=1)

    def approximate_log_likelihood_sum(self, theta, X, y=None):
        """:meth:`log_likelihood_sum` to about single precision per row, shape ``(n_particles,)``.

        What the posterior-mode check's importance draws evaluate (hundreds to thousands of draws, each on every
        row seen), whose weights value the evidence to hundredths of a nat, and nested sampling's likelihood where
        the model's gradient is fast (``fast_gradient``: its every value then comes from this one function): a
        row's rounding of about ``1e-7`` of its log-density adds to a total over ``n`` rows about ``1e-7
        sqrt(n)`` times that (the signs vary), far below either's error. Override it where single precision is
        cheaper (eight vector lanes instead of four); the total must be a fixed function of ``theta`` for given
        rows. The default is :meth:`log_likelihood_sum` itself, and an
        override counts only where its class also defines :meth:`log_likelihood` and :meth:`log_likelihood_sum`
        or subclasses their definers (``capabilities().approximate_sum``): a subclass with another likelihood
        does not inherit its parent's approximation."""
        return self.log_likelihood_sum(theta, X, y)

    def log_likelihood_and_grad(self, theta, X, y, weights):
        """Weighted total log-likelihood and its gradient in one call.

        Samplers that need both at the same positions (every HMC leapfrog step on
        an exact target) call this; the default calls the two members. Override it
        when they share most of their work (a softmax's logits, a mixture's
        component densities): the shared part is then computed once.

        Parameters
        ----------
        theta : ndarray of shape (n_particles, n_params)
        X : ndarray of shape (n_batch, n_features)
        y : ndarray of shape (n_batch,) or None
        weights : float or ndarray broadcastable to (n_particles, n_batch)

        Returns
        -------
        total : ndarray of shape (n_particles,)
            ``sum_j weights[i, j] * log p(y_j | x_j, theta_i)``.
        grad : ndarray of shape (n_particles, n_params)
            Its gradient, as :meth:`grad_log_likelihood`.
        """
        weights = np.asarray(weights, dtype=float)
        if weights.ndim == 0:
            total = self.log_likelihood_sum(theta, X, y) * weights
        else:
            total = weighted_total(self.log_likelihood(theta, X, y), weights)
        return total, self.grad_log_likelihood(theta, X, y, weights)

    def grad_log_likelihood_at(self, theta):
        """``(X, y, weights) -> grad_log_likelihood(theta, X, y, weights)`` for points ``theta`` held fixed.

        SGHMC's control variates evaluate the same reference points on a new
        mini-batch at every step. The default binds ``theta``; override it to
        compute the work that depends on ``theta`` alone once. The function must
        return the same values as :meth:`grad_log_likelihood`.
        """
        return functools.partial(self.grad_log_likelihood, theta)

    def grad_log_joint(self, theta, X, y, weights):
        """``grad_log_prior(theta) + grad_log_likelihood(theta, X, y, weights)`` in one call.

        SGHMC's gradient estimator calls this at every step; the default adds the
        two members. Override it when they share work (a mixture's parameter
        transform): it must return the same sum.

        Returns
        -------
        grad : ndarray of shape (n_particles, n_params)
        """
        return self.grad_log_prior(theta) + self.grad_log_likelihood(theta, X, y, weights)

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()) if not k.startswith("_"))
        return f"{type(self).__name__}({params})"

    def __eq__(self, other):
        return type(self) is type(other) and _hyper(self) == _hyper(other)

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted((k, repr(v)) for k, v in vars(self).items()))))


def weighted_total(log_lik, weights):
    """``sum_j weights[i, j] * log_lik[i, j]`` per particle, for scalar, 1-d (per-row) or 2-d ``weights``."""
    if np.ndim(weights) == 0:
        return log_lik.sum(axis=1) * weights
    if np.ndim(weights) == 1:
        return log_lik @ weights
    return np.sum(log_lik * weights, axis=1)


def kernel_array(values, dtype=float):
    """``values`` as a C-contiguous, writable array of ``dtype`` for a compiled kernel (copied only if needed).

    numba types read-only arrays apart from writable ones, so a read-only input (a broadcast view, a memory map)
    would compile every kernel afresh, for seconds, instead of running the cached code.
    """
    values = np.ascontiguousarray(values, dtype=dtype)
    return values if values.flags.writeable else values.copy()


def kernel_row_weights(weights, n_particles, n_rows):
    """``weights`` (scalar, ``(n_rows,)`` or ``(n_particles, n_rows)``) as the compiled kernels' row weights: a
    contiguous, writable ``(1, n_rows)`` shared by every particle, or one row per particle (see
    :func:`kernel_array`)."""
    weights = np.asarray(weights, dtype=float)
    if weights.ndim == 0:  # the common cases without broadcast_to, which costs more than a small kernel call
        return np.full((1, n_rows), weights)
    if weights.shape == (n_rows,):
        return kernel_array(weights)[None]
    if weights.ndim == 2:
        return kernel_array(np.broadcast_to(weights, (n_particles, n_rows)))
    return kernel_array(np.broadcast_to(weights, (n_rows,)))[None]


def gaussian_prior_transform(u, variances):
    """``N(0, diag(variances))`` parameters of unit-cube points ``u`` ``(n, n_params)``: each coordinate's inverse
    CDF (a model's ``prior_transform`` for that prior)."""
    return ndtri(np.asarray(u, dtype=float)) * np.sqrt(variances)


def gaussian_prior_cdf(theta, variances):
    """Unit-cube points of ``N(0, diag(variances))`` parameters ``theta``, the inverse of
    :func:`gaussian_prior_transform` (a model's ``prior_cdf``)."""
    return ndtr(np.asarray(theta, dtype=float) / np.sqrt(variances))


@functools.lru_cache(maxsize=64)
def diagonal_prior_variances(n_weights, n_intercepts, prior_scale, intercept_scale):
    """Prior variances: ``prior_scale**2`` for ``n_weights`` weights, then ``intercept_scale**2`` for the intercepts.

    Cached and read-only, since samplers read them at every gradient of the prior.

    Examples
    --------
    >>> from evidence_select.models._protocol import diagonal_prior_variances
    >>> diagonal_prior_variances(2, 1, 3.0, 1.0).tolist()
    [9.0, 9.0, 1.0]
    """
    variances = np.full(n_weights + n_intercepts, prior_scale**2)
    variances[n_weights:] = intercept_scale**2
    variances.setflags(write=False)
    return variances


def design_step_scales(X, fit_intercept, curvature):
    """Jacobi step scales ``1 / (curvature * E[a_j^2])`` for a design ``a = (x, 1)``.

    ``curvature`` is the per-datum second derivative of the log-likelihood with
    respect to the linear predictor (``1 / noise_variance`` for the Gaussian,
    at most 1/4 for the softmax). Correlated features make the largest curvature
    exceed the diagonal one by up to ``lambda_max`` of the design's correlation
    matrix; above 2 the scales shrink by ``lambda_max / 2`` to stay stable.
    Constant-zero columns get scale 1/curvature. Models with a linear predictor
    use it for :meth:`Model.step_scales`.

    Parameters
    ----------
    X : array-like of shape (n_batch, n_features)
        A batch of data, typically the first chunk of a stream.
    fit_intercept : bool
        Whether the design has a column of ones appended.
    curvature : float
        Per-datum second derivative of the log-likelihood in the linear predictor.

    Returns
    -------
    scales : ndarray of shape (n_features + fit_intercept,)

    Examples
    --------
    A feature ten times larger gets a step a hundred times smaller:

    >>> import numpy as np
    >>> from evidence_select.models import design_step_scales
    >>> X = np.random.default_rng(0).normal(size=(200, 2)) * [1.0, 10.0]
    >>> design_step_scales(X, fit_intercept=True, curvature=1.0).round(2)
    array([1.03, 0.01, 1.  ])
    """
    X = np.asarray(X, dtype=float)
    second_moment = _design_gram(X, fit_intercept) / max(len(X), 1)
    diagonal = second_moment.diagonal().copy()
    diagonal[~(diagonal > 0)] = 1.0
    inv_sqrt = 1.0 / np.sqrt(diagonal)
    correlation = second_moment * np.outer(inv_sqrt, inv_sqrt)
    # Gershgorin: lambda_max is at most the largest absolute row sum; at most 2 needs no eigenvalues.
    if np.abs(correlation).sum(axis=1).max() <= 2.0:
        return 1.0 / (curvature * diagonal)
    lambda_max = float(np.linalg.eigvalsh(correlation)[-1])
    return 1.0 / (curvature * diagonal * max(1.0, lambda_max / 2.0))


#: Rows of the design per product in :func:`_design_gram`: a stream's chunks fit in one, and a whole data set's
#: scales (the estimators' data-scale check) are summed block by block instead of copying every row.
_GRAM_BLOCK = 8192


def _design_gram(X, fit_intercept):
    """``A^T A`` of the design ``A = [X, 1]`` (``X`` without the intercept), one product of ``[X, 1]`` per block of
    ``_GRAM_BLOCK`` rows: a column sum of ``X`` alone costs as much as the column of ones."""
    if not fit_intercept:
        return X.T @ X
    design = np.empty((min(len(X), _GRAM_BLOCK), X.shape[1] + 1))
    design[:, -1] = 1.0
    gram = np.zeros((X.shape[1] + 1,) * 2)
    for start in range(0, len(X), _GRAM_BLOCK):
        block = design[: min(_GRAM_BLOCK, len(X) - start)]
        block[:, :-1] = X[start:start + len(block)]
        gram += block.T @ block
    return gram


def _hyper(model):
    return {k: repr(v) for k, v in vars(model).items()}


def check_model(model, X, y=None, *, n_particles=3, random_state=0, rtol=1e-5):
    """Check that a model honours the protocol on data ``(X, y)``.

    Verifies output shapes, finiteness at prior draws, both gradients
    against central finite differences, that ``log_likelihood_sum`` (at a
    population of more draws than parameters, as SGAIS evaluates it) and
    ``log_likelihood_and_grad`` agree with the members they stand for, and,
    where the model offers them, that its ``gradient_statistics`` give the
    same gradient and that its ``prior_transform`` and ``prior_cdf`` invert
    each other and carry the prior to the uniform density on the unit cube.

    Parameters
    ----------
    model : Model
        The model to check.
    X : ndarray of shape (n_batch, n_features)
        A small data set.
    y : ndarray of shape (n_batch,), default=None
        Targets, or None for density models.
    n_particles : int, default=3
        Number of prior draws to check at.
    random_state : int, default=0
        Seed for the prior draws and the weights.
    rtol : float, default=1e-5
        Relative tolerance for the gradient comparison.

    Raises
    ------
    ValueError
        Naming the first method that fails.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models import LinearGaussianModel, check_model
    >>> X = np.random.default_rng(0).normal(size=(8, 2)); y = X.sum(axis=1)
    >>> check_model(LinearGaussianModel(n_features=2), X, y)
    """
    rng = np.random.default_rng(random_state)
    theta = np.asarray(model.sample_prior(rng, n_particles), dtype=float)
    n_params = model.n_params
    if theta.shape != (n_particles, n_params):
        raise ValueError(f"sample_prior returned shape {theta.shape}, expected {(n_particles, n_params)}")
    log_prior = np.asarray(model.log_prior(theta))
    if log_prior.shape != (n_particles,) or not np.all(np.isfinite(log_prior)):
        raise ValueError(f"log_prior must return {n_particles} finite values, got {log_prior!r}")
    log_lik = np.asarray(model.log_likelihood(theta, X, y))
    if log_lik.shape != (n_particles, len(X)):
        raise ValueError(f"log_likelihood returned shape {log_lik.shape}, expected {(n_particles, len(X))}")
    weights = rng.uniform(0.5, 1.5, size=(n_particles, len(X)))

    def lik_fn(t):
        return np.sum(weights[: len(t)] * model.log_likelihood(t, X, y), axis=1)

    pairs = [
        ("grad_log_prior", model.log_prior, model.grad_log_prior(theta)),
        ("grad_log_likelihood", lik_fn, model.grad_log_likelihood(theta, X, y, weights)),
    ]
    population = np.resize(theta, (max(n_particles, n_params + 2), n_params))  # the prior draws, repeated
    summed = np.asarray(model.log_likelihood_sum(population, X, y), dtype=float)
    rows = np.asarray(model.log_likelihood(population, X, y), dtype=float).sum(axis=1)
    if summed.shape != rows.shape or not np.allclose(summed, rows, rtol=rtol, atol=rtol):
        raise ValueError("log_likelihood_sum disagrees with log_likelihood summed over the rows")
    total, grad = model.log_likelihood_and_grad(theta, X, y, weights)
    separate = lik_fn(theta), model.grad_log_likelihood(theta, X, y, weights)
    for part, fused, alone in zip(("total", "gradient"), (total, grad), separate):
        fused = np.asarray(fused, dtype=float)
        if fused.shape != alone.shape or not np.allclose(fused, alone, rtol=rtol, atol=rtol):
            raise ValueError(f"log_likelihood_and_grad's {part} disagrees with log_likelihood and "
                             f"grad_log_likelihood at the same weights")
    likelihood_grad = model.grad_log_likelihood(theta, X, y, weights)
    fused = {"grad_log_joint": (model.grad_log_joint(theta, X, y, weights),
                                model.grad_log_prior(theta) + likelihood_grad),
             "grad_log_likelihood_at": (model.grad_log_likelihood_at(theta)(X, y, weights), likelihood_grad)}
    for name, (value, expected) in fused.items():
        value = np.asarray(value, dtype=float)
        if value.shape != expected.shape or not np.allclose(value, expected, rtol=rtol, atol=rtol):
            raise ValueError(f"{name} disagrees with the gradients it stands for at the same weights")
    if hasattr(model, "gradient_statistics"):
        _check_gradient_statistics(model, theta, X, y, rng, rtol)
    if model.capabilities().prior_transform:
        _check_prior_transform(model, theta)
    for name, fn, analytic in pairs:
        numeric = finite_difference_gradient(fn, theta)
        scale = np.maximum(np.abs(numeric), 1.0)
        if np.asarray(analytic).shape != theta.shape or np.any(np.abs(analytic - numeric) > rtol * scale * 10):
            raise ValueError(f"{name} disagrees with central finite differences: max abs diff "
                             f"{np.max(np.abs(np.asarray(analytic) - numeric)):.3g}")


def _check_prior_transform(model, theta):
    """``prior_cdf`` maps prior draws into the open unit cube, ``prior_transform`` maps them back, and the
    determinant of ``prior_cdf``'s Jacobian (central differences) is the prior density: the map carries the prior
    to the uniform density."""
    cube = np.asarray(model.prior_cdf(theta), dtype=float)
    if cube.shape != theta.shape or not np.all((cube > 0.0) & (cube < 1.0)):
        raise ValueError(f"prior_cdf must map prior draws into the open unit cube with shape {theta.shape}")
    if not np.allclose(np.asarray(model.prior_transform(cube), dtype=float), theta, rtol=1e-6, atol=1e-6):
        raise ValueError("prior_transform does not invert prior_cdf at prior draws")
    steps = 1e-5 * np.maximum(np.abs(theta), 1.0)
    jacobian = np.empty(theta.shape + theta.shape[1:])
    for j in range(theta.shape[1]):
        shift = np.zeros_like(theta)
        shift[:, j] = steps[:, j]
        difference = model.prior_cdf(theta + shift) - model.prior_cdf(theta - shift)
        jacobian[:, :, j] = difference / (2.0 * steps[:, j:j + 1])
    _, log_det = np.linalg.slogdet(jacobian)
    log_prior = np.asarray(model.log_prior(theta), dtype=float)
    if not np.allclose(log_det, log_prior, rtol=0.0, atol=1e-4):
        raise ValueError(f"prior_cdf is not the prior's: the log determinant of its Jacobian, {log_det}, differs "
                         f"from log_prior, {log_prior}")


def _check_gradient_statistics(model, theta, X, y, rng, rtol):
    """``grad_from_statistics`` of weighted ``gradient_statistics`` against ``grad_log_likelihood``.

    Two row blocks at two shared weights (a chunk at its power, a mini-batch at its scaling), summed as SGAIS sums
    them; and the statistics of a stack of row sets (leading axis) against each set's own.
    """
    half = len(X) // 2
    blocks = [(X[:half], None if y is None else y[:half]), (X[half:], None if y is None else y[half:])]
    powers = rng.uniform(0.5, 1.5, size=2)
    statistics = sum(w * np.asarray(model.gradient_statistics(*rows)) for w, rows in zip(powers, blocks))
    weights = np.concatenate([np.full(half, powers[0]), np.full(len(X) - half, powers[1])])
    # Per-particle weights: a model may itself route shared weights through its statistics.
    expected = model.grad_log_likelihood(theta, X, y, np.broadcast_to(weights, (len(theta), len(X))))
    got = np.asarray(model.grad_from_statistics(theta, statistics), dtype=float)
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=rtol, atol=rtol):
        raise ValueError("grad_from_statistics of the rows' weighted gradient_statistics disagrees with "
                         "grad_log_likelihood at the same weights")
    stacked_y = None if y is None else np.stack([y, y[::-1]])
    stacked = np.asarray(model.gradient_statistics(np.stack([X, X[::-1]]), stacked_y))
    alone = np.asarray(model.gradient_statistics(X, y))
    if stacked.shape != (2,) + alone.shape or not np.allclose(stacked, alone, rtol=rtol, atol=rtol):
        raise ValueError("gradient_statistics of a stack of row sets (leading axis) must be each set's own")


def finite_difference_gradient(fn, theta, step=1e-5):
    """Central finite-difference gradient of a vectorised scalar function.

    Parameters
    ----------
    fn : callable
        Maps ``(n_particles, n_params)`` to ``(n_particles,)``.
    theta : array-like of shape (n_particles, n_params)
        Where to differentiate.
    step : float, default=1e-5
        Relative step; the step of coordinate ``j`` is ``step * max(|theta_j|, 1)``.

    Returns
    -------
    grad : ndarray of shape (n_particles, n_params)

    See Also
    --------
    check_model : Compares a model's analytic gradients with this.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models import finite_difference_gradient
    >>> def log_density(theta):
    ...     return -0.5 * np.sum(theta**2, axis=1)
    >>> finite_difference_gradient(log_density, np.array([[1.0, -2.0]])).round(6)
    array([[-1.,  2.]])
    """
    theta = np.asarray(theta, dtype=float)
    grad = np.empty_like(theta)
    for j in range(theta.shape[1]):
        h = step * np.maximum(np.abs(theta[:, j]), 1.0)
        plus, minus = theta.copy(), theta.copy()
        plus[:, j] += h
        minus[:, j] -= h
        grad[:, j] = (fn(plus) - fn(minus)) / (2.0 * h)
    return grad
