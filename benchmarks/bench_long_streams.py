"""SGAIS beyond ``reservoir_size``: streams that shift after the reservoir filled, and the surprise budget.

    python benchmarks/bench_long_streams.py                                 # 5 seeds per case
    python benchmarks/bench_long_streams.py --seeds 20 --cases "whole stream"  # the restarts on a shift
    python benchmarks/bench_long_streams.py --seeds 10 --cases "whole stream" --data-seed 2  # other data

For each model a stream shifts after its reservoir is full (linear: the coefficients change; classifier: the
class boundary turns; mixture: a second cluster appears). Each row: SGAIS with the estimator's defaults and a small
reservoir against a reference (exact for the linear model, bridge sampling on the full data for the others), the
reported std with and without the degradation widening, the number of degraded chunks, the rows replayed by
restarts, and the error in units of the reported std. Two more cases shift past ``exact_move_rows`` while the
reservoir holds the whole stream, where the linear and logistic estimators restart on the shift and flag it. A summary gives
each case's fraction of seeds within 1, 2 and 3 std and flagged. Then a drifting stream on which every chunk asks
for a restart: replayed rows and surprise evaluations with and without the budget. Prints markdown tables and
writes ``benchmarks/results/long_streams.json``.
"""

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np

from _common import PAPER_LINEAR, RESULTS_DIR, run_metadata, save_json
from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture, log_evidence
from evidence_select.sgais._engine import SGAISConfig, combine_replicates, sgais_init, sgais_update
from evidence_select.testing._shift_streams import linear_shift, logistic_shift, mixture_shift
from evidence_select.models import LinearGaussianModel

CASES = {  # model: (data, estimator factory, reference method)
    "linear (coefficients shift at 1000, reservoir 500)": (
        lambda: linear_shift(2000, 1000, 0), lambda s: BayesianLinearRegressor(**PAPER_LINEAR, batch_size=250,
                                                                               reservoir_size=500, random_state=s),
        "exact"),
    "classifier (boundary turns at 400, reservoir 200)": (
        lambda: logistic_shift(800, 400, 0), lambda s: BayesianLogisticClassifier(batch_size=100, reservoir_size=200,
                                                                                  random_state=s), "bridge"),
    "mixture K=2 (cluster appears at 300, reservoir 200)": (
        lambda: (mixture_shift(600, 300, 0), None), lambda s: BayesianMixture(2, batch_size=100, reservoir_size=200,
                                                                              random_state=s), "bridge"),
}


def whole_stream_cases(data_seed):
    """Streams that shift past ``exact_move_rows`` with the whole stream stored, their data drawn with ``data_seed``."""
    return {
        "linear (coefficients shift at 1000, whole stream stored)": (
            lambda: linear_shift(2000, 1000, data_seed),
            lambda s: BayesianLinearRegressor(**PAPER_LINEAR, batch_size=250, reservoir_size=2000, random_state=s),
            "exact"),
        "classifier (boundary turns at 1250, whole stream stored)": (
            lambda: logistic_shift(2000, 1250, data_seed),
            lambda s: BayesianLogisticClassifier(batch_size=250, reservoir_size=2000, random_state=s), "bridge"),
    }


def shift_rows(n_seeds, cases):
    rows = []
    for name, (data, make, method) in cases.items():
        X, y = data()
        reference = log_evidence(make(0), X, y, method=method, random_state=0)
        for seed in range(n_seeds):
            tic, cpu = time.perf_counter(), time.process_time()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                estimator = make(seed).set_params(shuffle=False).fit(X, y)  # the shift in its place
            state = estimator.sgais_state_
            unwidened = combine_replicates(state.log_evidence, state.log_evidence_variance)[1]
            error = estimator.log_evidence_ - reference.log_evidence
            std = math.hypot(estimator.log_evidence_std_, reference.log_evidence_std)
            rows.append(dict(case=name, seed=seed, reference=reference.log_evidence,
                             reference_std=reference.log_evidence_std, log_evidence=estimator.log_evidence_,
                             std=estimator.log_evidence_std_, std_unwidened=unwidened, error=error,
                             error_in_std=abs(error) / std, degraded_chunks=state.widening.n_degraded_chunks,
                             replayed_rows=int(sum(r.n_replayed for r in estimator.evidence_history_)),
                             warnings=sum("EvidenceConvergence" in w.category.__name__ for w in caught),
                             seconds=time.perf_counter() - tic, cpu_seconds=time.process_time() - cpu))
            row = rows[-1]
            print(f"  {name} seed {seed}: error {error:.2f}, std {row['std']:.2f} (unwidened {unwidened:.2f}), "
                  f"{row['degraded_chunks']} degraded, {row['cpu_seconds']:.1f} s CPU", flush=True)
    return rows


def budget_rows():
    X, y = linear_shift(2000, 1000, 2)
    model, rows = LinearGaussianModel(3), []
    for budget in (4.0, 2.0, float("inf")):
        config = SGAISConfig(batch_size=100, reheat_after_steps=1, restart_on_surprise=True, surprise_budget=budget)
        state = sgais_init(np.random.default_rng(0), model, config, X.shape[1], y.dtype)
        replayed = degraded = 0
        tic = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for start in range(0, len(X), config.batch_size):
                chunk = slice(start, start + config.batch_size)
                state, record, _ = sgais_update(state, X[chunk], y[chunk], model, config)
                replayed, degraded = replayed + record.n_replayed, degraded + bool(record.degraded)
        ordinary = state.n_datum_evaluations - state.n_surprise_evaluations
        rows.append(dict(surprise_budget=budget, rows=len(X), replayed_rows=replayed, degraded_chunks=degraded,
                         surprise_over_ordinary=state.n_surprise_evaluations / ordinary,
                         cpu_seconds=time.process_time() - tic))
    return rows


def print_summary(shifts):
    """Per case: seeds, fraction within 1, 2 and 3 reported std, fraction flagged (a degraded chunk)."""
    print("\n| case | seeds | within 1 std | within 2 std | within 3 std | flagged | mean error |")
    print("|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(r["case"] for r in shifts):
        rows = [r for r in shifts if r["case"] == name]
        pulls = np.array([r["error_in_std"] for r in rows])
        flagged = np.mean([r["degraded_chunks"] > 0 for r in rows])
        print(f"| {name} | {len(rows)} | {np.mean(pulls <= 1):.0%} | {np.mean(pulls <= 2):.0%} | "
              f"{np.mean(pulls <= 3):.0%} | {flagged:.0%} | {np.mean([r['error'] for r in rows]):+.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cases", default="", help="run only the cases whose name contains this text")
    parser.add_argument("--data-seed", type=int, default=0, help="seed of the whole-stream cases' data")
    args = parser.parse_args()
    cases = {name: case for name, case in {**CASES, **whole_stream_cases(args.data_seed)}.items() if args.cases in name}
    print("## Shifting streams (defaults)\n", flush=True)
    shifts = shift_rows(args.seeds, cases)
    print("\n| case | seed | reference | SGAIS | std (unwidened) | error / std | degraded chunks | replayed rows |")
    print("|---|---|---|---|---|---|---|---|")
    for r in shifts:
        print(f"| {r['case']} | {r['seed']} | {r['reference']:.2f} +/- {r['reference_std']:.2f} | "
              f"{r['log_evidence']:.2f} | {r['std']:.2f} ({r['std_unwidened']:.2f}) | {r['error_in_std']:.2f} | "
              f"{r['degraded_chunks']} | {r['replayed_rows']} |")
    print_summary(shifts)
    print("\n## Surprise budget: linear, every chunk asks for a restart (2000 rows, chunks of 100)\n")
    budgets = budget_rows()
    print("| surprise_budget | replayed rows | degraded chunks | surprise / ordinary evaluations | CPU s |")
    print("|---|---|---|---|---|")
    for r in budgets:
        print(f"| {r['surprise_budget']} | {r['replayed_rows']} | {r['degraded_chunks']} | "
              f"{r['surprise_over_ordinary']:.2f} | {r['cpu_seconds']:.1f} |")
    save_json(os.path.join(RESULTS_DIR, "long_streams.json"),
              dict(metadata=run_metadata(["bench_long_streams.py", *sys.argv[1:]]), shifts=shifts,
                   budgets=budgets))


if __name__ == "__main__":
    main()
