"""Known misses of the online evidence, each measured and marked ``xfail(strict=True)``.

A case here is a target on which the estimator's defaults read wrong beyond their error bar without a
warning (``benchmarks/bench_coverage.py`` measures how often). ``strict`` turns a case into a failure as
soon as every one of its seeds is within its error bar or flagged: then check the fix with the benchmark
over many seeds and remove the marker.
"""

import warnings

import numpy as np
import pytest

from evidence_select import BayesianMixture
from evidence_select.datasets import make_mixture

#: log Z of ``make_mixture(1000, random_state=0)`` under ``BayesianMixture(5)``: two AIS runs at 1600 chains and
#: 48 moves per temperature (seeds 11, 12: -4023.36 +/- 0.19 and -4023.28 +/- 0.22, both converged); the mean,
#: and the larger of their combined error and half their gap (``bench_coverage._paper_mixture_reference``).
PAPER_MIXTURE_LOG_Z, PAPER_MIXTURE_STD = -4023.3227, 0.1447


@pytest.mark.xfail(strict=True, reason=(
    "engine: on the paper's five-component mixture the groups of 20 particles often miss a posterior mode, "
    "both groups of a run the same one, so neither their spread nor their weights show it: over 60 seeds "
    "the estimate reads 1.6 nats low on average and 2 sigma covers 65%, unflagged (bench_coverage.py "
    "--cases K=5). Seed 4 here reads 6 nats low with a 0.6-nat error bar."))
def test_paper_mixture_within_its_error_or_flagged():
    X = make_mixture(1000, random_state=0).X
    for seed in range(6):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            estimator = BayesianMixture(5, random_state=seed).fit(X)
        flagged = any(w.category.__module__.startswith("evidence_select") for w in caught)
        error = estimator.log_evidence_ - PAPER_MIXTURE_LOG_Z
        assert flagged or abs(error) <= 3 * np.hypot(estimator.log_evidence_std_, PAPER_MIXTURE_STD), (seed, error)
