"""Held-out hard targets with exact evidence (benchmarks only, never used to tune the backends).

Every target is a density ``f(x)`` (normalised, except the ring's) used as the
likelihood of one dummy data row, under a uniform prior on the box ``[-half_width, half_width]^d`` reached
through the sigmoid map ``x = half_width (2 sigmoid(theta) - 1)``; so
``Z = int_box f / (2 half_width)^d``. Five families, each parameterised so that
every variant a benchmark uses is one instance:

- :class:`Funnel`: ``v ~ N(0, scale_sd^2)``, ``x_i | v ~ N(0, e^v)``; exact by one
  quadrature over ``v`` with the box truncation of each ``x_i`` in closed form;
- :class:`RotatedBanana`: pairs ``a ~ N(0, 1)``, ``b | a ~ N(curvature (a^2 - 1), thickness^2)``
  after a random rotation; the box holds all but a negligible tail of the mass, so
  ``log Z = -d log(2 half_width)``;
- :class:`RotatedRidge`: the same pairs with a sine or cubic ridge ``b | a ~ N(g(a), thickness^2)``;
- :class:`TwoPeakProduct`: product of ``0.5 t_df(-peak, scale) + 0.5 t_df(peak, scale)``;
  exact from the Student-t CDF to the power ``d``;
- :class:`RingChain`: ``exp(-sum V(x_i) - kappa/2 sum (x_i - x_{i+1})^2)`` on a ring with
  ``V = a x^2 / 2 + c x^4``; exact by transfer-matrix quadrature (trace of ``T^d``).

They are kept apart from the package's calibration suite
(:func:`evidence_select.testing.calibration_cases`) on purpose: the suite is what
the backends are tuned on, these targets only judge them. :data:`HELD_OUT_TARGETS`
names every variant; :func:`held_out_cases` builds them as calibration cases.
"""

import functools

import numpy as np
from scipy import special, stats

from evidence_select.testing import (CALIBRATION_DIMS, BananaTarget, BoxGaussianTarget, CalibrationCase, FunnelTarget,
                                     ProductTarget, TwoPeakFactor)
from evidence_select.testing._calibration import _ThetaTarget
from evidence_select.utils._quadrature import log_quad

__all__ = ["BoxTarget", "Funnel", "RotatedBanana", "RotatedRidge", "TwoPeakProduct", "RingChain", "HELD_OUT_TARGETS",
           "held_out_case", "held_out_cases"]


class BoxTarget(_ThetaTarget):
    """A density ``f(x)`` as the likelihood, uniform prior on ``[-half_width, half_width]^d`` via the sigmoid map.

    The prior, its gradient and the map are the package's
    (:class:`~evidence_select.testing._targets.BoxGaussianTarget`), the no-data
    likelihood plumbing the calibration targets'. A subclass sets ``_density``,
    a package target whose likelihood is ``f`` (read on ``x``), or overrides
    ``_log_density_and_grad(x)``, ``log f(x)`` and its gradient in ``x``; the
    chain rule through the map is applied here once.
    """

    is_density_model = True
    sample_prior = BoxGaussianTarget.sample_prior
    log_prior = BoxGaussianTarget.log_prior
    grad_log_prior = BoxGaussianTarget.grad_log_prior
    to_box = BoxGaussianTarget.to_box

    def __init__(self, n_params, half_width):
        self.dim, self.half_width = int(n_params), float(half_width)

    @property
    def n_params(self):
        return self.dim

    def _log_lik_and_grad(self, theta):
        sig = special.expit(theta)
        log_f, grad_x = self._log_density_and_grad(self.to_box(theta))
        return log_f, grad_x * (2.0 * self.half_width * sig * (1.0 - sig))

    def _log_density_and_grad(self, x):
        return self._density._log_lik_and_grad(x)

    def _log_volume(self):
        return self.dim * np.log(2.0 * self.half_width)


class Funnel(BoxTarget):
    """Neal's funnel ``N(v; 0, scale_sd^2) prod_i N(x_i; 0, e^v)`` in the box (the package's funnel density)."""

    def __init__(self, n_params, *, half_width=10.0, scale_sd=3.0):
        super().__init__(n_params, half_width)
        self.scale_sd = float(scale_sd)
        self._density = FunnelTarget(self.dim, scale_sd=self.scale_sd)

    def log_scale_marginal(self, v):
        """``log`` of the density's marginal in the log-scale ``v`` over the box (unnormalised by the volume):
        ``N(v; 0, scale_sd^2)`` times each other coordinate's box mass ``erf(B e^{-v/2} / sqrt 2)``."""
        box_mass = special.erf(self.half_width * np.exp(-0.5 * np.asarray(v)) / np.sqrt(2))
        return stats.norm.logpdf(v, 0.0, self.scale_sd) + (self.dim - 1) * np.log(box_mass)

    def exact_log_evidence(self, X=None, y=None):
        """Quadrature of :meth:`log_scale_marginal` over ``v`` in the box."""
        b = self.half_width
        return float(log_quad(self.log_scale_marginal, -b, b, points=[0.0]) - self._log_volume())


def _rotation(d, seed, method):
    if method == "qr":  # Q factor of a Gaussian matrix (orthogonal, determinant +-1)
        return np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))[0]
    if method == "special_ortho":
        return stats.special_ortho_group.rvs(d, random_state=seed)
    raise ValueError(f"rotation must be 'qr' or 'special_ortho', got {method!r}")


class _RotatedPairs(BoxTarget):
    """Independent 2-d pairs of ``z = R^T x`` (a subclass's :meth:`_pairs`), in the box, after a random rotation
    ``R`` drawn from ``rotation_seed``: the Q factor of a Gaussian matrix (``rotation="qr"``) or
    :func:`scipy.stats.special_ortho_group` (``"special_ortho"``). Each pair is a normalised density whose mass
    outside the box is negligible."""

    def __init__(self, n_params, half_width, rotation, rotation_seed):
        super().__init__(n_params, half_width)
        self.rotation, self.rotation_seed = rotation, rotation_seed
        self._rotation = _rotation(self.dim, rotation_seed, rotation)

    def _log_density_and_grad(self, x):
        log_f, grad_z = self._pairs(x @ self._rotation)
        return log_f, grad_z @ self._rotation.T

    def exact_log_evidence(self, X=None, y=None):
        """``-d log(2 half_width)``: the density is normalised and its mass outside the box is negligible."""
        return float(-self._log_volume())


class RotatedBanana(_RotatedPairs):
    """Curved pairs ``a ~ N(0, 1)``, ``b | a ~ N(curvature (a^2 - 1), thickness^2)``, rotated
    (:class:`_RotatedPairs`): the package's banana density."""

    def __init__(self, n_params, *, half_width=15.0, curvature=0.5, thickness=0.5, rotation="qr", rotation_seed=0):
        super().__init__(n_params, half_width, rotation, rotation_seed)
        self.curvature, self.thickness = float(curvature), float(thickness)
        self._density = BananaTarget(self.dim, curvature=self.curvature, width=1.0, thickness=self.thickness)

    def _pairs(self, z):
        return self._density._log_lik_and_grad(z)


class RotatedRidge(_RotatedPairs):
    """Curved pairs ``a ~ N(0, 1)``, ``b | a ~ N(g(a), thickness^2)``, rotated (:class:`_RotatedPairs`), with a
    ridge that is not a parabola: ``g(a) = height sin(2 a)`` (``shape="sine"``) or ``height a^3`` (``"cubic"``).

    Added after the bridge's quadratic shift, to judge it on curvature it cannot represent. The box holds all
    but a negligible tail of the mass (``|b| <= height 4^3`` for the cubic's 4-sigma ``a``).
    """

    _SHAPES = {"sine": (lambda a: np.sin(2.0 * a), lambda a: 2.0 * np.cos(2.0 * a)),
               "cubic": (lambda a: a**3, lambda a: 3.0 * a**2)}

    def __init__(self, n_params, *, shape, height=1.0, half_width=20.0, thickness=0.1, rotation_seed=0):
        if shape not in self._SHAPES or n_params % 2:
            raise ValueError(f"shape must be one of {sorted(self._SHAPES)} and n_params even, got {shape!r}, "
                             f"{n_params!r}")
        super().__init__(n_params, half_width, "special_ortho", rotation_seed)
        self.shape, self.height, self.thickness = shape, float(height), float(thickness)

    def _pairs(self, z):
        g, dg = self._SHAPES[self.shape]
        a, b = z[:, 0::2], z[:, 1::2]
        offset = b - self.height * g(a)
        residual = offset / self.thickness**2
        log_f = np.sum(-0.5 * a**2 - 0.5 * residual * offset - np.log(2.0 * np.pi * self.thickness), axis=1)
        grad = np.empty_like(z)
        grad[:, 1::2] = -residual
        grad[:, 0::2] = -a + residual * self.height * dg(a)
        return log_f, grad


class TwoPeakProduct(BoxTarget):
    """Product over coordinates of ``0.5 t_df(x; -peak, scale) + 0.5 t_df(x; peak, scale)``, in the box."""

    def __init__(self, n_params, *, half_width=10.0, peak=2.0, scale=0.5, df=3.0):
        super().__init__(n_params, half_width)
        self.peak, self.scale, self.df = float(peak), float(scale), float(df)
        factor = TwoPeakFactor(separation=2.0 * self.peak, scale=self.scale, weight=0.5, df=self.df)
        self._density = ProductTarget(factor, self.dim)

    def exact_log_evidence(self, X=None, y=None):
        """``d`` times the log box mass of one factor, from the Student-t CDF, over the box width."""
        t, b = stats.t(self.df), self.half_width
        mass = sum(0.5 * (t.cdf((b - c) / self.scale) - t.cdf((-b - c) / self.scale)) for c in (-self.peak, self.peak))
        return float(self.dim * np.log(mass) - self._log_volume())


@functools.lru_cache(maxsize=None)
def _transfer_eigenvalues(half_width, a, c, kappa, n_nodes):
    """Positive eigenvalues of the symmetrised transfer kernel on a trapezoid grid (independent of ``d``)."""
    g = np.linspace(-half_width, half_width, n_nodes)
    h = g[1] - g[0]
    w = np.full(n_nodes, h)
    w[0] = w[-1] = h / 2
    site = 0.5 * a * g**2 + c * g**4
    kernel = np.exp(-0.5 * site[:, None] - 0.5 * kappa * (g[:, None] - g[None, :]) ** 2 - 0.5 * site[None, :])
    lam = np.linalg.eigvalsh(np.sqrt(w)[:, None] * kernel * np.sqrt(w)[None, :])
    return lam[lam > 0]  # the kernel is positive definite; the rest is rounding


class RingChain(BoxTarget):
    """``exp(-sum_i V(x_i) - kappa/2 sum_i (x_i - x_{i+1})^2)`` on a ring, ``V = a x^2 / 2 + c x^4``, in the box.

    Unnormalised: the exact evidence is ``trace(T^d) / (2 half_width)^d`` with the
    transfer kernel ``T`` discretised on ``n_nodes`` trapezoid nodes over the box.
    """

    def __init__(self, n_params, *, half_width=8.0, a=0.5, c=0.1, kappa=10.0, n_nodes=3001):
        super().__init__(n_params, half_width)
        self.a, self.c, self.kappa, self.n_nodes = float(a), float(c), float(kappa), int(n_nodes)

    def _log_density_and_grad(self, x):
        diff = x - np.roll(x, -1, axis=1)
        log_f = -np.sum(0.5 * self.a * x**2 + self.c * x**4, axis=1) - 0.5 * self.kappa * np.sum(diff**2, axis=1)
        grad = -(self.a * x + 4.0 * self.c * x**3) - self.kappa * (diff - np.roll(diff, 1, axis=1))
        return log_f, grad

    def exact_log_evidence(self, X=None, y=None):
        """``log trace(T^d)`` from the transfer kernel's eigenvalues, minus the log box volume."""
        lam = _transfer_eigenvalues(self.half_width, self.a, self.c, self.kappa, self.n_nodes)
        return float(special.logsumexp(self.dim * np.log(lam)) - self._log_volume())


#: name -> factory ``d -> target``. ``funnel``, ``banana``, ``twopeak`` and ``ring`` are the
#: bridge benchmark's targets; ``heavy``, ``funnel`` and ``banana_steep`` the AIS/NS benchmark's
#: (``bench_aisns_hard.py --targets banana`` is ``banana_steep``); ``ridge_sine`` and ``ridge_cubic``
#: judge the bridge's quadratic shift on ridges it cannot straighten.
HELD_OUT_TARGETS = {
    "funnel": lambda d: Funnel(d, half_width=10.0, scale_sd=3.0),
    "banana": lambda d: RotatedBanana(d, half_width=15.0, curvature=0.5, thickness=0.5, rotation="qr"),
    "twopeak": lambda d: TwoPeakProduct(d, half_width=10.0, peak=2.0, scale=0.5, df=3.0),
    "ring": lambda d: RingChain(d, half_width=8.0, a=0.5, c=0.1, kappa=10.0),
    "heavy": lambda d: TwoPeakProduct(d, half_width=10.0, peak=3.0, scale=0.3, df=3.0),
    "banana_steep": lambda d: RotatedBanana(d, half_width=20.0, curvature=1.0, thickness=0.5,
                                            rotation="special_ortho"),
    "ridge_sine": lambda d: RotatedRidge(d, shape="sine", height=1.0),
    "ridge_cubic": lambda d: RotatedRidge(d, shape="cubic", height=0.3),
}


def held_out_case(name, dim):
    """The held-out target ``name`` in ``dim`` dimensions as a no-data calibration case named ``<name>_d<dim>``."""
    model = HELD_OUT_TARGETS[name](dim)
    return CalibrationCase(f"{name}_d{dim}", name, dim, model, None, None, model.exact_log_evidence())


def held_out_cases(max_dim=64, dims=CALIBRATION_DIMS):
    """Every held-out target at every dimension of ``dims`` up to ``max_dim``, in registry then dimension order."""
    return [held_out_case(name, dim) for name in HELD_OUT_TARGETS for dim in dims if dim <= max_dim]
