"""Nested sampling's accuracy against its cost as the number of live points grows (issue 4).

Usage (one heavy job; ~1 CPU hour with the defaults)::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_ns_live_points.py
    OMP_NUM_THREADS=1 python benchmarks/bench_ns_live_points.py --models mixture --n-live 100 --n-runs 1 4

For each paper model (softmax, mixture; N=1e3 by default) the bridge-sampling
estimate (cheap, and the most accurate reference for these posteriors) is
computed once, then our nested sampler runs for every ``n_live``, ``n_runs`` and seed. Each
row gives log Z, its reported error, the error against bridge sampling in units
of the combined reported error, likelihood calls and CPU seconds. The agreement
criterion of issue 4 is ``|NS - bridge| <= max(3 x combined error, 0.5)``.

Prints a markdown table and writes ``benchmarks/results/ns_live_points.json``.
"""

import argparse
import itertools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS_DIR, paper_problem, run_metadata, save_json  # noqa: E402

from evidence_select.backends._bridge import bridge_log_evidence  # noqa: E402
from evidence_select.backends._ns import nested_sampling_log_evidence  # noqa: E402


def study(models, n, n_lives, seeds, save, n_runs_list=(1,)):
    rows = []
    for name in models:
        model, X, y = paper_problem(name, n)
        c0 = time.process_time()
        bridge = bridge_log_evidence(model, X, y, random_state=1)
        bridge_cpu = time.process_time() - c0
        print(f"{name} N={n}: bridge {bridge.log_evidence:.3f} +/- {bridge.log_evidence_std:.3f} ({bridge_cpu:.0f} CPU s)",
              flush=True)
        for n_live, n_runs, seed in itertools.product(n_lives, n_runs_list, seeds):
            c0 = time.process_time()
            res = nested_sampling_log_evidence(model, X, y, n_live=n_live, n_runs=n_runs, random_state=seed)
            cpu = time.process_time() - c0
            combined = float(np.hypot(res.log_evidence_std, bridge.log_evidence_std))
            diff = res.log_evidence - bridge.log_evidence
            rows.append(dict(model=name, n=n, n_live=n_live, n_runs=n_runs, seed=seed, log_evidence=res.log_evidence,
                             std=res.log_evidence_std, bridge=bridge.log_evidence,
                             bridge_std=bridge.log_evidence_std, diff=diff, z=diff / combined,
                             agrees=bool(abs(diff) <= max(3 * combined, 0.5)),
                             calls=res.n_likelihood_calls, cpu_seconds=cpu,
                             start_correlation=res.info["start_correlation"]))
            print(f"  n_live={n_live:4d} n_runs={n_runs} seed={seed}: {res.log_evidence:.3f} +/- {res.log_evidence_std:.3f}  "
                  f"diff {diff:+.2f} ({diff / combined:+.1f} sigma)  {cpu:.0f} CPU s", flush=True)
            save(rows)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["mixture", "softmax"], choices=["softmax", "mixture"])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--n-live", type=int, nargs="+", default=[100, 300])
    parser.add_argument("--n-runs", type=int, nargs="+", default=[1], help="merged independent runs (n_runs)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    out = dict(run_metadata(sys.argv))
    path = os.path.join(RESULTS_DIR, "ns_live_points.json")

    def save(rows):
        out["rows"] = rows
        save_json(path, out)

    rows = study(args.models, args.n, args.n_live, args.seeds, save, args.n_runs)
    print("\n| model | n_live | n_runs | seeds agreeing with bridge | mean diff (nats) | mean reported err | sd over seeds | "
          "mean CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, n_live, n_runs in itertools.product(args.models, args.n_live, args.n_runs):
        group = [r for r in rows if r["model"] == name and r["n_live"] == n_live and r.get("n_runs", 1) == n_runs]
        if group:
            diffs = np.array([r["diff"] for r in group])
            print(f"| {name} | {n_live} | {n_runs} | {sum(r['agrees'] for r in group)}/{len(group)} | {diffs.mean():+.2f} | "
                  f"{np.mean([r['std'] for r in group]):.2f} | "
                  f"{diffs.std(ddof=1) if len(group) > 1 else float('nan'):.2f} | "
                  f"{np.mean([r['cpu_seconds'] for r in group]):.0f} |")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
