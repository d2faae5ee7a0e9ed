"""The tempering step's reweighting and its error estimate (``_sgais_steps``)."""

import numpy as np

from evidence_select.sgais._steps import count_lineages, resample, reweight, segment_log_variance
from evidence_select.sgais._state import Particles


def _particles(theta, n_groups):
    n_particles = len(theta) // n_groups
    return Particles(theta=theta, log_weights=np.full((n_groups, n_particles), -np.log(n_particles)),
                     log_evidence=np.zeros(n_groups), log_evidence_variance=np.zeros(n_groups), reference=None,
                     reference_grad=None)


def test_segment_log_variance_is_zero_for_uniform_weights_and_one_for_a_single_survivor():
    n = 50
    uniform = np.full((1, n), -np.log(n))
    single = np.full((1, n), -np.inf)
    single[0, 3] = 0.0
    np.testing.assert_allclose(segment_log_variance(uniform), [0.0], atol=1e-12)
    np.testing.assert_allclose(segment_log_variance(single), [np.log1p(1 - 1 / n)], rtol=1e-12)


def test_reweighting_accumulates_the_open_segment_and_resampling_closes_it():
    rng = np.random.default_rng(1)
    particles = _particles(rng.normal(size=(2 * 40, 1)), 2)
    log_lik = -0.5 * (particles.theta[:, 0].reshape(2, 40) - 1.0) ** 2 / 0.3**2
    for _ in range(5):
        particles = reweight(particles, 0.2 * log_lik, "test")
    # Telescoped over the steps: exactly the path importance sampler's variance of the final weights.
    np.testing.assert_allclose(particles.log_evidence_variance, segment_log_variance(particles.log_weights),
                               rtol=1e-12)
    closed = particles.log_evidence_variance.copy()
    particles, n_resampled = resample(rng, particles, threshold=1.0)
    assert n_resampled == 2
    np.testing.assert_array_equal(particles.log_evidence_variance, closed)
    particles = reweight(particles, 0.1 * log_lik, "test")
    np.testing.assert_allclose(particles.log_evidence_variance, closed + segment_log_variance(particles.log_weights),
                               rtol=1e-12)


def test_error_estimate_matches_the_spread_when_the_particles_do_not_move():
    # A Gaussian likelihood annealed in 8 steps over particles drawn from the N(0, 1) prior and never moved:
    # every particle carries its weight from step to step, the case where a sum of per-step variances
    # under-reads (here by a factor of ~4.6). 2000 independent groups of 100 particles give the spread of
    # log Z directly; the sample variance of 2000 values has a relative error of ~3-5%, the mean estimate less,
    # so 20% is several standard errors (the delta method's own error at a variance of 0.03 is ~1%).
    mean, sd, n_particles, n_groups, n_steps = 1.5, 0.5, 100, 2000, 8
    exact = np.log(sd / np.sqrt(1 + sd**2)) - mean**2 / (2 * (1 + sd**2))
    rng = np.random.default_rng(0)
    particles = _particles(rng.normal(size=(n_groups * n_particles, 1)), n_groups)
    log_lik = -0.5 * (particles.theta[:, 0].reshape(n_groups, n_particles) - mean) ** 2 / sd**2
    for _ in range(n_steps):
        particles = reweight(particles, log_lik / n_steps, "test")
    spread = np.var(particles.log_evidence - exact)
    estimated = np.mean(particles.log_evidence_variance)
    assert 0.8 < estimated / spread < 1.25, (estimated, spread)


def test_resampling_carries_the_origins_and_lineages_count_the_survivors():
    rng = np.random.default_rng(2)
    n_groups, n_particles = 2, 8
    theta = np.arange(n_groups * n_particles, dtype=float)[:, None]
    particles = _particles(theta, n_groups)._replace(origins=np.arange(n_groups * n_particles))
    assert count_lineages(particles) == n_particles
    log_weights = np.full((n_groups, n_particles), -np.inf)
    log_weights[0, [1, 5]] = 0.0  # group 0 keeps two particles
    log_weights[1, 3] = 0.0  # group 1 keeps one
    particles, _ = resample(rng, particles._replace(log_weights=log_weights), threshold=1.0)
    # Each particle keeps the origin of the particle it copies, so origins and theta move together.
    np.testing.assert_array_equal(particles.origins, particles.theta[:, 0].astype(int))
    assert set(particles.origins[:n_particles]) == {1, 5} and set(particles.origins[n_particles:]) == {11}
    assert count_lineages(particles) == 2  # the largest over groups
    assert count_lineages(particles._replace(origins=None)) == 0
