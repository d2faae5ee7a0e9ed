"""Priors given as ``scipy.stats`` distributions, as blocks of an unconstrained parameter vector.

A block is one named parameter array: its prior (a frozen ``scipy.stats`` distribution), its shape, and the map
between its ``size`` unconstrained coordinates and its natural values. Every method is vectorised over particles:
``u`` has shape ``(n_particles, size)``, natural values ``(n_particles, *shape)``.

- :class:`UnivariatePrior`: a continuous univariate distribution, one per element (its parameters broadcast to the
  shape), mapped elementwise onto its support (:mod:`._transforms`). The log density and its derivative come from
  closed forms for the common families (``_KERNELS``: ``scipy.stats``' own ``logpdf`` costs some hundred
  microseconds a call, and samplers ask for the prior's gradient at every step), with the normalising constant taken
  once from scipy; any other family uses scipy's ``logpdf`` and central differences.
- :class:`MultivariateNormalPrior`: ``scipy.stats.multivariate_normal`` over the last axis, unconstrained.
- :class:`DirichletPrior`: ``scipy.stats.dirichlet`` over the last axis, mapped from ``R^(K-1)`` by the additive
  log-ratio (softmax with a zero last logit), whose log-Jacobian is ``sum_k log x_k``.
"""

import math

import numpy as np
from scipy import stats
from scipy.linalg import solve_triangular
from scipy.special import gammaln, log_softmax, ndtr, ndtri, softmax, xlog1py, xlogy

from ._transforms import transform_for_support

__all__ = ["DIMENSION_NAMES", "MultivariateNormalPrior", "DirichletPrior", "UnivariatePrior", "parse_prior",
           "prior_block", "frozen_covariance"]

#: Names a prior's shape may use for sizes known only from the data: the number of columns of ``X`` and, for a
#: classifier, the number of classes.
DIMENSION_NAMES = ("n_features", "n_classes")

_MVN_FROZEN = type(stats.multivariate_normal(np.zeros(1)))
_DIRICHLET_FROZEN = type(stats.dirichlet(np.ones(2)))
_SUPPORTED = ("a frozen continuous scipy.stats distribution (e.g. scipy.stats.norm(0, 1), scipy.stats.gamma(2.0)), "
              "scipy.stats.multivariate_normal(mean, cov) or scipy.stats.dirichlet(alpha)")


# -- closed forms: log density up to a constant, and its derivative, of the standardised z = (x - loc) / scale --
def _norm(z):
    return -0.5 * z * z, -z


def _cauchy(z):
    return -np.log1p(z * z), -2.0 * z / (1.0 + z * z)


def _student_t(z, df):
    return -0.5 * (df + 1.0) * np.log1p(z * z / df), -(df + 1.0) * z / (df + z * z)


def _laplace(z):
    return -np.abs(z), -np.sign(z)


def _logistic(z):
    a = np.abs(z)
    return -a - 2.0 * np.log1p(np.exp(-a)), -np.tanh(0.5 * z)


def _expon(z):
    return -z, -np.ones_like(z)


def _gamma(z, a):
    return xlogy(a - 1.0, z) - z, (a - 1.0) / z - 1.0


def _invgamma(z, a):
    return -(a + 1.0) * np.log(z) - 1.0 / z, (1.0 / z - (a + 1.0)) / z


def _lognorm(z, s):
    log_z = np.log(z)
    return -log_z - 0.5 * (log_z / s) ** 2, -(1.0 + log_z / s**2) / z


def _beta(z, a, b):
    return xlogy(a - 1.0, z) + xlog1py(b - 1.0, -z), (a - 1.0) / z - (b - 1.0) / (1.0 - z)


def _uniform(z):
    return np.zeros_like(z), np.zeros_like(z)


def _weibull_min(z, c):
    power = z**c
    return xlogy(c - 1.0, z) - power, (c - 1.0) / z - c * power / z


#: scipy family name -> ``(z, *shape parameters) -> (log kernel, d log kernel / dz)``.
_KERNELS = {"norm": _norm, "halfnorm": _norm, "truncnorm": _norm, "cauchy": _cauchy, "halfcauchy": _cauchy,
            "t": _student_t, "laplace": _laplace, "logistic": _logistic, "expon": _expon, "gamma": _gamma,
            "invgamma": _invgamma, "lognorm": _lognorm, "beta": _beta, "uniform": _uniform,
            "weibull_min": _weibull_min}
# Shape parameters of a family that its kernel does not take (they only set the support and the constant).
_SUPPORT_ONLY = {"truncnorm"}


def _frozen_parameters(dist):
    """``(shape parameters, loc, scale)`` of a frozen univariate distribution, from its public ``args``/``kwds``."""
    names = [s.strip() for s in (dist.dist.shapes or "").split(",") if s.strip()] + ["loc", "scale"]
    values = dict(zip(names, dist.args))
    values.update(dist.kwds)
    shapes = tuple(np.asarray(values[name], dtype=float) for name in names[:-2])
    return shapes, np.asarray(values.get("loc", 0.0), dtype=float), np.asarray(values.get("scale", 1.0), dtype=float)


def _flat(value, shape):
    return np.ascontiguousarray(np.broadcast_to(np.asarray(value, dtype=float), shape).reshape(-1))


def _check_broadcast(name, parameter_shape, shape):
    try:
        fits = np.broadcast_shapes(parameter_shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"prior {name!r}: its distribution's parameters have shape {parameter_shape}, which does "
                         f"not broadcast to the parameter's shape {tuple(shape)}")


class UnivariatePrior:
    """A block of independent elements under one continuous univariate ``scipy.stats`` distribution.

    Parameters
    ----------
    name : str
    dist : frozen scipy.stats distribution (continuous, univariate)
        Its parameters broadcast to ``shape``.
    shape : tuple of int
    """

    def __init__(self, name, dist, shape):
        self.name, self.dist, self.shape = name, dist, tuple(shape)
        self.size = math.prod(self.shape)
        shapes, loc, scale = _frozen_parameters(dist)
        _check_broadcast(name, np.broadcast_shapes(loc.shape, scale.shape, *(s.shape for s in shapes)), self.shape)
        lower, upper = dist.support()
        self.transform = transform_for_support(_flat(lower, self.shape), _flat(upper, self.shape))
        family = dist.dist.name
        self.family = family if family in _KERNELS else None
        self.loc, self.scale = _flat(loc, self.shape), _flat(scale, self.shape)
        self.kernel_shapes = () if family in _SUPPORT_ONLY else tuple(_flat(s, self.shape) for s in shapes)
        if self.family is not None:
            # The normalising constant, once, from scipy at an interior point of every element.
            x0 = _flat(dist.median(), self.shape)
            log_kernel, _ = _KERNELS[self.family]((x0 - self.loc) / self.scale, *self.kernel_shapes)
            self.log_constant = float(np.sum(_flat(dist.logpdf(x0.reshape(self.shape)), self.shape) - log_kernel))

    def sample(self, rng, n_samples):
        """``(n_samples, size)`` unconstrained draws from the prior."""
        x = np.asarray(self.dist.rvs(size=(n_samples, *self.shape), random_state=rng), dtype=float)
        return self.unconstrain(x)

    def constrain(self, u):
        """Natural values ``(n_particles, *shape)`` of unconstrained ``u`` ``(n_particles, size)``."""
        return self.transform.forward(u).reshape(len(u), *self.shape)

    def unconstrain(self, x):
        """Unconstrained ``(n_particles, size)`` of natural values ``(n_particles, *shape)``."""
        x = np.asarray(x, dtype=float)
        return self.transform.inverse(x.reshape(len(x), self.size))

    def log_prior(self, u):
        """Log density of ``u`` (with the log-Jacobian), ``(n_particles,)``."""
        x = self.transform.forward(u)
        if self.family is None:
            log_density = np.sum(self.dist.logpdf(x.reshape(len(u), *self.shape)).reshape(len(u), -1), axis=1)
        else:
            log_kernel, _ = _KERNELS[self.family]((x - self.loc) / self.scale, *self.kernel_shapes)
            log_density = np.sum(log_kernel, axis=1) + self.log_constant
        if self.transform.kind == "real":  # no Jacobian (the samplers ask at every step: skip the zeros)
            return log_density
        return log_density + np.sum(self.transform.log_det(u), axis=1)

    def grad_log_prior(self, u):
        """Gradient of :meth:`log_prior`, ``(n_particles, size)``."""
        if self.family is None:
            return self._numeric_grad_log_density(u) + self.transform.grad_log_det(u)
        x = self.transform.forward(u)
        _, score = _KERNELS[self.family]((x - self.loc) / self.scale, *self.kernel_shapes)
        if self.transform.kind == "real":
            return score / self.scale
        return score / self.scale * self.transform.derivative(u) + self.transform.grad_log_det(u)

    def _numeric_grad_log_density(self, u):
        """Central differences of ``logpdf(forward(u))`` elementwise (the elements are independent): one scipy call
        on both shifted arrays, staying inside the support since the steps are taken in ``u``."""
        step = 1e-5 * np.maximum(np.abs(u), 1.0)
        shifted = self.transform.forward(np.stack([u + step, u - step]))
        values = self.dist.logpdf(shifted.reshape(2, len(u), *self.shape)).reshape(2, len(u), self.size)
        return (values[0] - values[1]) / (2.0 * step)

    def pullback(self, u, grad_x):
        """A gradient in the natural values ``(n_particles, *shape)`` as one in ``u`` ``(n_particles, size)``."""
        grad_u = np.asarray(grad_x, dtype=float).reshape(len(u), self.size)
        return grad_u if self.transform.kind == "real" else grad_u * self.transform.derivative(u)

    def prior_transform(self, cube):
        """Unconstrained ``(n_particles, size)`` of unit-cube points ``(n_particles, size)``: each element's inverse
        CDF, then the map to ``u``."""
        x = self.dist.ppf(np.asarray(cube, dtype=float).reshape(len(cube), *self.shape))
        return self.transform.inverse(np.asarray(x, dtype=float).reshape(len(cube), self.size))

    def prior_cdf(self, u):
        """Unit-cube points of unconstrained ``u``, the inverse of :meth:`prior_transform`."""
        x = self.transform.forward(u).reshape(len(u), *self.shape)
        return np.asarray(self.dist.cdf(x), dtype=float).reshape(len(u), self.size)


class MultivariateNormalPrior:
    """A block whose last axis is ``scipy.stats.multivariate_normal(mean, cov)`` (leading axes independent copies).

    Unconstrained: the natural values are the coordinates.
    """

    def __init__(self, name, dist, shape):
        self.name, self.dist, self.shape = name, dist, tuple(shape)
        self.mean = np.asarray(dist.mean, dtype=float)
        dim = len(self.mean)
        if not self.shape or self.shape[-1] != dim:
            raise ValueError(f"prior {name!r}: a multivariate normal of dimension {dim} needs a shape ending in "
                             f"{dim}, got {self.shape}")
        self.size = math.prod(self.shape)
        cov = frozen_covariance(dist)
        chol = self.chol = np.linalg.cholesky(cov)
        self.precision = np.linalg.inv(cov)
        self.log_normaliser = -0.5 * dim * np.log(2.0 * np.pi) - float(np.sum(np.log(np.diag(chol))))
        self.n_copies = self.size // dim

    def sample(self, rng, n_samples):
        x = self.dist.rvs(size=n_samples * self.n_copies, random_state=rng)
        return np.asarray(x, dtype=float).reshape(n_samples, self.size)

    def constrain(self, u):
        return u.reshape(len(u), *self.shape)

    def unconstrain(self, x):
        x = np.asarray(x, dtype=float)
        return x.reshape(len(x), self.size)

    def _centred(self, u):
        return u.reshape(len(u), self.n_copies, -1) - self.mean

    def log_prior(self, u):
        centred = self._centred(u)
        quadratic = np.einsum("pci,ij,pcj->p", centred, self.precision, centred)
        return -0.5 * quadratic + self.n_copies * self.log_normaliser

    def grad_log_prior(self, u):
        return -(self._centred(u) @ self.precision).reshape(len(u), self.size)

    def pullback(self, u, grad_x):
        return np.asarray(grad_x, dtype=float).reshape(len(u), self.size)

    def prior_transform(self, cube):
        """``mean + L z`` with ``z`` the standard normal quantiles of the unit-cube points (``L`` the covariance's
        Cholesky factor): the Rosenblatt transform of each copy."""
        z = ndtri(np.asarray(cube, dtype=float).reshape(len(cube), self.n_copies, -1))
        return (self.mean + z @ self.chol.T).reshape(len(cube), self.size)

    def prior_cdf(self, u):
        """Unit-cube points of ``u``, the inverse of :meth:`prior_transform`."""
        centred = self._centred(u).reshape(-1, len(self.mean))
        z = solve_triangular(self.chol, centred.T, lower=True).T
        return ndtr(z).reshape(len(u), self.size)


class DirichletPrior:
    """A block whose last axis is ``scipy.stats.dirichlet(alpha)`` (leading axes independent copies).

    ``K - 1`` unconstrained coordinates per copy map to the simplex by ``x = softmax([u, 0])``; with the
    log-Jacobian ``sum_k log x_k`` the log density of ``u`` is ``sum_k alpha_k log x_k - log B(alpha)``.
    """

    def __init__(self, name, dist, shape):
        self.name, self.dist, self.shape = name, dist, tuple(shape)
        self.alpha = np.asarray(dist.alpha, dtype=float)
        n_components = len(self.alpha)
        if not self.shape or self.shape[-1] != n_components:
            raise ValueError(f"prior {name!r}: a Dirichlet over {n_components} components needs a shape ending in "
                             f"{n_components}, got {self.shape}")
        self.n_copies = math.prod(self.shape[:-1])
        self.size = self.n_copies * (n_components - 1)
        self.log_beta = float(np.sum(gammaln(self.alpha)) - gammaln(np.sum(self.alpha)))

    def _logits(self, u):
        logits = np.zeros((len(u), self.n_copies, len(self.alpha)))
        logits[:, :, :-1] = u.reshape(len(u), self.n_copies, -1)
        return logits

    def sample(self, rng, n_samples):
        x = self.dist.rvs(size=n_samples * self.n_copies, random_state=rng)
        return self.unconstrain(np.asarray(x, dtype=float).reshape(n_samples, *self.shape))

    def constrain(self, u):
        return softmax(self._logits(u), axis=2).reshape(len(u), *self.shape)

    def unconstrain(self, x):
        log_x = np.log(np.maximum(np.asarray(x, dtype=float), np.finfo(float).tiny))
        log_x = log_x.reshape(len(log_x), self.n_copies, -1)
        return (log_x[:, :, :-1] - log_x[:, :, -1:]).reshape(len(log_x), self.size)

    def log_prior(self, u):
        log_x = log_softmax(self._logits(u), axis=2)
        return np.einsum("pck,k->p", log_x, self.alpha) - self.n_copies * self.log_beta

    def grad_log_prior(self, u):
        x = softmax(self._logits(u), axis=2)
        return (self.alpha[:-1] - np.sum(self.alpha) * x[:, :, :-1]).reshape(len(u), self.size)

    def pullback(self, u, grad_x):
        # dx_k/du_j = x_k (delta_kj - x_j), so the pulled-back gradient is x_j (g_j - g . x).
        x = softmax(self._logits(u), axis=2)
        grad_x = np.asarray(grad_x, dtype=float).reshape(x.shape)
        inner = np.sum(grad_x * x, axis=2, keepdims=True)
        return (x[:, :, :-1] * (grad_x[:, :, :-1] - inner)).reshape(len(u), self.size)


def _natural_shape(dist):
    """The shape a distribution gives a parameter when none is declared."""
    if isinstance(dist, _MVN_FROZEN):
        return (len(np.asarray(dist.mean)),)
    if isinstance(dist, _DIRICHLET_FROZEN):
        return (len(np.asarray(dist.alpha)),)
    shapes, loc, scale = _frozen_parameters(dist)
    return np.broadcast_shapes(loc.shape, scale.shape, *(s.shape for s in shapes))


def _check_distribution(name, dist):
    if isinstance(dist, (stats.rv_continuous, stats.rv_discrete)):
        raise TypeError(f"prior {name!r} is the distribution family scipy.stats.{dist.name}, not a distribution: "
                        f"freeze it with its parameters, e.g. scipy.stats.{dist.name}(...)")
    if isinstance(dist, (_MVN_FROZEN, _DIRICHLET_FROZEN)):
        return
    family = getattr(dist, "dist", None)
    if isinstance(family, stats.rv_discrete):
        raise TypeError(f"prior {name!r} is the discrete distribution scipy.stats.{family.name}: gradient-based "
                        "samplers need continuous parameters (sum a discrete parameter out in the likelihood)")
    if not isinstance(family, stats.rv_continuous):
        raise TypeError(f"prior {name!r} must be {_SUPPORTED}; got {type(dist).__name__} ({dist!r:.80})")


def _check_shape(name, shape):
    shape = (shape,) if isinstance(shape, (int, np.integer, str)) else shape
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"prior {name!r}: a shape must be an int, a dimension name or a tuple of them, "
                        f"got {shape!r}") from None
    for size in shape:
        if isinstance(size, str) and size in DIMENSION_NAMES:
            continue
        if isinstance(size, (str, bool)) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"prior {name!r}: each size in a shape must be a positive int or one of "
                             f"{DIMENSION_NAMES}, got {size!r} in {shape!r}")
    return tuple(s if isinstance(s, str) else int(s) for s in shape)


def parse_prior(name, spec):
    """``(distribution, shape)`` of one entry of ``make_model``'s ``priors``, checked.

    ``spec`` is a frozen distribution (shape: the distribution's own) or a tuple ``(distribution, shape)`` whose
    shape is an int, a name from :data:`DIMENSION_NAMES`, or a tuple of them.

    Examples
    --------
    >>> from scipy import stats
    >>> from evidence_select.models._priors import parse_prior
    >>> parse_prior("w", (stats.norm(0, 1), "n_features"))[1]
    ('n_features',)
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"prior names must be identifiers (they key the params dict), got {name!r}")
    if isinstance(spec, tuple):
        if len(spec) != 2:
            raise TypeError(f"prior {name!r}: a tuple must be (distribution, shape), got {len(spec)} items")
        dist, shape = spec
        _check_distribution(name, dist)
        return dist, _check_shape(name, shape)
    _check_distribution(name, spec)
    return spec, _natural_shape(spec)


def prior_block(name, dist, shape):
    """The block of a checked prior with a concrete shape (no dimension names left)."""
    if isinstance(dist, _MVN_FROZEN):
        return MultivariateNormalPrior(name, dist, shape)
    if isinstance(dist, _DIRICHLET_FROZEN):
        return DirichletPrior(name, dist, shape)
    return UnivariatePrior(name, dist, shape)


def frozen_covariance(dist):
    """The covariance matrix of a frozen ``scipy.stats.multivariate_normal`` (``cov_object``: scipy 1.10 has no
    ``cov`` attribute on the frozen distribution)."""
    return np.asarray(dist.cov_object.covariance, dtype=float)
