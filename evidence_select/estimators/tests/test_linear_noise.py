"""BayesianLinearRegressor with the noise variance and the weights' scale learned: the model its parameters build,
the online evidence against the exact one in any row order, its predictive, and its checks of the target's scale."""

import warnings

import numpy as np
import pytest
from sklearn import datasets

from evidence_select import BayesianLinearRegressor, log_evidence
from evidence_select.datasets import make_linear_regression
from evidence_select.estimators import FeatureScaleWarning
from evidence_select.models import LinearGaussianModel, LinearHyperModel
from evidence_select.sgais._engine import sgais_stream
from evidence_select.utils import make_generator

KNOWN = dict(noise_variance=1.0, prior_scale=1.0)


@pytest.fixture(scope="module")
def diabetes():
    X, y = datasets.load_diabetes(return_X_y=True)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def _scale_warnings(estimator, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X, y)
    return [str(w.message) for w in caught if issubclass(w.category, FeatureScaleWarning)]


@pytest.mark.parametrize("params, expected", [
    ({}, LinearHyperModel(3, intercept_scale=1000.0)),
    (dict(noise_variance=2.0), LinearHyperModel(3, noise_variance=2.0, intercept_scale=1000.0)),
    (dict(prior_scale=0.5, fit_intercept=False), LinearHyperModel(3, prior_scale=0.5, fit_intercept=False)),
    (dict(intercept_scale=7.0), LinearHyperModel(3, intercept_scale=7.0)),
    (KNOWN, LinearGaussianModel(3, noise_variance=1.0, prior_scale=1.0, intercept_scale=1.0)),
    (dict(noise_variance=0.5, prior_scale=2.0, intercept_scale=3.0),
     LinearGaussianModel(3, noise_variance=0.5, prior_scale=2.0, intercept_scale=3.0)),
])
def test_parameters_build_their_model(params, expected):
    data = make_linear_regression(50, n_features=3, random_state=0)
    assert BayesianLinearRegressor(n_particles=4, random_state=0, **params).fit(data.X, data.y).model_ == expected


def test_both_floats_run_the_known_noise_model_bit_for_bit():
    data = make_linear_regression(700, random_state=0)
    est = BayesianLinearRegressor(**KNOWN, batch_size=250, shuffle=False, random_state=3).fit(data.X, data.y)
    state = sgais_stream(make_generator(3), LinearGaussianModel(5), est.sgais_config_, data.X, data.y)
    np.testing.assert_array_equal(est.sgais_state_.particles, state.particles)
    np.testing.assert_array_equal(est.sgais_state_.log_evidence, state.log_evidence)


def _orders(y, seed):
    """Rows shuffled, and sorted by the target (streamed as given: ``shuffle=False``)."""
    return {"shuffled": np.random.default_rng(seed).permutation(len(y)), "sorted": np.argsort(y, kind="stable")}


@pytest.mark.slow
@pytest.mark.parametrize("order", ["shuffled", "sorted"])
def test_online_evidence_of_raw_diabetes_in_any_order_is_the_exact_one(diabetes, order):
    """Raw y (152 +/- 77): the learned noise needs no rescaling. Within max(3 sigma, 2 nats) on every seed, and
    within 2 nats on average over the seeds (the runs' spread is ~0.4 nats)."""
    X, y = diabetes
    exact = log_evidence(BayesianLinearRegressor(), X, y, method="exact")
    assert exact.log_evidence_std < 1e-9
    errors = []
    for seed in range(3):
        rows = _orders(y, seed)[order]
        est = BayesianLinearRegressor(batch_size=100, shuffle=False, random_state=seed).fit(X[rows], y[rows])
        error = est.log_evidence_ - exact.log_evidence
        assert abs(error) <= max(3 * est.log_evidence_std_, 2.0), (seed, error, est.log_evidence_std_)
        errors.append(error / est.log_evidence_std_)
    assert abs(np.mean(errors)) < 2.0, errors


@pytest.mark.slow
@pytest.mark.parametrize("order", ["shuffled", "sorted"])
def test_online_evidence_of_a_standardised_stream_is_the_exact_one(order):
    data = make_linear_regression(1500, n_features=4, noise_variance=0.3, random_state=4)
    y = (data.y - data.y.mean()) / data.y.std()
    exact = log_evidence(BayesianLinearRegressor(), data.X, y, method="exact").log_evidence
    for seed in range(2):
        rows = _orders(y, seed)[order]
        est = BayesianLinearRegressor(shuffle=False, random_state=seed).fit(data.X[rows], y[rows])
        assert abs(est.log_evidence_ - exact) <= max(3 * est.log_evidence_std_, 2.0), (seed, est.log_evidence_)


def test_online_evidence_tracks_the_exact_one_chunk_by_chunk():
    data = make_linear_regression(1200, n_features=3, random_state=5)
    est = BayesianLinearRegressor(batch_size=300, random_state=0)
    model = LinearHyperModel(3)
    for start in range(0, 1200, 300):
        est.partial_fit(data.X[start:start + 300], data.y[start:start + 300])
        exact = model.exact_log_evidence(data.X[:start + 300], data.y[:start + 300])
        assert abs(est.log_evidence_ - exact) <= max(3 * est.log_evidence_std_, 2.0)


def test_predict_is_the_exact_predictive_of_the_rows_seen(diabetes):
    X, y = diabetes
    est = BayesianLinearRegressor(n_particles=8, batch_size=200, random_state=0).fit(X, y)
    mean, std = est.predict(X[:5], return_std=True)
    expected = est.model_.predictive_from_statistics(est.model_.gradient_statistics(X, y), X[:5])
    np.testing.assert_allclose(mean, expected[0], rtol=1e-10)
    np.testing.assert_allclose(std, expected[1], rtol=1e-10)
    np.testing.assert_array_equal(est.predict(X[:5]), mean)
    # The noise standard deviation of this target is ~54: the predictive is wider, but not by much at n = 442.
    assert np.all((std > 50) & (std < 60))


def test_raw_target_needs_no_rescaling(diabetes):
    X, y = diabetes
    assert _scale_warnings(BayesianLinearRegressor(n_particles=4, random_state=0), X, y) == []
    assert _scale_warnings(BayesianLinearRegressor(n_particles=4, random_state=0), X, 1e5 * y) == []


@pytest.mark.parametrize("transform, params, words", [
    (lambda y: 1e-12 * (y - y.mean()) / y.std(), {}, "near an end of the noise variance's prior support"),
    (lambda y: (y - y.mean()) / y.std() + 1e4, {}, "the intercept lies"),
    (lambda y: 10 * (y - y.mean()) / y.std(), dict(noise_variance=1.0), "times noise_variance=1"),
])
def test_target_scale_problems_warn(diabetes, transform, params, words):
    X, y = diabetes
    messages = _scale_warnings(BayesianLinearRegressor(n_particles=4, random_state=0, **params), X, transform(y))
    assert len(messages) == 1 and words in messages[0] and "rescale or center y" in messages[0], messages
