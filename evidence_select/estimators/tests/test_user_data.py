"""Data as users have it: files sorted by their target, columns on raw scales.

``fit`` streams the rows in a seeded random order, so a sorted file gives the
evidence of the same rows shuffled; ``partial_fit`` keeps its order and warns
(``StreamOrderWarning``) when a call's target is sorted. A mixture whose
columns are on a scale its prior cannot hold warns (``FeatureScaleWarning``)
before any particle moves, and its evidence is flagged ``feature_scale``.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_wine
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from evidence_select import (BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture,
                             FeatureScaleWarning, StreamOrderWarning)
from evidence_select.datasets import make_linear_regression, make_softmax_classification
from evidence_select.estimators import _base, _mixture
from evidence_select.evidence import exact_log_evidence
from evidence_select.models import GaussianMixtureModel

FAST = dict(n_particles=6, n_mcmc_steps=2)


# -- fit: order-invariant by design ------------------------------------------------------------------
@pytest.fixture(scope="module")
def sorted_digits():
    """All 1797 digits sorted by their class (0, then 1, ... then 9), as their first three principal components.

    Streamed in this order, each chunk of 100 rows holds one or two classes: nine shifts, whose restarts replay
    every row seen until the surprise budget is spent, after which the chunks are flagged ``degraded`` (error
    bars of hundreds of nats, and ten times the time of the shuffled rows).
    """
    data = load_digits()
    X = StandardScaler().fit_transform(PCA(3, random_state=0).fit_transform(data.data))
    order = np.argsort(data.target, kind="stable")
    return X[order], data.target[order]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_fit_on_sorted_rows_gives_the_evidence_of_the_shuffled_rows(sorted_digits, seed):
    """fit shuffles the rows (the same seed for both files: two different random orders), so the sorted file
    gives the shuffled file's evidence within the combined errors, and neither run is degraded."""
    X, y = sorted_digits
    shuffled = np.random.default_rng(100 + seed).permutation(len(y))
    results = []
    for rows in (np.arange(len(y)), shuffled):
        est = BayesianLogisticClassifier(n_particles=10, batch_size=100, exact_move_rows=0,
                                         random_state=seed).fit(X[rows], y[rows])
        assert "degraded" not in est.evidence_checks_ and not any(r.degraded for r in est.evidence_history_)
        assert sum(r.n_replayed for r in est.evidence_history_) == 0  # no shift to restart at
        results.append((est.log_evidence_, est.log_evidence_std_))
    (a, sa), (b, sb) = results
    assert abs(a - b) < 3.0 * np.hypot(sa, sb), results


def test_partial_fit_on_sorted_labels_warns_once_per_stream():
    data = make_softmax_classification(400, n_features=2, n_classes=3, random_state=0)
    order = np.argsort(data.y, kind="stable")
    X, y = data.X[order], data.y[order]
    clf = BayesianLogisticClassifier(batch_size=200, random_state=0, **FAST)
    with pytest.warns(StreamOrderWarning, match=r"partial_fit call: column 'y' is sorted .*runs deficit.* pass the "
                                                r"rows to fit, which streams them in a seeded random order"):
        clf.partial_fit(X[:200], y[:200], classes=[0, 1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamOrderWarning)
        clf.partial_fit(X[200:], y[200:])  # once per stream
        clf.fit(X, y)  # fit orders the rows itself
        random_rows = np.random.default_rng(0).permutation(400)
        BayesianLogisticClassifier(batch_size=200, random_state=0, **FAST).partial_fit(
            X[random_rows], y[random_rows], classes=[0, 1, 2])
    with pytest.warns(StreamOrderWarning):  # a new stream after fit
        clf.partial_fit(X[:200], y[:200])


def test_partial_fit_on_an_autocorrelated_target_warns_and_a_mixture_never_does():
    data = make_linear_regression(300, n_features=2, random_state=0)
    order = np.argsort(data.y)
    with pytest.warns(StreamOrderWarning, match="lag-1 autocorrelation"):
        BayesianLinearRegressor(random_state=0, **FAST).partial_fit(data.X[order], data.y[order])
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamOrderWarning)
        BayesianLinearRegressor(random_state=0, **FAST).partial_fit(data.X, data.y)
        X = np.sort(data.X, axis=0)  # sorted columns, but a density has no target to test
        BayesianMixture(1, random_state=0, **FAST).partial_fit(X)


def test_shuffle_false_streams_the_rows_as_given():
    data = make_linear_regression(300, n_features=2, random_state=0)
    est = BayesianLinearRegressor(batch_size=100, shuffle=False, random_state=0, **FAST).fit(data.X, data.y)
    np.testing.assert_array_equal(est.sgais_state_.reservoir.X[:300], data.X)  # every row stored, in order


# -- scale: decided from the data, before any particle moves -------------------------------------------
@pytest.fixture(scope="module")
def raw_wine():
    """Magnesium (mean 100, sd 14) and proline (mean 750, sd 315): raw columns of a real file."""
    return load_wine().data[:, [4, 12]]


def test_raw_scale_mixture_warns_before_any_particle_moves(raw_wine, monkeypatch):
    calls = []
    for name in ("sgais_init", "sgais_update"):
        real = getattr(_base, name)
        monkeypatch.setattr(_base, name, lambda *args, _real=real, _name=name, **kw: calls.append(_name)
                            or _real(*args, **kw))
    est = BayesianMixture(2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        with pytest.raises(FeatureScaleWarning, match=r"column\(s\) \[0, 1\] have mean 99.7, 747 .*prior's "
                                                      r"predictive scale 2.24 .*Standardise X"):
            est.fit(raw_wine)
    assert calls == [] and not hasattr(est, "sgais_state_")  # no particle drawn, let alone moved


def test_raw_scale_mixture_is_flagged_as_the_scales_fault(raw_wine):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = BayesianMixture(1, random_state=0, **FAST).fit(raw_wine)
    assert issubclass(caught[0].category, FeatureScaleWarning)  # first, before the sampler's own warnings
    assert "feature_scale" in est.evidence_checks_
    est.partial_fit(raw_wine[:50])  # the flag stays with the stream's evidence
    assert "feature_scale" in est.evidence_checks_


def test_standardised_columns_are_not_flagged_and_match_the_exact_evidence(raw_wine):
    X = StandardScaler().fit_transform(raw_wine)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        est = BayesianMixture(1, random_state=0).fit(X)
    exact = exact_log_evidence(est.model_, X)
    assert "feature_scale" not in est.evidence_checks_
    assert abs(est.log_evidence_ - exact) < max(3.0 * est.log_evidence_std_, 2.0)


@pytest.mark.parametrize("location, spread, flagged", [
    (0.0, 1.0, False), (30.0, 1.0, False), (0.0, 30.0, False), (0.0, 0.2, False),  # within 20 scales of 2.24
    (100.0, 1.0, True), (0.0, 100.0, True), (0.0, 0.05, True),  # beyond: location, spread up, spread down
])
def test_mixture_scale_check_compares_the_data_with_the_prior_predictive(location, spread, flagged):
    X = np.random.default_rng(0).normal(location, spread, size=(200, 2))
    model = GaussianMixtureModel(2, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _mixture.warn_if_mixture_badly_scaled(model, X) is flagged
    assert len(caught) == int(flagged)
    # The prior's own scales hold the same data: the cure the message names.
    held = GaussianMixtureModel(2, 2, mean_prior_loc=location, variance_scale=spread**2)
    assert not _mixture.warn_if_mixture_badly_scaled(held, X)


def test_mixture_spread_needs_enough_rows():
    X = np.full((5, 2), 0.5)  # five equal rows: no spread to judge, and a mean the prior holds
    location, spread = _mixture.mixture_scale_diagnosis(GaussianMixtureModel(1, 2), X)
    assert np.all(location < 1) and np.all(np.isnan(spread))
    assert not _mixture.warn_if_mixture_badly_scaled(GaussianMixtureModel(1, 2), X)
