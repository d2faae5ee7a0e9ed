"""Speed targets of the SGAIS estimators (issue 3), default parameters.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_speed.py [--seeds 5]

Streams 1e6 linear rows and 1e5 softmax rows through ``fit`` and reports wall
and CPU seconds and the median time per chunk at n ~ 1e4 and in the last 10% of
the stream (targets: <= 2 s, <= 15 s, late/early <= 1.3). Run it on a quiet
machine: wall time is what the targets mean, and it is only comparable to CPU
time when nothing else runs. Writes ``benchmarks/results/speed.json``.
"""

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import run_metadata, save_json  # noqa: E402  (benchmarks/; also puts the checkout on the path)

from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier  # noqa: E402
from evidence_select.datasets import make_linear_regression, make_softmax_classification  # noqa: E402

CASES = [("linear", 1_000_000, make_linear_regression, BayesianLinearRegressor, 2.0),
         ("softmax", 100_000, make_softmax_classification, BayesianLogisticClassifier, 15.0)]


def time_fit(make, estimator, n, seed):
    data = make(n, random_state=seed)
    est = estimator(random_state=seed)
    cpu, wall = time.process_time(), time.perf_counter()
    est.fit(data.X, data.y)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    seconds = np.array([r.seconds for r in est.evidence_history_])
    seen = np.array([r.n_samples_seen for r in est.evidence_history_])
    window = seconds[(seen > 5000) & (seen <= 20000)]
    early = float(np.median(window)) if len(window) else float("nan")
    late = float(np.median(seconds[seen > 0.9 * n]))
    steps = int(sum(r.n_annealing_steps for r in est.evidence_history_))
    return dict(n=n, seed=seed, wall=wall, cpu=cpu, ms_per_chunk_1e4=1e3 * early, ms_per_chunk_late=1e3 * late,
                annealing_steps=steps, log_evidence=est.log_evidence_)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "results", "speed.json"))
    args = parser.parse_args(argv)
    rows = []
    print("| model | N | seed | wall s | CPU s | target s | ms/chunk n~1e4 | ms/chunk late | annealing steps |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, n, make, estimator, target in CASES:
        for seed in range(args.seeds):
            row = dict(model=name, target_seconds=target, **time_fit(make, estimator, n, seed))
            rows.append(row)
            print(f"| {name} | {n:.0e} | {seed} | {row['wall']:.2f} | {row['cpu']:.2f} | {target:g} | "
                  f"{row['ms_per_chunk_1e4']:.2f} | {row['ms_per_chunk_late']:.2f} | {row['annealing_steps']} |",
                  flush=True)
    for name, _, _, _, target in CASES:
        walls = [r["wall"] for r in rows if r["model"] == name]
        print(f"{name}: median wall {np.median(walls):.2f} s (target {target:g} s)")
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    save_json(args.output, dict(run_metadata(sys.argv[1:]), rows=rows, peak_rss_mb=peak_rss_mb,
                                load_average_end=os.getloadavg()))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
