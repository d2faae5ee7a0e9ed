"""Kernels: SGHMC, ESS schedule, resampling, reservoir (seeded, emcee-style integration tests)."""

import numpy as np
import pytest

from evidence_select.sgais._reservoir import reservoir_data, reservoir_init, reservoir_insert, reservoir_undo
from evidence_select.kernels._resampling import systematic_resample
from evidence_select.kernels._schedule import conditional_ess_fraction, next_tempering_increment
from evidence_select.kernels._sghmc import sghmc_trajectory


def test_sghmc_recovers_gaussian_mean_and_covariance():
    rng = np.random.default_rng(0)
    mean = np.array([1.0, -2.0])
    cov = np.array([[1.0, 0.6], [0.6, 2.0]])
    precision = np.linalg.inv(cov)
    theta = rng.normal(size=(4000, 2))
    theta = sghmc_trajectory(rng, theta, lambda t, s: -(t - mean) @ precision, step_size=0.02, friction=0.2,
                             n_steps=400)
    # 4000 nearly independent chains: Monte Carlo error of the mean ~ sqrt(2/4000) ~ 0.02;
    # discretisation bias of SGHMC at eta = 0.02 is O(eta) on the covariance.
    np.testing.assert_allclose(theta.mean(axis=0), mean, atol=0.08)
    np.testing.assert_allclose(np.cov(theta.T), cov, atol=0.12)


def test_sghmc_with_noisy_gradients_stays_close():
    rng = np.random.default_rng(1)
    noise_rng = np.random.default_rng(2)
    theta = rng.normal(size=(3000, 1)) * 3
    theta = sghmc_trajectory(rng, theta, lambda t, s: -t + 0.3 * noise_rng.normal(size=t.shape),
                             step_size=0.01, friction=0.3, n_steps=600)
    assert abs(theta.mean()) < 0.1 and abs(theta.var() - 1.0) < 0.12


def test_schedule_takes_whole_step_when_allowed():
    log_weights = np.full((2, 5), -np.log(5))
    log_lik = np.zeros((2, 5)) - 3.0  # identical particles: ESS is always full
    assert next_tempering_increment(log_weights, log_lik, 0.4, 0.9) == 0.4


@pytest.mark.parametrize("target", [0.3, 0.5, 0.9, 0.99])
def test_schedule_hits_target_and_never_passes_one(target):
    rng = np.random.default_rng(3)
    log_weights = np.log(rng.dirichlet(np.ones(20), size=3))
    log_lik = rng.normal(scale=50.0, size=(3, 20))
    delta = next_tempering_increment(log_weights, log_lik, 0.7, target)
    assert 0 < delta <= 0.7
    assert conditional_ess_fraction(log_weights, log_lik, np.array([delta]))[0] == pytest.approx(target, rel=0.02)
    assert conditional_ess_fraction(log_weights, log_lik, np.array([delta]))[0] >= target * (1 - 1e-9)


def test_schedule_with_dead_particles():
    log_weights = np.full((1, 4), -np.log(4))
    log_lik = np.array([[-1.0, -np.inf, -2.0, -1.5]])
    delta = next_tempering_increment(log_weights, log_lik, 1.0, 0.9)
    assert 0 < delta <= 1.0 and np.isfinite(delta)


@pytest.mark.parametrize("log_weights", [
    np.log([0.1, 0.2, 0.3, 0.4]),
    np.array([0.0, -np.inf, 1.0, -np.inf]),
    np.array([-1e4, -1e4 + 1.0, -1e4 - 2.0, -np.inf]),
])
def test_systematic_resampling_is_unbiased(log_weights):
    rng = np.random.default_rng(4)
    n = len(log_weights)
    probabilities = np.exp(log_weights - np.logaddexp.reduce(log_weights))
    counts = np.zeros(n)
    n_repeats = 20000
    ancestors = systematic_resample(rng, np.tile(log_weights, (n_repeats, 1)))
    for i in range(n):
        counts[i] = np.mean(np.sum(ancestors == i, axis=1))
    # E[count_i] = n * W_i; the count of each particle varies by at most 1 around n W_i,
    # so the mean over 20000 repeats has standard error <= 0.5 / sqrt(20000) ~ 0.004.
    np.testing.assert_allclose(counts, n * probabilities, atol=0.02)
    assert not np.any(np.isin(np.flatnonzero(np.isneginf(log_weights)), ancestors))


def test_reservoir_holds_uniform_sample():
    capacity, n_stream, n_repeats = 10, 50, 4000
    hits = np.zeros(n_stream)
    for repeat in range(n_repeats):
        rng = np.random.default_rng(repeat)
        state = reservoir_init(capacity, 1, y_dtype=np.int64)
        for start in range(0, n_stream, 7):  # uneven chunks cross the capacity boundary
            rows = np.arange(start, min(start + 7, n_stream))
            state, _ = reservoir_insert(rng, state, rows[:, None].astype(float), rows)
        X, y = reservoir_data(state)
        assert len(X) == capacity and np.array_equal(X[:, 0].astype(int), y)
        hits[y] += 1
    # Each row is kept with probability capacity / n_stream = 0.2; binomial sd ~ 0.0063.
    np.testing.assert_allclose(hits / n_repeats, capacity / n_stream, atol=0.03)


def test_reservoir_undo_restores_buffer():
    rng = np.random.default_rng(5)
    state = reservoir_init(5, 2)
    state, _ = reservoir_insert(rng, state, np.arange(10.0).reshape(5, 2))
    before = state.X.copy()
    new_state, undo = reservoir_insert(rng, state, np.full((20, 2), -1.0))
    assert not np.array_equal(new_state.X, before)
    reservoir_undo(new_state, undo)
    np.testing.assert_array_equal(state.X, before)
    assert state.n_seen == 5 and new_state.n_seen == 25
