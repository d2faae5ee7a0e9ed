"""Split R-hat, bulk ESS and the integrated autocorrelation time on series with known answers.

AR(1) chains ``x_t = phi x_{t-1} + e_t`` have ``tau = (1 + phi) / (1 - phi)`` and
bulk ESS ``n / tau``; tolerances are a few times the estimators' sampling spread
at these lengths (4 chains of 5000 draws).
"""

import numpy as np
import pytest

from evidence_select.utils._diagnostics import ess_bulk, integrated_autocorrelation_time, split_rhat


def _ar1(rng, phi, n_chains=4, n_iter=5000, n_params=1):
    x = np.zeros((n_chains, n_iter, n_params))
    noise = rng.normal(size=x.shape) * np.sqrt(1 - phi**2)
    x[:, 0] = rng.normal(size=(n_chains, n_params))
    for t in range(1, n_iter):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


@pytest.mark.parametrize("phi", [0.0, 0.8])
def test_ess_and_tau_of_ar1(phi):
    x = _ar1(np.random.default_rng(0), phi)
    tau = (1 + phi) / (1 - phi)
    assert abs(integrated_autocorrelation_time(x[..., 0]) / tau - 1) < 0.2
    assert abs(ess_bulk(x[..., 0]) / (x.shape[0] * x.shape[1] / tau) - 1) < 0.2


def test_rhat_sees_unmixed_chains_and_trends():
    rng = np.random.default_rng(1)
    mixed = _ar1(rng, 0.5, n_params=3)
    assert np.all(split_rhat(mixed) < 1.01)
    stuck = mixed.copy()
    stuck[0, :, 1] += 1.0  # one chain in another mode, one parameter
    rhat = split_rhat(stuck)
    assert rhat[1] > 1.05 and rhat[0] < 1.01
    trend = mixed[..., 0] + np.linspace(0, 2, mixed.shape[1])  # split halves disagree
    assert split_rhat(trend) > 1.1
    scale = mixed[..., 0] * np.array([1, 1, 1, 4.0])[:, None]  # same centre, different scale: the tail R-hat
    assert split_rhat(scale) > 1.05


def test_bad_shapes():
    with pytest.raises(ValueError, match="n_chains, n_iter"):
        split_rhat(np.zeros((2, 3, 4, 5)))
    with pytest.raises(ValueError, match="at least 4"):
        ess_bulk(np.zeros((2, 3)))
