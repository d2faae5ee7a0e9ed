"""The adapted HMC sampler: the fixed kernel leaves an exactly sampleable target invariant; warm-up adapts.

Invariance (as in the issue): 4000 chains start at exact draws of a tempered
banana (``a ~ N(0, 1/beta)``, ``b | a ~ N(a^2, 0.5^2/beta)``, ``beta = 0.5``) and
run 10 transitions of the kernel with a step size large enough that the
Metropolis correction matters. The final positions must still be exact draws:
two-sample KS tests per coordinate against fresh exact draws (p > 1e-3, three
tests) and the means within 5 standard errors. A kernel without its accept step
drifts by many standard errors.
"""

import numpy as np
import pytest
from scipy import stats

from evidence_select.kernels._adaptive_hmc import SamplerSettings, run_fixed_kernel, sample_chains
from evidence_select.kernels._hmc import hmc_init

BETA = 0.5
SB = 0.5


def _banana(x):
    a, b = x[:, 0], x[:, 1]
    res = (b - a**2) / SB**2
    log_density = BETA * (-0.5 * a**2 - 0.5 * (b - a**2) ** 2 / SB**2)
    grad = BETA * np.stack([-a + 2 * a * res, -res], axis=1)
    return log_density, grad, None


def _exact(rng, n):
    a = rng.normal(size=n) / np.sqrt(BETA)
    return np.stack([a, a**2 + SB / np.sqrt(BETA) * rng.normal(size=n)], axis=1)


@pytest.mark.parametrize("step_jitter", [1.0, 0.3])
def test_fixed_kernel_leaves_exact_draws_exact(step_jitter):
    rng = np.random.default_rng(0)
    state = hmc_init(_exact(rng, 4000), _banana)
    settings = SamplerSettings(trajectory_length=1.5, step_jitter=step_jitter)
    state, draws, _, _, acceptance, _ = run_fixed_kernel(rng, state, _banana, 0.45, np.ones(2), 10, settings)
    assert 0.3 < acceptance < 0.95  # the correction is active
    final, fresh = state.position, _exact(rng, 20000)
    for j in range(2):
        assert stats.ks_2samp(final[:, j], fresh[:, j]).pvalue > 1e-3
    assert stats.ks_2samp(final[:, 1] - final[:, 0] ** 2, fresh[:, 1] - fresh[:, 0] ** 2).pvalue > 1e-3
    exact_mean = np.array([0.0, 1.0 / BETA])
    se = fresh.std(axis=0) / np.sqrt(len(final))
    assert np.all(np.abs(final.mean(axis=0) - exact_mean) < 5 * se)


def test_warmup_adapts_step_and_mass_and_recovers_moments():
    cov = np.array([[4.0, 1.9], [1.9, 1.0]])
    prec = np.linalg.inv(cov)

    def gaussian(x):
        return -0.5 * np.einsum("ni,ij,nj->n", x, prec, x), -x @ prec, None

    rng = np.random.default_rng(1)
    out = sample_chains(rng, gaussian, 5 * rng.normal(size=(8, 2)), SamplerSettings(n_warmup=300, n_draws=500))
    assert out.inv_mass_factor.shape == (2, 2)  # dense: 8 chains x the windows' draws >> 10 d
    np.testing.assert_allclose(out.inv_mass_factor @ out.inv_mass_factor.T, cov, rtol=0.3, atol=0.3)
    assert 0.6 < out.acceptance < 0.95
    flat = out.draws.reshape(-1, 2)
    np.testing.assert_allclose(np.cov(flat.T), cov, rtol=0.15, atol=0.1)
    assert np.all(np.abs(flat.mean(axis=0)) < 0.15)
    assert out.n_evaluations > 8 * 800


# -- a target whose thin directions are rotated away from the axes ---------------------------------------------
# Pairs of coordinates with standard deviation 1 along their sum and THIN along their difference: a softmax's
# class weights under many rows look like this (the data fix the differences, only the prior the sums).
THIN = 0.01
N_PAIRS = 5


def _pairs_covariance():
    rotation = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2.0)
    block = rotation @ np.diag([1.0, THIN**2]) @ rotation.T
    return np.kron(np.eye(N_PAIRS), block)


PAIRS_COV = _pairs_covariance()
PAIRS_PREC = np.linalg.inv(PAIRS_COV)


def _pairs(x):
    return -0.5 * np.einsum("ni,ij,nj->n", x, PAIRS_PREC, x), -x @ PAIRS_PREC, None


def _whitened_eigenvalues(factor, cov):
    """Eigenvalues of ``cov`` in the frame whitened by ``factor``: all 1 for a perfect mass."""
    whitening = np.linalg.inv(factor)
    return np.linalg.eigvalsh(whitening @ cov @ whitening.T)


def test_warmup_mass_keeps_the_thin_directions_of_a_correlated_target():
    """Ample warm-up draws give the dense mass unshrunk: whitened, every direction is near unit scale, and the
    step is of order one. Shrunk by 5% towards its diagonal, the thin directions would sit ~0.06 wide in the
    whitened frame, and the step would follow them down."""
    rng = np.random.default_rng(2)
    start = rng.multivariate_normal(np.zeros(2 * N_PAIRS), PAIRS_COV, size=16)
    out = sample_chains(rng, _pairs, start, SamplerSettings(n_warmup=300, n_draws=50))
    assert out.inv_mass_factor.shape == (2 * N_PAIRS, 2 * N_PAIRS)
    eigenvalues = _whitened_eigenvalues(out.inv_mass_factor, PAIRS_COV)
    assert 0.25 < eigenvalues.min() and eigenvalues.max() < 4.0, eigenvalues
    assert out.step_size > 0.4
