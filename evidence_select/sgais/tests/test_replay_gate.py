"""The replay gate (:mod:`evidence_select.sgais._replay_gate`): a periodic restart of a mixture replays only where
the run fell behind the posterior's best mode."""

import math
import warnings

import numpy as np
import pytest

from evidence_select.estimators import BayesianMixture
from evidence_select.models import GaussianMixtureModel
from evidence_select.sgais import _engine as engine
from evidence_select.sgais._mode_check import ModeCheck, ModeEvidence, compare_with_mode, rows_mode_evidence
from evidence_select.sgais._replay_gate import GateCheck, allowed_gap, gate_applies, gate_mode_evidence, groups_behind
from evidence_select.sgais._policy import pooled_restart
from evidence_select.sgais._settings import EngineTuning, ModeCheckSettings


def _three_clusters(n, seed=0):
    """1-d rows from three unit clusters at -6, 0 and 6 (within the default prior's predictive scale)."""
    rng = np.random.default_rng(seed)
    return rng.normal(rng.choice([-6.0, 0.0, 6.0], size=n), 1.0)[:, None]


def _clusters_in_order(n_each, seed):
    """The three clusters one after another, ``n_each`` rows each: the chunks that open a cluster surprise."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(centre, 1.0, n_each) for centre in (-6.0, 0.0, 6.0)])[:, None]


def _check(gap, std, mode_std=0.05, off_mode=True):
    """A gate's check of a run ``gap`` nats below the mode's value, whose particles sit off the mode or at it."""
    return GateCheck(ModeCheck(evidence=ModeEvidence(0.0, mode_std), log_evidence=-gap, std=std, gap=gap,
                               failed=gap > 2 * math.hypot(std, mode_std)), off_mode)


PAST = 10_000  # rows past the default ModeCheckSettings.max_rows


def _fell(check, groups, settings, n_rows=PAST, last_gap=0.0):
    return bool(np.any(groups_behind(check, groups, allowed_gap(check, last_gap**2, n_rows, settings), settings)))


def test_past_the_checked_rows_a_run_falls_behind_when_its_gap_grows_beyond_its_errors():
    settings = ModeCheckSettings()
    level = ([-1.0, -1.0], [1.0, 1.0])  # two groups that agree, each 1 nat below the mode's value
    assert not _fell(_check(gap=1.0, std=1.0), level, settings)
    assert _fell(_check(gap=3.0, std=1.0), ([-3.0, -3.0], [1.0, 1.0]), settings)
    # A gap that stood since the last check (its error bar holds it) is not a fall; growing past it by 2 sigma is.
    assert not _fell(_check(gap=5.0, std=1.0), ([-5.0, -5.0], [1.0, 1.0]), settings, last_gap=4.0)
    assert _fell(_check(gap=7.0, std=1.0), ([-7.0, -7.0], [1.0, 1.0]), settings, last_gap=4.0)


def test_within_the_checked_rows_any_reading_below_the_mode_is_a_fall():
    # There a replay costs few rows and closes a deficit of any size: the run must read the mode's value.
    settings = ModeCheckSettings(max_rows=500)
    level = ([-0.3, -0.3], [1.0, 1.0])
    assert _fell(_check(gap=0.3, std=1.0), level, settings, n_rows=500)
    assert not _fell(_check(gap=-0.3, std=1.0), ([0.3, 0.3], [1.0, 1.0]), settings, n_rows=500)
    assert not _fell(_check(gap=0.3, std=1.0), level, settings, n_rows=501)
    assert _fell(_check(gap=0.3, std=1.0), level, settings, n_rows=500, last_gap=5.0)  # no gap stands there


def test_one_group_left_behind_is_a_fall_that_the_pooled_estimate_hides():
    # The pooled estimate follows the better group (log mean exp) and the groups' spread widens its error bar, so
    # its own gap stays within its errors; the group's distance below the pool, against the two groups' own
    # errors, does not.
    settings = ModeCheckSettings()
    pooled = _check(gap=1.0 + math.log(2.0), std=900.0)
    assert _fell(pooled, ([-1.0, -1800.0], [1.0, 1.0]), settings)
    assert _fell(pooled, ([-1.0, -9.0], [1.0, 1.0]), settings)  # 7.3 nats below the pool, 2.8 allowed
    assert not _fell(pooled, ([-1.0, -4.0], [1.0, 1.0]), settings)  # 2.4 nats below: within 2 sigma
    assert not _fell(pooled, ([-1.0, -9.0], [16.0, 16.0]), settings)  # groups with wide errors
    assert not _fell(pooled, ([-31.0, -30.0], [1.0, 1.0]), settings, last_gap=29.0)  # a deficit the groups share
    assert not _fell(pooled, ([-1.0, np.nan], [1.0, 1.0]), settings)  # no reading is not a fall
    assert _fell(pooled, ([-1.0, -np.inf], [1.0, 1.0]), settings)  # no mass left is


def test_the_groups_left_behind_replay_alone_and_a_run_below_the_mode_replays_every_group():
    settings = ModeCheckSettings()
    pooled = _check(gap=1.0 + math.log(2.0), std=900.0)
    allowed = allowed_gap(pooled, 0.0, PAST, settings)
    assert groups_behind(pooled, ([-1.0, -9.0, -1.5], [1.0, 1.0, 1.0]), allowed, settings).tolist() == [
        False, True, False]
    assert groups_behind(_check(gap=3.0, std=1.0), ([-3.0, -9.0], [1.0, 1.0]), 0.0, settings).tolist() == [True, True]


def test_within_the_checked_rows_a_run_whose_particles_sit_at_the_mode_falls_only_beyond_its_errors():
    # Within its errors it lost what it lost in the mode's basin, which a replay from the prior would lose again;
    # beyond them it may have lost mass before its particles found the basin, which a replay mends. Groups left
    # behind the others replay either way.
    settings = ModeCheckSettings(max_rows=500)
    level = ([-1.5, -1.5], [1.0, 1.0])
    assert not _fell(_check(gap=1.5, std=1.0, off_mode=False), level, settings, n_rows=500)
    assert _fell(_check(gap=1.5, std=1.0, off_mode=True), level, settings, n_rows=500)
    assert _fell(_check(gap=3.0, std=1.0, off_mode=False), ([-3.0, -3.0], [1.0, 1.0]), settings, n_rows=500)
    assert _fell(_check(gap=1.5, std=1.0, off_mode=False), ([-1.5, -9.0], [1.0, 1.0]), settings, n_rows=500)
    # Past the checked rows the particles' basin does not change the rule.
    assert _fell(_check(gap=3.0, std=1.0, off_mode=False), ([-3.0, -3.0], [1.0, 1.0]), settings)
    assert not _fell(_check(gap=1.5, std=1.0, off_mode=True), level, settings)


def test_the_gate_applies_to_models_with_a_mode_search_and_few_symmetries():
    settings = ModeCheckSettings(max_rows=1000)
    model = GaussianMixtureModel(3, 1)
    assert gate_applies(model, settings)
    assert not gate_applies(model, settings._replace(gate_draws=0))
    assert not gate_applies(GaussianMixtureModel(6, 1), settings)  # 720 relabellings: too many to sum over


def test_within_the_checked_rows_the_gate_takes_the_posterior_mode_checks_value():
    # The chunk's own check and a restart's replays then share the gate's value instead of taking it again.
    X = _three_clusters(600)
    model = GaussianMixtureModel(3, 1)
    settings = ModeCheckSettings(max_rows=600)
    gated = gate_mode_evidence(model, (X, None), np.random.default_rng(3), settings,
                               _mode_particles(model, [-6.0, 0.0, 6.0]))
    assert gated.evidence == rows_mode_evidence(model, X, None, np.random.default_rng(3), settings)
    assert not gated.particles_off_mode


def _mode_particles(model, means, n=6, seed=0):
    """``n`` points of a mixture configuration with the given component ``means`` (unit variances), jittered."""
    k = len(means)
    theta = model.pack(np.full((1, k), 1.0 / k), np.asarray(means, float)[None, :, None], np.ones((1, k, 1)))
    return theta + 0.01 * np.random.default_rng(seed).normal(size=(n, theta.shape[-1]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_gate_finds_the_best_mode_when_every_particle_sits_in_a_poorer_one(seed):
    # Two components share the cluster at -6 and one covers the other two: a configuration hundreds of nats below
    # the best on these rows. The search on a subsample finds the best one anyway, so the mode's value is the
    # best mode's (to within the two values' errors), and a run reading the poorer mode's mass falls behind it.
    X = _three_clusters(3000, seed)
    model = GaussianMixtureModel(3, 1)
    settings = ModeCheckSettings(search_rows=500)
    good = gate_mode_evidence(model, (X, None), np.random.default_rng(seed), settings,
                              _mode_particles(model, [-6.0, 0.0, 6.0]))
    from_poor = gate_mode_evidence(model, (X, None), np.random.default_rng(seed + 10), settings,
                                   _mode_particles(model, [-6.0, -6.0, 3.0]))
    assert not good.particles_off_mode and from_poor.particles_off_mode
    good, from_poor = good.evidence, from_poor.evidence
    assert abs(good.log_evidence - from_poor.log_evidence) < 4 * math.hypot(good.std, from_poor.std)
    poor_joint = (model.log_prior(_mode_particles(model, [-6.0, -6.0, 3.0], n=1))
                  + model.log_likelihood_sum(_mode_particles(model, [-6.0, -6.0, 3.0], n=1), X, None))[0]
    assert good.log_evidence - poor_joint > 100.0


def test_the_gates_search_keeps_the_subsamples_mode_that_is_best_on_every_row():
    # Four components on the paper's five clusters: merging different pairs gives configurations hundreds of nats
    # apart on 16,000 rows, which a 1000-row subsample often ranks the other way round. Each of the subsample's
    # modes is valued on every row before the refinement, so every search finds the same best mode (its value
    # within 1 nat, where the poorer configuration reads hundreds of nats lower).
    from evidence_select.datasets import make_mixture
    X = make_mixture(16_000, random_state=0).X
    model = GaussianMixtureModel(4, X.shape[1])
    settings = ModeCheckSettings(search_rows=1000, gate_draws=100)
    particles = np.random.default_rng(1).normal(size=(4, model.n_params))  # no help from the particles
    values = [gate_mode_evidence(model, (X, None), np.random.default_rng(seed), settings,
                                 particles).evidence.log_evidence for seed in range(6)]
    assert max(values) - min(values) < 1.0


# The gate's tests leave out the restarts after a chunk's check (test_mode_restart): they study which periodic
# restarts replay.
class _GatedEarly(BayesianMixture):
    """Posterior-mode checks up to 400 rows, the gate's own search past them (periodic restarts at 800 and 1600)."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(max_rows=400, search_rows=400, n_draws=1000,
                                                               restart_after_check=False))


class _Gated(BayesianMixture):
    """Posterior-mode checks, and the gate, on every row seen up to the default 5000."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(n_draws=1000, restart_after_check=False))


class _Ungated(BayesianMixture):
    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(max_rows=400, n_draws=1000, gate_draws=0,
                                                               restart_after_check=False))


class _AlwaysBehind(BayesianMixture):
    """A gate that finds every run behind (a negative gap threshold): every restart due replays."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(n_draws=1000, gap_sigmas=-1e6,
                                                               restart_after_check=False))


def _replayed_at(estimator_class, X, seed, shuffle=True):
    estimator = estimator_class(3, batch_size=100, n_particles=10, random_state=seed, shuffle=shuffle)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(X)
    return estimator, [r.n_samples_seen for r in estimator.evidence_history_ if r.n_replayed]


@pytest.mark.parametrize("seed", [0, 1])
def test_periodic_restarts_past_the_checked_rows_replay_only_when_the_gate_says_so(seed):
    X = _three_clusters(1600, seed)
    ungated, replayed = _replayed_at(_Ungated, X, seed)
    assert {800, 1600} <= set(replayed)
    gated, replayed = _replayed_at(_GatedEarly, X, seed)
    assert not {800, 1600} & set(replayed)
    records = {r.n_samples_seen: r for r in gated.evidence_history_}
    for n in (800, 1600):  # the gate's value is recorded as the chunk's posterior-mode check
        record = records[n]
        assert np.isfinite(record.mode_log_evidence)
        assert abs(record.log_evidence - record.mode_log_evidence) < 3 * record.log_evidence_std
    _, replayed = _replayed_at(_AlwaysBehind, X, seed)
    assert {800, 1600} <= set(replayed)


def _record_gates(monkeypatch):
    """The gate's :class:`GateCheck` of every chunk it ran on, by the rows seen after the chunk (filled as runs go)."""
    gates, original = {}, engine._replay_gate

    def recording(rng, state, context, limits, progress):
        gate = original(rng, state, context, limits, progress)
        if gate is not None:
            gates[state.n_samples_seen + len(context.X)] = gate
        return gate

    monkeypatch.setattr(engine, "_replay_gate", recording)
    return gates


@pytest.mark.parametrize("seed", [5, 6, 10])
def test_within_the_checked_rows_a_periodic_restart_is_passed_only_where_a_replay_cannot_mend_the_run(seed,
                                                                                                     monkeypatch):
    # The shuffled clusters cross periodic restarts at 400, 800 and 1600 rows. Every restart the gate passes is one
    # an always-failing gate replays, at a chunk whose run reads at least the mode's value, or within its errors
    # below it with its best particle refined to the best mode (what the run lost within that basin a replay
    # would lose again).
    X = _three_clusters(1600, seed)
    _, always = _replayed_at(_AlwaysBehind, X, seed)
    gates = _record_gates(monkeypatch)
    gated, replayed = _replayed_at(_Gated, X, seed)
    records = {r.n_samples_seen: r for r in gated.evidence_history_}
    passed = set(always) - set(replayed)
    assert set(replayed) <= set(always) and passed
    for n in passed:
        gate = gates[n]
        assert records[n].log_evidence >= records[n].mode_log_evidence or not (gate.particles_off_mode
                                                                               or gate.check.failed)


@pytest.mark.parametrize("seed", [1, 3])
def test_a_surprise_restart_waits_for_the_surprises_then_replays_whatever_the_gate_would_say(seed):
    # In order, the chunks that open the second and third clusters (at 300 and 500 rows) and the chunks after them
    # need 17-67 annealing steps, past reheat_after_steps=12: the restart the first surprise asks for waits while
    # the chunks keep surprising, up to the rows seen doubling (600, also the call's last chunk), and then replays
    # every row, gated or not (at 400 rows these runs read the mode's value, so a gate would pass it). Meanwhile
    # each surprised chunk is checked, and its error bar holds the mode's value. Checked broken: a restart that
    # never runs once deferred leaves the final estimate 20 nats low; one per surprise replays at 300-500 too.
    X = _clusters_in_order(200, seed)
    gated, replayed = _replayed_at(_Gated, X, seed, shuffle=False)
    history = gated.evidence_history_
    surprised = [r.n_samples_seen for r in history[1:] if r.n_annealing_steps >= 12]
    assert surprised == [300, 400, 500, 600] and replayed == [600]
    for record in history[2:5]:  # the surprised chunks while the restart waits
        assert record.mode_log_evidence - record.log_evidence <= 2 * record.log_evidence_std
    final = history[-1]
    assert abs(final.log_evidence - final.mode_log_evidence) <= 2 * final.log_evidence_std


def test_no_call_returns_while_a_surprise_restart_waits():
    # The same rows in two calls, split after 400 rows: the restart that the surprise at 300 rows defers runs
    # after the first call's last chunk, whose evidence the call returns, and nothing waits after either call;
    # the second call's surprises (500, 600) defer theirs to its own last chunk. Checked broken: with the
    # restart allowed to wait past a call's end, the first call returns with one waiting and no replay.
    X = _clusters_in_order(200, 1)
    estimator = _Gated(3, batch_size=100, n_particles=10, random_state=1, shuffle=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.partial_fit(X[:400])
        assert estimator.sgais_state_.restart_pending == 0
        estimator.partial_fit(X[400:])
    assert estimator.sgais_state_.restart_pending == 0
    assert [r.n_samples_seen for r in estimator.evidence_history_ if r.n_replayed] == [400, 600]


def test_a_run_left_behind_by_the_gate_keeps_the_gap_in_its_error_bar():
    # The pooled run after a replay is checked against the gate's value like any posterior-mode check: an estimate
    # that still reads low by more than gap_sigmas combined errors keeps the gap as a variance.
    settings = ModeCheckSettings()
    check = compare_with_mode((-10.0, 1.0), ModeEvidence(0.0, 0.05), settings)
    assert check.failed and check.gap == pytest.approx(10.0)
    assert not compare_with_mode((-1.0, 1.0), ModeEvidence(0.0, 0.05), settings).failed


@pytest.mark.parametrize("seed", [0, 1])
def test_the_gate_replays_when_one_group_fell_behind(seed, monkeypatch):
    # One replicate group's estimate is set 2000 nats low before the chunk that crosses the periodic restart at
    # 800 rows, as a group left in a poorer mode would read: the pooled estimate moves by log 2, and the groups'
    # increments over the chunk agree, so only the group's own gap shows it. The replay brings the group back, and
    # only that group replays: the other keeps what the chunk's annealing gave it.
    pooled = []

    def pool_and_record(rng, first, replay, groups, widening_and_increments, split_sigmas):
        result = pooled_restart(rng, first, replay, groups, widening_and_increments, split_sigmas)
        pooled.append((first, replay.particles, groups, result.particles))
        return result

    monkeypatch.setattr(engine, "pooled_restart", pool_and_record)
    X = _three_clusters(800, seed)
    estimator = _GatedEarly(3, batch_size=100, n_particles=10, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(X[:700])
        state = estimator.sgais_state_
        estimator.sgais_state_ = state._replace(log_evidence=state.log_evidence - np.array([0.0, 2000.0]))
        pooled.clear()
        estimator.partial_fit(X[700:])
    record = estimator.evidence_history_[-1]
    assert record.n_samples_seen == 800 and record.n_replayed == 800
    low, high = np.sort(estimator.sgais_state_.log_evidence)
    assert high - low < 1000.0
    [(in_order, replay, groups, merged)] = pooled
    assert groups.tolist() == [False, True] and len(replay.log_evidence) == 1
    assert merged.log_evidence[0] == in_order.log_evidence[0]
    assert np.array_equal(merged.theta[:10], in_order.theta[:10])
    assert not np.array_equal(merged.theta[10:], in_order.theta[10:])
