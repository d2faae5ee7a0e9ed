"""Cost per row of the SGAIS estimators over long streams: bounded, and not growing with the rows seen (issue 16).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_cost.py                  # 1e6 rows per model, 1e5 shift stream
    OMP_NUM_THREADS=1 python benchmarks/bench_cost.py --rows 100000 --cases linear,mixture
    OMP_NUM_THREADS=1 python benchmarks/bench_cost.py --save     # also benchmarks/saved/cost.json

Streams each model's simulated data through ``partial_fit`` in windows of ``--window`` rows (each window is
``window / batch_size`` chunks) with default settings, and after each window reads the state's counters:
per-datum likelihood and gradient evaluations (``n_datum_evaluations``), of which restarts and excursions
(``n_surprise_evaluations``, charged to ``surprise_budget``), replayed rows, and CPU seconds. Per window it
reports the evaluations per row and particle; per case the first, median, largest and last window, the
largest window over the median (a worst case a constant times the chunk, not growing with the stream), the
surprise work as a multiple of the ordinary work against ``surprise_budget``, and CPU per 1e4 rows early and
late. Prints a markdown table and writes ``benchmarks/results/cost.json``; ``--save`` (at a clean commit) also
writes the per-case summaries to ``benchmarks/saved/cost.json``, the validation page's source.

Cases: linear (``make_linear_regression``), softmax (``make_softmax_classification``, 4 classes), the paper's
5-component mixture (``make_mixture``), and the paper's shift stream (``make_shift_stream``, 3 then 5 then 7
clusters, ``BayesianMixture(7)``), whose change points ask for restarts.
"""

import argparse
import functools
import os
import sys
import time

import numpy as np
from sklearn.base import is_classifier

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PAPER_LINEAR, require_clean_checkout, run_metadata, save_result  # noqa: E402  (checkout on path)
from _tables import cost_table, markdown_lines, print_tables  # noqa: E402

from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture  # noqa: E402
from evidence_select.datasets import (make_linear_regression, make_mixture, make_shift_stream,  # noqa: E402
                                      make_softmax_classification)

#: name: (data, estimator, rows by default); the shift stream is stationary after its last change point (row 10000)
CASES = {"linear": (make_linear_regression, functools.partial(BayesianLinearRegressor, **PAPER_LINEAR), 1_000_000),
         "softmax": (make_softmax_classification, BayesianLogisticClassifier, 1_000_000),
         "mixture": (make_mixture, functools.partial(BayesianMixture, 5), 1_000_000),
         "mixture_shift": (make_shift_stream, functools.partial(BayesianMixture, 7), 100_000)}


def stream_windows(name, n_rows, window, seed):
    """Per-window counters of one stream of ``n_rows`` rows fed in windows of ``window`` rows."""
    make, estimator, _ = CASES[name]
    data = make(n_rows, random_state=seed)
    X, y = data.X, getattr(data, "y", None)
    est = estimator(random_state=seed)
    rows, evaluations, cpu_before = [], 0, time.process_time()
    for start in range(0, n_rows, window):
        stop = min(start + window, n_rows)
        if is_classifier(est):
            est.partial_fit(X[start:stop], y[start:stop], classes=np.unique(y))
        else:
            est.partial_fit(X[start:stop], None if y is None else y[start:stop])
        cpu = time.process_time()
        state = est.sgais_state_
        chunks = [r for r in est.evidence_history_ if start < r.n_samples_seen <= stop]
        n_total_particles = est.sgais_config_.n_particles * est.sgais_config_.n_replicates
        window_evaluations = state.n_datum_evaluations - evaluations
        surprise = int(sum(r.n_surprise_evaluations for r in chunks))
        rows.append(dict(rows_seen=stop, evaluations_per_row=window_evaluations / ((stop - start) * n_total_particles),
                         surprise_evaluations=surprise, ordinary_evaluations=int(window_evaluations - surprise),
                         replayed_rows=int(sum(r.n_replayed for r in chunks)),
                         degraded_chunks=sum(bool(r.degraded) for r in chunks),
                         annealing_steps=int(sum(r.n_annealing_steps for r in chunks)),
                         cpu_per_1e4_rows=1e4 * (cpu - cpu_before) / (stop - start)))
        evaluations, cpu_before = state.n_datum_evaluations, cpu
    return dict(case=name, rows=n_rows, window=window, seed=seed, batch_size=est.sgais_config_.batch_size,
                surprise_budget=est.sgais_config_.surprise_budget, log_evidence=est.log_evidence_, windows=rows)


def summarise(run):
    """The per-case row of the table from one stream's windows."""
    windows = run["windows"]
    per_row = np.array([w["evaluations_per_row"] for w in windows])
    cpu = np.array([w["cpu_per_1e4_rows"] for w in windows])
    surprise = sum(w["surprise_evaluations"] for w in windows)
    ordinary = sum(w["ordinary_evaluations"] for w in windows)
    tenth = max(1, len(windows) // 10)
    return dict(case=run["case"], rows=run["rows"], first=per_row[0], median=float(np.median(per_row)),
                largest=float(per_row.max()), last=per_row[-1], largest_over_median=float(per_row.max()
                                                                                       / np.median(per_row)),
                surprise_over_ordinary=surprise / ordinary, surprise_budget=run["surprise_budget"],
                replayed_rows=sum(w["replayed_rows"] for w in windows),
                degraded_chunks=sum(w["degraded_chunks"] for w in windows),
                cpu_early=float(np.median(cpu[1:1 + tenth])) if len(cpu) > 1 else float(cpu[0]),
                cpu_late=float(np.median(cpu[-tenth:])), cpu_total=float(cpu.sum() * run["window"] / 1e4))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="rows per case (default: the case's own)")
    parser.add_argument("--window", type=int, default=20_000, help="rows per partial_fit call")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", action="store_true",
                        help="also write benchmarks/saved/cost.json (the validation page's source; clean commit)")
    args = parser.parse_args(argv)
    if args.save:
        require_clean_checkout(parser, "cost")
    out = dict(meta=run_metadata(sys.argv), summaries=[], runs=[])  # the commit and load at the start
    for name in args.cases.split(","):
        out["runs"].append(stream_windows(name, args.rows or CASES[name][2], args.window, args.seed))
        out["summaries"].append(summarise(out["runs"][-1]))
        print(markdown_lines(*cost_table(dict(summaries=out["summaries"][-1:])))[-1], flush=True)
        save_result("cost", out)
    paths = save_result("cost", out, args.save, lambda result: dict(meta=result["meta"],
                                                                      summaries=result["summaries"]))
    print_tables("cost", out)
    print("\nwrote " + ", ".join(paths))


if __name__ == "__main__":
    main()
