"""A classifier streamed past its exact moves on classes that a feature nearly separates.

The posterior keeps moving as rows arrive (the separating weight grows) while its curvature at the
particles is far below the softmax's bound ``p (1 - p) <= 1/4``. SGHMC steps sized by the bound are then
too short for the particles to follow, every chunk's increment reads low and the evidence drifts down by
nats per chunk with healthy weights and no warning (20 nats low on 5000 rows, error bar 1.3). The steps
are lengthened by the curvature measured at the particles (``Model.curvature_ratio``).
"""

import numpy as np
import pytest

from evidence_select import BayesianLogisticClassifier

#: log Z of :func:`_nearly_separable` under ``BayesianLogisticClassifier()`` (defaults): bridge sampling
#: -298.6074 +/- 0.001 (converged), importance sampling with a t proposal at the mode -298.605 +/- 0.005,
#: nested sampling -298.57 +/- 0.39, AIS (200 chains, 20 moves) -299.01 +/- 0.23.
NEARLY_SEPARABLE_LOG_Z = -298.607


def _nearly_separable(n=5000):
    """Four standard normal features; the class is the sign of the first plus noise of scale 0.05."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4))
    rng.uniform(size=3 * n)  # draws made for other targets where the references were computed: same rows
    y = (X[:, 0] + 0.05 * rng.normal(size=n) > 0).astype(int)
    return X, y


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nearly_separable_stream_past_the_exact_moves_is_within_its_error_bar(seed):
    X, y = _nearly_separable()
    est = BayesianLogisticClassifier(random_state=seed).fit(X, y)  # exact moves for the first 1000 rows only
    error = est.log_evidence_ - NEARLY_SEPARABLE_LOG_Z
    # The reference is exact to 0.01 nat, so the run's own error bar must cover the error. Two groups of 30
    # particles that follow the posterior give a bar of about half a nat on these 10 parameters; a bar of
    # several nats means the groups disagree by that much, one of them behind the posterior.
    assert abs(error) <= 3.0 * est.log_evidence_std_, (error, est.log_evidence_std_)
    assert est.log_evidence_std_ < 2.0, est.log_evidence_std_


#: log Z of the 2e4 rows of :func:`_nearly_separable_long` under the defaults: bridge sampling -920.8730 +/- 0.0008
#: (converged), importance sampling with a t proposal at the mode -920.871 +/- 0.011.
NEARLY_SEPARABLE_LONG_LOG_Z = -920.873


def _nearly_separable_long(n=20_000):
    """The same classes on 2e4 rows from another generator (``bench_coverage._nearly_separable``)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] + 0.05 * rng.normal(size=n) > 0).astype(int)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nearly_separable_long_stream_is_within_its_error_bar(seed):
    # On 2e4 rows the mini-batch noise caps the step's growth (relative_step_floor); the particles then keep up
    # by taking more moves per annealing step (sghmc_move_factor). Without them seed 0 reads 3.3 nats low at
    # +/- 0.65. Same tolerances as above.
    X, y = _nearly_separable_long()
    est = BayesianLogisticClassifier(random_state=seed).fit(X, y)
    error = est.log_evidence_ - NEARLY_SEPARABLE_LONG_LOG_Z
    assert abs(error) <= 3.0 * est.log_evidence_std_, (error, est.log_evidence_std_)
    assert est.log_evidence_std_ < 2.0, est.log_evidence_std_
