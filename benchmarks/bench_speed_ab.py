"""The speed cases of ``bench_speed.py``, this checkout against another commit, interleaved in one run.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_speed_ab.py BASELINE [--seeds 2] [--only linear softmax mixture]

``BASELINE`` is any commit (hash, tag, branch). It is checked out into a temporary
git worktree, removed afterwards. Each case and seed runs first on the baseline,
then on this checkout, each in a fresh process (so neither inherits the other's
imports or warm caches), one after the other: on a shared machine the load drifts
over minutes, and timings taken far apart are not comparable, while the ratio of
two runs taken back to back is. Prints a table of wall and CPU seconds and the
ratio this/baseline per run and as medians, and writes
``benchmarks/results/speed_ab.json``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)
#: name -> (rows, simulator, estimator class, positional and keyword arguments); the cases and sizes of bench_speed.py.
CASES = {"linear": (1_000_000, "make_linear_regression", "BayesianLinearRegressor", (),
                    dict(noise_variance=1.0, prior_scale=1.0)),  # the paper's model in every tree
         "softmax": (100_000, "make_softmax_classification", "BayesianLogisticClassifier", (), {}),
         "mixture": (100_000, "make_mixture", "BayesianMixture", (5,), {})}


def time_in_tree(tree, case, seed):
    """Wall and CPU seconds of ``fit`` on ``case`` with the package of ``tree`` (run in a worker process)."""
    sys.path.insert(0, tree)
    import time
    import warnings

    import evidence_select
    from evidence_select import datasets

    assert os.path.realpath(evidence_select.__file__).startswith(os.path.realpath(tree)), evidence_select.__file__
    n, simulator, estimator, args, kwargs = CASES[case]
    data = getattr(datasets, simulator)(n, random_state=seed)
    est = getattr(evidence_select, estimator)(*args, **kwargs, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu, wall = time.process_time(), time.perf_counter()
        est.fit(data.X, getattr(data, "y", None))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return dict(wall=wall, cpu=cpu, log_evidence=float(est.log_evidence_))


def _run_worker(tree, case, seed):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", tree, case, str(seed)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _git(*args):
    return subprocess.run(["git", "-C", CHECKOUT, *args], check=True, capture_output=True, text=True).stdout.strip()


def compare(baseline_tree, cases, n_seeds):
    """Rows of interleaved baseline/current timings, printed as they come."""
    rows = []
    print("| case | seed | baseline wall s | this wall s | wall ratio | baseline CPU s | this CPU s | CPU ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        for seed in range(n_seeds):
            base, this = _run_worker(baseline_tree, case, seed), _run_worker(CHECKOUT, case, seed)
            row = dict(case=case, seed=seed, baseline=base, this=this, wall_ratio=this["wall"] / base["wall"],
                       cpu_ratio=this["cpu"] / base["cpu"])
            rows.append(row)
            print(f"| {case} | {seed} | {base['wall']:.2f} | {this['wall']:.2f} | {row['wall_ratio']:.2f} | "
                  f"{base['cpu']:.2f} | {this['cpu']:.2f} | {row['cpu_ratio']:.2f} |", flush=True)
    for case in cases:
        ratios = [r["cpu_ratio"] for r in rows if r["case"] == case]
        walls = [r["this"]["wall"] for r in rows if r["case"] == case]
        print(f"{case}: median CPU ratio this/baseline {np.median(ratios):.2f}, "
              f"median wall here {np.median(walls):.2f} s")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", help="commit to compare against")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--only", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--output", default=os.path.join(HERE, "results", "speed_ab.json"))
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    from _common import run_metadata, save_json

    metadata = run_metadata(sys.argv)
    baseline_commit = _git("rev-parse", args.baseline)
    print(f"this checkout {metadata['git_commit']} against {baseline_commit}; load average {os.getloadavg()} on "
          f"{os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as parent:
        tree = os.path.join(parent, "baseline")
        _git("worktree", "add", "--detach", tree, baseline_commit)
        try:
            rows = compare(tree, args.only, args.seeds)
        finally:
            _git("worktree", "remove", "--force", tree)
    print(f"load average at end {os.getloadavg()}")
    save_json(args.output, dict(metadata, baseline=baseline_commit, rows=rows, load_average_end=os.getloadavg()))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        tree, case, seed = sys.argv[2], sys.argv[3], int(sys.argv[4])
        print(json.dumps(time_in_tree(tree, case, seed)))
    else:
        main()
