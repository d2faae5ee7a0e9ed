"""Gaussianized bridge sampling on the issue's hard targets (exact evidence) and on nearly separable digits.

The hard targets are the held-out ``funnel``, ``banana``, ``twopeak`` and ``ring`` of
``benchmarks/_held_out_targets.py``.

Usage (one heavy job at a time on the shared machine)::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_bridge.py --dims 16 64 --seeds 0
    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_bridge.py --only digits

Each row: estimate, exact value (for digits: none; compare with AIS/NS), error in
nats and in reported standard errors, the verdict and the failed checks,
likelihood evaluations and CPU seconds (``time.process_time``; wall time in the
JSON). The issue's target: within 0.5 nat wherever the chains pass R-hat; at most
2e6 evaluations and 60 s per 64-d target. Writes ``benchmarks/results/bridge.json``.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS_DIR, run_metadata, save_json  # noqa: E402
from _held_out_targets import HELD_OUT_TARGETS  # noqa: E402
from evidence_select import BayesianLogisticClassifier  # noqa: E402
from evidence_select.evidence._api import _model_and_data  # noqa: E402
from evidence_select.backends._bridge import bridge_log_evidence  # noqa: E402
from evidence_select.exceptions import EvidenceConvergenceWarning  # noqa: E402

TARGETS = {name: HELD_OUT_TARGETS[name] for name in ("funnel", "banana", "twopeak", "ring")}


def digits_problem(classes=(0, 1)):
    """2-class subset of scikit-learn's digits, standardised; softmax model with prior_scale=3."""
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, classes)
    X = StandardScaler().fit_transform(X[keep])
    return _model_and_data(BayesianLogisticClassifier(prior_scale=3), X, y[keep])


def run_one(name, d, seed, model, X, y, exact):
    cpu, wall = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvidenceConvergenceWarning)
        res = bridge_log_evidence(model, X, y, random_state=seed)
    row = dict(target=name, d=d, seed=seed, estimate=res.log_evidence, std=res.log_evidence_std, exact=exact,
               converged=res.converged, failed=[k for k, v in res.diagnostics.items() if not v["passed"]],
               diagnostics=res.diagnostics, calls=res.n_likelihood_calls, cpu=time.process_time() - cpu,
               wall=time.perf_counter() - wall, halves=res.info["halves"], step_size=res.info.get("step_size"))
    return row


def table(rows):
    lines = ["| target | d | seed | bridge | exact | error (nats) | error / std | verdict (failed) | calls | CPU s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        err = "" if r["exact"] is None else f"{r['estimate'] - r['exact']:+.3f}"
        pull = "" if r["exact"] is None else f"{(r['estimate'] - r['exact']) / r['std']:+.1f}"
        exact = "" if r["exact"] is None else f"{r['exact']:.3f}"
        verdict = "converged" if r["converged"] else "flagged (" + ", ".join(r["failed"]) + ")"
        lines.append(f"| {r['target']} | {r['d']} | {r['seed']} | {r['estimate']:.3f} +/- {r['std']:.3f} | {exact} "
                     f"| {err} | {pull} | {verdict} | {r['calls']:.3g} | {r['cpu']:.0f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--only", nargs="+", default=list(TARGETS) + ["digits"])
    parser.add_argument("--output", default="bridge.json")
    args = parser.parse_args(argv)
    out = dict(meta=run_metadata(sys.argv), rows=[])
    path = os.path.join(RESULTS_DIR, args.output)
    jobs = [(name, d) for d in args.dims for name in TARGETS if name in args.only]
    if "digits" in args.only:
        jobs.append(("digits", None))
    for name, d in jobs:
        for seed in args.seeds:
            if name == "digits":
                model, X, y = digits_problem()
                row = run_one(name, model.n_params, seed, model, X, y, None)
            else:
                target = TARGETS[name](d)
                row = run_one(name, d, seed, target, None, None, target.exact_log_evidence())
            out["rows"].append(row)
            save_json(path, out)
            print(table([row]).splitlines()[-1], flush=True)
    print(table(out["rows"]))


if __name__ == "__main__":
    main()
