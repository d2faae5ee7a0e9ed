"""SGAIS accuracy and speed on the paper's models (issue: SGAIS engine).

Usage::

    python benchmarks/bench_sgais.py            # full: 5 seeds, linear to 1e6, softmax to 1e5
    python benchmarks/bench_sgais.py --quick    # minutes: 3 seeds, linear to 1e5, softmax to 1e4

Prints markdown tables and writes ``benchmarks/results/sgais.json``.
Accuracy: linear against the exact evidence; softmax against Laplace importance
sampling (``_laplace_reference.py``, with its own standard error). Speed: wall
time of ``fit`` with default parameters, the time per chunk early (n ~ 1e4) and
late (last 10% of the stream), and the calibration of ``log_evidence_std_``.
"""

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _laplace_reference import laplace_importance_log_evidence  # noqa: E402

from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier  # noqa: E402
from evidence_select.datasets import make_linear_regression, make_softmax_classification  # noqa: E402
from evidence_select.models import LinearEvidenceStats  # noqa: E402


def _chunk_times(est):
    seconds = np.array([r.seconds for r in est.evidence_history_])
    seen = np.array([r.n_samples_seen for r in est.evidence_history_])
    early = seconds[(seen > 5000) & (seen <= 20000)]
    late = seconds[seen > 0.9 * seen[-1]]
    # Median: re-centring chunks (every doubling of n) are amortised spikes.
    return float(np.median(early)) if len(early) else float("nan"), float(np.median(late))


def linear_rows(sizes, seeds):
    rows = []
    largest = max(sizes)
    for seed in seeds:
        data = make_linear_regression(largest, random_state=seed)
        reg = BayesianLinearRegressor(**PAPER_LINEAR, random_state=seed)
        stats, done = None, 0
        tic = time.perf_counter()
        for n in sizes:
            reg.partial_fit(data.X[done:n], data.y[done:n])
            stats = (stats or LinearEvidenceStats.empty(reg.model_)).update(reg.model_, data.X[done:n], data.y[done:n])
            done = n
            early, late = _chunk_times(reg)
            rows.append(dict(model="linear", n=n, seed=seed, log_z=reg.log_evidence_, std=reg.log_evidence_std_,
                             reference=stats.log_evidence(reg.model_), reference_std=0.0,
                             seconds=time.perf_counter() - tic, ms_per_chunk_early=1e3 * early,
                             ms_per_chunk_late=1e3 * late))
    return rows


def softmax_rows(sizes, seeds, n_reference_samples):
    rows = []
    largest = max(sizes)
    for seed in seeds:
        data = make_softmax_classification(largest, random_state=seed)
        clf = BayesianLogisticClassifier(random_state=seed)
        done = 0
        tic = time.perf_counter()
        for n in sizes:
            kwargs = {"classes": [0, 1, 2, 3]} if done == 0 else {}
            clf.partial_fit(data.X[done:n], data.y[done:n], **kwargs)
            done = n
            elapsed = time.perf_counter() - tic
            ref, ref_std = laplace_importance_log_evidence(clf.model_, data.X[:n], data.y[:n],
                                                           n_samples=n_reference_samples, random_state=seed)
            early, late = _chunk_times(clf)
            rows.append(dict(model="softmax", n=n, seed=seed, log_z=clf.log_evidence_, std=clf.log_evidence_std_,
                             reference=ref, reference_std=ref_std, seconds=elapsed, ms_per_chunk_early=1e3 * early,
                             ms_per_chunk_late=1e3 * late))
            tic = time.perf_counter() - elapsed  # exclude the reference's time from SGAIS's clock
    return rows


def calibration(n, n_seeds):
    data = make_linear_regression(n, random_state=12345)
    exact = None
    errors, stds = [], []
    for seed in range(n_seeds):
        reg = BayesianLinearRegressor(**PAPER_LINEAR, random_state=seed).fit(data.X, data.y)
        exact = reg.model_.exact_log_evidence(data.X, data.y) if exact is None else exact
        errors.append(reg.log_evidence_ - exact)
        stds.append(reg.log_evidence_std_)
    return dict(n=n, n_seeds=n_seeds, mean_error=float(np.mean(errors)), spread=float(np.std(errors, ddof=1)),
                mean_reported_std=float(np.mean(stds)), ratio=float(np.std(errors, ddof=1) / np.mean(stds)))


def summarise(rows):
    table = {}
    for row in rows:
        table.setdefault((row["model"], row["n"]), []).append(row)
    lines = ["| model | N | seeds | mean error (nats) | max abs error | per datum | mean reported std | "
             "reference std | fit seconds | ms/chunk early | ms/chunk late |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    summary = []
    for (model, n), group in sorted(table.items()):
        errors = np.array([g["log_z"] - g["reference"] for g in group])
        entry = dict(model=model, n=n, seeds=len(group), mean_error=float(errors.mean()),
                     max_abs_error=float(np.max(np.abs(errors))), mean_std=float(np.mean([g["std"] for g in group])),
                     reference_std=float(np.mean([g["reference_std"] for g in group])),
                     seconds=float(np.mean([g["seconds"] for g in group])),
                     early=float(np.nanmean([g["ms_per_chunk_early"] for g in group])),
                     late=float(np.mean([g["ms_per_chunk_late"] for g in group])))
        summary.append(entry)
        lines.append(f"| {model} | {n:.0e} | {len(group)} | {entry['mean_error']:+.3f} | {entry['max_abs_error']:.3f} | "
                     f"{entry['mean_error'] / n:+.1e} | {entry['mean_std']:.3f} | {entry['reference_std']:.3f} | "
                     f"{entry['seconds']:.2f} | {entry['early']:.2f} | {entry['late']:.2f} |")
    return lines, summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "results", "sgais.json"))
    args = parser.parse_args(argv)
    seeds = range(3) if args.quick else range(5)
    linear_sizes = [1000, 10_000, 100_000] if args.quick else [1000, 10_000, 100_000, 1_000_000]
    softmax_sizes = [1000, 10_000] if args.quick else [1000, 10_000, 100_000]
    rows = linear_rows(linear_sizes, seeds)
    rows += softmax_rows(softmax_sizes, seeds, 2000 if args.quick else 4000)
    lines, summary = summarise(rows)
    calib = calibration(10_000, 8 if args.quick else 20)
    print("\n".join(lines))
    print(f"\nCalibration at N={calib['n']} over {calib['n_seeds']} seeds: spread of estimates "
          f"{calib['spread']:.3f} vs mean reported std {calib['mean_reported_std']:.3f} (ratio {calib['ratio']:.2f}), "
          f"mean error {calib['mean_error']:+.3f}")
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak_rss_mb:.0f} MB")
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as fh:
        json.dump(dict(rows=rows, summary=summary, calibration=calib, peak_rss_mb=peak_rss_mb, quick=args.quick), fh,
                  indent=1)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
