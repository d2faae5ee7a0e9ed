"""Memory on an endless stream (issue 6): peak RSS while ``partial_fit`` streams 1e7 rows.

Usage::

    python benchmarks/bench_memory.py                 # linear to 1e7 rows, softmax 1e6, mixture 3e5
    python benchmarks/bench_memory.py --quick         # linear 1e6, softmax 2e5, mixture 1.5e5
    python benchmarks/bench_memory.py --models linear --linear-rows 10000000

Prints a markdown table and writes ``benchmarks/results/memory.json``.

Each model runs in its own fresh process (peak RSS is a per-process high-water
mark). Rows are generated block by block (``--block`` rows at a time, default
1e5) from the simulators' models -- the true parameters come from
``evidence_select.datasets`` and each block has its own seeded generator -- so
the stream is never held in memory. At every checkpoint (1e4, 1e5, 1e6, 1e7
rows, up to ``--rows``) the worker records the peak RSS so far
(``getrusage``), the current RSS (psutil when installed, else ``/proc``), the
number of chunk records in ``evidence_history_`` and their deep size in bytes,
the reservoir's rows and bytes, and the CPU time. The reservoir (default
1e5 rows) is full from 1e5 rows on; after that only ``evidence_history_``
may grow (one record per chunk of ``batch_size`` rows).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
MB = 1024.0 ** 2


def _current_rss():
    try:
        import psutil
    except ImportError:  # Linux fallback: resident pages from /proc
        with open("/proc/self/statm") as stream:
            return int(stream.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return psutil.Process().memory_info().rss


def _peak_rss():
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def _deep_size(obj, seen=None):
    """Bytes of ``obj`` and everything it references (lists, tuples, numbers; shared objects once)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, (list, tuple)):
        size += sum(_deep_size(item, seen) for item in obj)
    return size


def _blocks(model, stops, seed):
    """Yield ``(X, y)`` blocks ending at ``stops`` from the model's simulator distribution."""
    from evidence_select import datasets

    if model == "linear":
        truth = datasets.make_linear_regression(0, random_state=seed)
    elif model == "softmax":
        truth = datasets.make_softmax_classification(0, random_state=seed)
    for index, (start, stop) in enumerate(zip([0, *stops[:-1]], stops)):
        rows = stop - start
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))
        if model == "mixture":
            labels = rng.choice(len(datasets.MIXTURE_WEIGHTS), size=rows, p=datasets.MIXTURE_WEIGHTS)
            yield datasets.MIXTURE_MEANS[labels] + datasets.MIXTURE_STDS[labels] * rng.standard_normal((rows, 2)), None
            continue
        X = rng.standard_normal((rows, truth.coef.shape[-1]))
        if model == "linear":
            yield X, X @ truth.coef + truth.intercept + np.sqrt(truth.noise_variance) * rng.standard_normal(rows)
        else:
            logits = X @ truth.coef.T + truth.intercept
            proba = np.exp(logits - logits.max(axis=1, keepdims=True))
            proba /= proba.sum(axis=1, keepdims=True)
            yield X, (proba.cumsum(axis=1) < rng.random(rows)[:, None]).sum(axis=1).clip(max=proba.shape[1] - 1)


def _make_estimator(model, seed):
    from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture

    if model == "linear":
        return BayesianLinearRegressor(noise_variance=1.0, prior_scale=1.0, random_state=seed), {}  # the paper's
    if model == "softmax":
        return BayesianLogisticClassifier(random_state=seed), {"classes": [0, 1, 2, 3]}
    return BayesianMixture(5, random_state=seed), {}


def worker(model, n_rows, block, seed):
    """Stream ``n_rows`` rows through one estimator; return the checkpoint rows (in this process)."""
    est, first_kwargs = _make_estimator(model, seed)
    checkpoints = [c for c in (10_000, 100_000, 1_000_000, 10_000_000, 100_000_000) if c < n_rows] + [n_rows]
    stops = sorted(set(range(block, n_rows, block)) | set(checkpoints))  # blocks end at every checkpoint
    rows = [dict(model=model, n=0, peak_rss_mb=_peak_rss() / MB, rss_mb=_current_rss() / MB, history_records=0,
                 history_mb=0.0, reservoir_rows=0, reservoir_mb=0.0, cpu_seconds=0.0, wall_seconds=0.0)]
    cpu, wall, seen = time.process_time(), time.perf_counter(), 0
    for X, y in _blocks(model, stops, seed):
        est.partial_fit(X, y, **(first_kwargs if seen == 0 else {}))
        seen += len(X)
        if seen in checkpoints:
            reservoir = est.sgais_state_.reservoir
            rows.append(dict(model=model, n=seen, peak_rss_mb=_peak_rss() / MB, rss_mb=_current_rss() / MB,
                             history_records=len(est.evidence_history_),
                             history_mb=_deep_size(est.evidence_history_) / MB,
                             reservoir_rows=reservoir.n_stored,
                             reservoir_mb=(reservoir.X.nbytes + (0 if reservoir.y is None else reservoir.y.nbytes)) / MB,
                             cpu_seconds=time.process_time() - cpu, wall_seconds=time.perf_counter() - wall,
                             log_evidence=est.log_evidence_, finite=bool(np.isfinite(est.log_evidence_))))
    return rows


def _run_in_fresh_process(model, n_rows, block, seed):
    command = [sys.executable, os.path.abspath(__file__), "--worker", model, "--rows", str(n_rows),
               "--block", str(block), "--seed", str(seed)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _table(rows):
    lines = ["| model | rows | peak RSS MB | RSS MB | history records | history MB | reservoir rows | reservoir MB "
             "| CPU s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['n']:.0e} | {r['peak_rss_mb']:.1f} | {r['rss_mb']:.1f} | "
                     f"{r['history_records']} | {r['history_mb']:.2f} | {r['reservoir_rows']} | "
                     f"{r['reservoir_mb']:.2f} | {r['cpu_seconds']:.1f} |")
    return "\n".join(lines)


def _growth(rows, model, low, high):
    by_n = {r["n"]: r for r in rows if r["model"] == model}
    if low in by_n and high in by_n:
        return dict(model=model, from_rows=low, to_rows=high,
                    peak_rss_growth_mb=by_n[high]["peak_rss_mb"] - by_n[low]["peak_rss_mb"],
                    history_growth_mb=by_n[high]["history_mb"] - by_n[low]["history_mb"])
    return None


DEFAULT_ROWS = {"linear": 10_000_000, "softmax": 1_000_000, "mixture": 300_000}
QUICK_ROWS = {"linear": 1_000_000, "softmax": 200_000, "mixture": 150_000}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_ROWS), choices=list(DEFAULT_ROWS))
    for model, rows in DEFAULT_ROWS.items():
        parser.add_argument(f"--{model}-rows", type=int, default=None,
                            help=f"rows streamed through {model} (default {rows:.0e}, --quick {QUICK_ROWS[model]:.0e})")
    parser.add_argument("--block", type=int, default=100_000, help="rows generated and passed per partial_fit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", choices=list(DEFAULT_ROWS), help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.rows, args.block, args.seed)))
        return
    rows, growth = [], []
    for model in args.models:
        n_rows = getattr(args, f"{model}_rows") or (QUICK_ROWS if args.quick else DEFAULT_ROWS)[model]
        print(f"streaming {n_rows:.0e} rows through {model} ...", file=sys.stderr, flush=True)
        rows += _run_in_fresh_process(model, n_rows, args.block, args.seed)
        for low, high in ((100_000, n_rows), (1_000_000, 10_000_000)):  # the reservoir is full from 1e5 rows
            found = _growth(rows, model, low, high)
            if found and found not in growth and low < high:
                growth.append(found)
    print(_table(rows))
    print()
    for g in growth:
        print(f"{g['model']}: peak RSS growth {g['from_rows']:.0e} -> {g['to_rows']:.0e} rows: "
              f"{g['peak_rss_growth_mb']:.1f} MB (evidence_history_ grew {g['history_growth_mb']:.2f} MB)")
    os.makedirs(RESULTS, exist_ok=True)
    name = "memory_quick.json" if args.quick else "memory.json"
    with open(os.path.join(RESULTS, name), "w") as stream:
        json.dump(dict(rows=rows, growth=growth, block=args.block, seed=args.seed), stream, indent=1)


if __name__ == "__main__":
    main()
