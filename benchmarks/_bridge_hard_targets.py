"""The issue's four hard targets with exact evidence, in a uniform box prior through the sigmoid map.

``x = B (2 sigmoid(theta) - 1)``, prior uniform on ``[-B, B]^d``, likelihood a
normalised density ``f(x)`` (one dummy data row), so ``Z = int_box f / (2B)^d``:

- ``funnel``: ``v ~ N(0, 3^2)``, ``x_i | v ~ N(0, e^v)``; exact by 1-d quadrature over ``v``
  (box truncation included).
- ``banana``: pairs ``a ~ N(0, 1)``, ``b | a ~ N(0.5 (a^2 - 1), 0.5^2)``, randomly rotated;
  the box holds all but ~1e-6 of the mass, so ``log Z = -d log(2B)``.
- ``twopeak``: product of ``0.5 t_3(-2, 0.5) + 0.5 t_3(2, 0.5)``; exact by 1-d quadrature to the power d.
- ``ring``: ``exp(-sum V(x_i) - kappa/2 sum (x_i - x_{i+1})^2)`` on a ring, ``V = x^2/4 + x^4/10``;
  exact by transfer-matrix quadrature (trace of ``T^d`` on a 3001-point grid).

All four agree with plain Monte Carlo from the prior in d=2 to ~0.01 nats.
"""
import numpy as np
from scipy import integrate, stats
from scipy.special import expit, gammaln, log_ndtr, logsumexp
from evidence_select.models import Model


_LOG_2PI = np.log(2 * np.pi)


def _norm_logpdf(x, loc=0.0, scale=1.0):
    return -0.5 * ((x - loc) / scale) ** 2 - np.log(scale) - 0.5 * _LOG_2PI


def _t_logpdf(x, nu, loc, scale):
    z = (x - loc) / scale
    return (gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * np.log(nu * np.pi) - np.log(scale)
            - (nu + 1) / 2 * np.log1p(z**2 / nu))


class BoxTarget(Model):
    is_density_model = True

    def __init__(self, d, B):
        self.d, self.B = d, float(B)

    @property
    def n_params(self):
        return self.d

    def to_box(self, t):
        return self.B * (2 * expit(t) - 1)

    def sample_prior(self, rng, n):
        u = rng.uniform(size=(n, self.d))
        return np.log(u) - np.log1p(-u)

    def log_prior(self, t):
        return np.sum(-np.abs(t) - 2 * np.log1p(np.exp(-np.abs(t))), axis=1)

    def grad_log_prior(self, t):
        return 1 - 2 * expit(t)

    def log_likelihood(self, t, X, y=None):
        return np.repeat(self.log_f(self.to_box(t))[:, None] / len(X), len(X), axis=1)

    def log_likelihood_sum(self, t, X, y=None):
        return self.log_f(self.to_box(t))

    def grad_log_likelihood(self, t, X, y, weights):
        s = expit(t)
        w = np.broadcast_to(weights, (len(t), len(X))).sum(axis=1, keepdims=True) / len(X)
        return w * self.grad_log_f(self.to_box(t)) * 2 * self.B * s * (1 - s)


class Funnel(BoxTarget):
    def __init__(self, d, B=10.0, sv=3.0):
        super().__init__(d, B); self.sv = sv

    def log_f(self, x):
        v, r = x[:, 0], x[:, 1:]
        return (_norm_logpdf(v, 0, self.sv) - 0.5 * (self.d - 1) * (v + np.log(2 * np.pi))
                - 0.5 * np.sum(r**2, axis=1) * np.exp(-v))

    def grad_log_f(self, x):
        v, r = x[:, 0], x[:, 1:]
        g = np.empty_like(x)
        g[:, 0] = -v / self.sv**2 - 0.5 * (self.d - 1) + 0.5 * np.sum(r**2, axis=1) * np.exp(-v)
        g[:, 1:] = -r * np.exp(-v)[:, None]
        return g

    def exact(self):
        B, d = self.B, self.d
        def integrand(v):
            p = np.log(2 * np.exp(log_ndtr(B * np.exp(-v / 2))) - 1)  # log mass of |x|<B per coordinate
            return np.exp(stats.norm.logpdf(v, 0, self.sv) + (d - 1) * p)
        val, _ = integrate.quad(integrand, -B, B, limit=500, points=[0])
        return np.log(val) - d * np.log(2 * B)


class RotatedBanana(BoxTarget):
    def __init__(self, d, B=15.0, beta=0.5, sb=0.5, seed=0):
        super().__init__(d, B); self.beta, self.sb = beta, sb
        self.R = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))[0]

    def log_f(self, x):
        z = x @ self.R  # z = R^T x
        a, b = z[:, 0::2], z[:, 1::2]
        return np.sum(_norm_logpdf(a) + _norm_logpdf(b, self.beta * (a**2 - 1), self.sb), axis=1)

    def grad_log_f(self, x):
        z = x @ self.R
        a, b = z[:, 0::2], z[:, 1::2]
        res = (b - self.beta * (a**2 - 1)) / self.sb**2
        gz = np.empty_like(z)
        gz[:, 0::2] = -a + res * 2 * self.beta * a
        gz[:, 1::2] = -res
        return gz @ self.R.T

    def exact(self):
        return -self.d * np.log(2 * self.B)


class TwoPeakProduct(BoxTarget):
    def __init__(self, d, B=10.0, mu=2.0, s=0.5, nu=3.0):
        super().__init__(d, B); self.mu, self.s, self.nu = mu, s, nu

    def _parts(self, x):
        return np.stack([_t_logpdf(x, self.nu, -self.mu, self.s), _t_logpdf(x, self.nu, self.mu, self.s)])

    def log_f(self, x):
        return np.sum(logsumexp(self._parts(x), axis=0) - np.log(2), axis=1)

    def grad_log_f(self, x):
        parts = self._parts(x)
        w = np.exp(parts - logsumexp(parts, axis=0))
        g = 0
        for k, m in enumerate((-self.mu, self.mu)):
            zz = (x - m) / self.s
            g = g + w[k] * (-(self.nu + 1) * zz / (self.nu + zz**2) / self.s)
        return g

    def exact(self):
        h = lambda x: 0.5 * (stats.t.pdf(x, self.nu, -self.mu, self.s) + stats.t.pdf(x, self.nu, self.mu, self.s))
        val, _ = integrate.quad(h, -self.B, self.B, limit=500, points=[-self.mu, 0, self.mu])
        return self.d * (np.log(val) - np.log(2 * self.B))


class RingChain(BoxTarget):
    def __init__(self, d, B=8.0, a=0.5, c=0.1, kappa=10.0):
        super().__init__(d, B); self.a, self.c, self.kappa = a, c, kappa

    def V(self, x):
        return 0.5 * self.a * x**2 + self.c * x**4

    def log_f(self, x):
        diff = x - np.roll(x, -1, axis=1)
        return -np.sum(self.V(x), axis=1) - 0.5 * self.kappa * np.sum(diff**2, axis=1)

    def grad_log_f(self, x):
        return (-(self.a * x + 4 * self.c * x**3) - self.kappa * (x - np.roll(x, -1, axis=1))
                - self.kappa * (x - np.roll(x, 1, axis=1)))

    def exact(self, n=3001):
        g = np.linspace(-self.B, self.B, n); h = g[1] - g[0]
        w = np.full(n, h); w[0] = w[-1] = h / 2
        K = np.exp(-0.5 * self.V(g)[:, None] - 0.5 * self.kappa * (g[:, None] - g[None, :])**2 - 0.5 * self.V(g)[None, :])
        S = np.sqrt(w)[:, None] * K * np.sqrt(w)[None, :]
        lam = np.linalg.eigvalsh(S)
        lam = lam[lam > 0]
        return logsumexp(self.d * np.log(lam)) - self.d * np.log(2 * self.B)


TARGETS = {"funnel": Funnel, "banana": RotatedBanana, "twopeak": TwoPeakProduct, "ring": RingChain}
