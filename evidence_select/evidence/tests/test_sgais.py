"""The SGAIS engine against the exact linear evidence."""

import numpy as np
import pytest

from evidence_select.datasets import make_linear_regression
from evidence_select.evidence._sgais import SGAISConfig, evidence_estimate, sgais_init, sgais_update
from evidence_select.models import LinearGaussianModel


def run_sgais(X, y, model, config, seed):
    state = sgais_init(np.random.default_rng(seed), model, config, X.shape[1], np.float64)
    records = []
    for start in range(0, len(X), config.batch_size):
        state, record, _ = sgais_update(state, X[start:start + config.batch_size], y[start:start + config.batch_size],
                                        model, config)
        records.append(record)
    return state, records


@pytest.mark.parametrize("seed", range(5))
def test_sgais_matches_exact_linear_evidence_within_reported_error(seed):
    # 8 replicate groups: the reported std is a 7-dof estimate, so |error| / std follows
    # roughly a t(7) law; P(|t7| > 5) ~ 0.0016 per run. A broken update (e.g. dropping the
    # weight increment) is off by hundreds of nats and fails by orders of magnitude.
    data = make_linear_regression(3000, random_state=100 + seed)
    model = LinearGaussianModel(5)
    config = SGAISConfig(n_replicates=8)
    state, records = run_sgais(data.X, data.y, model, config, seed)
    exact = model.exact_log_evidence(data.X, data.y)
    log_z, std = evidence_estimate(state)
    assert records[-1].log_evidence == log_z
    assert 0 < std < 2.0
    assert abs(log_z - exact) < 5 * std + 1e-3


def test_sgais_unbiased_over_seeds_and_std_calibrated():
    data = make_linear_regression(2000, random_state=7)
    model = LinearGaussianModel(5)
    exact = model.exact_log_evidence(data.X, data.y)
    errors, stds = [], []
    for seed in range(8):
        state, _ = run_sgais(data.X, data.y, model, SGAISConfig(), seed)
        log_z, std = evidence_estimate(state)
        errors.append(log_z - exact)
        stds.append(std)
    errors, stds = np.array(errors), np.array(stds)
    # Mean of 8 errors: its standard error is ~ rms(std) / sqrt(8).
    assert abs(errors.mean()) < 3.5 * np.sqrt(np.mean(stds**2) / 8)
    # Reported std within a factor 3 of the observed spread (8 seeds: the spread itself is
    # known only to ~25%).
    assert 1 / 3 < np.std(errors, ddof=1) / np.mean(stds) < 3


def test_history_records():
    data = make_linear_regression(1200, random_state=1)
    _, records = run_sgais(data.X, data.y, LinearGaussianModel(5), SGAISConfig(), 0)
    assert [r.n_samples_seen for r in records] == [500, 1000, 1200]
    assert all(r.n_annealing_steps >= 1 and 1 <= r.ess <= SGAISConfig().n_particles and r.seconds > 0 for r in records)
    increments = np.diff([0.0] + [r.log_evidence for r in records]) / np.diff([0, 500, 1000, 1200])
    np.testing.assert_allclose(increments, [r.log_predictive_per_datum for r in records], rtol=1e-10)


def test_paper_settings_run():
    from evidence_select.evidence._sgais import PAPER_SETTINGS

    data = make_linear_regression(1000, random_state=2)
    model = LinearGaussianModel(5)
    config = SGAISConfig(**{**PAPER_SETTINGS, "n_mcmc_steps": 5, "n_replicates": 4})
    state, records = run_sgais(data.X, data.y, model, config, 0)
    # The paper's settings stay reachable and numerically sound (no control-variate state);
    # their accuracy is measured in benchmarks/bench_sgais.py, not asserted here.
    assert state.reference is None
    assert all(np.isfinite(r.log_evidence) and r.log_evidence < 0 for r in records)
