"""Each MCMC kernel, run as its backend runs it, leaves a target it can be checked against exactly.

Start from exact draws of the target, apply the kernel (with the backend's
adaptation), and test the output against the exact distribution: a
Kolmogorov-Smirnov test on the pooled one-dimensional marginals and the change of
a moment (``log L`` for AIS, the quantity its weights are built from) in units of
its standard error. An invariant kernel passes at the fixed seeds with p-values
far above the threshold (1e-3); a kernel that is not invariant drifts away from
the exact draws within a few transitions. ``test_self_dependent_mass_is_detected``
shows the check's power on the defect it guards against: a mass matrix estimated
from the particles it moves (AIS read ``log Z`` several nats high with it).
"""

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

from evidence_select.backends import _ais
from evidence_select.backends._ais import AISConfig, ais_move
from evidence_select.kernels._hmc import hmc_init, preconditioner_from_samples
from evidence_select.kernels._independence import independence_metropolis
from evidence_select.kernels._constrained import ConstrainedPoints, LikelihoodConstraint
from evidence_select.kernels._slice import SliceSettings, constrained_slice_sample
from evidence_select.kernels._tempered import TemperedTarget
from evidence_select.models import Model

P_MIN = 1e-3
Z_MAX = 4.0
STEP_SIZE = 0.2  # near the step AIS adapts to here (acceptance ~0.75)
# 3-7 leapfrog steps at STEP_SIZE: trajectories short enough that 20 populations show a kernel whose mass comes
# from the particles it moves (the default's 5-15 steps carry them further and blur that kernel's distortion).
TRAJECTORY_LENGTH = 0.9
PEAK, SCALE, PRIOR_SCALE = 3.0, 0.3, 5.0


def _t3_logpdf(z):
    return gammaln(2.0) - gammaln(1.5) - 0.5 * np.log(3.0 * np.pi) - 2.0 * np.log1p(z**2 / 3.0)


class TwoPeakProduct(Model):
    """Per coordinate: prior N(0, 5^2), likelihood an equal mixture of Student-t(3) bumps at +/-3 (scale 0.3).

    Heavy-tailed and multimodal (2^d modes), the geometry on which AIS with a
    self-dependent mass matrix read ``log Z`` high.
    """

    is_density_model = True

    def __init__(self, n_params):
        self._n_params = n_params

    @property
    def n_params(self):
        return self._n_params

    def sample_prior(self, rng, n_samples):
        return PRIOR_SCALE * rng.standard_normal((n_samples, self.n_params))

    def log_prior(self, theta):
        return np.sum(stats.norm(0.0, PRIOR_SCALE).logpdf(theta), axis=1)

    def grad_log_prior(self, theta):
        return -np.asarray(theta) / PRIOR_SCALE**2

    def _terms(self, theta):
        z1, z2 = (theta - PEAK) / SCALE, (theta + PEAK) / SCALE
        l1, l2 = _t3_logpdf(z1), _t3_logpdf(z2)
        return z1, z2, l1, l2, np.logaddexp(l1, l2)

    def log_likelihood(self, theta, X, y=None):
        total = np.sum(self._terms(np.asarray(theta, float))[-1] + np.log(0.5 / SCALE), axis=1)
        return np.repeat(total[:, None] / len(X), len(X), axis=1)

    def grad_log_likelihood(self, theta, X, y, weights):
        z1, z2, l1, l2, lse = self._terms(np.asarray(theta, float))
        w1 = np.exp(l1 - lse)
        grad = (w1 * (-4.0 * z1 / (3.0 + z1**2)) + (1 - w1) * (-4.0 * z2 / (3.0 + z2**2))) / SCALE
        return np.broadcast_to(weights, (len(theta), len(X))).sum(axis=1, keepdims=True) / len(X) * grad


def _tempered_cdf(tempering):
    """Exact 1-d CDF of the tempered coordinate ``N(0, 5^2) * L^tempering`` on a fine grid."""
    one = TwoPeakProduct(1)
    grid = np.linspace(-40.0, 40.0, 400_001)
    log_f = one.log_prior(grid[:, None]) + tempering * one.log_likelihood(grid[:, None], np.zeros((1, 1)))[:, 0]
    cdf = np.cumsum(np.exp(log_f - log_f.max()))
    return grid, cdf / cdf[-1]


def _ais_move_check(n_params=32, n_particles=64, n_populations=20, tempering=0.3):
    """KS p-value of the pooled marginals and the z-score of the mean log L change after AIS's move."""
    model = TwoPeakProduct(n_params)
    grid, cdf = _tempered_cdf(tempering)
    rng = np.random.default_rng(0)
    config = AISConfig(trajectory_length=TRAJECTORY_LENGTH).resolved(jumping=False)
    X = np.zeros((1, 1))
    drift, positions = [], []
    for _ in range(n_populations):
        start = np.interp(rng.uniform(size=(n_particles, n_params)), cdf, grid)
        target = TemperedTarget(model, X, None, tempering)
        state = hmc_init(start, target)
        state, rates, _ = ais_move(rng, state, target, np.zeros(n_particles), 8, STEP_SIZE, config,
                                   config.max_mcmc_steps)
        assert 0.5 < rates.mean() < 1.0
        drift.append(np.mean(state.aux[:, 1]) - np.mean(model.log_likelihood_sum(start, X, None)))
        positions.append(state.position.ravel())
    drift = np.array(drift)
    pvalue = stats.kstest(np.concatenate(positions), lambda v: np.interp(v, grid, cdf)).pvalue
    return pvalue, drift.mean() / (drift.std(ddof=1) / np.sqrt(len(drift)))


def test_ais_hmc_move_leaves_the_tempered_target_invariant():
    pvalue, drift_z = _ais_move_check()
    assert pvalue > P_MIN
    assert abs(drift_z) < Z_MAX


def test_self_dependent_mass_is_detected(monkeypatch):
    # The same check with each population's mass estimated from the very particles it moves.
    def pooled(samples, log_weights=None, n_folds=2, *, dense=True):
        factor = preconditioner_from_samples(samples, log_weights, dense=dense)
        return np.repeat((factor if factor.ndim == 2 else np.diag(factor))[None], n_folds, axis=0)

    monkeypatch.setattr(_ais, "held_out_preconditioners", pooled)
    pvalue, drift_z = _ais_move_check()
    assert pvalue < P_MIN or abs(drift_z) > Z_MAX


def _two_peak_log_density(x):
    """Unnormalised log density of the two-peak Student-t(3) product (as the slice kernel's 'prior')."""
    z1, z2 = (x - PEAK) / SCALE, (x + PEAK) / SCALE
    return np.sum(np.logaddexp(_t3_logpdf(z1), _t3_logpdf(z2)), axis=1)


def test_slice_leaves_a_multimodal_heavy_tailed_density_invariant():
    # Unconstrained slice sampling (log_lik_min = -inf) of the two-peak product, sampled exactly as
    # a random peak plus a scaled t(3) draw per coordinate.
    rng = np.random.default_rng(1)
    n, d = 3000, 4
    x = rng.choice([-PEAK, PEAK], size=(n, d)) + SCALE * rng.standard_t(3, size=(n, d))
    flat = lambda v: np.zeros(len(v))  # noqa: E731
    factor = np.full(d, PEAK)
    (new, *_), _ = constrained_slice_sample(rng, ConstrainedPoints(x, _two_peak_log_density(x), flat(x)),
                                            LikelihoodConstraint(-np.inf, _two_peak_log_density, flat),
                                            SliceSettings(factor, width=2.0), n_steps=5)
    exact = lambda v: 0.5 * stats.t(3).cdf((v - PEAK) / SCALE) + 0.5 * stats.t(3).cdf((v + PEAK) / SCALE)  # noqa
    assert stats.kstest(new.ravel(), exact).pvalue > P_MIN
    # The chains move (a kernel that never moves is trivially invariant).
    assert np.mean(np.all(new != x, axis=1)) > 0.9


@pytest.mark.parametrize("d", [3, 10])
def test_constrained_slice_as_nested_sampling_uses_it(d):
    # Constrained prior N(0, I) restricted to |x|^2 < r^2 (the median radius): |x|^2 has the chi2(d)
    # law truncated at r^2, and each coordinate's sign is symmetric. The whitening factor comes from
    # independent draws, as NS takes it from the other surviving live points.
    rng = np.random.default_rng(2)
    r2 = stats.chi2(d).median()

    def exact(n):
        z = rng.standard_normal((4 * n, d))
        return z[np.sum(z**2, axis=1) < r2][:n]

    log_prior = lambda v: -0.5 * np.sum(v**2, axis=1)  # noqa: E731
    log_lik = lambda v: -np.sum(v**2, axis=1)  # noqa: E731
    x = exact(3000)
    factor = preconditioner_from_samples(exact(500), dense=True)
    (new, new_prior, new_lik), info = constrained_slice_sample(
        rng, ConstrainedPoints(x, log_prior(x), log_lik(x)), LikelihoodConstraint(-r2, log_prior, log_lik),
        SliceSettings(factor, width=np.sqrt(d)), n_steps=3)
    assert np.all(new_lik > -r2) and info.n_stuck == 0
    radius_cdf = lambda q: stats.chi2(d).cdf(q) / stats.chi2(d).cdf(r2)  # noqa: E731
    assert stats.kstest(np.sum(new**2, axis=1), radius_cdf).pvalue > P_MIN
    # Direction: the first coordinate over the radius is symmetric with a known law (Beta on its square).
    u2 = new[:, 0] ** 2 / np.sum(new**2, axis=1)
    assert stats.kstest(u2, stats.beta(0.5, (d - 1) / 2).cdf).pvalue > P_MIN
    assert np.mean(np.all(new != x, axis=1)) > 0.9


def _independence_check(log_weight_of):
    """KS p-value of the two-peak product after 5 independence Metropolis steps from exact draws, and the share
    of chains that moved; ``log_weight_of(log_p, log_q)``. The proposal has Gaussian peaks of the wrong widths
    and weights (0.3 / 0.7), so the kernel must correct for it."""
    rng = np.random.default_rng(3)
    n, d, steps, width, weight = 3000, 4, 5, 0.5, 0.3
    x = rng.choice([-PEAK, PEAK], size=(n, d)) + SCALE * rng.standard_t(3, size=(n, d))
    z = np.where(rng.uniform(size=(n, steps, d)) < weight, PEAK, -PEAK) + width * rng.standard_normal((n, steps, d))
    peaks = [stats.norm(PEAK, width), stats.norm(-PEAK, width)]
    log_q = lambda v: np.sum(np.logaddexp(np.log(weight) + peaks[0].logpdf(v),  # noqa: E731
                                          np.log(1 - weight) + peaks[1].logpdf(v)), axis=-1)
    z_log_p = _two_peak_log_density(z.reshape(-1, d)).reshape(n, steps)
    x_log_p = _two_peak_log_density(x)
    out = independence_metropolis(rng, x, x_log_p, log_weight_of(x_log_p, log_q(x)), z, z_log_p,
                                  log_weight_of(z_log_p, log_q(z)))
    exact = lambda v: 0.5 * stats.t(3).cdf((v - PEAK) / SCALE) + 0.5 * stats.t(3).cdf((v + PEAK) / SCALE)  # noqa
    return stats.kstest(out.draws[:, -1].ravel(), exact).pvalue, np.mean(np.any(out.draws[:, -1] != x, axis=1))


def test_independence_metropolis_leaves_a_multimodal_density_invariant():
    pvalue, moved = _independence_check(lambda log_p, log_q: log_p - log_q)
    assert pvalue > P_MIN
    assert moved > 0.5


def test_independence_metropolis_without_the_proposal_density_is_detected():
    # Accepting on p(z) / p(x) alone, forgetting q, samples p * q instead of p.
    pvalue, _ = _independence_check(lambda log_p, log_q: log_p)
    assert pvalue < P_MIN
