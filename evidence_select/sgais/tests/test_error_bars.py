"""Error bars as wide as the evidence says, no wider: a widening follows the gap a check measured, a restart or a
passing check resets it, and a flagged estimate whose error bar is beyond use reads NaN."""

import math
import warnings

import numpy as np
import pytest

from evidence_select import BayesianLinearRegressor, BayesianMixture, EvidenceConvergenceWarning
from evidence_select.datasets import make_linear_regression, make_mixture
from evidence_select.models import LinearGaussianModel
from evidence_select.sgais._engine import SGAISConfig, evidence_estimate, sgais_init, sgais_update
from evidence_select.sgais._mode_check import apply_mode_check

#: A widening as degraded chunks leave it (nats^2): a 30-nat error bar.
DEGRADED_VARIANCE = 900.0


def _widened(state, **widening):
    return state._replace(widening=state.widening._replace(**widening))


def _linear_stream(seed, restart_growth, stuck_group_shift=0.0):
    """A 1000-row linear run whose state is widened as degraded chunks would leave it before its last chunk (rows
    750-1000), which restarts where ``restart_growth`` is 2 (a periodic restart at 1000 rows); with
    ``stuck_group_shift``, its first group's log evidence is also that many nats low there, as a group stuck in a
    poorer mode reads."""
    data = make_linear_regression(1000, random_state=300 + seed)
    model = LinearGaussianModel(5)
    config = SGAISConfig(n_replicates=8, batch_size=250, restart_on_surprise=restart_growth is not None,
                         restart_growth=restart_growth or 2.0, reservoir_size=3000)
    state = sgais_init(np.random.default_rng(seed), model, config, 5, np.float64)
    for start in range(0, 1000, 250):
        if start == 750:
            state = _widened(state, degraded_variance=DEGRADED_VARIANCE)
            state = state._replace(log_evidence=state.log_evidence - np.eye(len(state.log_evidence))[0]
                                   * stuck_group_shift)
        state, record, _ = sgais_update(state, data.X[start:start + 250], data.y[start:start + 250], model, config)
    error = evidence_estimate(state)[0] - model.exact_log_evidence(data.X, data.y)
    return state, record, error


@pytest.mark.parametrize("seed", range(3))
def test_a_restart_resets_the_widening_of_the_chunks_it_replays(seed):
    """After the restart the error bar is the replayed run's own (under 2 nats, and it covers the error); without
    a restart the earlier chunks' widening stays."""
    state, record, error = _linear_stream(seed, restart_growth=2.0)
    std = evidence_estimate(state)[1]
    assert record.n_replayed == 1000 and state.widening.degraded_variance == 0.0
    assert 0 < std < 2.0 and abs(error) < 5 * std
    kept, record, _ = _linear_stream(seed, restart_growth=None)
    assert record.n_replayed == 0 and evidence_estimate(kept)[1] >= math.sqrt(DEGRADED_VARIANCE)


@pytest.mark.parametrize("seed", range(3))
def test_a_restarts_jump_from_a_stuck_group_does_not_widen_the_pooled_error_bar(seed):
    """The restart repairs a group 40 nats low: the pooled evidence covers the exact one with the replayed run's
    own error bar (under 2 nats, as without the stuck group), not with the repaired group's jump (that chunk's
    increment spread, about 40 / G nats), which measures the run it replaced."""
    state, record, error = _linear_stream(seed, restart_growth=2.0, stuck_group_shift=40.0)
    std = evidence_estimate(state)[1]
    assert record.n_replayed == 1000
    assert 0 < std < 2.0 and abs(error) < 5 * std


@pytest.fixture(scope="module")
def mixture_states():
    """Three mixture runs on 300 rows, each with its rows (the posterior-mode check can run on them)."""
    runs = []
    for seed in range(3):
        X = make_mixture(300, random_state=seed).X
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = BayesianMixture(2, batch_size=100, random_state=seed).partial_fit(X)
        runs.append(est)
    return runs


def test_a_check_replaces_the_degraded_widening_by_the_gap_it_measured(mixture_states):
    """Over seeds: a check run on a widened state leaves an error bar no wider than the base one and the gap it
    measured combined (the 30-nat widening is gone), and the gap is what it keeps when the check fails."""
    for est in mixture_states:
        state = _widened(est.sgais_state_, degraded_variance=DEGRADED_VARIANCE)
        base = evidence_estimate(_widened(state, degraded_variance=0.0, mode_gap_variance=0.0))[1]
        checked, check = apply_mode_check(state, est.model_, est.sgais_config_.tuning.mode_check)
        assert check is not None
        std = evidence_estimate(checked)[1]
        assert std <= math.hypot(base, check.gap) + 1e-9 and std < math.sqrt(DEGRADED_VARIANCE)
        kept = checked.widening.mode_gap_variance if check.failed else checked.widening.degraded_variance
        assert kept <= check.gap**2 + 1e-12
        assert checked.widening.mode_gap_variance == (check.gap**2 if check.failed else 0.0)


def test_a_check_of_split_groups_measures_the_groups_the_estimate_follows(mixture_states):
    """Over seeds: with one group 100 nats below the other (stuck in a poorer mode), the check measures the group
    the pooled estimate follows, so the error bar after it is about the distance to the mode's value (it holds
    that value), not the 50-nat spread of the split groups, which would pass any estimate."""
    for est in mixture_states:
        state = est.sgais_state_
        state = state._replace(log_evidence=state.log_evidence - np.array([0.0, 100.0]))
        checked, check = apply_mode_check(state, est.model_, est.sgais_config_.tuning.mode_check)
        log_z, std = evidence_estimate(checked)
        assert checked.widening.checked_groups == (0,)
        assert check.evidence.log_evidence - log_z <= std < 10.0
        assert std >= check.evidence.std


def _degraded_after_400_rows(data):
    """A linear estimator fitted on the first 400 rows of ``data`` whose last record flags it ``degraded``."""
    est = BayesianLinearRegressor(batch_size=200, random_state=0).partial_fit(data.X[:400], data.y[:400])
    last = est.evidence_history_[-1]
    est.evidence_history_[-1] = last._replace(degraded="a test's degraded chunk",
                                              failed_checks=("degraded", *last.failed_checks))
    return est


def test_a_flagged_estimate_beyond_use_reads_nan_with_a_warning():
    """A degraded run (its last record flags it) whose error bar exceeds CheckSettings.unusable_std reports NaN and
    warns, naming the check; its records keep the number; under the threshold the same run reports its number."""
    data = make_linear_regression(600, random_state=0)
    est = _degraded_after_400_rows(data)
    for variance, unusable in ((500.0**2, False), (2000.0**2, True)):
        est.sgais_state_ = _widened(est.sgais_state_, degraded_variance=variance)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.partial_fit(data.X[400:500] if not unusable else data.X[500:], data.y[400:500] if not unusable
                            else data.y[500:])
        said = [str(w.message) for w in caught if issubclass(w.category, EvidenceConvergenceWarning)
                and "unusable" in str(w.message)]
        assert ("unusable" in est.evidence_checks_) == unusable and len(said) == unusable
        assert math.isnan(est.log_evidence_) == unusable and est.log_evidence_std_ > 500.0
        assert np.isfinite(est.evidence_history_[-1].log_evidence)
    assert f"{est.evidence_history_[-1].log_evidence_std:.3g} nats" in said[0] and "degraded" in said[0]


def test_a_caller_who_asks_for_strictness_gets_an_error_and_the_state_before_the_call():
    """Strictness is the warnings filter: with EvidenceConvergenceWarning made an error, the call whose estimate
    turns unusable raises, and the estimator keeps the state, history and reservoir it had before that call."""
    data = make_linear_regression(500, random_state=0)
    est = _degraded_after_400_rows(data)
    est.sgais_state_ = _widened(est.sgais_state_, degraded_variance=2000.0**2)
    before = (est.n_samples_seen_, list(est.evidence_history_), est.particles_.copy(), est.log_weights_.copy(),
              est.sgais_state_.reservoir.X[:400].copy())
    with warnings.catch_warnings():
        warnings.simplefilter("error", EvidenceConvergenceWarning)
        with pytest.raises(EvidenceConvergenceWarning, match="unusable"):
            est.partial_fit(data.X[400:], data.y[400:])
    assert est.n_samples_seen_ == before[0] and est.evidence_history_ == before[1]
    np.testing.assert_array_equal(est.particles_, before[2])
    np.testing.assert_array_equal(est.log_weights_, before[3])
    reservoir = est.sgais_state_.reservoir  # the rows it holds: rows past n_stored are free buffer
    assert (reservoir.n_stored, reservoir.n_seen) == (400, 400)
    np.testing.assert_array_equal(reservoir.X[:400], before[4])
    assert math.isfinite(est.log_evidence_)  # the number before the call, not NaN
