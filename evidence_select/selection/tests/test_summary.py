"""The selector's results by name (``results_``, ``summary``) and the probability bounds of the text table."""

import math

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from evidence_select import BayesianLinearRegressor, BayesianMixture, EvidenceModelSelector
from evidence_select.datasets import make_linear_regression
from evidence_select.selection._summary import (KASS_RAFTERY_SCALE, UNDECIDED_SIGMAS, bayes_factor_strength,
                                                bayes_factor_verdict, format_probability, format_summary,
                                                log_bayes_factors, selection_results)

FAST = {"n_particles": 5, "n_replicates": 2, "n_mcmc_steps": 2, "batch_size": 100}
COLUMNS = ["name", "log_evidence", "log_evidence_std", "log_evidence_per_datum", "log_model_probability",
           "log_model_probability_std", "model_probability", "model_probability_std", "log_bayes_factor",
           "log_bayes_factor_std", "bayes_factor_verdict", "backend", "rank", "checks"]


@pytest.fixture(scope="module")
def fitted():
    data = make_linear_regression(300, n_features=2, noise_variance=1.0, random_state=0)
    return EvidenceModelSelector([("quiet", BayesianLinearRegressor(noise_variance=0.3, **FAST)),
                                  ("true", BayesianLinearRegressor(noise_variance=1.0, **FAST)),
                                  ("noisy", BayesianLinearRegressor(noise_variance=1.5, **FAST))],
                                 random_state=0).fit(data.X, data.y)


def test_results_are_columns_by_candidate_name(fitted):
    results = fitted.results_
    assert list(results) == COLUMNS
    assert all(len(column) == 3 for column in results.values())
    assert results["name"].tolist() == ["quiet", "true", "noisy"]
    np.testing.assert_array_equal(results["log_evidence"], fitted.log_evidences_)
    np.testing.assert_array_equal(results["log_evidence_std"], fitted.log_evidence_stds_)
    np.testing.assert_array_equal(results["model_probability"], fitted.model_probabilities_)
    np.testing.assert_array_equal(results["model_probability_std"], fitted.model_probabilities_std_)
    np.testing.assert_allclose(results["log_evidence_per_datum"], fitted.log_evidences_ / 300)
    assert set(results["backend"]) == {"sgais"}
    assert results["checks"].tolist() == [", ".join(checks) for checks in fitted.evidence_checks_]
    # rank 1 is the best candidate, and the ranks follow the probabilities
    assert results["rank"][fitted.best_index_] == 1
    assert np.all(np.diff(results["model_probability"][np.argsort(results["rank"])]) <= 0)


def test_results_feed_a_dataframe(fitted):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(fitted.results_).set_index("name")
    assert frame.loc["true", "rank"] == 1 and frame.shape == (3, len(COLUMNS) - 1)


def test_results_need_a_fitted_selector():
    selector = EvidenceModelSelector([("k1", BayesianMixture(1, **FAST))])
    with pytest.raises(NotFittedError):
        selector.results_
    assert not hasattr(selector, "results_")


def test_summary_lists_every_candidate_best_first(fitted):
    lines = fitted.summary().splitlines()
    assert lines[0].split()[:2] == ["rank", "candidate"]
    assert lines[1].split()[:2] == ["1", "true"]
    assert {line.split()[1] for line in lines[1:]} == {"quiet", "true", "noisy"}
    assert [line.split()[1] for line in fitted.summary(order="input").splitlines()[1:]] == ["quiet", "true", "noisy"]
    with pytest.raises(ValueError, match="order"):
        fitted.summary(order="name")


def test_log_probability_std_matches_a_simulation():
    # The delta method on the log scale, against the spread of log softmax over Gaussian evidence errors.
    rng = np.random.default_rng(0)
    log_z, sigma = np.array([0.0, -1.0, -40.0]), np.array([0.05, 0.08, 0.1])
    draws = log_z + sigma * rng.standard_normal((20000, 3))
    log_p = draws - np.logaddexp.reduce(draws, axis=1, keepdims=True)
    results = selection_results(list("abc"), log_z, sigma, log_z - np.logaddexp.reduce(log_z), np.zeros(3), 10,
                                "sgais")
    # 20000 draws: the sample std has a relative error of 1/sqrt(2 n) = 0.5%; the linearisation error is
    # of relative order sigma^2 < 1% at these sigmas; 3% leaves room for both.
    np.testing.assert_allclose(results["log_model_probability_std"], log_p.std(axis=0), rtol=0.03)


@pytest.mark.parametrize("probability, log_std, expected", [
    (0.7312, 0.03, "0.7312 +/- 0.022"),
    (1.0, 1e-73, "1"),                               # an error four significant digits cannot show
    (0.25, 1e-5, "0.25"),                            # nor this one (relative 1e-5)
    (0.25, 1e-3, "0.25 +/- 0.00025"),                # but this
    (1.801e-138, 52.7, "< 1e-91"),                   # error exceeds the value: exp(log p + 2 x 52.7)
    (0.03, 1.2, "< 0.4"),                            # 0.03 e^2.4 = 0.33, rounded up
    (0.2, 1.5, "< 1"),                               # the bound says nothing
    (1e-200, 0.1, "1e-200 +/- 1e-201"),              # tiny but meaningful
    (5e-310, 0.0, "< 1e-309"),                       # subnormal: a bound
    (1.7e-237, 0.5, "1.7e-237 +/- 8.5e-238"),        # no underflow of the error
    (0.0, 0.0, "0"),                                 # excluded by a zero prior weight (log p = -inf)
    (0.4, math.nan, "0.4"),                          # unknown error
])
def test_probability_text(probability, log_std, expected):
    log_p = math.log(probability) if probability > 0 else -math.inf
    assert format_probability(log_p, log_std) == expected


def test_probability_text_for_log_probabilities_beyond_float64():
    assert format_probability(-1e5, 0.0) == "< 1e-43429"


def test_probability_text_never_prints_an_error_larger_than_the_value():
    rng = np.random.default_rng(1)
    for _ in range(2000):
        log_p = -rng.exponential(rng.choice([1.0, 300.0]))
        log_std = rng.exponential(1.0)
        text = format_probability(log_p, log_std)
        if text.startswith("<"):  # a bound: at or above the estimate (parsed on the log scale: 1e-400 is 0.0)
            mantissa, _, exponent = text[2:].partition("e")
            assert math.log(float(mantissa)) + int(exponent or 0) * math.log(10) >= log_p - 1e-12
        else:  # a value: meaningful, with an error (where printed) no larger than itself
            value, _, std = text.partition(" +/- ")
            assert float(value) >= 1e-300 and (not std or float(std) <= float(value) * (1 + 1e-2))
            assert std or log_std < 5e-5  # an error is left out only where the value's digits cannot show it


def test_summary_of_evidences_1e5_nats_apart():
    log_z = np.array([-1.1e6, -1e6])
    results = selection_results(["k1", "k2"], log_z, np.array([2.0, 3.0]), np.array([-1e5, 0.0]),
                                np.zeros(2), 1_000_000, "sgais")
    text = format_summary(results)
    assert "nan" not in text and "inf" not in text
    assert text.splitlines()[1].split()[:2] == ["1", "k2"]
    # (log p + 2 sigma) / ln 10 = (-1e5 + 2 sqrt(2^2 + 3^2)) / 2.3026 = -43426.3, rounded up
    line = text.splitlines()[2]
    assert "< 1e-43426 " in line and line.split()[-1] == "sgais"
    assert "-100000.00 +/- 3.61" in line and "very strong" in line  # log BF vs k2, error hypot(2, 3)


def test_bayes_factors_are_against_the_highest_evidence_with_independent_errors(fitted):
    results = fitted.results_
    best = int(np.argmax(fitted.log_evidences_))
    np.testing.assert_allclose(results["log_bayes_factor"], fitted.log_evidences_ - fitted.log_evidences_[best])
    expected_std = np.hypot(fitted.log_evidence_stds_, fitted.log_evidence_stds_[best])
    expected_std[best] = 0.0
    np.testing.assert_allclose(results["log_bayes_factor_std"], expected_std)
    assert results["bayes_factor_verdict"][best] == "best"
    assert all(verdict != "best" for k, verdict in enumerate(results["bayes_factor_verdict"]) if k != best)


def test_bayes_factor_error_matches_a_simulation():
    # Independent Gaussian evidence errors: the spread of the simulated differences is the combined error.
    rng = np.random.default_rng(0)
    log_z, sigma = np.array([-10.0, -13.0]), np.array([0.4, 0.7])
    draws = log_z + sigma * rng.standard_normal((20000, 2))
    factors, stds = log_bayes_factors(log_z, sigma)
    assert factors.tolist() == [0.0, -3.0]
    # 20000 draws: the sample std's relative error is 0.5%.
    assert stds[1] == pytest.approx((draws[:, 1] - draws[:, 0]).std(), rel=0.03)


@pytest.mark.parametrize("log_factor, expected", [(0.0, "bare mention"), (-1.0, "bare mention"), (1.5, "positive"),
                                                   (-3.0, "positive"), (-3.01, "strong"), (5.0, "strong"),
                                                   (-5.2, "very strong"), (-800.0, "very strong")])
def test_kass_raftery_scale(log_factor, expected):
    # Kass & Raftery's table is on 2 ln B: 0-2, 2-6, 6-10, > 10.
    assert bayes_factor_strength(log_factor) == expected
    assert [upper for upper, _ in KASS_RAFTERY_SCALE][:3] == [1.0, 3.0, 5.0]


@pytest.mark.parametrize("log_factor, std, expected", [
    (-0.9, 0.5, "undecided"),                 # 1.8 standard errors
    (-1.1, 0.5, "bare mention to positive"),  # 2.2 standard errors: decided, [0.1, 2.1] spans two words
    (-4.0, 0.2, "strong"),                    # [3.6, 4.4]
    (-3.5, 0.4, "positive to strong"),
    (-20.0, 3.0, "very strong"),
    (-0.3, 0.0, "bare mention"),              # exact evidences: decided however small
    (-0.3, math.nan, "bare mention"),         # unknown error: the estimate's words alone
])
def test_bayes_factor_verdicts(log_factor, std, expected):
    assert bayes_factor_verdict(log_factor, std) == expected


def test_summary_shows_bayes_factors_and_notes_an_undecided_ranking():
    results = selection_results(["a", "b", "c"], np.array([-100.0, -100.5, -110.0]), np.array([0.4, 0.4, 0.4]),
                                np.array([-0.47, -0.97, -10.47]), np.zeros(3), 50, "sgais")
    lines = format_summary(results).splitlines()
    header = lines[0]
    assert "log BF" in header and "vs best" in header
    by_name = {line.split()[1]: line for line in lines[1:4]}
    assert "best" in by_name["a"] and " 0 " in by_name["a"]
    assert "-0.50 +/- 0.57" in by_name["b"] and "undecided" in by_name["b"]
    assert "-10.00 +/- 0.57" in by_name["c"] and "very strong" in by_name["c"]
    assert lines[-1].startswith("undecided:") and f"{UNDECIDED_SIGMAS:g} combined standard errors" in lines[-1]
    decided = selection_results(["a", "c"], np.array([-100.0, -110.0]), np.array([0.4, 0.4]),
                                np.array([0.0, -10.0]), np.zeros(2), 50, "sgais")
    assert "undecided" not in format_summary(decided)
