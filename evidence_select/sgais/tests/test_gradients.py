"""SGHMC's gradient estimator read from a model's additive row statistics is the estimator read from the rows."""

import numpy as np
import pytest

from evidence_select.datasets import make_linear_regression
from evidence_select.sgais._engine import sgais_stream
from evidence_select.sgais._settings import StepSettings
from evidence_select.sgais._state import SGAISConfig, evidence_estimate
from evidence_select.models import LinearGaussianModel, check_model


class RowsOnly(LinearGaussianModel):
    """The same model, its likelihood redefined (unchanged): the engine then reads the rows at every gradient."""

    def log_likelihood(self, theta, X, y=None):
        return super().log_likelihood(theta, X, y)


def test_rows_only_model_has_no_statistics_path():
    assert LinearGaussianModel(2).capabilities().gradient_statistics
    assert not RowsOnly(2).capabilities().gradient_statistics


@pytest.mark.parametrize("settings", [
    dict(),  # control variates, BAOAB, beyond the reservoir
    dict(control_variates=False, integrator="sghmc", step_size_schedule="tempered"),
], ids=["defaults", "no_control_variates"])
def test_statistics_and_rows_give_the_same_run(settings):
    """Same seed, same draws: the two paths differ by rounding only, so every particle agrees to ~1e-10 and every
    decision (increments, resamplings) is the same. A wrong weight on the chunk or the mini-batch in either path
    moves the particles by far more."""
    data = make_linear_regression(3000, random_state=3)
    config = SGAISConfig(n_particles=10, n_replicates=2, batch_size=250, exact_move_rows=0, reservoir_size=1000,
                         **settings)
    states = [sgais_stream(np.random.default_rng(0), model, config, data.X, data.y)
              for model in (LinearGaussianModel(data.X.shape[1]), RowsOnly(data.X.shape[1]))]
    np.testing.assert_allclose(states[0].particles, states[1].particles, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(evidence_estimate(states[0]), evidence_estimate(states[1]), rtol=1e-10)


def test_check_model_catches_wrong_statistics():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 3)), rng.normal(size=20)
    check_model(LinearGaussianModel(3), X, y)

    class Halved(LinearGaussianModel):
        def grad_from_statistics(self, theta, statistics):
            return 0.5 * super().grad_from_statistics(theta, statistics)

    with pytest.raises(ValueError, match="grad_from_statistics"):
        check_model(Halved(3), X, y)


def test_curvature_ratio_at_samples_the_past_and_checks_the_model():
    from evidence_select.sgais._moves import curvature_ratio_at
    from evidence_select.sgais._reservoir import reservoir_init, reservoir_insert

    class Ratio(LinearGaussianModel):
        ratio = None

        def curvature_ratio(self, theta, X, sample_weight=None):
            self.seen = (len(X), None if sample_weight is None else np.asarray(sample_weight))
            return self.ratio

    model, theta, X = Ratio(2), np.zeros((4, 3)), np.ones((10, 2))
    reservoir, _ = reservoir_insert(np.random.default_rng(0), reservoir_init(100, 2), np.ones((60, 2)))
    assert curvature_ratio_at(model, theta, X, reservoir, 20) is None  # None: the step scales are exact
    assert curvature_ratio_at(LinearGaussianModel(2), theta, X, reservoir, 20) is None
    model.ratio = np.array([1.0, 0.25, 1e-3])
    np.testing.assert_array_equal(curvature_ratio_at(model, theta, X, reservoir, 20), model.ratio)
    rows, weights = model.seen  # the chunk's 10 rows, then 20 past rows standing for 3 rows each
    assert rows == 30 and np.all(weights[:10] == 1.0) and np.allclose(weights[10:], 3.0)
    model.ratio = np.array([1.0, 0.0, 0.5])
    with pytest.raises(ValueError, match="curvature_ratio must return 3 values in"):
        curvature_ratio_at(model, theta, X, reservoir, 20)


def test_step_gain_and_move_factor_make_up_for_a_flat_posterior_within_the_noise_floor():
    from evidence_select.sgais._moves import sghmc_move_factor, step_gain

    steps = StepSettings()
    ratio = np.array([1.0, 0.25, 1e-3])
    np.testing.assert_allclose(step_gain(ratio, steps.typical_curvature_ratio), [1.0, 1.0, 250.0])  # at 1/4
    np.testing.assert_allclose(step_gain(ratio, 0.01), [1.0, 1.0, 10.0])
    # The curvature asks for 250, the floor grants 10: a shortfall of 25, five times the moves, capped.
    assert sghmc_move_factor(ratio, 0.01, steps) == steps.max_move_factor
    assert sghmc_move_factor(ratio, 0.01, steps._replace(max_move_factor=5)) == 5
    assert sghmc_move_factor(ratio, 0.25, steps) == 1  # granted in full
    assert sghmc_move_factor(np.array([0.2, 0.5]), 1e-4, steps) == 1  # overlapping classes: a shortfall of 1.25
    assert sghmc_move_factor(np.array([0.05, 0.5]), 1e-4, steps) == 2  # a shortfall of 5


def test_relative_step_floor_keeps_the_mini_batch_noise_within_its_share_of_the_refresh():
    from evidence_select.sgais._moves import relative_step_floor

    config = SGAISConfig(learning_rate=0.1, friction=0.2)
    typical, share = config.tuning.steps.typical_curvature_ratio, config.tuning.steps.gradient_noise_share
    refresh = 1.0 - 0.8**2
    assert relative_step_floor(config, 0, 1000, 500) == typical  # no mini-batch, no noise
    assert relative_step_floor(config, 500, 0, 500) == typical  # no past rows
    assert relative_step_floor(config, 500, 1000, 500) == typical  # noise allows the typical ratio
    floor = relative_step_floor(config, 100, 20000, 100)
    # eta = learning_rate floor / n per-row Fisher informations, V = n_past^2 / |B| of them: eta V = share refresh
    np.testing.assert_allclose(0.1 * floor / 20100 * 20000**2 / 100, share * refresh)
