"""Reference evidence backends (NS, AIS, bridge) against each other, exact answers and dynesty.

Usage (one heavy job at a time on the shared machine)::

    # calibration study, 20 seeds (analytic targets, linear N=1e2 and 1e3; drop --quick to add N=1e4)
    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_backends.py --quick --seeds 20 --skip-models \
        --output calibration.json
    # paper models at N=1e3: ours, then dynesty (default settings, ~25 CPU min per model)
    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_backends.py --sizes 1000 --skip-calibration \
        --dynesty 1000 --output models.json
    # dynesty alone, cached in results/ for a later table run with --dynesty-cache
    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_backends.py --dynesty 1000 --dynesty-only softmax mixture

Part 1: the paper's three models (linear d=5, softmax d=10 K=4, mixture K=5 d=2)
at each N: log Z, reported error, likelihood calls (full-data evaluations of one
parameter vector; dynesty's ``ncall``), seconds; agreement of every pair of
estimates (ours, dynesty, exact or Laplace-IS reference) within
``max(3 x combined error, 0.5)``, listing the pairs that disagree. dynesty (optional ``bench`` extra) runs with its
default settings only when ``--dynesty`` lists that N (it takes ~25 min per model
at N=1e3 on this machine).

Part 2: calibration over seeds on analytic targets and the exact linear
evidence: fraction of runs with ``|error| <= 3 x reported`` and the ratio of the
mean reported error to the observed spread (sd of the estimates over seeds).

Order: ours on the models, then the calibration study, then dynesty (slowest),
saving after every row, so a run cut short keeps what it measured. Times are
wall and process CPU seconds: on a shared machine only CPU time is comparable
between runs.

Writes ``benchmarks/results/backends.json`` (``--output``).
"""

import argparse
import json
import os
import time

import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evidence_select.datasets import make_linear_regression
from evidence_select.backends._ais import ais_log_evidence
from evidence_select.backends._bridge import bridge_log_evidence
from evidence_select.backends._ns import nested_sampling_log_evidence
from evidence_select.models import LinearGaussianModel
from _common import format_disagreements, pairwise_agreement, paper_problem, run_dynesty_cached  # noqa: E402
from _laplace_reference import laplace_importance_log_evidence  # noqa: E402  (benchmarks/)
from evidence_select.testing import (BimodalTarget, BoxGaussianTarget, GaussianTarget,  # noqa: E402
                                     correlated_gaussian_target)

BACKENDS = {"ns": nested_sampling_log_evidence, "ais": ais_log_evidence, "bridge": bridge_log_evidence}


# -- part 1 ------------------------------------------------------------------------------
def dynesty_only(sizes, models, seed=1):
    """Run (and cache) dynesty alone: the one heavy job, before the table run reads it."""
    for n in sizes:
        for name in models:
            model, X, y = paper_problem(name, n)
            r = run_dynesty_cached(name, n, model, X, y, seed, use_cache=False)
            print(f"  {name:8s} N={n:<6d} dynesty {r['log_evidence']:12.3f} +/- {r['std']:.3f}  calls={r['calls']:10.3g}"
                  f"  {r['seconds']:7.1f} s", flush=True)


def part_models(sizes, backend_kwargs, seed=1, save=None, methods=tuple(BACKENDS), models=("linear", "softmax", "mixture")):
    """Our three backends (and a reference) on the paper's models; dynesty is added by :func:`part_dynesty`."""
    rows = []
    for n in sizes:
        for name in models:
            model, X, y = paper_problem(name, n)
            row = dict(model=name, n=n, results={})
            if name == "linear":
                row["exact"] = model.exact_log_evidence(X, y)
            elif name == "softmax":
                # Careful reference: Laplace-t importance sampling, 20000 draws (unimodal posterior).
                c0 = time.process_time()
                log_z, std = laplace_importance_log_evidence(model, X, y, n_samples=20000, random_state=seed)
                row["reference"] = dict(method="laplace IS (20000)", log_evidence=log_z, std=std,
                                        cpu_seconds=time.process_time() - c0)
            for method, fn in BACKENDS.items():
                if method not in methods:
                    continue
                c0 = time.process_time()
                res = fn(model, X, y, random_state=seed, **backend_kwargs.get(method, {}))
                row["results"][method] = dict(log_evidence=res.log_evidence, std=res.log_evidence_std,
                                              calls=res.n_likelihood_calls, seconds=res.seconds,
                                              cpu_seconds=time.process_time() - c0)
                print(f"  {name:8s} N={n:<6d} {method:7s} {res.log_evidence:12.3f} +/- {res.log_evidence_std:.3f}"
                      f"  calls={res.n_likelihood_calls:10.3g}  {res.seconds:7.1f} s"
                      f"  cpu {row['results'][method]['cpu_seconds']:7.1f} s", flush=True)
            _check_agreement(row)
            rows.append(row)
            if save is not None:
                save(rows)
    return rows


def _check_agreement(row):
    """Every pair of (ours, dynesty, exact or reference) within ``max(3 x combined error, 0.5)``."""
    estimates = {m: (r["log_evidence"], r["std"]) for m, r in row["results"].items()}
    if "exact" in row:
        estimates["exact"] = (row["exact"], 0.0)
    if "reference" in row:
        estimates["laplace_is"] = (row["reference"]["log_evidence"], row["reference"]["std"])
    row["agreement"] = pairwise_agreement(estimates)
    ours = [r["log_evidence"] for m, r in row["results"].items() if m in BACKENDS]
    row["spread_of_ours"] = max(ours) - min(ours) if ours else float("nan")


def part_dynesty(rows, dynesty_sizes, seed=1, use_cache=False, save=None):
    for row in rows:
        if row["n"] not in dynesty_sizes:
            continue
        model, X, y = paper_problem(row["model"], row["n"])
        try:
            r = run_dynesty_cached(row["model"], row["n"], model, X, y, seed, use_cache)
        except ImportError:
            print("  dynesty not installed (pip install evidence-select[bench]); skipped")
            return
        row["results"]["dynesty"] = r
        _check_agreement(row)
        print(f"  {row['model']:8s} N={row['n']:<6d} dynesty {r['log_evidence']:12.3f} +/- {r['std']:.3f}"
              f"  calls={r['calls']:10.3g}  {r['seconds']:7.1f} s  cpu {r.get('cpu_seconds', float('nan')):7.1f} s",
              flush=True)
        if save is not None:
            save(rows)


def print_table(rows):
    print("\n| model | N | method | log Z | reported err | likelihood calls | wall s | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        if "exact" in row:
            print(f"| {row['model']} | {row['n']} | exact | {row['exact']:.3f} | 0 | - | - | - |")
        if "reference" in row:
            r = row["reference"]
            print(f"| {row['model']} | {row['n']} | {r['method']} | {r['log_evidence']:.3f} | {r['std']:.3f} | 2e4 | - | "
                  f"{r['cpu_seconds']:.1f} |")
        for method, r in row["results"].items():
            print(f"| {row['model']} | {row['n']} | {method} | {r['log_evidence']:.3f} | {r['std']:.3f} | "
                  f"{r['calls']:.3g} | {r['seconds']:.1f} | {r.get('cpu_seconds', float('nan')):.1f} |")
        print(f"| {row['model']} | {row['n']} | spread of ours | {row['spread_of_ours']:.3f} | | | | |")
        print(f"| {row['model']} | {row['n']} | pairs outside max(3 x combined err, 0.5) | "
              f"{format_disagreements(row['agreement'])} | | | | |")


# -- part 2 ------------------------------------------------------------------------------
def analytic_problems(full):
    X0 = np.zeros((1, 1))
    problems = []
    for n in ((100, 1000, 10000) if full else (100, 1000)):
        d = make_linear_regression(n, n_features=5, random_state=0)
        problems.append((f"linear_N{n}", LinearGaussianModel(5), d.X, d.y))
    problems += [
        ("gauss_d10", GaussianTarget(np.full(10, 0.3), cov=0.01), X0, None),
        ("box_d5", BoxGaussianTarget(np.full(5, 0.5), 0.1), X0, None),
        ("bimodal_d5", BimodalTarget(5, separation=1.0, scale=0.1), X0, None),
        ("correlated_d20", correlated_gaussian_target(20, correlation=0.9), X0, None),
    ]
    return problems


def part_calibration(n_seeds, full, backend_kwargs, save=None, methods=tuple(BACKENDS)):
    rows = []
    for name, model, X, y in analytic_problems(full):
        truth = model.exact_log_evidence(X, y)
        for method, fn in BACKENDS.items():
            if method not in methods:
                continue
            if method == "bridge" and name.startswith("bimodal"):
                continue  # single-mode proposal: not applicable to a genuinely bimodal posterior
            est, std, secs = [], [], []
            for seed in range(n_seeds):
                res = fn(model, X, y, random_state=1000 + seed, **backend_kwargs.get(method, {}))
                est.append(res.log_evidence)
                std.append(res.log_evidence_std)
                secs.append(res.seconds)
            est, std = np.array(est), np.array(std)
            err = est - truth
            row = dict(problem=name, method=method, n_seeds=n_seeds, mean_error=float(err.mean()),
                       observed_sd=float(est.std(ddof=1)), mean_reported=float(std.mean()),
                       within_3sigma=int(np.sum(np.abs(err) <= 3 * std)),
                       ratio_reported_to_observed=float(std.mean() / est.std(ddof=1)),
                       seconds_per_run=float(np.mean(secs)))
            rows.append(row)
            print(f"  {name:15s} {method:7s} within3s={row['within_3sigma']:2d}/{n_seeds}  "
                  f"mean err={row['mean_error']:+.3f}  reported={row['mean_reported']:.3f}  "
                  f"observed sd={row['observed_sd']:.3f}  ratio={row['ratio_reported_to_observed']:.2f}  "
                  f"{row['seconds_per_run']:.1f} s/run", flush=True)
            if save is not None:
                save(rows)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N=1e3 only, 5 seeds, lighter settings")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--dynesty", type=int, nargs="*", default=[], help="sizes N at which to run dynesty")
    parser.add_argument("--dynesty-cache", action="store_true",
                        help="reuse dynesty results of an earlier --dynesty-only run on the same problems")
    parser.add_argument("--dynesty-only", type=str, nargs="*", default=None, metavar="MODEL",
                        help="only run dynesty on these models at the --dynesty sizes and cache the results")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="N of the paper models (full run)")
    parser.add_argument("--output", default="backends.json")
    parser.add_argument("--models", nargs="*", default=["linear", "softmax", "mixture"])
    parser.add_argument("--methods", nargs="*", default=list(BACKENDS), help="our backends to run")
    parser.add_argument("--skip-models", action="store_true")
    parser.add_argument("--skip-calibration", action="store_true")
    args = parser.parse_args()
    if args.dynesty_only is not None:
        dynesty_only(args.dynesty, args.dynesty_only or ("softmax", "mixture", "linear"))
        return
    sizes = (1000,) if args.quick else tuple(args.sizes or (1000, 10000))
    n_seeds = args.seeds or (5 if args.quick else 20)
    # Four merged runs: single NS runs on the mixture scatter 3-4 nats against a reported ~1 (see
    # bench_ns_live_points.py); the runs' spread makes the reported error honest.
    model_kwargs = {"ns": dict(n_live=100, n_runs=4)}
    calib_kwargs = {"ns": dict(n_live=200)}
    out = dict(settings=dict(quick=args.quick, sizes=sizes, n_seeds=n_seeds, model_kwargs=model_kwargs,
                             calibration_kwargs=calib_kwargs, dynesty_sizes=args.dynesty,
                             command=" ".join(sys.argv)))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", args.output)
    os.makedirs(os.path.dirname(path), exist_ok=True)

    def save(key):
        def _save(rows):
            out[key] = rows
            with open(path, "w") as fh:
                json.dump(out, fh, indent=1, default=float)
        return _save

    if not args.skip_models:
        print("Part 1: paper models (ours)")
        out["models"] = part_models(sizes, model_kwargs, save=save("models"), methods=tuple(args.methods),
                                    models=tuple(args.models))
        print_table(out["models"])
    if not args.skip_calibration:
        print(f"\nPart 2: calibration over {n_seeds} seeds")
        out["calibration"] = part_calibration(n_seeds, not args.quick, calib_kwargs, save=save("calibration"),
                                              methods=tuple(args.methods))
    if not args.skip_models and args.dynesty:
        print("\nPart 3: dynesty (default settings) on the same data")
        part_dynesty(out["models"], set(args.dynesty), use_cache=args.dynesty_cache, save=save("models"))
        print_table(out["models"])
    save("models")(out.get("models"))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
