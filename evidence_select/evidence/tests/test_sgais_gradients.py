"""SGHMC's gradient estimator read from a model's additive row statistics is the estimator read from the rows."""

import numpy as np
import pytest

from evidence_select.datasets import make_linear_regression
from evidence_select.evidence._sgais import sgais_stream
from evidence_select.evidence._sgais_moves import offers_gradient_statistics
from evidence_select.evidence._sgais_state import SGAISConfig, evidence_estimate
from evidence_select.models import LinearGaussianModel, check_model


class RowsOnly(LinearGaussianModel):
    """The same model, its likelihood redefined (unchanged): the engine then reads the rows at every gradient."""

    def log_likelihood(self, theta, X, y=None):
        return super().log_likelihood(theta, X, y)


def test_rows_only_model_has_no_statistics_path():
    assert offers_gradient_statistics(LinearGaussianModel(2))
    assert not offers_gradient_statistics(RowsOnly(2))


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
