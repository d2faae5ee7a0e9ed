"""Hard targets with exact evidence for the AIS/NS benchmark (benchmarks only, not part of the package).

Uniform box priors through the sigmoid map ``x = a (2 sigmoid(u) - 1)``, one dummy data row:

- ``HeavyTwoPeak(d)``: per coordinate an equal mixture of Student-t(3) bumps at +/-3
  (scale 0.3) in ``[-10, 10]``; exact ``log Z`` from the t CDF to the power ``d``
  (checked against 1-d quadrature by :meth:`HeavyTwoPeak.exact_check`);
- ``Funnel(d)``: Neal's funnel (``x0 ~ N(0, 3^2)``, ``xi ~ N(0, e^x0)``) in ``[-10, 10]^d``;
  exact by 1-d quadrature over ``x0``;
- ``Banana(d)``: ``d/2`` curved pairs ``y1 ~ N(0, 1)``, ``y2 ~ N(y1^2 - 1, 0.5^2)`` after a
  random rotation, in ``[-20, 20]^d``; a normalised density well inside the box, so
  ``log Z = -d log 40`` up to its tail mass outside the box (below 1e-4 nats at ``d <= 64``).
"""
import numpy as np
from scipy import stats, integrate
from scipy.special import expit, gammaln
from evidence_select.models import Model  # noqa: E402

def _t3_logpdf(z):
    # Student-t(3)
    nu = 3.0
    c = gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * np.log(nu * np.pi)
    return c - (nu + 1) / 2 * np.log1p(z**2 / nu)

def _t3_dlogpdf(z):
    nu = 3.0
    return -(nu + 1) * z / (nu + z**2)

class HeavyTwoPeak(Model):
    """Per coordinate: box prior U(-a, a) via x = a(2 sigmoid(u) - 1); L = 0.5 t3((x-m)/s)/s + 0.5 t3((x+m)/s)/s."""
    is_density_model = True
    def __init__(self, d, m=3.0, s=0.3, a=10.0):
        self.d, self.m, self.s, self.a = d, m, s, a
    @property
    def n_params(self):
        return self.d
    def sample_prior(self, rng, n):
        u = rng.uniform(size=(n, self.d))
        return np.log(u) - np.log1p(-u)
    def log_prior(self, theta):
        theta = np.asarray(theta, float)
        return np.sum(-np.abs(theta) - 2.0 * np.log1p(np.exp(-np.abs(theta))), axis=1)
    def grad_log_prior(self, theta):
        return 1.0 - 2.0 * expit(np.asarray(theta, float))
    def _parts(self, theta):
        x = self.a * (2 * expit(theta) - 1)
        z1, z2 = (x - self.m) / self.s, (x + self.m) / self.s
        l1, l2 = _t3_logpdf(z1), _t3_logpdf(z2)
        lse = np.logaddexp(l1, l2)
        ll = lse + np.log(0.5) - np.log(self.s)
        return x, z1, z2, l1, l2, lse, ll
    def total(self, theta):
        return self._parts(np.asarray(theta, float))[-1].sum(axis=1)
    def log_likelihood(self, theta, X, y=None):
        t = self.total(theta)
        return np.repeat(t[:, None] / len(X), len(X), axis=1)
    def grad_log_likelihood(self, theta, X, y, weights):
        theta = np.asarray(theta, float)
        x, z1, z2, l1, l2, lse, ll = self._parts(theta)
        w1 = np.exp(l1 - lse)
        dldx = (w1 * _t3_dlogpdf(z1) + (1 - w1) * _t3_dlogpdf(z2)) / self.s
        sig = expit(theta)
        g = dldx * 2 * self.a * sig * (1 - sig)
        w = np.broadcast_to(weights, (len(theta), len(X))).sum(axis=1, keepdims=True) / len(X)
        return w * g
    def exact_log_evidence(self, X=None, y=None):
        t = stats.t(3)
        a, m, s = self.a, self.m, self.s
        mass = 0.5 * (t.cdf((a - m) / s) - t.cdf((-a - m) / s)) + 0.5 * (t.cdf((a + m) / s) - t.cdf((-a + m) / s))
        return float(self.d * (np.log(mass) - np.log(2 * a)))
    def exact_check(self):
        def f(x):
            u = np.log((x / self.a + 1) / 2) - np.log1p(-(x / self.a + 1) / 2)
            return np.exp(self._parts(np.array([[u]]))[-1][0, 0]) / (2 * self.a)

        v, _ = integrate.quad(f, -self.a + 1e-12, self.a - 1e-12, points=[-3, 3], limit=200)
        return self.d * np.log(v)

class GaussPriorTwoPeak(HeavyTwoPeak):
    """Per coordinate: prior N(0, ps^2) on x=theta; same two-peak t3 likelihood."""
    def __init__(self, d, m=3.0, s=0.3, ps=5.0):
        self.d, self.m, self.s, self.ps = d, m, s, ps
    def sample_prior(self, rng, n):
        return self.ps * rng.standard_normal((n, self.d))
    def log_prior(self, theta):
        return np.sum(stats.norm(0, self.ps).logpdf(theta), axis=1)
    def grad_log_prior(self, theta):
        return -np.asarray(theta) / self.ps**2
    def _parts(self, theta):
        x = theta
        z1, z2 = (x - self.m) / self.s, (x + self.m) / self.s
        l1, l2 = _t3_logpdf(z1), _t3_logpdf(z2)
        lse = np.logaddexp(l1, l2)
        return x, z1, z2, l1, l2, lse, lse + np.log(0.5) - np.log(self.s)
    def grad_log_likelihood(self, theta, X, y, weights):
        theta = np.asarray(theta, float)
        x, z1, z2, l1, l2, lse, ll = self._parts(theta)
        w1 = np.exp(l1 - lse)
        g = (w1 * _t3_dlogpdf(z1) + (1 - w1) * _t3_dlogpdf(z2)) / self.s
        w = np.broadcast_to(weights, (len(theta), len(X))).sum(axis=1, keepdims=True) / len(X)
        return w * g
    def exact_log_evidence(self, X=None, y=None):
        f = lambda x: np.exp(self._parts(np.array([[x]]))[-1][0, 0] + stats.norm(0, self.ps).logpdf(x))
        v, _ = integrate.quad(f, -np.inf, np.inf, points=None, limit=400)
        v2 = sum(integrate.quad(f, lo, hi, limit=400)[0] for lo, hi in [(-np.inf, -3), (-3, 0), (0, 3), (3, np.inf)])
        return float(self.d * np.log(v2))


class _Box(Model):
    is_density_model = True
    a = 10.0
    @property
    def n_params(self):
        return self.d
    def sample_prior(self, rng, n):
        u = rng.uniform(size=(n, self.d))
        return np.log(u) - np.log1p(-u)
    def log_prior(self, theta):
        theta = np.asarray(theta, float)
        return np.sum(-np.abs(theta) - 2.0 * np.log1p(np.exp(-np.abs(theta))), axis=1)
    def grad_log_prior(self, theta):
        return 1.0 - 2.0 * expit(np.asarray(theta, float))
    def total(self, theta):
        return self._ll(self.a * (2 * expit(np.asarray(theta, float)) - 1))[0]
    def log_likelihood(self, theta, X, y=None):
        t = self.total(theta)
        return np.repeat(t[:, None] / len(X), len(X), axis=1)
    def grad_log_likelihood(self, theta, X, y, weights):
        theta = np.asarray(theta, float)
        sig = expit(theta)
        _, g = self._ll(self.a * (2 * sig - 1))
        w = np.broadcast_to(weights, (len(theta), len(X))).sum(axis=1, keepdims=True) / len(X)
        return w * g * 2 * self.a * sig * (1 - sig)


class Funnel(_Box):
    """Neal's funnel density as likelihood in a box [-a, a]^d: x0 ~ N(0, 3^2), xi ~ N(0, e^x0)."""
    def __init__(self, d, a=10.0):
        self.d, self.a = d, a
    def _ll(self, x):
        v, r = x[:, 0], x[:, 1:]
        ll = (-0.5 * v**2 / 9 - 0.5 * np.log(2 * np.pi * 9)
              + np.sum(-0.5 * r**2 * np.exp(-v)[:, None] - 0.5 * v[:, None] - 0.5 * np.log(2 * np.pi), axis=1))
        g = np.empty_like(x)
        g[:, 0] = -v / 9 + np.sum(0.5 * r**2 * np.exp(-v)[:, None] - 0.5, axis=1)
        g[:, 1:] = -r * np.exp(-v)[:, None]
        return ll, g
    def exact_log_evidence(self, X=None, y=None):
        a = self.a
        f = lambda v: stats.norm(0, 3).pdf(v) * (2 * stats.norm.cdf(a / np.exp(v / 2)) - 1) ** (self.d - 1)
        m = integrate.quad(f, -a, a, limit=400, points=[0.0])[0]
        return float(np.log(m) - self.d * np.log(2 * a))


class Banana(_Box):
    """Pairs y1 ~ N(0,1), y2 ~ N(b(y1^2-1), sig^2), y = R^T x (random rotation), box [-a, a]^d."""
    def __init__(self, d, b=1.0, sig=0.5, rotate=True, a=20.0, seed=0):
        self.d, self.b, self.sig, self.a = d, b, sig, a
        self.R = stats.special_ortho_group.rvs(d, random_state=seed) if rotate else np.eye(d)
    def _ll(self, x):
        y = x @ self.R
        y1, y2 = y[:, 0::2], y[:, 1::2]
        r = y2 - self.b * (y1**2 - 1)
        ll = np.sum(-0.5 * y1**2 - 0.5 * r**2 / self.sig**2 - np.log(2 * np.pi * self.sig), axis=1)
        gy = np.empty_like(y)
        gy[:, 1::2] = -r / self.sig**2
        gy[:, 0::2] = -y1 + r / self.sig**2 * 2 * self.b * y1
        return ll, gy @ self.R.T
    def exact_log_evidence(self, X=None, y=None):
        return float(-self.d * np.log(2 * self.a))
