"""HMC kernel: invariance (recovers a Gaussian), divergences, adaptation, mass matrix."""

import numpy as np

from evidence_select.kernels._hmc import (KickedTarget, _apply, _apply_t, adapt_step_size, hmc_init, hmc_step,
                                          jittered_leapfrog_count, leapfrog, preconditioner_from_samples)

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


def test_per_chain_leapfrog_counts_end_each_chain_after_its_own_count():
    # Each chain with its own count must end exactly where a run of that count alone ends: the chains that
    # finished early stay put (with a final half kick), so every chain's move is a proper leapfrog trajectory.
    rng = np.random.default_rng(3)
    state = hmc_init(rng.normal(size=(3, 2)), gaussian_fn)
    momentum, step = rng.normal(size=(3, 2)), np.full((3, 1), 0.2)
    counts = np.array([2, 7, 4])
    mixed, mixed_r = leapfrog(state, momentum, gaussian_fn, step, counts, np.ones(2))
    for chain, count in enumerate(counts):
        alone, alone_r = leapfrog(state, momentum, gaussian_fn, step, int(count), np.ones(2))
        np.testing.assert_array_equal(mixed.position[chain], alone.position[chain])
        np.testing.assert_array_equal(mixed_r[chain], alone_r[chain])
        np.testing.assert_array_equal(mixed.grad_log_density[chain], alone.grad_log_density[chain])


def _run_jittered(target, seed, n_steps=300, n_chains=200):
    """Draws of ``n_chains`` chains after 50 of ``n_steps`` transitions with per-chain jittered leapfrog counts."""
    rng = np.random.default_rng(seed)
    state = hmc_init(np.zeros((n_chains, 2)), target)
    draws = []
    for i in range(n_steps):
        counts = jittered_leapfrog_count(rng, np.full(n_chains, 0.3), 2.0, 12)
        state, _ = hmc_step(rng, state, target, 0.3, counts)
        if i >= 50:
            draws.append(state.position)
    return np.concatenate(draws)


def test_per_chain_leapfrog_counts_recover_the_gaussian():
    # Counts drawn per chain and transition independently of the state: still an invariant kernel.
    draws = _run_jittered(gaussian_fn, seed=4)
    # as test_recovers_correlated_gaussian_identity_mass: mean SE < 0.03
    np.testing.assert_allclose(draws.mean(axis=0), MEAN, atol=0.1)
    np.testing.assert_allclose(np.cov(draws.T), COV, atol=0.2, rtol=0.1)


def _poorly_kicked_gaussian(calls):
    """The Gaussian with kicks from 0.7 times its gradient in single precision: leapfrog alone would sample a
    target 1/0.7 times wider, so only the Metropolis correction with the exact density keeps the Gaussian."""
    def kick_gradient(x):
        calls["kick"] += len(x)
        return (0.7 * gaussian_fn(x)[1]).astype(np.float32)

    def density(x):
        calls["density"] += len(x)
        return gaussian_fn(x)[0], None

    return KickedTarget(gaussian_fn, kick_gradient, density)


def test_kicked_target_recovers_the_gaussian():
    draws = _run_jittered(_poorly_kicked_gaussian({"kick": 0, "density": 0}), seed=5)
    # as test_recovers_correlated_gaussian_identity_mass: mean SE < 0.03; the uncorrected kicks' covariance is
    # COV / 0.7, 43% too wide, far outside rtol=0.1
    np.testing.assert_allclose(draws.mean(axis=0), MEAN, atol=0.1)
    np.testing.assert_allclose(np.cov(draws.T), COV, atol=0.2, rtol=0.1)


def test_kicked_target_reads_the_density_at_trajectory_ends_only():
    calls = {"kick": 0, "density": 0}
    target = _poorly_kicked_gaussian(calls)
    state = hmc_init(np.zeros((4, 2)), target)
    np.testing.assert_array_equal(state.grad_log_density, target.kick_gradient_fn(np.zeros((4, 2))))
    calls.update(kick=0, density=0)
    state, _ = hmc_step(np.random.default_rng(0), state, target, 0.3, 6)
    assert calls == {"kick": 4 * 6, "density": 4}
    np.testing.assert_array_equal(state.grad_log_density, target.kick_gradient_fn(state.position))


def test_jittered_leapfrog_count_covers_the_trajectory_length():
    counts = jittered_leapfrog_count(np.random.default_rng(0), np.full(10_000, 0.25), 2.0, 64)
    # lengths uniform in [1, 3] at step 0.25, rounded up: 5 to 12 steps equally often, 8.5 on average
    assert counts.min() == 5 and counts.max() == 12 and abs(counts.mean() - 8.5) < 0.1
    assert np.all(jittered_leapfrog_count(np.random.default_rng(0), np.full(5, 1e-6), 2.0, 20) == 20)


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


def test_mass_factors_apply_to_each_row_and_each_group_its_own():
    # L v and L^T v row by row, for a diagonal, one matrix, and a stack whose g-th factor moves the g-th block of
    # rows: fails if a group's block meets another group's factor or a factor is transposed.
    rng = np.random.default_rng(0)
    n_groups, n_per_group, d = 3, 4, 5
    v = rng.standard_normal((n_groups * n_per_group, d))
    stack = np.tril(rng.standard_normal((n_groups, d, d)))
    diagonal = rng.uniform(0.5, 2.0, d)
    for factor, per_row in ((diagonal, lambda i: np.diag(diagonal)), (stack[0], lambda i: stack[0]),
                            (stack, lambda i: stack[i // n_per_group])):
        expected = [per_row(i) @ row for i, row in enumerate(v)]
        np.testing.assert_allclose(_apply(factor, v), expected, rtol=1e-12, atol=1e-12)
        expected_t = [per_row(i).T @ row for i, row in enumerate(v)]
        np.testing.assert_allclose(_apply_t(factor, v), expected_t, rtol=1e-12, atol=1e-12)
