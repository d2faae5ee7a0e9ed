"""make_model: a protocol model from a per-datum log-likelihood function and ``scipy.stats`` priors.

The user writes the log-likelihood of the rows in the natural parameters (a dict of named arrays) and gives each
parameter a prior; :class:`CustomModel` does the rest of the :class:`~evidence_select.models.Model` protocol: the map
of each parameter to an unconstrained block of ``theta`` and its log-Jacobian (:mod:`._priors`), prior draws, the
prior's gradient, and the likelihood's gradient from one of three sources: the user's own, JAX's automatic
differentiation (:mod:`._jax`), or central finite differences (with a :class:`FiniteDifferenceWarning` naming their
cost).
"""

import contextlib
import sys
from collections.abc import Mapping

import numpy as np

from ..utils._warnings import warn
from ._jax import float64_context, jax_installed, jax_per_datum, jax_weighted_grad
from ._priors import DIMENSION_NAMES, frozen_covariance, parse_prior, prior_block
from ._protocol import Model, finite_difference_gradient, weighted_total

__all__ = ["CustomModel", "FiniteDifferenceWarning", "make_model"]

GRADIENT_OPTIONS = ("auto", "jax", "finite")


class FiniteDifferenceWarning(UserWarning):
    """A model's likelihood gradient comes from central finite differences.

    Each gradient then costs ``2 * n_params`` evaluations of the log-likelihood
    matrix (an analytic or JAX gradient costs about one), and the samplers ask
    for one at every move. :func:`make_model` raises it when no gradient was
    given and JAX is not installed, or when the log-likelihood does not run
    under JAX; pass ``gradient=...``, or install JAX and write the
    log-likelihood with ``jax.numpy``.

    Examples
    --------
    >>> import warnings
    >>> from scipy import stats
    >>> from evidence_select.models import FiniteDifferenceWarning, make_model
    >>> def log_lik(params, X, y):
    ...     return -0.5 * (y - params["mu"]) ** 2
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     model = make_model(log_lik, {"mu": stats.norm(0, 1)}, gradient="finite")
    >>> caught   # asked for explicitly: no warning
    []
    >>> issubclass(FiniteDifferenceWarning, UserWarning)
    True
    """


def _name(fn):
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _describe(dist):
    """A short, stable description of a frozen distribution (its family and parameters)."""
    family = getattr(getattr(dist, "dist", None), "name", None)
    if family is not None:
        args = [np.asarray(a).tolist() for a in dist.args] + [f"{k}={np.asarray(v).tolist()}"
                                                              for k, v in sorted(dist.kwds.items())]
        return f"{family}({', '.join(map(str, args))})"
    if hasattr(dist, "alpha"):
        return f"dirichlet({np.asarray(dist.alpha).tolist()})"
    return f"multivariate_normal(mean={np.asarray(dist.mean).tolist()}, cov={frozen_covariance(dist).tolist()})"


def _concrete_shape(name, shape, dims):
    missing = [size for size in shape if isinstance(size, str) and size not in dims]
    if missing:
        raise ValueError(f"prior {name!r} has shape {shape}: {missing[0]} is known only from the data; resolve the "
                         f"model with model.resolve({missing[0]}=...) or fit it in an evidence estimator "
                         "(EvidenceRegressor, EvidenceClassifier, EvidenceDensityEstimator), which does")
    return tuple(dims[size] if isinstance(size, str) else size for size in shape)


class CustomModel(Model):
    """A model built by :func:`make_model` (see there for the parameters).

    Its parameters are named arrays (``parameter_shapes``), laid out in ``theta`` in the order of the priors, each
    mapped to an unconstrained block by its prior's support. A model whose prior shapes use a dimension name
    (``"n_features"``, ``"n_classes"``) is a template until :meth:`resolve` gives the sizes; the evidence
    estimators resolve it from the data.

    Attributes
    ----------
    log_likelihood_fn : callable
    priors : dict of str to (distribution, shape)
    gradient : callable or {"auto", "jax", "finite"}
    mean_fn, variance_fn : callable or None
    vectorized : bool
    is_density_model : bool
    dims : dict
        The resolved dimension names (empty for a template).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from evidence_select.models import make_model
    >>> def log_lik(params, X, y):
    ...     return stats.norm.logpdf(y, X @ params["w"], params["sigma"])
    >>> template = make_model(log_lik, {"w": (stats.norm(0, 1), "n_features"), "sigma": stats.halfnorm(0, 1)},
    ...                       gradient="finite")
    >>> model = template.resolve(n_features=3)
    >>> model.n_params, model.parameter_shapes
    (4, {'w': (3,), 'sigma': ()})
    >>> params = model.unpack(model.sample_prior(np.random.default_rng(0), 5))
    >>> params["w"].shape, bool(np.all(params["sigma"] > 0))
    ((5, 3), True)
    """

    def __init__(self, log_likelihood_fn, priors, *, gradient="auto", mean_fn=None, variance_fn=None,
                 vectorized=False, density=False, dims=None, method=None):
        self.log_likelihood_fn = log_likelihood_fn
        self.priors = dict(priors)
        self.gradient = gradient
        self.mean_fn, self.variance_fn = mean_fn, variance_fn
        self.vectorized, self.is_density_model = bool(vectorized), bool(density)
        self.dims = dict(dims or {})
        self._method = method  # "user", "jax" or "finite"; None: "auto", decided on first use (tries JAX)
        symbolic = any(isinstance(s, str) for _, shape in self.priors.values() for s in shape)
        self._blocks = None if symbolic and not self.dims else [
            prior_block(name, dist, _concrete_shape(name, shape, self.dims)) for name, (dist, shape) in
            self.priors.items()]

    # -- identity, pickling --------------------------------------------------------------------------------
    def _key(self):
        priors = tuple((name, _describe(dist), shape) for name, (dist, shape) in self.priors.items())
        return (self.log_likelihood_fn, self.gradient, self.mean_fn, self.variance_fn, self.vectorized,
                self.is_density_model, priors, tuple(sorted(self.dims.items())))

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        priors = ", ".join(f"{name!r}: {_describe(dist)} x {shape}" for name, (dist, shape) in self.priors.items())
        gradient = self.gradient if isinstance(self.gradient, str) else _name(self.gradient)
        return f"CustomModel({_name(self.log_likelihood_fn)}, {{{priors}}}, gradient={gradient!r})"

    def __getstate__(self):
        state = dict(self.__dict__)
        if self.gradient == "auto" and state["_method"] != "finite":
            state["_method"] = None  # decided again where it is unpickled (JAX may be missing there)
        return state

    # -- shapes --------------------------------------------------------------------------------------------
    def resolve(self, **dims):
        """A copy of this model with the sizes of its named dimensions given (ignored where it uses none).

        A copy even when nothing changes: an estimator fits a copy, so that fitting never changes its ``model``
        parameter (the ``"auto"`` gradient is decided on first use).

        Parameters
        ----------
        **dims : int
            ``n_features`` (columns of ``X``) and, for a classifier, ``n_classes``.

        Returns
        -------
        model : CustomModel
        """
        unknown = set(dims) - set(DIMENSION_NAMES)
        if unknown:
            raise TypeError(f"resolve takes the dimensions {DIMENSION_NAMES}, got {sorted(unknown)}")
        used = {s for _, shape in self.priors.values() for s in shape if isinstance(s, str)}
        dims = {name: int(size) for name, size in dims.items() if name in used and size is not None}
        dims = {**self.dims, **dims}
        return CustomModel(self.log_likelihood_fn, self.priors, gradient=self.gradient, mean_fn=self.mean_fn,
                           variance_fn=self.variance_fn, vectorized=self.vectorized, density=self.is_density_model,
                           dims=dims, method=self._method)

    def _resolved_blocks(self):
        if self._blocks is None:
            for name, (_, shape) in self.priors.items():
                _concrete_shape(name, shape, self.dims)  # raises, naming the missing dimension
        return self._blocks

    @property
    def parameter_shapes(self):
        """``{name: shape}`` of the natural parameters, in their order in ``theta``."""
        return {block.name: block.shape for block in self._resolved_blocks()}

    @property
    def n_params(self):
        """Number of unconstrained coordinates (a simplex of ``K`` components takes ``K - 1``)."""
        return sum(block.size for block in self._resolved_blocks())

    def _split(self, theta):
        # Contiguous copies, not column views: numpy 1.x's SIMD exp of a column view can differ in the last bit
        # from that of the same values stored contiguously, varying from run to run, and a fit must give the same
        # bits in every process.
        theta = np.asarray(theta, dtype=float)
        blocks, start = [], 0
        for block in self._resolved_blocks():
            blocks.append(np.ascontiguousarray(theta[:, start:start + block.size]))
            start += block.size
        return blocks

    def unpack(self, theta):
        """Natural parameters ``{name: (n_particles, *shape)}`` of unconstrained ``theta`` ``(n_particles, n_params)``."""
        return {block.name: block.constrain(u) for block, u in zip(self._resolved_blocks(), self._split(theta))}

    def pack(self, params):
        """Unconstrained ``theta`` ``(n_particles, n_params)`` of natural parameters ``{name: (n_particles, *shape)}``."""
        return np.hstack([block.unconstrain(params[block.name]) for block in self._resolved_blocks()])

    # -- prior ---------------------------------------------------------------------------------------------
    def sample_prior(self, rng, n_samples):
        return np.hstack([block.sample(rng, n_samples) for block in self._resolved_blocks()])

    def log_prior(self, theta):
        return sum(block.log_prior(u) for block, u in zip(self._resolved_blocks(), self._split(theta)))

    def grad_log_prior(self, theta):
        return np.hstack([block.grad_log_prior(u) for block, u in zip(self._resolved_blocks(), self._split(theta))])

    def prior_transform(self, cube):
        """Parameters ``theta`` of unit-cube points ``(n_particles, n_params)``, block by block (each block's
        inverse CDF; nested sampling draws in this cube where it pays). Every prior but a Dirichlet has one."""
        return np.hstack([self._transformable(block).prior_transform(c)
                          for block, c in zip(self._resolved_blocks(), self._split(cube))])

    def prior_cdf(self, theta):
        """Unit-cube points of ``theta``, the inverse of :meth:`prior_transform`."""
        return np.hstack([self._transformable(block).prior_cdf(u)
                          for block, u in zip(self._resolved_blocks(), self._split(theta))])

    @staticmethod
    def _transformable(block):
        if not hasattr(block, "prior_transform"):
            raise TypeError(f"prior {block.name!r} ({type(block.dist).__name__}) has no transform from the unit cube")
        return block

    def capabilities(self):
        """The declared capabilities, with ``prior_transform`` only where every prior block has one."""
        declared = super().capabilities()
        return declared._replace(prior_transform=declared.prior_transform and all(
            hasattr(block, "prior_transform") for block in self._resolved_blocks()))

    # -- likelihood ----------------------------------------------------------------------------------------
    def _call(self, fn, params, X, y, *extra):
        """``fn`` on every particle's parameters, stacked on a first axis (one call when ``vectorized``)."""
        args = (X,) if self.is_density_model else (X, y)
        if self.vectorized:
            return fn(params, *args, *extra)
        n_particles = len(next(iter(params.values())))
        return [fn({k: v[i] for k, v in params.items()}, *args, *(e[i] for e in extra)) for i in range(n_particles)]

    def _eager_per_datum(self, params, X, y):
        with _float64_if_jax():
            out = self._call(self.log_likelihood_fn, params, X, y)
            log_lik = np.asarray(out if self.vectorized else np.stack([np.asarray(o) for o in out]), dtype=float)
        n_particles = len(next(iter(params.values())))
        if log_lik.shape != (n_particles, len(X)):
            got = log_lik.shape if self.vectorized else log_lik.shape[1:]
            want = (n_particles, len(X)) if self.vectorized else (len(X),)
            raise ValueError(f"the log-likelihood function {_name(self.log_likelihood_fn)} returned shape {got} for "
                             f"{len(X)} rows; it must return one value per row, shape {want}")
        return log_lik

    def _per_datum(self, params, X, y):
        if self._method_for(params, X, y) == "jax":
            return jax_per_datum(self.log_likelihood_fn, self.is_density_model, self.vectorized, params, X, y)
        return self._eager_per_datum(params, X, y)

    def _method_for(self, params, X, y):
        """The gradient's source; ``"auto"`` with JAX installed tries JAX on these inputs the first time."""
        if self._method is None:
            try:
                jax_per_datum(self.log_likelihood_fn, self.is_density_model, self.vectorized, params, X, y)
            except Exception as error:  # noqa: BLE001  (any failure under JAX: fall back to NumPy if that runs)
                self._eager_per_datum(params, X, y)  # a function broken in NumPy too raises its own error here
                self._method = "finite"
                first_line = (str(error).strip().splitlines() or [""])[0][:200]
                warn_finite_differences(self.log_likelihood_fn, self.n_params,
                                        f"it does not run under JAX ({type(error).__name__}: {first_line})")
            else:
                self._method = "jax"
        return self._method

    def log_likelihood(self, theta, X, y=None):
        X = np.asarray(X, dtype=float)
        return self._per_datum(self.unpack(theta), X, y)

    def _pullback(self, theta, grads):
        """Gradients ``{name: (n_particles, *shape)}`` in the natural parameters as ``(n_particles, n_params)``."""
        return np.hstack([block.pullback(u, grads[block.name])
                          for block, u in zip(self._resolved_blocks(), self._split(theta))])

    def _user_grad(self, params, X, y, weights):
        out = self._call(self.gradient, params, X, y, weights)
        shapes = self.parameter_shapes
        if not self.vectorized:
            out = {name: np.stack([np.asarray(o[name], dtype=float) for o in out]) if all(
                isinstance(o, Mapping) and name in o for o in out) else None for name in shapes}
        if not isinstance(out, Mapping) or set(out) != set(shapes) or any(v is None for v in out.values()):
            raise ValueError(f"the gradient function {_name(self.gradient)} must return a dict with one entry per "
                             f"parameter, {sorted(shapes)}; got {sorted(out) if isinstance(out, Mapping) else out!r}")
        n_particles = len(weights)
        grads = {}
        for name, shape in shapes.items():
            grads[name] = np.asarray(out[name], dtype=float)
            if grads[name].shape != (n_particles, *shape):
                got = grads[name].shape if self.vectorized else grads[name].shape[1:]
                want = (n_particles, *shape) if self.vectorized else shape
                raise ValueError(f"the gradient function {_name(self.gradient)} returned shape {got} for "
                                 f"{name!r}; expected {want}, the parameter's shape")
        return grads

    def grad_log_likelihood(self, theta, X, y, weights):
        X = np.asarray(X, dtype=float)
        weights = np.broadcast_to(np.asarray(weights, dtype=float), (len(theta), len(X)))
        params = self.unpack(theta)
        method = self._method_for(params, X, y)
        if method == "finite":
            return finite_difference_gradient(
                lambda t: weighted_total(self._eager_per_datum(self.unpack(t), X, y), weights), theta)
        if method == "jax":
            grads = jax_weighted_grad(self.log_likelihood_fn, self.is_density_model, self.vectorized, params, X, y,
                                      weights)
        else:
            grads = self._user_grad(params, X, y, weights)
        return self._pullback(theta, grads)

    def log_likelihood_and_grad(self, theta, X, y, weights):
        X = np.asarray(X, dtype=float)
        params = self.unpack(theta)
        if self._method_for(params, X, y) != "jax":
            return super().log_likelihood_and_grad(theta, X, y, weights)
        weights = np.broadcast_to(np.asarray(weights, dtype=float), (len(theta), len(X)))
        totals, grads = jax_weighted_grad(self.log_likelihood_fn, self.is_density_model, self.vectorized, params, X,
                                          y, weights, with_value=True)
        return totals, self._pullback(theta, grads)

    # -- predictions ---------------------------------------------------------------------------------------
    def _predictive(self, fn, what, theta, X):
        if fn is None:
            raise TypeError(f"this model has no {what}: pass make_model(..., {what}=...) to predict with it")
        X = np.asarray(X, dtype=float)
        params = self.unpack(theta)
        with _float64_if_jax():
            out = (fn(params, X) if self.vectorized
                   else np.stack([np.asarray(fn({k: v[i] for k, v in params.items()}, X)) for i in range(len(theta))]))
            out = np.asarray(out, dtype=float)
        if out.shape != (len(theta), len(X)):
            raise ValueError(f"the {what} function {_name(fn)} must return one value per row; got shape {out.shape} "
                             f"for {len(theta)} particles and {len(X)} rows")
        return out

    def predict_mean(self, theta, X):
        """``E[y | x, params]`` per particle and row, ``(n_particles, n_rows)``, from ``mean``."""
        return self._predictive(self.mean_fn, "mean", theta, X)

    def predict_variance(self, theta, X):
        """``Var[y | x, params]`` per particle and row, ``(n_particles, n_rows)``, from ``variance``."""
        return self._predictive(self.variance_fn, "variance", theta, X)


def _float64_if_jax():
    """JAX's float64 context when JAX is already imported (a function written with jax.numpy runs eagerly in it),
    else a null context: importing JAX for a NumPy function would cost a second or two."""
    return float64_context() if "jax" in sys.modules else contextlib.nullcontext()


def warn_finite_differences(fn, n_params, reason):
    """Raise the :class:`FiniteDifferenceWarning` of ``fn``, naming why and what it costs."""
    cost = f"2 x {n_params} = {2 * n_params}" if n_params is not None else "2 x n_params"
    warn(f"make_model: the gradient of {_name(fn)} comes from central finite differences because {reason}: each "
         f"gradient costs {cost} evaluations of the log-likelihood (an analytic or JAX gradient costs about one), "
         "at every sampler move. Pass gradient=<function>, or install JAX (pip install 'evidence-select[jax]') and "
         "write the log-likelihood with jax.numpy", FiniteDifferenceWarning)


def _check_callable(name, value, optional=True):
    if (value is None and optional) or callable(value):
        return
    raise TypeError(f"{name} must be a function{' or None' if optional else ''}, got {type(value).__name__}")


def _known_n_params(priors):
    """The number of unconstrained coordinates when no prior shape waits for the data, else None."""
    if any(isinstance(s, str) for _, shape in priors.values() for s in shape):
        return None
    return sum(prior_block(name, dist, shape).size for name, (dist, shape) in priors.items())


def make_model(log_likelihood, priors, *, gradient="auto", mean=None, variance=None, vectorized=False,
               density=False):
    """A model of the protocol from a per-datum log-likelihood and ``scipy.stats`` priors.

    Write the log-likelihood of the rows in the natural parameters, give each
    parameter a prior, and every evidence method (SGAIS, NS, AIS, bridge
    sampling) and the evidence estimators (:class:`~evidence_select.EvidenceRegressor`,
    :class:`~evidence_select.EvidenceClassifier`,
    :class:`~evidence_select.EvidenceDensityEstimator`) work on it. The map of
    each parameter to the real line (by its prior's support: identity, log,
    logit, additive log-ratio for a simplex) and its log-Jacobian are done here.

    Parameters
    ----------
    log_likelihood : callable
        ``log_likelihood(params, X, y)`` (``log_likelihood(params, X)`` with
        ``density=True``): the log-likelihood of each row, ``log p(y_j | x_j, params)``,
        shape ``(n_rows,)``. ``params`` is a dict of the named parameters, each
        an array of its prior's shape; ``X`` is ``(n_rows, n_features)`` and
        ``y`` ``(n_rows,)`` (class indices ``0..K-1`` in a classifier). It is
        called for one parameter set at a time, and the library vectorises it
        over the particles (with ``vectorized=True`` it is called once for all).
    priors : dict of str to distribution or (distribution, shape)
        One entry per parameter, in the order they take in ``theta``. A
        distribution is a frozen continuous ``scipy.stats`` distribution
        (``stats.norm(0, 1)``, ``stats.gamma(2.0)``, ``stats.beta(2, 2)``, ...;
        its parameters may be arrays), ``stats.multivariate_normal(mean, cov)``
        or ``stats.dirichlet(alpha)``. The shape is an int or a tuple; a size
        may be ``"n_features"`` (the columns of ``X``) or ``"n_classes"``,
        filled in from the data by the estimators (:meth:`CustomModel.resolve`).
        Without a shape a parameter takes its distribution's own (scalar for
        scalar parameters).
    gradient : callable or {"auto", "jax", "finite"}, default="auto"
        The likelihood's gradient in the natural parameters.
        ``gradient(params, X, y, weights)`` (``gradient(params, X, weights)``
        for a density) returns the gradient of ``sum_j weights[j] *
        log p(y_j | x_j, params)`` as a dict of arrays shaped like ``params``.
        ``"jax"``: automatic differentiation through JAX (``pip install
        'evidence-select[jax]'``); write ``log_likelihood`` with ``jax.numpy``.
        ``"finite"``: central finite differences, ``2 * n_params`` likelihood
        evaluations per gradient. ``"auto"``: JAX when it is installed and
        the function runs under it, else finite differences with a
        :class:`FiniteDifferenceWarning`.
    mean : callable, default=None
        ``mean(params, X)``: ``E[y_j | x_j, params]`` per row, for
        :meth:`EvidenceRegressor.predict <evidence_select.EvidenceRegressor.predict>`.
    variance : callable, default=None
        ``variance(params, X)``: ``Var[y_j | x_j, params]`` per row, for
        ``predict(X, return_std=True)``.
    vectorized : bool, default=False
        The functions take all particles at once: each entry of ``params``
        has a leading particle axis, ``(n_particles, *shape)``, ``weights`` is
        ``(n_particles, n_rows)``, and they return ``(n_particles, n_rows)``
        (the gradient ``(n_particles, *shape)`` per parameter). Much faster
        with NumPy, which otherwise runs once per particle.
    density : bool, default=False
        A model of ``X`` alone (no ``y``), as in
        :class:`~evidence_select.EvidenceDensityEstimator`.

    Returns
    -------
    model : CustomModel
        A :class:`~evidence_select.models.Model`; ``model.unpack(theta)`` gives
        the natural parameters of particles.

    Raises
    ------
    TypeError
        When a prior is not a frozen continuous ``scipy.stats`` distribution, or
        a function is not callable.
    ValueError
        For a malformed shape or an unknown ``gradient`` option. The functions'
        outputs (shapes, NaN) are checked where they first meet data: by
        :func:`check_model`, and by the estimators before any particle moves.

    See Also
    --------
    check_model : Check the model on a few rows.
    evidence_select.EvidenceRegressor : Its online estimator.

    Notes
    -----
    The log prior of ``theta`` is the priors' log densities at the natural
    values plus the log-Jacobian of the map, so the evidence is that of the
    model as written. Common families (normal, half-normal, Student-t, Cauchy,
    Laplace, logistic, exponential, gamma, inverse gamma, log-normal, beta,
    uniform, truncated normal, Weibull) use closed forms of the log density
    and its derivative (normalised by scipy once); others call scipy's
    ``logpdf``, which is slower.

    Examples
    --------
    Poisson regression with a log link, with its gradient:

    >>> import numpy as np
    >>> from scipy import stats
    >>> from scipy.special import gammaln
    >>> from evidence_select.models import check_model, make_model
    >>> def log_lik(params, X, y):
    ...     eta = X @ params["w"] + params["b"]
    ...     return y * eta - np.exp(eta) - gammaln(y + 1)
    >>> def grad(params, X, y, weights):
    ...     residual = weights * (y - np.exp(X @ params["w"] + params["b"]))
    ...     return {"w": residual @ X, "b": residual.sum()}
    >>> model = make_model(log_lik, {"w": (stats.norm(0, 1), 2), "b": stats.norm(0, 1)}, gradient=grad)
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = rng.poisson(np.exp(X @ [0.5, -0.3] + 0.2)).astype(float)
    >>> check_model(model, X[:20], y[:20])
    >>> from evidence_select import log_evidence
    >>> result = log_evidence(model, X, y, method="sgais", random_state=0)
    >>> bool(np.isfinite(result.log_evidence))
    True
    """
    _check_callable("log_likelihood", log_likelihood, optional=False)
    if not isinstance(priors, Mapping) or not priors:
        raise TypeError(f"priors must be a non-empty dict of parameter name to scipy.stats distribution, got "
                        f"{type(priors).__name__}")
    parsed = {name: parse_prior(name, spec) for name, spec in priors.items()}
    for name, fn in (("mean", mean), ("variance", variance)):
        _check_callable(name, fn)
    if not callable(gradient) and gradient not in GRADIENT_OPTIONS:
        raise ValueError(f"gradient must be a function or one of {GRADIENT_OPTIONS}, got {gradient!r}")
    n_params = _known_n_params(parsed)  # builds every concrete block: a mismatched shape fails here
    if callable(gradient):
        method = "user"
    elif gradient == "jax" and not jax_installed():
        raise ImportError("gradient='jax' needs JAX: pip install 'evidence-select[jax]' (or pip install jax)")
    elif gradient == "auto" and not jax_installed():
        method = "finite"
        warn_finite_differences(log_likelihood, n_params, "no gradient was given and JAX is not installed")
    else:
        method = {"jax": "jax", "finite": "finite"}.get(gradient)
    return CustomModel(log_likelihood, parsed, gradient=gradient, mean_fn=mean, variance_fn=variance,
                       vectorized=vectorized, density=density, method=method)

