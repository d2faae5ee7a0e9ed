"""Hard calibration targets with evidence known by construction, in any dimension.

Each target is a :class:`Model` *without data*: its likelihood ``L(theta)`` is a
fixed function of the parameters. By the library's no-data rule (see
:func:`~evidence_select.log_evidence`) such a model is evaluated on one row with
no features, ``X = np.empty((1, 0))``, and ``y = None``; ``log_likelihood``
returns ``log L(theta)`` as that row's column. On any other ``X`` the total is
split evenly over the rows, so ``log_likelihood_sum`` is ``log L`` whatever ``X``
is (the convention of :mod:`evidence_select.testing._targets`).

The geometry is what samplers find hard (heavy tails, many modes, a funnel's
neck, curved ridges, long-range correlation along a chain), while the evidence
stays a 1-d integral (to a power) computed here by adaptive quadrature or a
transfer matrix. The tests check every exact value by a second method.
"""

import numpy as np
from scipy.special import expit, gammaln
from scipy.stats import special_ortho_group

from ..utils._quadrature import log_quad
from ..models._protocol import Model
from ._targets import BoxGaussianTarget, GaussianTarget, _GaussianPriorMixin

__all__ = ["BananaTarget", "BoxBananaTarget", "BoxProductTarget", "FunnelTarget", "ProductTarget", "RingChainTarget",
           "StudentTFactor", "TwoPeakFactor", "ill_conditioned_gaussian_target"]

_LOG_2PI = np.log(2.0 * np.pi)


def _n_rows(X):
    return 1 if X is None else len(X)


def _gaussian_logpdf(x, mean, var):
    return -0.5 * ((x - mean) ** 2 / var + np.log(var) + _LOG_2PI)


class _ThetaTarget(Model):
    """A likelihood that is a function of ``theta`` alone; subclasses give ``_log_lik_and_grad``."""

    def log_likelihood(self, theta, X=None, y=None):
        total, _ = self._log_lik_and_grad(np.asarray(theta, dtype=float))
        n_batch = _n_rows(X)
        return np.repeat(total[:, None] / n_batch, n_batch, axis=1)

    def grad_log_likelihood(self, theta, X, y, weights):
        theta = np.asarray(theta, dtype=float)
        return _mean_weight(weights, theta, X)[:, None] * self._log_lik_and_grad(theta)[1]

    def log_likelihood_sum(self, theta, X=None, y=None):
        return self._log_lik_and_grad(np.asarray(theta, dtype=float))[0]

    def log_likelihood_and_grad(self, theta, X, y, weights):
        theta = np.asarray(theta, dtype=float)
        total, grad = self._log_lik_and_grad(theta)
        mean_weight = _mean_weight(weights, theta, X)
        return mean_weight * total, mean_weight[:, None] * grad


def _mean_weight(weights, theta, X):
    """Each particle's mean weight over the rows: the likelihood, a function of theta alone, is spread evenly over them."""
    n_batch = _n_rows(X)
    return np.broadcast_to(weights, (len(theta), n_batch)).sum(axis=1) / n_batch


def _check_dim(n_params, minimum=1, even=False):
    d = int(n_params)
    if d < minimum or (even and d % 2):
        raise ValueError(f"n_params must be an {'even ' if even else ''}int >= {minimum}, got {n_params!r}")
    return d


def _check_positive(**values):
    for name, value in values.items():
        if not float(value) > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


# -- one-dimensional factors -----------------------------------------------------------------
class StudentTFactor:
    """Student-t density in one coordinate: ``t_df((x - loc) / scale) / scale``.

    Parameters
    ----------
    df : float, default=1.5
        Degrees of freedom (small = heavy tails).
    loc : float, default=0.0
    scale : float, default=0.3

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> f = StudentTFactor(df=2.0, loc=1.0, scale=0.5)
    >>> bool(np.isclose(f.log_pdf(np.array([0.3]))[0], stats.t(2.0, 1.0, 0.5).logpdf(0.3)))
    True
    """

    def __init__(self, df=1.5, loc=0.0, scale=0.3):
        _check_positive(df=df, scale=scale)
        self.df, self.loc, self.scale = float(df), float(loc), float(scale)

    def __repr__(self):
        return f"StudentTFactor(df={self.df!r}, loc={self.loc!r}, scale={self.scale!r})"

    @property
    def peaks(self):
        """Locations of the modes (quadrature break points)."""
        return [self.loc]

    def log_pdf(self, x):
        """Log density at ``x`` (any shape)."""
        nu, z = self.df, (x - self.loc) / self.scale
        log_norm = gammaln(0.5 * (nu + 1)) - gammaln(0.5 * nu) - 0.5 * np.log(nu * np.pi) - np.log(self.scale)
        return log_norm - 0.5 * (nu + 1) * np.log1p(z**2 / nu)

    def grad_log_pdf(self, x):
        """Derivative of :meth:`log_pdf`."""
        nu, z = self.df, (x - self.loc) / self.scale
        return -(nu + 1) * z / (self.scale * (nu + z**2))


class TwoPeakFactor:
    """Two-peak density in one coordinate: ``w f(x - separation/2) + (1 - w) f(x + separation/2)``.

    ``f`` is a Gaussian of standard deviation ``scale``, or a Student-t of that
    scale with ``df`` degrees of freedom (heavy-tailed peaks).

    Parameters
    ----------
    separation : float, default=3.0
        Distance between the peaks.
    scale : float, default=0.4
    weight : float, default=0.3
        Weight ``w`` of the peak at ``+separation/2``.
    df : float or None, default=None
        None for Gaussian peaks.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.integrate import trapezoid
    >>> f = TwoPeakFactor()
    >>> x = np.linspace(-30, 30, 200001)
    >>> round(float(trapezoid(np.exp(f.log_pdf(x)), x)), 6)
    1.0
    """

    def __init__(self, separation=3.0, scale=0.4, weight=0.3, df=None):
        _check_positive(separation=separation, scale=scale)
        if not 0.0 < weight < 1.0:
            raise ValueError(f"weight must be in (0, 1), got {weight!r}")
        self.separation, self.scale, self.weight = float(separation), float(scale), float(weight)
        self.df = None if df is None else float(df)
        self._peaks = [StudentTFactor(self.df, c, self.scale) for c in self.peaks] if self.df else None

    def __repr__(self):
        return (f"TwoPeakFactor(separation={self.separation!r}, scale={self.scale!r}, weight={self.weight!r}, "
                f"df={self.df!r})")

    @property
    def peaks(self):
        """The two peak locations ``(+separation/2, -separation/2)``."""
        return [0.5 * self.separation, -0.5 * self.separation]

    def _terms(self, x):
        log_w = np.log([self.weight, 1.0 - self.weight])
        if self._peaks is None:
            logs = [_gaussian_logpdf(x, c, self.scale**2) for c in self.peaks]
            grads = [-(x - c) / self.scale**2 for c in self.peaks]
        else:
            logs = [p.log_pdf(x) for p in self._peaks]
            grads = [p.grad_log_pdf(x) for p in self._peaks]
        return logs[0] + log_w[0], logs[1] + log_w[1], grads

    def log_pdf(self, x):
        """Log density at ``x`` (any shape)."""
        first, second, _ = self._terms(x)
        return np.logaddexp(first, second)

    def grad_log_pdf(self, x):
        """Derivative of :meth:`log_pdf` (responsibility-weighted peak gradients)."""
        first, second, grads = self._terms(x)
        resp = expit(first - second)
        return resp * grads[0] + (1.0 - resp) * grads[1]


# -- products of one-dimensional factors -----------------------------------------------------
class ProductTarget(_GaussianPriorMixin, _ThetaTarget):
    """Likelihood ``prod_j f(theta_j)`` under the prior ``N(0, prior_scale^2 I)``.

    With a heavy-tailed or two-peak ``f`` the posterior has heavy tails or
    ``2^n_params`` modes; the evidence is ``z^n_params`` with ``z`` the 1-d
    integral of ``N(x; 0, prior_scale^2) f(x)``, by adaptive quadrature.

    Parameters
    ----------
    factor : StudentTFactor or TwoPeakFactor
        The 1-d likelihood factor.
    n_params : int
    prior_scale : float, default=3.0

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> target = ProductTarget(TwoPeakFactor(), 3)
    >>> # Gaussian peaks: the 1-d integral is a mixture of Gaussian convolutions.
    >>> z1 = sum(w * stats.norm(0, np.hypot(0.4, 3.0)).pdf(c) for w, c in zip([0.3, 0.7], [1.5, -1.5]))
    >>> bool(np.isclose(target.exact_log_evidence(), 3 * np.log(z1), atol=1e-9))
    True
    """

    def __init__(self, factor, n_params, *, prior_scale=3.0):
        _check_positive(prior_scale=prior_scale)
        self.factor = factor
        self.dim = _check_dim(n_params)
        self.prior_scale = float(prior_scale)

    @property
    def n_params(self):
        return self.dim

    def _log_lik_and_grad(self, theta):
        return self.factor.log_pdf(theta).sum(axis=1), self.factor.grad_log_pdf(theta)

    def log_evidence_1d(self):
        """``log z``: the evidence of one coordinate."""
        p = self.prior_scale
        reach = 40.0 * p
        return log_quad(lambda x: _gaussian_logpdf(x, 0.0, p**2) + self.factor.log_pdf(x), -reach, reach,
                        points=self.factor.peaks)

    def exact_log_evidence(self, X=None, y=None):
        """``n_params * log z`` (``X`` and ``y`` are ignored)."""
        return float(self.dim * self.log_evidence_1d())


def _through_box(target, theta, log_lik_and_grad_x):
    """A likelihood of the box coordinates ``x = target.to_box(theta)`` and its gradient in ``theta``.

    ``log_lik_and_grad_x(x)`` gives the log-likelihood and its gradient in ``x``; the chain rule multiplies the
    latter by ``dx/dtheta = 2 half_width sigmoid(theta) (1 - sigmoid(theta))``.
    """
    sig = expit(theta)
    log_f, grad_x = log_lik_and_grad_x(target.to_box(theta))
    return log_f, grad_x * (2.0 * target.half_width * sig * (1.0 - sig))


class BoxProductTarget(_ThetaTarget):
    """Likelihood ``prod_j f(x_j)`` under a uniform prior on the box ``[-half_width, half_width]^d``.

    The box is reached through the sigmoid map ``x = half_width (2 sigmoid(u) - 1)``
    of the unconstrained ``u``, whose prior density carries the log-Jacobian (a
    standard logistic per coordinate; see
    :class:`~evidence_select.testing._targets.BoxGaussianTarget`). The evidence is
    ``z^d`` with ``z`` the integral of ``f`` over ``[-half_width, half_width]``
    divided by the width.

    Parameters
    ----------
    factor : StudentTFactor or TwoPeakFactor
    n_params : int
    half_width : float, default=5.0

    Examples
    --------
    >>> target = BoxProductTarget(TwoPeakFactor(df=2.0), 4)
    >>> round(target.exact_log_evidence(), 4)
    -9.2436
    """

    sample_prior = BoxGaussianTarget.sample_prior
    log_prior = BoxGaussianTarget.log_prior
    grad_log_prior = BoxGaussianTarget.grad_log_prior
    prior_transform = BoxGaussianTarget.prior_transform
    prior_cdf = BoxGaussianTarget.prior_cdf
    to_box = BoxGaussianTarget.to_box

    def __init__(self, factor, n_params, *, half_width=5.0):
        _check_positive(half_width=half_width)
        self.factor = factor
        self.dim = _check_dim(n_params)
        self.half_width = float(half_width)

    @property
    def n_params(self):
        return self.dim

    def _log_lik_and_grad(self, theta):
        return _through_box(self, theta, lambda x: (self.factor.log_pdf(x).sum(axis=1), self.factor.grad_log_pdf(x)))

    def log_evidence_1d(self):
        """``log z``: the evidence of one coordinate."""
        a = self.half_width
        return log_quad(self.factor.log_pdf, -a, a, points=self.factor.peaks) - np.log(2.0 * a)

    def exact_log_evidence(self, X=None, y=None):
        """``n_params * log z`` (``X`` and ``y`` are ignored)."""
        return float(self.dim * self.log_evidence_1d())


# -- funnel ------------------------------------------------------------------------------------
class FunnelTarget(_GaussianPriorMixin, _ThetaTarget):
    """Neal's funnel as a likelihood: ``N(v; 0, scale_sd^2) prod_i N(x_i; 0, exp(v))``.

    ``theta = (v, x_1, ..., x_{d-1})`` under ``N(0, prior_scale^2 I)``. Integrating
    each ``x_i`` analytically leaves one integral over the scale variable,
    ``Z = int N(v; 0, prior_scale^2) N(v; 0, scale_sd^2) N(0; 0, prior_scale^2 + e^v)^(d-1) dv``.

    Parameters
    ----------
    n_params : int
        ``d >= 2``.
    scale_sd : float, default=3.0
        Standard deviation of the log variance ``v``.
    prior_scale : float, default=3.0

    Examples
    --------
    >>> round(FunnelTarget(2).exact_log_evidence(), 4)
    -4.5203
    """

    def __init__(self, n_params, *, scale_sd=3.0, prior_scale=3.0):
        _check_positive(scale_sd=scale_sd, prior_scale=prior_scale)
        self.dim = _check_dim(n_params, minimum=2)
        self.scale_sd = float(scale_sd)
        self.prior_scale = float(prior_scale)

    @property
    def n_params(self):
        return self.dim

    def _log_lik_and_grad(self, theta):
        v, x = theta[:, 0], theta[:, 1:]
        inv_var = np.exp(-v)[:, None]
        k = self.dim - 1
        log_lik = (_gaussian_logpdf(v, 0.0, self.scale_sd**2)
                   - 0.5 * (np.sum(x**2 * inv_var, axis=1) + k * (v + _LOG_2PI)))
        grad = np.empty_like(theta)
        grad[:, 0] = -v / self.scale_sd**2 - 0.5 * k + 0.5 * np.sum(x**2 * inv_var, axis=1)
        grad[:, 1:] = -x * inv_var
        return log_lik, grad

    def exact_log_evidence(self, X=None, y=None):
        """One quadrature over the scale variable ``v``."""
        p2, s2, k = self.prior_scale**2, self.scale_sd**2, self.dim - 1

        def log_integrand(v):
            return (_gaussian_logpdf(v, 0.0, p2) + _gaussian_logpdf(v, 0.0, s2)
                    - 0.5 * k * (np.logaddexp(np.log(p2), v) + _LOG_2PI))

        reach = 40.0 * min(self.prior_scale, self.scale_sd)
        return log_quad(log_integrand, -reach, reach, points=[0.0])


# -- curved (banana) pairs ---------------------------------------------------------------------
class BananaTarget(_GaussianPriorMixin, _ThetaTarget):
    """Rosenbrock-type pairs: ``N(a; 0, width^2) N(b; curvature (a^2 - width^2), thickness^2)`` per pair.

    ``theta`` is read as ``d / 2`` pairs ``(a, b)`` of the rotated coordinates
    ``phi = R^T theta``, with ``R`` a random rotation (``rotation_seed``) or the
    identity. The prior ``N(0, prior_scale^2 I)`` is isotropic, so the rotation
    does not change the evidence ``Z = z^(d/2)``, where ``b`` integrates
    analytically and ``a`` by quadrature:
    ``z = int N(a; 0, p^2) N(a; 0, width^2) N(curvature (a^2 - width^2); 0, p^2 + thickness^2) da``.

    Parameters
    ----------
    n_params : int
        Even dimension.
    curvature : float, default=1.0
    width : float, default=1.0
    thickness : float, default=0.1
    prior_scale : float, default=3.0
    rotation_seed : int or None, default=None
        Seed of the random rotation (:func:`scipy.stats.special_ortho_group`); None = no rotation.

    Examples
    --------
    >>> a, b = BananaTarget(4), BananaTarget(4, rotation_seed=0)
    >>> a.exact_log_evidence() == b.exact_log_evidence()
    True
    """

    def __init__(self, n_params, *, curvature=1.0, width=1.0, thickness=0.1, prior_scale=3.0, rotation_seed=None):
        _check_positive(width=width, thickness=thickness, prior_scale=prior_scale)
        self.dim = _check_dim(n_params, minimum=2, even=True)
        self.curvature, self.width, self.thickness = float(curvature), float(width), float(thickness)
        self.prior_scale = float(prior_scale)
        self.rotation_seed = rotation_seed
        self._rotation = (None if rotation_seed is None
                          else special_ortho_group.rvs(self.dim, random_state=int(rotation_seed)))

    @property
    def n_params(self):
        return self.dim

    def _log_lik_and_grad(self, theta):
        phi = theta if self._rotation is None else theta @ self._rotation
        a, b = phi[:, 0::2], phi[:, 1::2]
        centre = self.curvature * (a**2 - self.width**2)
        t2, w2 = self.thickness**2, self.width**2
        log_lik = np.sum(_gaussian_logpdf(a, 0.0, w2) + _gaussian_logpdf(b, centre, t2), axis=1)
        grad = np.empty_like(phi)
        grad[:, 1::2] = -(b - centre) / t2
        grad[:, 0::2] = -a / w2 + (b - centre) / t2 * 2.0 * self.curvature * a
        return log_lik, (grad if self._rotation is None else grad @ self._rotation.T)

    def exact_log_evidence(self, X=None, y=None):
        """``(d / 2) log z`` by quadrature over the first coordinate of a pair."""
        p2, w2 = self.prior_scale**2, self.width**2
        b_var = p2 + self.thickness**2

        def log_integrand(a):
            return (_gaussian_logpdf(a, 0.0, p2) + _gaussian_logpdf(a, 0.0, w2)
                    + _gaussian_logpdf(self.curvature * (a**2 - w2), 0.0, b_var))

        reach = 40.0 * min(self.prior_scale, self.width)
        return 0.5 * self.dim * log_quad(log_integrand, -reach, reach, points=[-self.width, 0.0, self.width])


class BoxBananaTarget(_ThetaTarget):
    """Rotated banana pairs (:class:`BananaTarget`'s density, normalised) under a uniform box prior.

    The likelihood is ``prod N(a; 0, width^2) N(b; curvature (a^2 - width^2),
    thickness^2)`` over the pairs of ``phi = R^T x``, with ``R`` a random
    rotation (``rotation_seed``) and ``x = half_width (2 sigmoid(theta) - 1)``
    in the box, reached through the sigmoid map as in
    :class:`BoxProductTarget`. The thin curved ridge fills a tiny part of the
    prior, away from the box's edges: prior draws sit where the likelihood is
    thousands of nats below its peak. The density is normalised and its mass
    outside the box is negligible (a coordinate of ``x`` beyond ``half_width``
    needs ``a^2`` of order ``half_width``; the tests bound it by sampling), so
    ``log Z = -d log(2 half_width)``.

    Parameters
    ----------
    n_params : int
        Even dimension.
    curvature, width, thickness : float, default=1.0, 1.0, 0.1
        The pairs' shape, as in :class:`BananaTarget` (here in the box's coordinates ``x``).
    half_width : float, default=20.0
    rotation_seed : int, default=0
        Seed of the rotation (:func:`scipy.stats.special_ortho_group`).

    Examples
    --------
    >>> target = BoxBananaTarget(4)
    >>> bool(target.exact_log_evidence() == -4 * np.log(40.0))
    True
    """

    sample_prior = BoxGaussianTarget.sample_prior
    log_prior = BoxGaussianTarget.log_prior
    grad_log_prior = BoxGaussianTarget.grad_log_prior
    prior_transform = BoxGaussianTarget.prior_transform
    prior_cdf = BoxGaussianTarget.prior_cdf
    to_box = BoxGaussianTarget.to_box

    def __init__(self, n_params, *, curvature=1.0, width=1.0, thickness=0.1, half_width=20.0, rotation_seed=0):
        _check_positive(half_width=half_width)
        self._density = BananaTarget(n_params, curvature=curvature, width=width, thickness=thickness,
                                     rotation_seed=rotation_seed)
        self.dim, self.half_width = self._density.dim, float(half_width)
        self.curvature, self.width, self.thickness = curvature, width, thickness
        self.rotation_seed = rotation_seed

    @property
    def n_params(self):
        return self.dim

    def _log_lik_and_grad(self, theta):
        return _through_box(self, theta, self._density._log_lik_and_grad)

    def sample_density(self, rng, n_samples):
        """Exact draws of the banana density in box coordinates ``x`` (for checking the box holds its mass)."""
        a = self.width * rng.standard_normal((n_samples, self.dim // 2))
        b = self.curvature * (a**2 - self.width**2) + self.thickness * rng.standard_normal(a.shape)
        phi = np.empty((n_samples, self.dim))
        phi[:, 0::2], phi[:, 1::2] = a, b
        return phi @ self._density._rotation.T

    def exact_log_evidence(self, X=None, y=None):
        """``-d log(2 half_width)`` (``X`` and ``y`` are ignored)."""
        return float(-self.dim * np.log(2.0 * self.half_width))


# -- nearest-neighbour ring ------------------------------------------------------------------
class RingChainTarget(_GaussianPriorMixin, _ThetaTarget):
    """A ring of double wells with heavy-tailed nearest-neighbour coupling.

    ``log L = sum_i -well (theta_i^2 - 1)^2 - (df + 1)/2 log(1 + (theta_i - theta_{i+1})^2 / (df coupling^2))``
    with ``theta_{d+1} = theta_1``, under ``N(0, prior_scale^2 I)``: neighbours
    want to sit in the same well, so the posterior has two large modes (all
    ``+1``, all ``-1``) joined through domain walls. The evidence is
    ``trace(T^d)`` of the symmetric transfer kernel
    ``T(a, b) = g(a)^(1/2) exp(J(a, b)) g(b)^(1/2)`` (``g`` = prior times well),
    discretised on ``n_nodes`` equally spaced nodes (trapezoid weights).

    Parameters
    ----------
    n_params : int
        Ring length ``d >= 3``.
    well : float, default=1.0
        Height of the double-well barrier, in nats.
    coupling : float, default=0.3
        Scale of the neighbour difference.
    df : float, default=2.0
        Degrees of freedom of the Student-t coupling (heavy-tailed: domain walls are cheap).
    prior_scale : float, default=3.0
    n_nodes : int, default=401
        Quadrature nodes of the transfer kernel.

    Examples
    --------
    >>> round(RingChainTarget(3).exact_log_evidence(), 4)
    -7.4436
    """

    def __init__(self, n_params, *, well=1.0, coupling=0.3, df=2.0, prior_scale=3.0, n_nodes=401):
        _check_positive(well=well, coupling=coupling, df=df, prior_scale=prior_scale)
        self.dim = _check_dim(n_params, minimum=3)
        self.well, self.coupling, self.df = float(well), float(coupling), float(df)
        self.prior_scale = float(prior_scale)
        self.n_nodes = int(n_nodes)

    @property
    def n_params(self):
        return self.dim

    def _pair(self, a, b):
        """Coupling ``J(a, b)`` and its derivative in ``a``."""
        diff, c2 = a - b, self.df * self.coupling**2
        return -0.5 * (self.df + 1) * np.log1p(diff**2 / c2), -(self.df + 1) * diff / (c2 + diff**2)

    def _log_lik_and_grad(self, theta):
        site = -self.well * (theta**2 - 1.0) ** 2
        pair, d_pair = self._pair(theta, np.roll(theta, -1, axis=1))  # (i, i+1): d/d theta_i
        grad = -4.0 * self.well * theta * (theta**2 - 1.0) + d_pair - np.roll(d_pair, 1, axis=1)
        return np.sum(site + pair, axis=1), grad

    def exact_log_evidence(self, X=None, y=None):
        """``log trace(T^d)`` from the eigenvalues of the discretised transfer kernel."""
        reach = 2.0 + 6.0 / np.sqrt(self.well)  # the quartic well confines |theta| far inside this
        x = np.linspace(-reach, reach, self.n_nodes)
        log_node = (np.log(x[1] - x[0]) + _gaussian_logpdf(x, 0.0, self.prior_scale**2)
                    - self.well * (x**2 - 1.0) ** 2)
        kernel = np.exp(0.5 * log_node[:, None] + self._pair(x[:, None], x[None, :])[0] + 0.5 * log_node[None, :])
        eig = np.linalg.eigvalsh(kernel)
        top = np.max(np.abs(eig))
        return float(self.dim * np.log(top) + np.log(np.sum((eig / top) ** self.dim)))


# -- ill-conditioned Gaussian --------------------------------------------------------------------
def ill_conditioned_gaussian_target(n_params, condition_number, *, prior_scale=3.0, random_state=0):
    """Correlated Gaussian likelihood with a given condition number, randomly rotated.

    The likelihood covariance ``Q diag(lambda) Q^T`` has variances ``lambda``
    log-spaced from 1 down to ``1 / condition_number`` and a random rotation
    ``Q``; its centre is ``0.5 N(0, I)``. The evidence is analytic
    (:class:`~evidence_select.testing._targets.GaussianTarget`).

    Parameters
    ----------
    n_params : int
    condition_number : float
        Ratio of the largest to the smallest likelihood variance, >= 1.
    prior_scale : float, default=3.0
    random_state : int, default=0
        Seed of the rotation and the centre.

    Returns
    -------
    target : GaussianTarget

    Examples
    --------
    >>> import numpy as np
    >>> target = ill_conditioned_gaussian_target(8, 1e4)
    >>> round(float(np.linalg.cond(target.cov)))
    10000
    """
    d = _check_dim(n_params)
    if not float(condition_number) >= 1.0:
        raise ValueError(f"condition_number must be >= 1, got {condition_number!r}")
    rng = np.random.default_rng(random_state)
    variances = np.logspace(0.0, -np.log10(condition_number), d) if d > 1 else np.ones(1)
    rotation = special_ortho_group.rvs(d, random_state=rng) if d > 1 else np.ones((1, 1))
    cov = (rotation * variances) @ rotation.T
    return GaussianTarget(0.5 * rng.standard_normal(d), 0.5 * (cov + cov.T), prior_scale=prior_scale)
