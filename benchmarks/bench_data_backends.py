"""Reference backends against dynesty on data: the same model and rows, side by side, wall time and accuracy.

Usage (one heavy job at a time on a shared machine; dynesty needs the ``bench`` extra)::

    # both models, 1e4 rows, NS, AIS, bridge and dynesty (defaults everywhere), seed 0
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_data_backends.py
    # one model, fewer rows, without dynesty
    python benchmarks/bench_data_backends.py --models logistic --rows 2000 --no-dynesty

The models (simulated data from :mod:`evidence_select.datasets`):

- ``logistic``: binary softmax regression, 4 features and intercepts (10 parameters), on
  ``make_softmax_classification(rows, n_features=4, n_classes=2)``;
- ``mixture``: a 3-component diagonal Gaussian mixture in 2-d (14 parameters) on the paper's
  five-cluster ``make_mixture(rows)``.

Every method runs with its documented defaults through ``log_evidence(model, X, y, method=...)``; dynesty with
its own defaults (500 live points, its automatic bound and sampler) on the prior's inverse CDF. Per run: the
estimate and its reported error, whether it reported convergence, likelihood calls (full-data evaluations of one
parameter vector, dynesty's ``ncall``), wall and CPU seconds, and the wall time over dynesty's. The estimates are
compared pairwise within ``max(3 x combined error, 0.5)`` nats, the calibration suite's tolerance. A dynesty
estimate that disagrees with the references is not the truth: none is known here, and two references that agree
with each other stand for it.

Writes ``benchmarks/results/data_backends.json``.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import format_disagreements, pairwise_agreement, run_dynesty, run_metadata, save_result  # noqa: E402
from evidence_select import log_evidence  # noqa: E402
from evidence_select.datasets import make_mixture, make_softmax_classification  # noqa: E402
from evidence_select.exceptions import EvidenceConvergenceWarning  # noqa: E402
from evidence_select.models import GaussianMixtureModel, SoftmaxRegressionModel  # noqa: E402

METHODS = ("ns", "ais", "bridge")


def make_problem(name, rows, seed):
    """``(model, X, y)`` of the named model on ``rows`` simulated rows."""
    if name == "logistic":
        data = make_softmax_classification(rows, n_features=4, n_classes=2, random_state=seed)
        return SoftmaxRegressionModel(4, 2), data.X, data.y
    if name == "mixture":
        return GaussianMixtureModel(3, 2), make_mixture(rows, random_state=seed).X, None
    raise ValueError(f"unknown model {name!r}; choose from logistic, mixture")


def run_method(method, model, X, y, seed):
    """One run: its estimate, error, verdict, calls and seconds (a convergence warning marks it unconverged)."""
    t0, c0 = time.perf_counter(), time.process_time()
    if method == "dynesty":
        out = run_dynesty(model, X, y, seed)
        estimate, std, calls, converged = out["log_evidence"], out["std"], out["calls"], True
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EvidenceConvergenceWarning)  # the verdict is in result.converged
            result = log_evidence(model, X, y, method=method, random_state=seed)
        estimate, std, calls, converged = (result.log_evidence, result.log_evidence_std, result.n_likelihood_calls,
                                           bool(result.converged))
    return dict(method=method, estimate=float(estimate), std=float(std), converged=converged, calls=float(calls),
                seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)


def print_problem(name, n_params, rows, runs, pairs):
    """The problem's table: one line per method, wall time against dynesty's when it ran."""
    dynesty = next((r["seconds"] for r in runs if r["method"] == "dynesty"), None)
    print(f"\n{name}: {n_params} parameters, {rows} rows\n")
    print("| method | log Z ± std | converged | calls | wall / CPU s | wall / dynesty's |")
    print("|---|---|---|---|---|---|")
    for r in runs:
        ratio = f"{r['seconds'] / dynesty:.2f}" if dynesty else "-"
        print(f"| {r['method']} | {r['estimate']:.3f} ± {r['std']:.3f} | {'yes' if r['converged'] else 'no'} "
              f"| {r['calls']:.3g} | {r['seconds']:.1f} / {r['cpu_seconds']:.1f} | {ratio} |")
    print(f"\npairs within max(3 x combined error, 0.5): {format_disagreements(pairs)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="logistic,mixture", help="comma-separated subset of logistic,mixture")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of ns,ais,bridge")
    parser.add_argument("--no-dynesty", action="store_true", help="leave dynesty out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m] + ([] if args.no_dynesty else ["dynesty"])
    unknown = [m for m in methods if m not in (*METHODS, "dynesty")]
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {METHODS}")
    result = dict(meta=run_metadata(sys.argv if argv is None else [sys.argv[0], *argv]), problems=[])
    for name in args.models.split(","):
        model, X, y = make_problem(name, args.rows, args.seed)
        runs = []
        for method in methods:
            runs.append(run_method(method, model, X, y, args.seed))
            print(f"{name} {method}: {runs[-1]['estimate']:.3f} ± {runs[-1]['std']:.3f} in {runs[-1]['seconds']:.1f} s",
                  flush=True)
        pairs = pairwise_agreement({r["method"]: (r["estimate"], r["std"]) for r in runs})
        result["problems"].append(dict(model=name, n_params=model.n_params, rows=args.rows, runs=runs, pairs=pairs))
        save_result("data_backends", result)  # after every problem: a run cut short keeps what it measured
        print_problem(name, model.n_params, args.rows, runs, pairs)
    print(f"\nwrote {save_result('data_backends', result)[0]}")


if __name__ == "__main__":
    main()
