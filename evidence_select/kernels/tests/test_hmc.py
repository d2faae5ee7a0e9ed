"""HMC kernel: invariance (recovers a Gaussian), divergences, adaptation, mass matrix."""

import numpy as np

from evidence_select.kernels._hmc import (adapt_step_size, hmc_init, hmc_step, preconditioner_from_samples)

FACTOR = np.array([[1.0, 0.0], [1.8, 0.6]])
COV = FACTOR @ FACTOR.T
PRECISION = np.linalg.inv(COV)
MEAN = np.array([1.0, -2.0])


def gaussian_fn(x):
    diff = x - MEAN
    return -0.5 * np.einsum("ij,jk,ik->i", diff, PRECISION, diff), -diff @ PRECISION, None


def _run(inv_mass_factor, step_size, n_steps=300, n_chains=200, seed=1):
    rng = np.random.default_rng(seed)
    state = hmc_init(np.zeros((n_chains, 2)), gaussian_fn)
    draws = []
    for i in range(n_steps):
        state, info = hmc_step(rng, state, gaussian_fn, step_size, 8, inv_mass_factor)
        if i >= 50:
            draws.append(state.position)
    return np.concatenate(draws), info


def test_recovers_correlated_gaussian_identity_mass():
    draws, info = _run(None, 0.3)
    # 250 x 200 correlated draws: effective size >~ 5e3, so mean SE < 0.03 and 0.1 is > 3 SE.
    np.testing.assert_allclose(draws.mean(axis=0), MEAN, atol=0.1)
    np.testing.assert_allclose(np.cov(draws.T), COV, atol=0.2, rtol=0.1)
    assert info.acceptance_rate.mean() > 0.5


def test_recovers_correlated_gaussian_dense_mass():
    draws, info = _run(np.linalg.cholesky(COV), 0.8)
    np.testing.assert_allclose(draws.mean(axis=0), MEAN, atol=0.05)
    np.testing.assert_allclose(np.cov(draws.T), COV, atol=0.1, rtol=0.05)


def test_divergent_trajectories_are_rejected():
    rng = np.random.default_rng(0)
    state = hmc_init(np.zeros((10, 2)), gaussian_fn)
    new, info = hmc_step(rng, state, gaussian_fn, 1e3, 5)
    assert np.all(~info.is_accepted) and np.all(info.acceptance_rate == 0.0)
    np.testing.assert_array_equal(new.position, state.position)


def test_aux_is_carried_with_the_accepted_state():
    def fn(x):
        log_density, grad, _ = gaussian_fn(x)
        return log_density, grad, x[:, :1] * 2.0

    rng = np.random.default_rng(0)
    state = hmc_init(np.zeros((5, 2)), fn)
    for _ in range(3):
        state, _ = hmc_step(rng, state, fn, 0.3, 4)
    np.testing.assert_allclose(state.aux, state.position[:, :1] * 2.0)


def test_step_size_adaptation_direction_and_bounds():
    assert adapt_step_size(0.1, [0.99]) > 0.1
    assert adapt_step_size(0.1, [0.1]) < 0.1
    assert adapt_step_size(1.9, [1.0], gain=10.0) == 2.0


def test_preconditioner_weighted():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 2)) @ FACTOR.T
    L = preconditioner_from_samples(x, np.zeros(len(x)), shrinkage=0.0)
    np.testing.assert_allclose(L @ L.T, COV, rtol=0.1, atol=0.05)
    # A -inf weight removes a point entirely.
    log_w = np.zeros(3)
    log_w[2] = -np.inf
    sd = preconditioner_from_samples(np.array([[0.0], [2.0], [100.0]]), log_w, dense=False)
    np.testing.assert_allclose(sd, [1.0], rtol=1e-6)
