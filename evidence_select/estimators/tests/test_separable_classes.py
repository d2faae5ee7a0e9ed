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
