"""The posterior-mode check: importance sampling at the best mode, and the online estimators' use of it."""

import re
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import datasets

from evidence_select import BayesianLinearRegressor, BayesianMixture, EvidenceConvergenceWarning
from evidence_select.datasets import make_linear_regression
from evidence_select.sgais._mode_check import mode_importance_log_evidence, symmetrised_log_density, symmetrised_t
from evidence_select.sgais._policy import crossed_checkpoint
from evidence_select.sgais._settings import EngineTuning, ModeCheckSettings
from evidence_select.models import GaussianMixtureModel
from evidence_select.utils import log_mean_exp


def test_mode_evidence_of_a_two_component_mixture_matches_prior_monte_carlo():
    """Two clusters of four rows: the symmetrised proposal at one labelling's mode against 2e6 prior draws
    (whose own standard error, about 0.01 nats here, enters the tolerance)."""
    X = np.array([-3.2, -2.9, -3.1, -2.7, 2.8, 3.0, 3.3, 2.9])[:, None]
    model = GaussianMixtureModel(2, 1)
    check = mode_importance_log_evidence(model, X, None, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    log_lik = np.concatenate([model.log_likelihood(model.sample_prior(rng, 200_000), X).sum(axis=1)
                              for _ in range(10)])
    ratios = np.exp(log_lik - log_lik.max())
    monte_carlo_std = ratios.std() / ratios.mean() / np.sqrt(len(ratios))
    assert abs(check.log_evidence - log_mean_exp(log_lik)) < 4 * np.hypot(check.std, monte_carlo_std)


def test_mode_evidence_without_symmetrising_misses_the_other_labelling():
    """The same data with the relabelling maps dropped: the proposal reaches one of the two label modes, so the
    estimate reads log 2 low (this is what the symmetrisation is for). Eight starts fix the draws: the
    one-labelling estimate is heavy-tailed (a tail draw near the other labelling weighs a lot), and these draws
    keep its own error at 0.02, small against the log 2 the test is about."""
    X = np.array([-3.2, -2.9, -3.1, -2.7, 2.8, 3.0, 3.3, 2.9])[:, None]
    model = GaussianMixtureModel(2, 1)
    symmetric = mode_importance_log_evidence(model, X, None, np.random.default_rng(0), ModeCheckSettings(n_starts=8))
    one_labelling = GaussianMixtureModel(2, 1)
    one_labelling.mode_symmetries = lambda: np.eye(model.n_params)[None]
    single = mode_importance_log_evidence(one_labelling, X, None, np.random.default_rng(0),
                                          ModeCheckSettings(n_starts=8))
    assert single.std < 0.05
    assert single.log_evidence - symmetric.log_evidence == pytest.approx(-np.log(2), abs=0.05)


@pytest.mark.parametrize("n_components", [1, 3, 5])
def test_symmetrised_proposal_density_is_scipys_t_averaged_over_the_relabellings(n_components):
    """The whitened density of every map in one product (maps in several blocks for K = 5: 120 maps of 24
    parameters exceed a block at 400 points) against scipy's t density of each map's image, averaged."""
    model = GaussianMixtureModel(n_components, 2)
    rng = np.random.default_rng(n_components)
    n = model.n_params
    root = rng.normal(size=(n, n))
    shape, loc = root @ root.T / n + 0.1 * np.eye(n), rng.normal(size=n)
    maps = model.mode_symmetries()
    theta = loc + rng.standard_t(5, size=(400, n))
    proposal = symmetrised_t(loc, shape, 5.0, maps)
    t = stats.multivariate_t(loc=loc, shape=shape, df=5.0)
    expected = np.log(np.mean([np.exp(t.logpdf(theta @ A.T)) for A in maps], axis=0))
    np.testing.assert_allclose(symmetrised_log_density(proposal, theta), expected, rtol=0, atol=1e-9)


@pytest.fixture(scope="module")
def sorted_iris():
    X = datasets.load_iris().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X[np.argsort(X[:, 0], kind="stable")]


def _fit(X, seed, **settings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = BayesianMixture(3, batch_size=100, random_state=seed, shuffle=False, **settings).fit(X)
    flagged = [w for w in caught if issubclass(w.category, EvidenceConvergenceWarning)
               and "best posterior mode" in str(w.message)]
    return est, flagged


def test_a_mixture_stuck_in_a_poorer_configuration_is_flagged_and_widened(sorted_iris):
    """Iris sorted by sepal length, three components: seed 2's particles settle 9 nats below the best mode's
    mass (which heavy AIS confirms: -568.8) with both groups agreeing at +/- 1. The check must flag the run and
    widen its error so that the mode's value lies within one standard deviation."""
    est, flagged = _fit(sorted_iris, 2)
    record = est.evidence_history_[-1]
    assert len(flagged) == 1 and "Cure" in str(flagged[0].message)
    gap = record.mode_log_evidence - est.log_evidence_
    assert gap > 5.0
    assert est.log_evidence_std_ >= gap and record.log_evidence_std == est.log_evidence_std_
    assert est.sgais_state_.widening.mode_gap_variance == pytest.approx(gap**2)


def test_a_mixture_near_the_mode_value_is_not_flagged(sorted_iris):
    est, flagged = _fit(sorted_iris, 3)
    record = est.evidence_history_[-1]
    assert flagged == [] and est.sgais_state_.widening.mode_gap_variance == 0.0
    assert record.mode_log_evidence - est.log_evidence_ < ModeCheckSettings().gap_sigmas * est.log_evidence_std_


class _UncheckedMixture(BayesianMixture):
    """The mixture estimator with its posterior-mode checks off (no rows are few enough)."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(max_rows=0))


def test_checks_run_where_due_and_leave_the_estimates_alone():
    """Chunks of 400 rows against the checkpoints 100, 141, 200, ..., 1131, 1600, 2262: the chunk ending at 2000
    crosses none, but it surprised the particles (a restart or an excursion ran), so it is checked too; every other
    chunk crosses one. The estimates equal those of the same run without checks (the check draws from a copy of
    the state's generator)."""
    X = np.random.default_rng(0).normal(size=(2400, 1)) + np.repeat([[-2.0], [2.0]], 1200, axis=0)

    def stream(estimator_class):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return estimator_class(2, batch_size=400, random_state=0, shuffle=False).fit(X)

    checked = stream(BayesianMixture)
    assert [r.n_samples_seen for r in checked.evidence_history_ if not np.isnan(r.mode_log_evidence)] == [400, 800,
                                                                                                       1200, 1600,
                                                                                                       2000, 2400]
    at_2000 = checked.evidence_history_[4]
    settings = ModeCheckSettings()
    assert not crossed_checkpoint(1600, 2000, settings.unit, settings.growth)
    assert at_2000.n_replayed > 0 or at_2000.n_reheat_steps > 0
    unchecked = stream(_UncheckedMixture)
    assert all(np.isnan(r.mode_log_evidence) for r in unchecked.evidence_history_)
    assert [r.log_evidence for r in checked.evidence_history_] == [r.log_evidence
                                                                    for r in unchecked.evidence_history_]
    np.testing.assert_array_equal(checked.particles_, unchecked.particles_)


def test_models_without_mode_starts_are_not_checked():
    data = make_linear_regression(300, random_state=0)
    est = BayesianLinearRegressor(random_state=0).fit(data.X, data.y)
    assert all(np.isnan(r.mode_log_evidence) for r in est.evidence_history_)
    assert est.sgais_state_.widening.mode_gap_variance == 0.0


def test_log_evidence_of_a_model_checks_the_final_state(sorted_iris):
    """``log_evidence(model, method="sgais")`` streams the engine without an estimator; its final state gets the
    same check. With two moves per temperature some seeds miss the configuration: their warning points at the
    caller and their reported std covers the gap it names."""
    from evidence_select import log_evidence

    flagged_runs = 0
    for seed in range(3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = log_evidence(GaussianMixtureModel(3, 4), sorted_iris, method="sgais", random_state=seed,
                                  batch_size=100, n_mcmc_steps=2, initial_mcmc_factor=1)
        flagged = [w for w in caught if "best posterior mode" in str(w.message)]
        assert result.diagnostics["posterior_mode"]["passed"] == (not flagged)  # the verdict keeps the warning
        for warning in flagged:
            assert warning.filename == __file__
            gap = float(re.search(r"([0-9.]+) nats above", str(warning.message)).group(1))
            assert result.log_evidence_std >= gap
        flagged_runs += bool(flagged)
    assert flagged_runs >= 1


def _without_chunk_checks(monkeypatch):
    """No check after any chunk: only the one when the evidence is read can run."""
    monkeypatch.setattr("evidence_select.estimators._base.check_against_mode", lambda state, *args, **kw: (state, None))


def test_reading_the_evidence_checks_a_last_chunk_the_stream_did_not(sorted_iris, monkeypatch):
    """The stuck seed of sorted iris with the chunks' checks switched off: the first read of the evidence checks
    the final state, warns at the reading line, widens the reported error over the gap and names the check,
    but records nothing in the history and keeps nothing in the state later chunks continue from. A second
    read reuses the check (no second warning, same numbers)."""
    _without_chunk_checks(monkeypatch)
    est, flagged = _fit(sorted_iris, 2)
    assert flagged == [] and all(np.isnan(r.mode_log_evidence) for r in est.evidence_history_)
    streamed_std = est.evidence_history_[-1].log_evidence_std
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value, std, checks = est.log_evidence_, est.log_evidence_std_, est.evidence_checks_
    flagged = [w for w in caught if "best posterior mode" in str(w.message)]
    assert len(flagged) == 1 and flagged[0].filename == __file__
    gap = float(re.search(r"([0-9.]+) nats above", str(flagged[0].message)).group(1))
    assert gap > 5.0 and std >= gap > streamed_std and "posterior_mode" in checks
    assert value == est.evidence_history_[-1].log_evidence and est.sgais_state_.widening.mode_gap_variance == 0.0
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        assert (est.log_evidence_, est.log_evidence_std_) == (value, std)
    assert again == []


def test_reading_the_evidence_between_calls_changes_nothing_later(sorted_iris, monkeypatch):
    """The stuck seed's 150 rows, then 50 more in a second call, with and without reading the evidence in
    between: the read's check fails (the reported error widens), yet the second call's chunks, state and
    reported numbers are the same either way."""
    _without_chunk_checks(monkeypatch)
    more = sorted_iris[::3]

    def stream(read_between):
        est = BayesianMixture(3, batch_size=100, random_state=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.partial_fit(sorted_iris)
            if read_between:
                assert "posterior_mode" in est.evidence_checks_
                assert est.log_evidence_std_ > 5.0 > est.evidence_history_[-1].log_evidence_std
            est.partial_fit(more)
            return est, (est.log_evidence_, est.log_evidence_std_)

    (read, read_numbers), (unread, unread_numbers) = stream(True), stream(False)
    np.testing.assert_array_equal(read.particles_, unread.particles_)
    assert [r.log_evidence_std for r in read.evidence_history_] == [r.log_evidence_std
                                                                     for r in unread.evidence_history_]
    assert read_numbers == unread_numbers
