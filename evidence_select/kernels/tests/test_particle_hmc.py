"""The group-preconditioned HMC move: exact invariance, and mobility along flat directions."""

import numpy as np

from evidence_select.kernels._particle_hmc import _held_out_factors, particle_hmc_move

# A correlated Gaussian whose scales differ 100-fold: the shape of a nearly separable classifier's posterior.
SCALES = np.array([0.1, 1.0, 10.0])
ROTATION = np.linalg.qr(np.random.default_rng(3).normal(size=(3, 3)))[0]
COVARIANCE = ROTATION @ np.diag(SCALES**2) @ ROTATION.T
PRECISION = np.linalg.inv(COVARIANCE)


def _log_density(theta):
    return -0.5 * np.einsum("ij,jk,ik->i", theta, PRECISION, theta), -theta @ PRECISION, None


def _draws(rng, n):
    return rng.normal(size=(n, 3)) * SCALES @ ROTATION.T


def test_exact_draws_stay_exact_draws():
    """Started from the target, 2000 particles (4 groups) keep its covariance after 20 moves: within 4 standard
    errors of each variance (se of a sample variance is sqrt(2 / n) relative)."""
    rng = np.random.default_rng(0)
    theta, step = _draws(rng, 2000), 0.5
    for _ in range(20):
        theta, info = particle_hmc_move(rng, theta, _log_density, n_groups=4, step_size=step, n_transitions=2)
        step = info.step_size
    variances = np.einsum("ij,jk,ik->i", ROTATION.T, np.cov(theta, rowvar=False), ROTATION.T)
    assert np.all(np.abs(variances / SCALES**2 - 1.0) < 4 * np.sqrt(2.0 / len(theta)))
    assert 0.5 < info.acceptance_rate < 0.95


def test_particles_spread_back_along_the_flat_direction():
    """Particles squeezed to a tenth of the target's width along the flat direction (as after a class-sorted
    chunk) regain its full width within 30 moves; a kernel with steps bounded by the stiff scale (0.1) cannot."""
    rng = np.random.default_rng(1)
    theta = _draws(rng, 400)
    flat = ROTATION[:, 2]
    theta -= 0.9 * np.outer(theta @ flat, flat)
    step = 0.5
    for _ in range(30):
        theta, info = particle_hmc_move(rng, theta, _log_density, n_groups=2, step_size=step, n_transitions=2)
        step = info.step_size
    spread = np.std(theta @ flat)
    assert 0.8 * SCALES[2] < spread < 1.2 * SCALES[2], spread


def test_a_groups_mass_comes_from_the_other_groups_only():
    """No particle (nor a resampled copy of it) shapes its own kernel: group 0's mass ignores group 0's particles
    and follows group 1's; a single group's particles each get their mass from the group's other particles."""
    theta = _draws(np.random.default_rng(2), 40)
    factors = _held_out_factors(theta, 2, None)
    moved_own, moved_other = theta.copy(), theta.copy()
    moved_own[:20] *= 5.0
    moved_other[20:] *= 5.0
    np.testing.assert_array_equal(_held_out_factors(moved_own, 2, None)[:20], factors[:20])
    assert not np.allclose(_held_out_factors(moved_other, 2, None)[:20], factors[:20])
    np.testing.assert_array_equal(factors[:20], np.repeat(factors[:1], 20, axis=0))  # one mass per group
    single = _held_out_factors(theta[:20], 1, None)
    copied = theta[:20].copy()
    copied[0] *= 5.0  # particle 0's own position is left out of its own mass, not of the others'
    np.testing.assert_array_equal(_held_out_factors(copied, 1, None)[0], single[0])
    assert not np.allclose(_held_out_factors(copied, 1, None)[1], single[1])
