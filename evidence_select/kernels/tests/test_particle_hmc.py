"""The group-preconditioned HMC move: exact invariance, and mobility along flat directions."""

import numpy as np
import pytest

from evidence_select.kernels import _particle_hmc
from evidence_select.kernels._hmc import start_correlation
from evidence_select.kernels._particle_hmc import particle_hmc_move, particle_hmc_move_until_decorrelated

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


def test_groups_are_independent():
    """A group's moves depend only on its own particles (its preconditioner and step-size adaptation): changing
    group 1 leaves group 0's result unchanged for the same random stream."""
    theta = _draws(np.random.default_rng(2), 40)
    other = theta.copy()
    other[20:] *= 5.0
    first, _ = particle_hmc_move(np.random.default_rng(7), theta, _log_density, n_groups=2, step_size=0.3,
                                 n_transitions=3)
    second, _ = particle_hmc_move(np.random.default_rng(7), other, _log_density, n_groups=2, step_size=0.3,
                                  n_transitions=3)
    np.testing.assert_array_equal(first[:20], second[:20])


@pytest.mark.slow
def test_fixed_step_moves_keep_few_particles_in_many_dimensions_exact(monkeypatch):
    """Ten particles per group in 20 dimensions (scales 0.1 to 10), started from exact draws, keep the target's
    variances over 40 moves at a fixed step: every particle's mass comes from the other half of its group, which
    does not move with it, so the particles stay independent exact draws and the pooled mean of ``z**2`` over
    500 particles x 20 coordinates stays within 4 standard errors (sqrt(2 / 10000)) of 1. A mass from the whole
    group, the moving particle included, fails: the particles shaping their own kernels move it to ~1.12."""
    monkeypatch.setattr(_particle_hmc, "adapt_step_size", lambda step_size, rate, target: float(step_size))
    scales = np.geomspace(0.1, 10.0, 20)

    def log_density(theta):
        return -0.5 * np.sum((theta / scales) ** 2, axis=1), -theta / scales**2, None

    rng = np.random.default_rng(0)
    theta = rng.normal(size=(500, 20)) * scales
    for _ in range(40):
        theta, _ = particle_hmc_move(rng, theta, log_density, n_groups=50, step_size=0.3, n_transitions=2)
    z_squared = np.mean((theta / scales) ** 2)
    assert abs(z_squared - 1.0) < 4 * np.sqrt(2.0 / theta.size), z_squared


def test_copies_of_a_particle_move_in_the_same_half():
    """Resampled copies (identical rows) never end up in different halves, and the halves stay near equal."""
    rng = np.random.default_rng(4)
    group = rng.normal(size=(30, 3))[np.sort(rng.integers(0, 30, size=30))]
    first = _particle_hmc._first_half(group)
    moving_first = {tuple(row) for row in group[first]}
    assert moving_first.isdisjoint(tuple(row) for row in group[~first])
    largest_copies = max(np.unique(group, axis=0, return_counts=True)[1])
    assert abs(np.count_nonzero(first) - 15) <= largest_copies


def test_no_repeats_is_one_move():
    """With ``max_repeats=0`` the repeated move is exactly one :func:`particle_hmc_move` (same stream, same result)."""
    theta = _draws(np.random.default_rng(4), 60)
    once, info = particle_hmc_move(np.random.default_rng(5), theta, _log_density, n_groups=2, step_size=0.3,
                                   n_transitions=2)
    repeated, repeated_info = particle_hmc_move_until_decorrelated(
        np.random.default_rng(5), theta, _log_density, n_groups=2, step_size=0.3, max_repeats=0, n_transitions=2)
    np.testing.assert_array_equal(once, repeated)
    np.testing.assert_array_equal(info.step_size, repeated_info.step_size)
    assert info.n_evaluations == repeated_info.n_evaluations
    np.testing.assert_array_equal(repeated_info.n_moves, [1, 1])


def test_a_group_that_remembers_its_start_moves_again():
    """Group 0 holds 10 draws of the target, 100 copies each (a population just resampled from few particles):
    after one short move its particles still correlate with where they began (> 0.1), so it moves again, until
    they do not. Group 1 (1000 distinct draws) has forgotten its start after the same first move and stops: each
    group's count is decided from its own particles."""
    rng = np.random.default_rng(6)
    theta = np.concatenate([np.repeat(_draws(rng, 10), 100, axis=0), _draws(rng, 1000)])
    options = dict(n_groups=2, step_size=0.5, n_transitions=2, trajectory_length=2.0)
    once, _ = particle_hmc_move(np.random.default_rng(7), theta, _log_density, **options)
    moved, info = particle_hmc_move_until_decorrelated(np.random.default_rng(7), theta, _log_density,
                                                       max_repeats=3, **options)
    assert start_correlation(theta[:1000], once[:1000]) > 0.1
    assert start_correlation(theta[1000:], once[1000:]) < 0.1
    np.testing.assert_array_equal(info.n_moves, [2, 1])
    assert info.start_correlation[0] == start_correlation(theta[:1000], moved[:1000])
    np.testing.assert_array_equal(once[1000:], moved[1000:])
    assert start_correlation(theta[:1000], moved[:1000]) < 0.1


def test_repeated_moves_keep_exact_draws_exact():
    """Started from the target, 2000 particles (4 groups) keep its covariance after 20 repeated moves (4 standard
    errors of each variance, as for one move)."""
    rng = np.random.default_rng(8)
    theta, step = _draws(rng, 2000), 0.5
    for _ in range(20):
        theta, info = particle_hmc_move_until_decorrelated(rng, theta, _log_density, n_groups=4, step_size=step,
                                                           n_transitions=1, trajectory_length=1.0)
        step = info.step_size
    variances = np.einsum("ij,jk,ik->i", ROTATION.T, np.cov(theta, rowvar=False), ROTATION.T)
    assert np.all(np.abs(variances / SCALES**2 - 1.0) < 4 * np.sqrt(2.0 / len(theta)))
