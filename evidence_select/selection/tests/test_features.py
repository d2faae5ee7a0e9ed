"""Feature-subset candidates, the columns each candidate uses, inclusion probabilities and the greedy search."""

import itertools

import numpy as np
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_diabetes
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from evidence_select import BayesianLinearRegressor, EvidenceModelSelector, exact_log_evidence, log_evidence
from evidence_select.models import LinearGaussianModel
from evidence_select.selection import feature_subset_candidates, feature_subset_search
from evidence_select.selection._features import candidate_feature_masks, column_labels, inclusion_probabilities
from evidence_select.selection._search import neighbour_subsets
from evidence_select.utils import fit_order

FAST = {"n_particles": 10, "n_replicates": 2, "n_mcmc_steps": 2, "batch_size": 250}


def _simulate(n, seed, rho=0.8):
    """Two relevant columns (0, 1); column 2 a decoy correlated ``rho`` with column 0; column 3 independent."""
    rng = np.random.default_rng(seed)
    relevant = rng.normal(size=(n, 2))
    decoy = rho * relevant[:, 0] + np.sqrt(1 - rho**2) * rng.normal(size=n)
    X = np.column_stack([relevant, decoy, rng.normal(size=n)])
    return X, relevant @ [0.6, -0.4] + rng.normal(size=n)


def _exact_log_evidences(estimator, candidates, X, y):
    return np.array([log_evidence(estimator, pipe[0].fit_transform(X), y, method="exact").log_evidence
                     for _, pipe in candidates])


# -- candidates ---------------------------------------------------------------------------------------------------
def test_candidates_cover_every_subset_by_size_with_named_columns():
    candidates = feature_subset_candidates(BayesianLinearRegressor(), 4, min_size=2, max_size=3)
    names = [name for name, _ in candidates]
    assert len(names) == 6 + 4 and names[:2] == ["x0+x1", "x0+x2"] and names[-1] == "x1+x2+x3"
    X = np.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(candidates[1][1][0].fit_transform(X), X[:, [0, 2]])
    assert candidates[0][1][-1] is not candidates[1][1][-1]  # clones
    assert len(feature_subset_candidates(BayesianLinearRegressor(), ["a", "b", "c"])) == 7


@pytest.mark.parametrize("features, kwargs, match", [
    (0, {}, "positive"), (["a", "a"], {}, "unique"), (["a__b"], {}, "'__'"), (["a+b", "c"], {}, "'\\+'"),
    (3, {"min_size": 0}, "1 <= min_size"), (3, {"min_size": 3, "max_size": 2}, "min_size <= max_size"),
    (30, {}, "exceed max_candidates=10000.*feature_subset_search"),
])
def test_bad_candidate_requests_are_clear_errors(features, kwargs, match):
    with pytest.raises(ValueError, match=match):
        feature_subset_candidates(BayesianLinearRegressor(), features, **kwargs)


def test_masks_read_the_leading_column_transformer():
    est = BayesianLinearRegressor()
    X = np.random.default_rng(0).normal(size=(10, 5))
    candidates = [
        est,                                                                               # all columns
        make_pipeline(ColumnTransformer([("k", "passthrough", slice(1, 3))]), est),       # 1, 2
        make_pipeline(ColumnTransformer([("k", "passthrough", [-1]), ("d", "drop", [0])],
                                        remainder="passthrough"), est),                    # 4 and remainder 1, 2, 3
        make_pipeline(ColumnTransformer([("k", "passthrough", np.array([1, 0, 0, 0, 1], dtype=bool))]), est),
        make_pipeline(FrozenEstimator(ColumnTransformer([("k", "passthrough", [3])]).fit(X)), est),
    ]
    masks = candidate_feature_masks(candidates, 5)
    np.testing.assert_array_equal(masks.astype(int), [[1, 1, 1, 1, 1], [0, 1, 1, 0, 0], [0, 1, 1, 1, 1],
                                                      [1, 0, 0, 0, 1], [0, 0, 0, 1, 0]])


# -- inclusion probabilities ---------------------------------------------------------------------------------------
def test_inclusion_probabilities_by_hand_on_three_features():
    X, y = _simulate(400, seed=0)
    X = X[:, :3]
    selector = EvidenceModelSelector(feature_subset_candidates(BayesianLinearRegressor(**FAST), 3),
                                     random_state=0).fit(X, y)
    p = dict(zip(selector.named_estimators_, selector.model_probabilities_))
    hand = [sum(prob for name, prob in p.items() if f"x{j}" in name.split("+")) for j in range(3)]
    np.testing.assert_allclose(selector.feature_inclusion_probabilities_, hand, rtol=1e-12)
    # The features' probabilities add up to the expected number of columns in the model.
    expected_size = sum(prob * len(name.split("+")) for name, prob in p.items())
    assert selector.feature_inclusion_probabilities_.sum() == pytest.approx(expected_size, rel=1e-12)
    assert selector.candidate_features_.shape == (7, 3)
    text = selector.summary()
    table = text.split("\n\n")[1].splitlines()
    assert table[0] == "feature  inclusion probability" and sorted(line[:2] for line in table[1:]) == ["x0", "x1", "x2"]


def test_inclusion_std_is_the_first_order_propagation_of_the_evidence_errors():
    rng = np.random.default_rng(1)
    masks = rng.random((6, 4)) < 0.5
    log_z = rng.normal(scale=2.0, size=6)
    sigma = rng.uniform(0.05, 0.3, size=6)

    def pip(log_evidences):
        p = np.exp(log_evidences - log_evidences.max())
        return inclusion_probabilities(p / p.sum(), masks, sigma)[0]

    jacobian = np.array([(pip(log_z + 1e-6 * e) - pip(log_z - 1e-6 * e)) / 2e-6 for e in np.eye(6)])  # (6, 4)
    p = np.exp(log_z - log_z.max())
    _, std = inclusion_probabilities(p / p.sum(), masks, sigma)
    np.testing.assert_allclose(std, np.sqrt(((jacobian * sigma[:, None]) ** 2).sum(axis=0)), rtol=1e-6)
    # And the spread of PIPs under draws of the log evidences within their errors matches it.
    draws = np.array([pip(log_z + sigma * rng.normal(size=6)) for _ in range(4000)])
    np.testing.assert_allclose(draws.std(axis=0), std, rtol=0.1)


def test_summary_has_no_feature_table_when_candidates_use_the_same_columns():
    X, y = _simulate(300, seed=0)
    selector = EvidenceModelSelector([(f"noise={v}", BayesianLinearRegressor(noise_variance=v, **FAST))
                                      for v in (0.5, 1.0)], random_state=0).fit(X, y)
    assert "inclusion" not in selector.summary()
    np.testing.assert_array_equal(selector.feature_inclusion_probabilities_, np.ones(4))


@pytest.mark.slow
def test_relevant_features_included_decoys_not_and_the_estimates_match_the_exact_posterior():
    # Columns 0, 1 carry the signal; 2 is a decoy correlated 0.8 with column 0, 3 is independent noise. On the
    # exact posterior a null column's inclusion probability exceeds 0.2 only when its chi-square(1) statistic
    # beats ~2 (Occam factor - log 4), a few per cent of data sets, so the decoys are judged on average over
    # seeds; the relevant columns' Bayes factors are e^50 and more, so they are judged on every seed. The online
    # estimates must agree with the exact posterior's within their errors (5 standard errors and 0.02).
    estimator = BayesianLinearRegressor(noise_variance=1.0, **FAST)
    decoy_pips, first = [], 0
    for seed in range(5):
        X, y = _simulate(1000, seed)
        candidates = feature_subset_candidates(estimator, 4)
        selector = EvidenceModelSelector(candidates, random_state=seed).fit(X, y)
        exact = _exact_log_evidences(estimator, candidates, X, y)
        p_exact = np.exp(exact - exact.max())
        pip_exact, _ = inclusion_probabilities(p_exact / p_exact.sum(), selector.candidate_features_,
                                               np.zeros(len(exact)))
        pip = selector.feature_inclusion_probabilities_
        assert np.all(np.abs(pip - pip_exact) <= 5 * selector.feature_inclusion_probabilities_std_ + 0.02)
        assert np.all(pip[:2] >= 0.95)
        decoy_pips += pip[2:].tolist()
        first += list(selector.named_estimators_)[selector.best_index_] == "x0+x1"
    assert np.mean(decoy_pips) <= 0.2 and first >= 4


# -- the greedy search ---------------------------------------------------------------------------------------------
def test_neighbours_by_direction():
    assert neighbour_subsets(None, 3, "forward", 3) == [frozenset({0}), frozenset({1}), frozenset({2})]
    assert neighbour_subsets(None, 3, "backward", 3) == [frozenset({0, 1, 2})]
    assert neighbour_subsets(frozenset({0, 1}), 3, "forward", 2) == []
    assert set(neighbour_subsets(frozenset({0, 1}), 3, "backward", 3)) == {frozenset({0}), frozenset({1})}
    assert neighbour_subsets(frozenset({1}), 3, "backward", 3) == []


@pytest.mark.parametrize("direction", ["forward", "backward", "stepwise"])
def test_greedy_search_ends_at_the_best_visited_subset(direction):
    X, y = _simulate(600, seed=2)
    estimator = BayesianLinearRegressor(**FAST)
    selector = feature_subset_search(estimator, X, y, direction=direction, window=0, random_state=0)
    names = list(selector.named_estimators_)
    assert names[selector.best_index_] == "x0+x1"
    assert selector.best_index_ == int(np.argmax(selector.log_evidences_))
    # Each subset's seed depends on the subset alone: refitting one alone on the search's row order reproduces its
    # evidence (the selector keeps the candidate's own seed).
    best = selector.estimators_[selector.best_index_]
    order = fit_order(0, len(y))
    again = EvidenceModelSelector([("again", best)], shuffle=False).fit(X[order], y[order])
    assert again.log_evidences_[0] == selector.log_evidences_[selector.best_index_]
    if direction == "backward":
        # All columns, its four 3-subsets, three 2-subsets of the best of those, two singles of x0+x1.
        assert names[0] == "x0+x1+x2+x3" and len(names) == 1 + 4 + 3 + 2
    else:
        assert names[:4] == ["x0", "x1", "x2", "x3"]


@pytest.mark.slow
def test_rounds_joined_equal_one_fit_over_every_subset_visited():
    X, y = _simulate(500, seed=4)
    searched = feature_subset_search(BayesianLinearRegressor(**FAST), X, y, features=["a", "b", "c", "d"],
                                     random_state=1)
    # The same candidates (each with the seed its round gave it) in one selector, fitted once on the same order.
    order = fit_order(1, len(y))
    once = EvidenceModelSelector(searched.estimators, shuffle=False).fit(X[order], y[order])
    assert list(once.named_estimators_) == list(searched.named_estimators_)
    for attribute in ("log_evidences_", "log_evidence_stds_", "model_probabilities_", "model_probabilities_std_",
                      "candidate_features_", "feature_inclusion_probabilities_",
                      "feature_inclusion_probabilities_std_"):
        np.testing.assert_array_equal(getattr(searched, attribute), getattr(once, attribute))
    assert searched.best_index_ == once.best_index_ and searched.evidence_checks_ == once.evidence_checks_
    assert len(searched.evidence_history_) == len(once.evidence_history_) == 2
    for mine, theirs in zip(searched.evidence_history_, once.evidence_history_):
        np.testing.assert_array_equal(mine.model_probabilities, theirs.model_probabilities)
        assert [r.log_evidence for r in mine.candidate_records] == [r.log_evidence for r in theirs.candidate_records]
    assert searched.predict(X[:3]).tolist() == once.predict(X[:3]).tolist()
    assert searched.summary() == once.summary() and "\na " in searched.summary()  # columns named in the table
    # Both continue the stream alike.
    X_more, y_more = _simulate(200, seed=5)
    searched.partial_fit(X_more, y_more)
    once.partial_fit(X_more, y_more)
    np.testing.assert_array_equal(searched.log_evidences_, once.log_evidences_)
    assert len(searched.evidence_history_) == len(once.evidence_history_) == 3
    with pytest.raises(ValueError, match="can be merged"):
        searched._merged(EvidenceModelSelector(searched.estimators[:1], shuffle=False).fit(X[:100], y[:100]))


def test_column_labels_come_from_single_column_parts():
    candidates = [make_pipeline(ColumnTransformer([("age", "passthrough", [0]), ("bmi", "passthrough", [2])]),
                                BayesianLinearRegressor()),
                  make_pipeline(ColumnTransformer([("keep", "passthrough", [1, 2])]), BayesianLinearRegressor()),
                  make_pipeline(ColumnTransformer([("other", "passthrough", [3])]), BayesianLinearRegressor()),
                  make_pipeline(ColumnTransformer([("last", "passthrough", [-1])]), BayesianLinearRegressor())]
    assert column_labels(candidates, 4) == ["age", "x1", "bmi", "x3"]  # column 3 named twice: no name


# Ten particles sometimes leave few lineages on a first chunk (a warning the test's tolerance already covers).
@pytest.mark.filterwarnings("ignore:SGAIS. resampling on the first"
                            ":evidence_select.exceptions.EvidenceConvergenceWarning")
@pytest.mark.slow
def test_occams_window_recovers_the_inclusion_probabilities_of_all_subsets_on_real_data():
    # The diabetes data (442 rows, 10 columns, several strongly correlated serum measurements): the exact
    # inclusion probabilities over all 1023 subsets, against the search's over the subsets it visits. A greedy
    # search alone misses subsets where correlated columns stand in for each other; the window must find them
    # (its residual error is the mass outside it, well under 0.05 here, plus the SGAIS errors of ~0.3 nats).
    data = load_diabetes()
    X = StandardScaler().fit_transform(data.data)
    y = (data.target - data.target.mean()) / data.target.std()
    estimator = BayesianLinearRegressor(noise_variance=0.5, **FAST)
    subsets = [list(c) for size in range(1, 11) for c in itertools.combinations(range(10), size)]
    exact = np.array([exact_log_evidence(LinearGaussianModel(len(c), noise_variance=0.5), X[:, c], y)
                      for c in subsets])
    p = np.exp(exact - exact.max())
    masks = np.array([[j in c for j in range(10)] for c in subsets])
    pip_exact = (p / p.sum()) @ masks
    greedy = feature_subset_search(estimator, X, y, window=0, random_state=0)
    searched = feature_subset_search(estimator, X, y, random_state=0)
    assert np.abs(greedy.feature_inclusion_probabilities_ - pip_exact).max() > 0.2
    errors = np.abs(searched.feature_inclusion_probabilities_ - pip_exact)
    assert np.all(errors <= 0.05 + 3 * searched.feature_inclusion_probabilities_std_), errors.round(3)


def test_search_agrees_with_all_subsets_and_names_columns_of_a_frame():
    pandas = pytest.importorskip("pandas")
    X, y = _simulate(600, seed=3)
    frame = pandas.DataFrame(X, columns=["a", "b", "decoy", "noise"])
    # The known-noise model: ten particles read its evidences to the precision this comparison was set for (the
    # default learns the noise and the scale, and its first chunk anneals through more steps).
    estimator = BayesianLinearRegressor(noise_variance=1.0, prior_scale=1.0, **FAST)
    searched = feature_subset_search(estimator, frame, y, random_state=0)
    full = EvidenceModelSelector(feature_subset_candidates(estimator, list(frame.columns)), random_state=0)
    full.fit(frame, y)
    assert list(searched.named_estimators_)[searched.best_index_] == "a+b"
    assert list(full.named_estimators_)[full.best_index_] == "a+b"
    assert "inclusion probability" in full.summary() and "decoy" in full.summary()
    # The search leaves out only subsets far below its end point: the inclusion probabilities agree.
    np.testing.assert_allclose(searched.feature_inclusion_probabilities_, full.feature_inclusion_probabilities_,
                               atol=0.05)


@pytest.mark.parametrize("kwargs, match", [
    ({"direction": "sideways"}, "direction must be one of"),
    ({"max_size": 0}, "max_size"),
    ({"selector_params": {"model_prior": [1.0]}}, "selector_params may set"),
    ({"features": ["a", "b"]}, "names 2 columns; X has 4"),
    ({"window": -1.0}, "window must be a non-negative"),
    ({"y": None}, "needs targets y"),
    ({"y": np.zeros(49)}, "inconsistent numbers of samples"),
])
def test_bad_search_arguments_are_clear_errors(kwargs, match):
    X, y = _simulate(50, seed=0)
    kwargs = {"y": y, **kwargs}
    with pytest.raises(ValueError, match=match):
        feature_subset_search(BayesianLinearRegressor(**FAST), X, **kwargs)
