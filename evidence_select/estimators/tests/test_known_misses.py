"""Known misses of the online evidence: targets on which the defaults read wrong beyond their error bar.

Each case must be flagged by a named warning on the runs that miss (``benchmarks/bench_coverage.py``
measures how often they miss and how often they warn). A case the package cannot flag yet belongs here
as ``xfail(strict=True)``, so that it fails as soon as every seed is within its error bar or flagged.
"""

import warnings

import numpy as np
import pytest

from evidence_select import BayesianLinearRegressor, BayesianMixture, EvidenceConvergenceWarning
from evidence_select.datasets import make_linear_regression, make_mixture
from evidence_select.sgais._settings import CheckSettings, EngineTuning, ModeCheckSettings, lineage_threshold

MIN_LINEAGES = CheckSettings().min_lineages

#: log Z of ``make_mixture(1000, random_state=0)`` under ``BayesianMixture(5)``: two AIS runs at 1600 chains and
#: 48 moves per temperature (seeds 11, 12: -4023.36 +/- 0.19 and -4023.28 +/- 0.22, both converged); the mean,
#: and the larger of their combined error and half their gap (``bench_coverage._paper_mixture_reference``).
PAPER_MIXTURE_LOG_Z, PAPER_MIXTURE_STD = -4023.3227, 0.1447
#: Above the error of every run on these rows that no posterior-mode gap widened (0.6-3.8 nats over twelve seeds),
#: and under the largest miss the check exists for (6 nats).
RAW_STD = 5.0


class _UncheckedMixture(BayesianMixture):
    """The raw runs, as the lineage warning sees them: no posterior-mode check widening their error bars."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(max_rows=0, gate_draws=0))


def _fit_recording(estimator, *data):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.set_params(shuffle=False).fit(*data)  # the rows in make_mixture's order, as measured
    return [w for w in caught if issubclass(w.category, EvidenceConvergenceWarning)]


def _paper_mixture_runs(seeds, estimator_class=BayesianMixture, **settings):
    """``(seed, estimator, its EvidenceConvergenceWarnings, error in nats, pull)`` per seed on the paper rows."""
    X = make_mixture(1000, random_state=0).X
    for seed in seeds:
        estimator = estimator_class(5, random_state=seed, **settings)
        caught = _fit_recording(estimator, X)
        error = estimator.log_evidence_ - PAPER_MIXTURE_LOG_Z
        yield seed, estimator, caught, error, abs(error) / np.hypot(estimator.log_evidence_std_, PAPER_MIXTURE_STD)


def _warned_of_lineages(caught):
    return any("starting particles" in str(w.message) for w in caught)


@pytest.mark.slow
@pytest.mark.parametrize("n_particles, seeds", [(20, range(6)), (40, range(3))])
def test_paper_mixture_misses_are_flagged_by_their_collapsed_lineages(n_particles, seeds):
    # The first chunk's resampling leaves each group descending from a few prior draws: two or three of 20 (such
    # runs read up to 6 nats low with a 0.6-nat error bar), three or four of 40 (still 1-3 nats low, at up to 4
    # of their sigmas), which a fixed MIN_LINEAGES would pass; the warning's threshold grows with the group.
    # On every seed the warning fires exactly when the first record's lineages fall below the group's threshold,
    # and every run that misses the reference by more than 3 sigma is among them.
    for seed, estimator, caught, error, pull in _paper_mixture_runs(seeds, _UncheckedMixture, n_particles=n_particles):
        n_lineages = estimator.evidence_history_[0].n_lineages
        collapsed = n_lineages < lineage_threshold(n_particles)
        assert _warned_of_lineages(caught) == collapsed, (seed, n_lineages)
        assert pull <= 3 or collapsed, (seed, error, n_lineages)


@pytest.mark.extended
def test_posterior_mode_check_widens_the_paper_mixture_misses():
    """With the check (the default), over eight seeds: every run holds the reference within 3 combined standard
    deviations (the trust target; a run without the check reads up to 6 nats low at +/- 0.6); a run the check
    widened carries its warning and the mode's value in its last record, and its error is no wider than the gap
    to the mode combined with RAW_STD (above the error of every run no gap widened on these rows)."""
    for seed, estimator, caught, error, pull in _paper_mixture_runs(range(8)):
        assert pull <= 3, (seed, error, estimator.log_evidence_std_)
        gap = 0.0
        if any("best posterior mode" in str(w.message) for w in caught):
            gap = estimator.evidence_history_[-1].mode_log_evidence - estimator.log_evidence_
            assert gap > 0 and "posterior_mode" in estimator.evidence_checks_, seed
        assert estimator.log_evidence_std_ <= np.hypot(gap, RAW_STD), (seed, gap, estimator.log_evidence_std_)


def test_lineage_threshold_grows_with_the_group():
    assert [lineage_threshold(n) for n in (8, 20, 21, 30, 40, 80)] == [MIN_LINEAGES, 3, 3, 4, 6, 12]


def test_lineage_warning_is_silent_where_the_first_chunk_keeps_its_lineages():
    data = make_linear_regression(1000, random_state=0)
    estimator = BayesianLinearRegressor(random_state=0)
    caught = _fit_recording(estimator, data.X, data.y)
    assert estimator.evidence_history_[0].n_lineages >= lineage_threshold(estimator.n_particles)
    assert not [w for w in caught if "starting particles" in str(w.message)]
