"""The particles' lag behind the posterior (Stein's identities), on a linear model's exact Gaussian posterior."""

import math

import numpy as np
import pytest

from evidence_select.models import LinearGaussianModel
from evidence_select.models._linear import LinearEvidenceStats
from evidence_select.sgais._engine import degraded_widening
from evidence_select.sgais._lag import PosteriorLag, lag_ratio, posterior_lag
from evidence_select.sgais._state import Particles

N_GROUPS, N_PER_GROUP = 2, 200


def _posterior(n_rows=500, n_features=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    y = X @ np.resize([1.0, -0.5, 0.25], n_features) + 0.3 + rng.normal(size=n_rows)
    model = LinearGaussianModel(n_features)
    mean, cov = LinearEvidenceStats.empty(model).update(model, X, y).posterior(model)
    return model, (X, y), mean, cov


def _particles(theta, n_per_group=N_PER_GROUP):
    log_weights = np.full((N_GROUPS, n_per_group), -math.log(n_per_group))
    return Particles(theta=theta, log_weights=log_weights, log_evidence=np.zeros(N_GROUPS),
                     log_evidence_variance=np.zeros(N_GROUPS), reference=None, reference_grad=None, origins=None)


def _draws(mean, cov, seed, *, shift_sds=0.0, scale=1.0):
    """Exact posterior draws, moved ``shift_sds`` posterior standard deviations along a whitened direction and
    narrowed by ``scale``."""
    rng = np.random.default_rng(seed)
    root = np.linalg.cholesky(cov)
    direction = rng.normal(size=len(mean))
    direction /= np.linalg.norm(direction)
    white = rng.standard_normal((N_GROUPS * N_PER_GROUP, len(mean)))
    return mean + (scale * white + shift_sds * direction) @ root.T


def test_exact_draws_lag_by_about_their_own_sampling_noise():
    model, rows, mean, cov = _posterior()
    lags = [posterior_lag(model, _particles(_draws(mean, cov, seed)), *rows) for seed in range(20)]
    # The mean of N exact draws sits sqrt(d / N) posterior standard deviations off on average (d = 4 here).
    noise = math.sqrt(len(mean) / (N_GROUPS * N_PER_GROUP))
    assert np.median([lag.lag for lag in lags]) < 2 * noise
    assert np.median([lag.dispersion for lag in lags]) > 0.9


@pytest.mark.parametrize("shift_sds", [1.0, 3.0])
def test_a_shifted_population_lags_by_the_shift(shift_sds):
    model, rows, mean, cov = _posterior()
    lags = [posterior_lag(model, _particles(_draws(mean, cov, seed, shift_sds=shift_sds)), *rows).lag
            for seed in range(20)]
    noise = math.sqrt(len(mean) / (N_GROUPS * N_PER_GROUP))
    assert abs(np.median(lags) - shift_sds) < 3 * noise


def test_a_narrow_population_reads_its_dispersion_and_its_lag_in_posterior_units():
    model, rows, mean, cov = _posterior()
    lags = [posterior_lag(model, _particles(_draws(mean, cov, seed, shift_sds=1.0, scale=0.5)), *rows)
            for seed in range(20)]
    assert abs(np.median([lag.dispersion for lag in lags]) - 0.25) < 0.05
    noise = math.sqrt(len(mean) / (N_GROUPS * N_PER_GROUP))
    assert abs(np.median([lag.lag for lag in lags]) - 1.0) < 3 * noise


@pytest.mark.parametrize("n_features, n_per_group", [(3, 200), (30, 30)])
def test_the_lag_ratio_of_exact_draws_is_about_one_whatever_the_dimension_and_the_particles(n_features,
                                                                                             n_per_group):
    # The engine's test of SGHMC (ExactMoveSettings.lag_ratio = 3) must not fire on particles that follow the
    # posterior, with 60 particles in 31 dimensions (more parameters than particles per group) as with 400 in 4.
    model, rows, mean, cov = _posterior(n_features=n_features)
    rng = np.random.default_rng(1)
    ratios = []
    for _ in range(20):
        theta = rng.multivariate_normal(mean, cov, size=N_GROUPS * n_per_group)
        ratios.append(lag_ratio(model, _particles(theta, n_per_group), *rows))
    assert 0.5 < np.median(ratios) < 1.5
    assert max(ratios) < 2.0


def test_the_lag_ratio_of_a_population_three_standard_deviations_behind_exceeds_the_engines_threshold():
    # 60 particles in 31 dimensions: their own noise is sqrt(31 / 60) = 0.72 standard deviations, so a lag of
    # 3 standard deviations reads a ratio near 4.
    model, rows, mean, cov = _posterior(n_features=30)
    rng = np.random.default_rng(2)
    root = np.linalg.cholesky(cov)
    ratios = []
    for _ in range(20):
        direction = rng.normal(size=len(mean))
        white = rng.standard_normal((N_GROUPS * 30, len(mean))) + 3.0 * direction / np.linalg.norm(direction)
        ratios.append(lag_ratio(model, _particles(mean + white @ root.T, 30), *rows))
    assert min(ratios) > 3.0


def test_degraded_widening_scales_with_the_measured_lag():
    assert degraded_widening(False, 0.1, 100, 1000, 1000, PosteriorLag(1.0, 1.0)) == 0.0
    assert degraded_widening(True, 0.1, 100, 1000, 1000, PosteriorLag(0.2, 1.0)) == pytest.approx(2.0)
    assert degraded_widening(True, 0.1, 100, 1000, 1000, PosteriorLag(0.2, 0.25)) == pytest.approx(4.0)
    # A lag measured at one standard deviation or more (or nothing measured) keeps the assumed one.
    assert degraded_widening(True, 0.1, 100, 1000, 1000, PosteriorLag(3.0, 1.0)) == pytest.approx(10.0)
    assert degraded_widening(True, 0.1, 100, 1000, 1000, PosteriorLag(0.8, 0.25)) == pytest.approx(10.0)
    assert degraded_widening(True, 0.1, 100, 1000, 1000, PosteriorLag(math.inf, 0.0)) == pytest.approx(10.0)
    # Beyond the reservoir (no lag measured): the subsample's mode error, at least one standard deviation.
    assert degraded_widening(True, 0.1, 100, 5000, 1000, None) == pytest.approx(20.0)
    assert degraded_widening(True, 0.1, 100, 1500, 1000, None) == pytest.approx(10.0)
