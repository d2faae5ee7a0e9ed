"""The posterior-mode check: importance sampling at the best mode, and the online estimators' use of it."""

import re
import warnings

import numpy as np
import pytest
from scipy import stats

from evidence_select import BayesianLinearRegressor, BayesianMixture, EvidenceConvergenceWarning
from evidence_select.datasets import make_linear_regression, make_mixture
from evidence_select.sgais import _engine as engine
from evidence_select.sgais import _mode_check
from evidence_select.sgais._engine import sgais_init, sgais_update
from evidence_select.sgais._mode_check import mode_importance_log_evidence, symmetrised_log_density, symmetrised_t
from evidence_select.sgais._policy import crossed_checkpoint
from evidence_select.sgais._settings import EngineTuning, ModeCheckSettings
from evidence_select.sgais._state import SGAISConfig
from evidence_select.sgais.tests._mixtures import (AnotherLikelihoodMixtureModel, ExactDrawsMixtureModel,
                                                   OneNatAboveMixtureModel, PriorReplayMixture)
from evidence_select.models import GaussianMixtureModel
from evidence_select.utils import log_mean_exp, logsumexp


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


def test_the_draws_weigh_by_the_models_approximate_likelihood_sum():
    """The check's draws take the model's approximate_log_likelihood_sum (and nothing else does: the search and
    the number of draws stay the same): one nat added there moves the value by one nat, and the mixture's single
    precision moves it by far less than its error, from the same draws."""
    X = make_mixture(3000, random_state=0).X

    def value(model):
        return mode_importance_log_evidence(model, X, None, np.random.default_rng(0))

    exact, above = value(ExactDrawsMixtureModel(3, 2)), value(OneNatAboveMixtureModel(3, 2))
    single = value(GaussianMixtureModel(3, 2))
    assert exact.n_draws == above.n_draws == single.n_draws
    assert above.log_evidence - exact.log_evidence == pytest.approx(1.0, abs=1e-9)
    assert 0 < abs(single.log_evidence - exact.log_evidence) < 0.1 * exact.std
    # A subclass with a likelihood of its own does not inherit the mixture's approximation: its draws read its sum.
    assert not AnotherLikelihoodMixtureModel(3, 2).capabilities().approximate_sum
    assert GaussianMixtureModel(3, 2).capabilities().approximate_sum
    another = value(AnotherLikelihoodMixtureModel(3, 2))
    assert another.log_evidence - exact.log_evidence == pytest.approx(1.0, abs=1e-9)


def test_mode_evidence_without_symmetrising_misses_the_other_labelling():
    """The same data with the relabelling maps dropped: the proposal reaches one of the two label modes, so the
    estimate reads log 2 low (this is what the symmetrisation is for). Eight starts and all ``n_draws`` draws
    (``target_std=0``) fix the draws: the one-labelling estimate is heavy-tailed (a tail draw near the other
    labelling weighs a lot), and 4000 draws keep its own error at 0.02, small against the log 2 the test is about.
    A few hundred draws can miss the tail and read lower still."""
    X = np.array([-3.2, -2.9, -3.1, -2.7, 2.8, 3.0, 3.3, 2.9])[:, None]
    model = GaussianMixtureModel(2, 1)
    settings = ModeCheckSettings(n_starts=8, target_std=0.0)
    symmetric = mode_importance_log_evidence(model, X, None, np.random.default_rng(0), settings)
    one_labelling = GaussianMixtureModel(2, 1)
    one_labelling.mode_symmetries = lambda: np.eye(model.n_params)[None]
    single = mode_importance_log_evidence(one_labelling, X, None, np.random.default_rng(0), settings)
    assert single.std < 0.05
    assert single.log_evidence - symmetric.log_evidence == pytest.approx(-np.log(2), abs=0.05)


def _counted_draws(monkeypatch):
    """Patch the importance sampler's blocks to count the draws they make; returns the list of block sizes."""
    sizes, block = [], _mode_check._block_log_weights

    def counted(model, X, y, rng, proposal, size):
        sizes.append(int(size))
        return block(model, X, y, rng, proposal, size)

    monkeypatch.setattr(_mode_check, "_block_log_weights", counted)
    return sizes


@pytest.mark.parametrize("seed", range(4))
def test_mode_check_draws_until_its_error_reaches_the_target(monkeypatch, seed):
    """300 rows of two clusters: the draws stop once the value's error is within ``target_std`` (after at least
    ``min_draws``), well before ``n_draws``, and the value agrees with all ``n_draws`` draws' within their
    combined errors (the first draws are the same). A target no run reaches takes every draw, bit for bit the
    fixed count's result; one every run reaches stops at ``min_draws``."""
    rng = np.random.default_rng(seed)
    X = np.concatenate([rng.normal(-3.0, 1.0, 150), rng.normal(3.0, 1.0, 150)])[:, None]
    model = GaussianMixtureModel(2, 1)
    sizes = _counted_draws(monkeypatch)
    adaptive = mode_importance_log_evidence(model, X, None, np.random.default_rng(seed), ModeCheckSettings())
    n_adaptive = sum(sizes)
    sizes.clear()
    every = mode_importance_log_evidence(model, X, None, np.random.default_rng(seed),
                                         ModeCheckSettings(target_std=0.0))
    assert sum(sizes) == ModeCheckSettings().n_draws
    assert ModeCheckSettings().min_draws <= n_adaptive < ModeCheckSettings().n_draws
    assert adaptive.std <= ModeCheckSettings().target_std
    assert abs(adaptive.log_evidence - every.log_evidence) < 4 * np.hypot(adaptive.std, every.std)
    unreachable = mode_importance_log_evidence(model, X, None, np.random.default_rng(seed),
                                               ModeCheckSettings(target_std=1e-12))
    assert unreachable == every
    sizes.clear()
    mode_importance_log_evidence(model, X, None, np.random.default_rng(seed), ModeCheckSettings(target_std=1e9))
    assert sum(sizes) == ModeCheckSettings().min_draws


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


def _distinct_mode(model, rng, spacing):
    """A point of ``model`` whose components' means lie ``spacing`` apart on a line (all distinct when
    ``spacing`` is far above the scale), with unit variances and equal weights."""
    K, d = model.n_components, model.n_features
    means = spacing * np.arange(K)[:, None] * np.ones(d) + 0.01 * rng.normal(size=(K, d))
    return model.pack(np.full((1, K), 1.0 / K), means[None], np.ones((1, K, d)))[0]


@pytest.mark.parametrize("spacing, n_near", [(5.0, 1), (0.0, None)])
def test_past_max_symmetries_the_proposal_lists_the_relabellings_near_the_mode(spacing, n_near):
    """Six components (720 relabellings) at a scale of 0.05: components 5 apart put every other copy of the mode
    hundreds of whitened units away, so the proposal lists the identity alone; components that coincide put every
    copy near, and all are listed. Either way its density at draws from the mode's own copy is the full sum over
    all 720 maps (scipy's t per map, averaged) to rounding: the maps left out weigh nothing there."""
    model = GaussianMixtureModel(6, 2)
    rng = np.random.default_rng(0)
    mode = _distinct_mode(model, rng, spacing)
    shape = 0.05**2 * np.eye(model.n_params)
    settings = ModeCheckSettings()
    proposal = _mode_check.mode_proposal(model, mode, shape, settings)
    assert proposal.n_symmetries == 720
    assert len(proposal.maps) == (720 if n_near is None else n_near)
    theta = proposal.distribution.rvs(size=50, random_state=rng)
    t = stats.multivariate_t(loc=mode, shape=shape, df=settings.df)
    maps = model.mode_symmetries()
    full = logsumexp(np.array([t.logpdf(theta @ A.T) for A in maps]), axis=0) - np.log(len(maps))
    np.testing.assert_allclose(symmetrised_log_density(proposal, theta), full, rtol=0, atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("n_clusters", [2, 4])
def test_mode_evidence_past_max_symmetries_agrees_with_the_full_sum(n_clusters):
    """Four components (24 relabellings) on 200 rows of two or four clusters, valued through the relabellings
    listed near the mode, drawn at its own copy (``max_symmetries=1``), and through all of them, drawn at every
    copy: over 16 seeds' draws the two means agree within four combined standard errors (the weights are
    heavy-tailed here, so each value's own error is not used). With two clusters the redundant components
    coincide at the mode and six copies of it are listed; with four, one. A density normalised by the listed
    maps' number instead of the symmetries' reads 1.4 or 3.2 nats high."""
    rng = np.random.default_rng(n_clusters)
    centres = 4.0 * np.arange(n_clusters)[:, None]
    X = centres[rng.integers(n_clusters, size=200)] + rng.normal(size=(200, 1))
    model = GaussianMixtureModel(4, 1)
    settings = ModeCheckSettings(target_std=0.0)
    objective = _mode_check.negative_log_joint(model, X, None)
    mode = _mode_check.best_mode(objective, model.mode_starts(rng, X, settings.n_starts), settings.same_fit)
    scale = settings.inflate * _mode_check._scale_at(objective, mode, settings.hessian_step)
    listed = _mode_check.mode_proposal(model, mode, scale, settings._replace(max_symmetries=1))
    assert len(listed.maps) == {2: 6, 4: 1}[n_clusters] and listed.n_symmetries == 24
    values = {}
    for name, chosen in (("listed", settings._replace(max_symmetries=1)), ("all", settings)):
        found = [_mode_check.importance_at_mode(model, (X, None), np.random.default_rng(seed), (objective, mode),
                                                chosen).log_evidence for seed in range(16)]
        values[name] = (np.mean(found), np.std(found, ddof=1) / 4.0)
    (listed_mean, listed_se), (full_mean, full_se) = values["listed"], values["all"]
    assert abs(listed_mean - full_mean) < 4 * np.hypot(listed_se, full_se), values


def test_mixtures_up_to_seven_components_are_checked_within_the_maps_memory():
    """The check values six and seven components (720 and 5040 label symmetries) while their relabelling maps stay
    within ``max_listed_entries`` numbers (64 MiB), five components at any size (their 120 maps are summed as
    before), and not eight (40320)."""
    settings = ModeCheckSettings()
    assert _mode_check.model_checkable(GaussianMixtureModel(6, 8), settings)
    assert _mode_check.model_checkable(GaussianMixtureModel(7, 2), settings)
    assert not _mode_check.model_checkable(GaussianMixtureModel(6, 9), settings)  # 720 maps of 113**2
    assert not _mode_check.model_checkable(GaussianMixtureModel(7, 3), settings)  # 5040 maps of 48**2
    assert _mode_check.model_checkable(GaussianMixtureModel(5, 30), settings)
    assert not _mode_check.model_checkable(GaussianMixtureModel(8, 1), settings)


def _fit(X, seed, estimator=BayesianMixture, **settings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = estimator(3, batch_size=100, random_state=seed, shuffle=False, **settings).fit(X)
    flagged = [w for w in caught if issubclass(w.category, EvidenceConvergenceWarning)
               and "best posterior mode" in str(w.message)]
    return est, flagged


@pytest.mark.slow
def test_a_mixture_stuck_in_a_poorer_configuration_is_flagged_and_widened(sorted_iris):
    """Iris sorted by sepal length, three components: seed 2's particles settle 9 nats below the best mode's
    mass (which heavy AIS confirms: -568.8) with both groups agreeing at +/- 1, where its restart replays from
    the prior. The check must flag the run and widen its error so that the mode's value lies within one standard
    deviation."""
    est, flagged = _fit(sorted_iris, 2, PriorReplayMixture)
    record = est.evidence_history_[-1]
    assert len(flagged) == 1 and "Cure" in str(flagged[0].message)
    gap = record.mode_log_evidence - est.log_evidence_
    assert gap > 5.0
    assert est.log_evidence_std_ >= gap and record.log_evidence_std == est.log_evidence_std_
    assert est.sgais_state_.widening.mode_gap_variance == pytest.approx(gap**2)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_six_components_in_a_poorer_configuration_are_flagged_and_widened(seed):
    """Six components (720 label symmetries, past the proposal's full sum) on 600 rows of the demo's seven
    clusters sorted along x: the particles settle in poorer configurations, both groups alike. Each run's
    interval must hold the mode's value (mass that the evidence has at least): it reads within ``gap_sigmas``
    combined standard deviations of it, or it is flagged and its std covers the gap."""
    from evidence_select.datasets._shift import shift_stream

    X = shift_stream((10, 10, 600), random_state=0).X[20:]
    X = X[np.argsort(X[:, 0], kind="stable")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = BayesianMixture(6, batch_size=100, random_state=seed, shuffle=False).fit(X)
    flagged = [w for w in caught if "best posterior mode" in str(w.message)]
    record = est.evidence_history_[-1]
    assert np.isfinite(record.mode_log_evidence)
    gap = record.mode_log_evidence - est.log_evidence_
    if gap > ModeCheckSettings().gap_sigmas * np.hypot(est.log_evidence_std_, record.mode_log_evidence_std):
        assert flagged and "posterior_mode" in est.evidence_checks_
        assert est.log_evidence_std_ >= gap


@pytest.mark.slow
def test_a_mixture_near_the_mode_value_is_not_flagged(sorted_iris):
    est, flagged = _fit(sorted_iris, 3)
    record = est.evidence_history_[-1]
    assert flagged == [] and est.sgais_state_.widening.mode_gap_variance == 0.0
    assert record.mode_log_evidence - est.log_evidence_ < ModeCheckSettings().gap_sigmas * est.log_evidence_std_


class _UngatedMixture(BayesianMixture):
    """The mixture estimator with its periodic restarts ungated (they replay wherever they are due), no restart
    after a check (test_mode_restart), and searches that keep no modes for the next (n_known_modes=0): no check's
    value or search enters a later decision."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(gate_draws=0, restart_after_check=False,
                                                               n_known_modes=0))


@pytest.mark.slow
def test_checks_run_where_due_and_leave_the_estimates_alone(monkeypatch):
    """Chunks of 400 rows against the checkpoints 100, 141, 200, ..., 1131, 1600, 2262: the chunk ending at 2000
    crosses none, but it surprised the particles (it needed reheat_after_steps annealing steps; its restart waits
    for the stream's last chunk, whose evidence the call reports), so it is checked too; every other chunk crosses
    one. The estimates equal those of the same run with the check's computation removed (the check draws from a
    copy of the state's generator; the restarts are ungated in both and no search keeps its modes for the next,
    so no check enters a decision). Where
    checks run and the bit-identity need no accurate evidence: 8 particles per group and 3 moves per step."""
    X = np.random.default_rng(0).normal(size=(2400, 1)) + np.repeat([[-2.0], [2.0]], 1200, axis=0)

    def stream():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _UngatedMixture(2, batch_size=400, n_particles=8, n_mcmc_steps=3, random_state=0,
                                   shuffle=False).fit(X)

    checked = stream()
    assert [r.n_samples_seen for r in checked.evidence_history_ if not np.isnan(r.mode_log_evidence)] == [400, 800,
                                                                                                       1200, 1600,
                                                                                                       2000, 2400]
    at_2000 = checked.evidence_history_[4]
    settings = ModeCheckSettings()
    assert not crossed_checkpoint(1600, 2000, settings.unit, settings.growth)
    assert at_2000.n_annealing_steps >= checked.sgais_config_.reheat_after_steps and at_2000.n_replayed == 0
    monkeypatch.setattr(engine, "apply_mode_check", lambda state, model, settings, evidence=None: (state, None))
    unchecked = stream()
    assert all(np.isnan(r.mode_log_evidence) for r in unchecked.evidence_history_)
    assert [r.log_evidence for r in checked.evidence_history_] == [r.log_evidence
                                                                    for r in unchecked.evidence_history_]
    np.testing.assert_array_equal(checked.particles_, unchecked.particles_)


def test_models_without_mode_starts_are_not_checked():
    data = make_linear_regression(300, random_state=0)
    est = BayesianLinearRegressor(random_state=0).fit(data.X, data.y)
    assert all(np.isnan(r.mode_log_evidence) for r in est.evidence_history_)
    assert est.sgais_state_.widening.mode_gap_variance == 0.0


@pytest.mark.slow
def test_log_evidence_of_a_model_checks_the_final_state(sorted_iris, monkeypatch):
    """``log_evidence(model, method="sgais")`` streams the engine without an estimator; its final state gets the
    same check. The mode's value is made 100 nats above what the importance sampler finds, beyond two of any run's
    error bars here, so every run's check fails whatever its luck: the warning points at the caller, the verdict
    keeps it, and the reported std covers the gap it names. The value comes without its proposal, so that no
    restart draws at the mode (test_mode_restart) from a value that is not the proposal's."""
    from evidence_select import log_evidence

    original = _mode_check.mode_importance_log_evidence

    def far_above(model, X, y, rng, settings, known_modes=None, loose_std=0.0):
        found = original(model, X, y, rng, settings, known_modes, loose_std)
        return found._replace(log_evidence=found.log_evidence + 100.0).without_proposal()

    monkeypatch.setattr(_mode_check, "mode_importance_log_evidence", far_above)
    for seed in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = log_evidence(GaussianMixtureModel(3, 4), sorted_iris, method="sgais", random_state=seed,
                                  batch_size=100, n_mcmc_steps=2, initial_mcmc_factor=1)
        flagged = [w for w in caught if "best posterior mode" in str(w.message)]
        assert len(flagged) == 1 and flagged[0].filename == __file__, [str(w.message) for w in caught]
        assert result.diagnostics["posterior_mode"]["passed"] is False
        gap = float(re.search(r"([0-9.]+) nats above", str(flagged[0].message)).group(1))
        assert gap > 50.0 and result.log_evidence_std >= gap - 0.005  # the message rounds the gap to 0.01


def test_the_last_chunk_of_every_call_is_checked_and_reading_computes_nothing(sorted_iris, monkeypatch):
    """Chunks of 100 rows over 130 rows: the chunk ending at 100 crosses a checkpoint, the one ending at 130 none
    (141 is next), yet, as the last of the call, it is checked too. Reading the fitted attributes then runs no
    check: with the check's importance sampler made to fail, they read the last record's numbers."""
    est = BayesianMixture(3, batch_size=100, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.partial_fit(sorted_iris[:130])
    settings = ModeCheckSettings()
    assert not crossed_checkpoint(100, 130, settings.unit, settings.growth)
    assert [bool(np.isfinite(r.mode_log_evidence)) for r in est.evidence_history_] == [True, True]

    def fail(*args):
        raise AssertionError("reading a fitted attribute ran a check")

    monkeypatch.setattr(_mode_check, "mode_importance_log_evidence", fail)
    last = est.evidence_history_[-1]
    assert (est.log_evidence_, est.log_evidence_std_) == (last.log_evidence, last.log_evidence_std)
    assert isinstance(est.evidence_checks_, tuple)


@pytest.fixture
def counted_checks(monkeypatch):
    """The row counts of the posterior-mode checks that run (the engine's importance sampler, counted)."""
    calls, original = [], _mode_check.mode_importance_log_evidence

    def counted(model, X, y, rng, settings, known_modes=None, loose_std=0.0):
        calls.append(len(X))
        return original(model, X, y, rng, settings, known_modes, loose_std)

    monkeypatch.setattr(_mode_check, "mode_importance_log_evidence", counted)
    return calls


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::evidence_select.EvidenceConvergenceWarning")
def test_each_replay_checks_its_last_chunk(monkeypatch):
    """A periodic restart at row 200 (restart_growth=2, chunks of 50) replays every row once per replicate group.
    The mode's value is made 0 nats, hundreds above the rows' log evidence (about -400), so every check fails; the stream's own chunks are not
    checked (check=False), so the gap the pooled state carries after the restart is the replays': each checked
    its last chunk against the value the restart took once, on all 200 rows. A replay path that skipped the
    check would leave no gap."""
    values = []

    def far_above(model, X, y, rng, settings, known_modes=None, loose_std=0.0):
        values.append(len(X))
        return _mode_check.ModeEvidence(0.0, 0.01)

    monkeypatch.setattr(_mode_check, "mode_importance_log_evidence", far_above)
    X = np.random.default_rng(0).normal(size=(200, 1)) + np.repeat([[-2.0], [2.0]], 100, axis=0)
    model = GaussianMixtureModel(2, 1)
    config = SGAISConfig(n_particles=8, n_replicates=2, batch_size=50, restart_on_surprise=True, restart_growth=2.0)
    state = sgais_init(np.random.default_rng(0), model, config, 1)
    replayed = []
    for start in range(0, 200, 50):
        state, record, _ = sgais_update(state, X[start:start + 50], None, model, config, check=False)
        replayed.append(record.n_replayed)
    assert replayed == [0, 0, 0, 200] and values == [200]
    assert state.widening.mode_gap_variance > 100.0**2


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::evidence_select.EvidenceConvergenceWarning")
def test_log_evidence_of_a_model_checks_its_chunks_as_the_estimators_do(sorted_iris, counted_checks):
    """``log_evidence(model, method="sgais")`` streams through the same chunk updates: chunks of 100 over 150 rows,
    the first crossing the checkpoint 100, the last both 141 and the end of the stream. Its records carry the
    checks' values."""
    from evidence_select import log_evidence

    result = log_evidence(GaussianMixtureModel(3, 4), sorted_iris, method="sgais", random_state=0, batch_size=100)
    assert counted_checks == [100, 150]
    history = result.info["evidence_history"]
    assert [r.n_samples_seen for r in history] == [100, 150] and np.isfinite(history[-1].mode_log_evidence)


class _CheckedUpTo150(BayesianMixture):
    """The mixture estimator whose posterior-mode checks stop after 150 rows, and whose restarts replay from the
    prior (as :class:`PriorReplayMixture`'s)."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(max_rows=150, restart_share=0.0))


@pytest.mark.slow
def test_a_failed_check_stays_until_a_later_check_passes(sorted_iris):
    """The stuck seed's 150 rows fail the check; 25 more rows in a second call (no restart is due) can no longer be
    checked (past the 150 rows the checks run to here), so the failed check, its widening and its name stay with
    the evidence: neither a later call nor a reading forgets them."""
    est = _CheckedUpTo150(3, batch_size=100, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.partial_fit(sorted_iris)
        gap = est.evidence_history_[-1].mode_log_evidence - est.log_evidence_
        assert "posterior_mode" in est.evidence_checks_ and est.log_evidence_std_ >= gap > 5.0
        est.partial_fit(sorted_iris[::6])
    last = est.evidence_history_[-1]
    assert last.n_replayed == 0 and np.isnan(last.mode_log_evidence) and "posterior_mode" in last.failed_checks
    assert "posterior_mode" in est.evidence_checks_ and est.log_evidence_std_ >= 5.0
    assert est.sgais_state_.widening.mode_gap_variance == pytest.approx(gap**2)


def test_a_search_starts_from_the_known_modes_and_a_few_fresh_points():
    """Without known modes the search takes ``n_starts`` k-means++ starts; with them, the known modes first
    (the tie order keeps the known mode where a fresh start finds the same minimum) and ``n_fresh_starts``."""
    X = make_mixture(300, random_state=0).X
    model = GaussianMixtureModel(3, 2)
    settings = ModeCheckSettings()
    cold = _mode_check.search_starts(model, X, np.random.default_rng(0), settings)
    assert cold.shape == (settings.n_starts, model.n_params)
    known = cold[:2]
    warm = _mode_check.search_starts(model, X, np.random.default_rng(0), settings, known)
    assert warm.shape == (2 + settings.n_fresh_starts, model.n_params)
    np.testing.assert_array_equal(warm[:2], known)


def test_a_search_from_the_modes_of_fewer_rows_keeps_what_they_found():
    """Seven components on the paper's five clusters (many near-equal configurations): the modes a search found
    on 1000 rows, as starts on 1414 rows beside ``n_fresh_starts`` fresh points, reach a minimum at least as low
    as the best of them refined there, on every seed; on some seeds the fresh points alone reach a poorer one."""
    settings = ModeCheckSettings()
    model = GaussianMixtureModel(7, 2)
    n_poorer_alone = 0
    for seed in range(4):
        X = make_mixture(1414, random_state=seed).X
        objective = _mode_check.negative_log_joint(model, X, None)
        earlier = _mode_check.rows_mode_evidence(model, X[:1000], None, np.random.default_rng(seed), settings)
        assert 1 <= len(earlier.modes) <= settings.n_known_modes

        def lowest(starts):
            return float(objective(_mode_check.best_mode(objective, starts, settings.same_fit))[0])

        fresh = model.mode_starts(np.random.default_rng(10 + seed), X, settings.n_fresh_starts)
        warm = lowest(_mode_check.search_starts(model, X, np.random.default_rng(10 + seed), settings,
                                                earlier.modes))
        assert warm <= lowest(earlier.modes[:1]) + settings.same_fit
        n_poorer_alone += lowest(fresh) > warm + settings.same_fit
    assert n_poorer_alone >= 1


def test_a_run_keeps_the_modes_of_its_due_checks_only():
    """The state's ``known_modes`` are those of the last check due by the rows: a check a call's last chunk
    asked for (not due) leaves them, so a stream split into calls differently searches from the same starts;
    the next due check starts from them (``n_fresh_starts`` fresh points)."""
    X = make_mixture(400, random_state=0).X
    fresh = []
    original = GaussianMixtureModel.mode_starts

    def spy(self, rng, rows, n_starts):
        fresh.append(n_starts)
        return original(self, rng, rows, n_starts)

    settings = ModeCheckSettings()
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        warnings.simplefilter("ignore")
        patch.setattr(GaussianMixtureModel, "mode_starts", spy)
        est = BayesianMixture(2, batch_size=100, n_particles=8, random_state=0, shuffle=False)
        est.partial_fit(X[:100])  # crosses the checkpoint 100: due
        assert fresh == [settings.n_starts]
        after_due = est.sgais_state_.known_modes
        assert after_due is not None and after_due.shape[1] == est.model_.n_params
        est.partial_fit(X[100:130])  # 130 rows cross no checkpoint: checked because the call reports it
        assert fresh[-1] == settings.n_fresh_starts and not np.isnan(est.evidence_history_[-1].mode_log_evidence)
        assert est.sgais_state_.known_modes is after_due
        est.partial_fit(X[130:145])  # crosses 141: due, from the known modes
        assert fresh[-1] == settings.n_fresh_starts
        assert est.sgais_state_.known_modes is not after_due


def test_draws_stop_early_only_where_the_proposal_does_not_fit():
    """On the exact one-component evidence (weights spread about 0.5) with a ``target_std`` of 0.01: a
    ``loose_std`` of 0.2 changes nothing where the proposal fits; where it counts as not fitting (a
    ``restart_spread`` below its spread) the draws stop at the fewest that reach 0.2, and the value stays within
    4 of its errors of the exact one."""
    X = np.random.default_rng(0).normal(loc=[0.5, -1.0], scale=[1.0, 2.0], size=(40, 2))
    model = GaussianMixtureModel(1, 2)
    exact = model.exact_log_evidence(X)
    fits = ModeCheckSettings(target_std=0.01)
    unfit = fits._replace(restart_spread=0.1)
    for seed in range(3):
        def value(settings, loose_std):
            return _mode_check.rows_mode_evidence(model, X, None, np.random.default_rng(seed), settings, None,
                                                  loose_std)
        fine = value(fits, 0.0)
        assert fine.n_draws > fits.min_draws and value(fits, 0.2) == fine
        assert value(unfit, 0.0).n_draws == fine.n_draws
        loose = value(unfit, 0.2)
        assert loose.n_draws == fits.min_draws and loose.std <= 0.2 and loose.fit_spread > unfit.restart_spread
        assert abs(loose.log_evidence - exact) < 4 * loose.std


def test_a_chunks_check_may_stop_its_draws_at_a_third_of_the_runs_error():
    """A chunk's own check passes ``relative_std`` times the run's error as its ``loose_std`` (the error its
    record reports where the check passed and nothing restarted); a restart's value passes none."""
    looseness = {}
    original = _mode_check.rows_mode_evidence

    def spy(model, X, y, rng, settings, known_modes=None, loose_std=0.0):
        looseness[len(X)] = loose_std
        return original(model, X, y, rng, settings, known_modes, loose_std)

    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        warnings.simplefilter("ignore")
        patch.setattr(_mode_check, "rows_mode_evidence", spy)
        est = BayesianMixture(3, batch_size=100, n_particles=8, random_state=0, shuffle=False).fit(
            make_mixture(400, random_state=0).X)
    settings = ModeCheckSettings()
    plain = [r for r in est.evidence_history_ if r.n_samples_seen in looseness and not r.n_replayed
             and not r.failed_checks]
    assert len(plain) >= 2
    for record in plain:
        assert looseness[record.n_samples_seen] == pytest.approx(settings.relative_std * record.log_evidence_std,
                                                                 rel=1e-12)
