"""Property-based tests (hypothesis) of the three online estimators over shapes and values (issue 6).

For any data shape, chunking, particle count, seed and feature scale drawn here, after streaming:

- log-weights are finite or ``-inf`` (never NaN or ``+inf``), in the raw per-group state and in ``log_weights_``;
- every ESS (history records, and recomputed from the state) lies in ``[1, n_particles]``;
- the history has one record per chunk, ``n_samples_seen`` strictly increasing to the total, and every
  ``log_evidence`` (and ``log_evidence_`` itself) finite;
- predictions are probabilities (rows in ``[0, 1]`` summing to 1), the regressor's predictive std is
  positive and finite, the mixture's log density finite.

Examples are derandomized (CI sees the same ones on every run); ``max_examples`` keeps the file to a few
seconds of CPU per estimator. ESS bounds allow a relative 1e-12 for the rounding of the Kish formula
``(sum w)^2 / sum w^2`` (a few ulps; a real violation is O(1)).
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture
from evidence_select.utils import ess_from_log_weights

ULPS = 1e-12
# The strategies draw features and targets far from unit scale on purpose: the estimators' FeatureScaleWarning
# is expected here (its own tests are in estimators/tests), as are the regressor's SamplerDegeneracyWarnings
# (stalled annealing, collapsed weights) on the tiniest particle systems with the most extreme scales.
SCALE_WARNING_EXPECTED = pytest.mark.filterwarnings("ignore::evidence_select.estimators.FeatureScaleWarning")
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

streams = st.fixed_dictionaries(dict(
    n_features=st.integers(1, 4),
    n_samples=st.integers(1, 90),
    batch_size=st.integers(7, 64),
    n_particles=st.integers(2, 8),
    n_replicates=st.integers(1, 2),
    n_mcmc_steps=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([0.01, 0.1, 1.0, 10.0, 100.0]),
    offset=st.sampled_from([0.0, 3.0, -50.0]),
))


def _data(p):
    rng = np.random.default_rng(p["seed"])
    X = p["offset"] + p["scale"] * rng.standard_normal((p["n_samples"], p["n_features"]))
    return rng, X


def _engine_settings(p):
    return dict(n_particles=p["n_particles"], n_replicates=p["n_replicates"], batch_size=p["batch_size"],
                n_mcmc_steps=p["n_mcmc_steps"], random_state=p["seed"])


def _stream_in_two_calls(est, X, y, first_kwargs):
    """A first ``partial_fit`` of about half the rows (at least one), then the rest (if any)."""
    split = max(1, len(X) // 2)
    est.partial_fit(X[:split], None if y is None else y[:split], **first_kwargs)
    if split < len(X):
        est.partial_fit(X[split:], None if y is None else y[split:])
    return est


def _check_state(est, p):
    n = p["n_samples"]
    state = est.sgais_state_
    for log_weights in (state.log_weights, est.log_weights_):
        assert not np.isnan(log_weights).any() and not np.isposinf(log_weights).any()
    assert np.all(np.isfinite(state.particles))
    ess = [record.ess for record in est.evidence_history_]
    ess += list(np.atleast_1d(ess_from_log_weights(state.log_weights, axis=1)))
    assert np.all(np.asarray(ess) >= 1.0 - ULPS) and np.all(np.asarray(ess) <= p["n_particles"] * (1 + ULPS)), ess
    seen = [record.n_samples_seen for record in est.evidence_history_]
    assert seen[-1] == n == est.n_samples_seen_ and np.all(np.diff(seen) > 0)
    # One record per chunk: each partial_fit call splits its rows into ceil(rows / batch_size) chunks.
    split = max(1, n // 2)
    assert len(seen) == -(-split // p["batch_size"]) + -(-(n - split) // p["batch_size"])
    assert np.all(np.isfinite([record.log_evidence for record in est.evidence_history_]))
    assert np.isfinite(est.log_evidence_)


def _check_probabilities(proba, n_rows, n_columns):
    assert proba.shape == (n_rows, n_columns)
    assert np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.slow
@SCALE_WARNING_EXPECTED
@pytest.mark.filterwarnings("ignore::evidence_select.SamplerDegeneracyWarning")
@SETTINGS
@given(streams)
def test_regressor_properties(p):
    rng, X = _data(p)
    y = X @ rng.standard_normal(p["n_features"]) / p["scale"] + rng.standard_normal(p["n_samples"])
    est = _stream_in_two_calls(BayesianLinearRegressor(**_engine_settings(p)), X, y, {})
    _check_state(est, p)
    mean, std = est.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std > 0)


@pytest.mark.slow
@SCALE_WARNING_EXPECTED
@SETTINGS
@given(streams, st.integers(2, 4))
def test_classifier_properties(p, n_classes):
    rng, X = _data(p)
    y = rng.integers(0, n_classes, size=p["n_samples"])
    est = _stream_in_two_calls(BayesianLogisticClassifier(**_engine_settings(p)), X, y,
                               {"classes": np.arange(n_classes)})
    _check_state(est, p)
    _check_probabilities(est.predict_proba(X), p["n_samples"], n_classes)
    assert set(est.predict(X)) <= set(range(n_classes))


@pytest.mark.slow
@SETTINGS
@given(streams, st.integers(1, 3))
def test_mixture_properties(p, n_components):
    rng, X = _data(p)
    est = _stream_in_two_calls(BayesianMixture(n_components, **_engine_settings(p)), X, None, {})
    _check_state(est, p)
    _check_probabilities(est.predict_proba(X), p["n_samples"], n_components)
    assert np.all(np.isfinite(est.score_samples(X)))
