"""Reproduction of the SGAIS paper's experiments and the speed-up table (issue 7; issue 4's dynesty table).

Usage (one heavy job at a time on the shared machine; BLAS is pinned to one thread, as in the paper)::

    nice -n 10 python benchmarks/bench_paper.py --quick     # a few minutes (smoke run of everything)
    nice -n 10 python benchmarks/bench_paper.py             # full: SGAIS to 1e6, references within --budget
    nice -n 10 python benchmarks/bench_paper.py --parts evidence --models softmax --budget 1800
    python benchmarks/bench_paper.py --report-only          # redo the tables and figures from the JSON

dynesty runs come from ``results/dynesty_<model>_N<n>_seed1.json`` (written by
``bench_backends.py --dynesty N --dynesty-only MODEL``); ``--run-dynesty`` runs the
missing ones that fit in the budget.

Parts (``--parts``):

1. ``evidence`` (paper Fig. 2-4) for the linear, softmax and mixture models:
   SGAIS streams one data set in chunks and its history gives log Z and the
   cumulative CPU time at every N; our NS, AIS and bridge sampling, dynesty, the
   exact evidence (linear) and Laplace importance sampling (softmax) each run once
   on the full data at log-spaced N. A reference whose predicted CPU time
   (its time at the previous N scaled by the ratio of N) exceeds ``--budget`` is
   recorded as "not run (> budget)", as are its larger N.
2. ``shift`` (Fig. 5): mixtures with 3, 5, 7 components on the distribution-shift
   stream, in order and shuffled: log evidence per datum and annealing steps vs
   samples seen, and what ``detect_change_points`` finds.
3. ``sensitivity`` (Sec. 7.3): particles, target ESS, MCMC steps, learning rate and
   batch size, each varied around the defaults (linear against the exact evidence;
   softmax against Laplace-IS in the full mode).

The speed-up table is built from part 1 of the same run: SGAIS's cost to reach N
is its cumulative streaming CPU time; a reference's cost is one full-data run at N.
Writes ``results/paper[_quick].json`` (with the git commit), ``results/paper[_quick].md``
and PNG figures in ``results/figures/``.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # single-threaded, like the paper; set before numpy is imported

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (PAPER_MODELS, RESULTS_DIR, cached_dynesty, pairwise_agreement, paper_data,  # noqa: E402
                     paper_estimator, paper_model, partial_fit_chunk, run_dynesty_cached, run_metadata, save_json)
from _laplace_reference import laplace_importance_log_evidence  # noqa: E402
from _paper_report import write_report  # noqa: E402

from evidence_select import BayesianMixture, EvidenceModelSelector, detect_change_points  # noqa: E402
from evidence_select.datasets import SHIFT_CHANGE_POINTS, make_shift_stream  # noqa: E402
from evidence_select.backends._ais import ais_log_evidence  # noqa: E402
from evidence_select.backends._bridge import bridge_log_evidence  # noqa: E402
from evidence_select.backends._ns import nested_sampling_log_evidence  # noqa: E402

SEED = 1  # references and SGAIS (the data always use seed 0); dynesty's cache is for seed 1
BACKENDS = {"ns": nested_sampling_log_evidence, "ais": ais_log_evidence, "bridge": bridge_log_evidence}
BACKEND_KWARGS = {"ns": dict(n_live=100)}  # as in bench_backends.py; AIS and bridge at their defaults


def settings(quick):
    """Sizes and budgets of the quick and full modes."""
    if quick:
        return dict(sgais_max={"linear": 100_000, "softmax": 10_000, "mixture": 10_000},
                    reference_sizes=[100, 1000, 10_000, 100_000], budget=30.0, laplace_samples=2000,
                    shift_n=12_000, sens_n=10_000, sens_seeds=2, sens_models=["linear"])
    return dict(sgais_max={m: 1_000_000 for m in PAPER_MODELS}, reference_sizes=[100, 1000, 10_000, 100_000, 1_000_000],
                budget=900.0, laplace_samples=4000, shift_n=100_000, sens_n=100_000, sens_seeds=3,
                sens_models=["linear", "softmax"])


# -- part 1: SGAIS stream ------------------------------------------------------------------
def sgais_stream(name, n_max, seed, checkpoints=(), params=None, reference_fn=None):
    """Stream ``n_max`` rows of model ``name`` chunk by chunk; CPU and wall time per chunk.

    Returns the per-chunk history (samples seen, log Z, std, annealing steps, ESS,
    cumulative CPU and wall seconds of the ``partial_fit`` calls only) and, at each
    of ``checkpoints``, the same plus ``reference_fn(n)`` when given (its time excluded).
    """
    params = dict(params or {})
    X, y = paper_data(name, n_max)
    est = paper_estimator(name, random_state=seed, **params)
    chunk = est.batch_size
    hist = dict(n=[], log_evidence=[], std=[], n_annealing_steps=[], ess=[], cpu_seconds=[], wall_seconds=[])
    cpu = wall = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # degeneracy warnings are counted in the records
        for start in range(0, n_max, chunk):
            stop = min(start + chunk, n_max)
            c0, t0 = time.process_time(), time.perf_counter()
            partial_fit_chunk(est, name, X[start:stop], None if y is None else y[start:stop], start == 0)
            cpu += time.process_time() - c0
            wall += time.perf_counter() - t0
            rec = est.evidence_history_[-1]
            for key, value in (("n", stop), ("log_evidence", rec.log_evidence), ("std", rec.log_evidence_std),
                               ("n_annealing_steps", rec.n_annealing_steps), ("ess", rec.ess),
                               ("cpu_seconds", cpu), ("wall_seconds", wall)):
                hist[key].append(value)
    return dict(model=name, seed=seed, params=params, batch_size=chunk, n_particles=est.n_particles,
                n_replicates=getattr(est, "n_replicates", None), history=hist)


def history_at(hist, n):
    """The history entry after exactly ``n`` rows (None if the stream did not reach it)."""
    try:
        i = hist["n"].index(n)
    except ValueError:
        return None
    return {k: v[i] for k, v in hist.items()}


# -- part 1: references --------------------------------------------------------------------
def _timed(fn):
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - t0


def run_reference(method, name, n, model, X, y, quick_laplace):
    """One full-data reference run: dict with log_evidence, std, calls, cpu_seconds, seconds."""
    if method == "exact":
        z, cpu, wall = _timed(lambda: model.exact_log_evidence(X, y))
        return dict(log_evidence=float(z), std=0.0, calls=1.0, cpu_seconds=cpu, seconds=wall)
    if method == "laplace_is":
        (z, s), cpu, wall = _timed(lambda: laplace_importance_log_evidence(model, X, y, n_samples=quick_laplace,
                                                                           random_state=SEED))
        return dict(log_evidence=z, std=s, calls=float(quick_laplace), cpu_seconds=cpu, seconds=wall,
                    settings=dict(n_samples=quick_laplace))
    if method == "dynesty":
        return run_dynesty_cached(name, n, model, X, y, SEED, use_cache=True)
    kwargs = BACKEND_KWARGS.get(method, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res, cpu, wall = _timed(lambda: BACKENDS[method](model, X, y, random_state=SEED, **kwargs))
    return dict(log_evidence=res.log_evidence, std=res.log_evidence_std, calls=res.n_likelihood_calls,
                cpu_seconds=cpu, seconds=wall, settings=res.settings)


def reference_methods(name, run_dynesty):
    methods = ["exact"] if name == "linear" else (["laplace_is"] if name == "softmax" else [])
    return methods + list(BACKENDS) + ["dynesty"]


def part_evidence(cfg, models, budget, run_dynesty, out, save):
    """Log Z and time vs N for every model: SGAIS stream plus references under the CPU budget."""
    out.setdefault("evidence", {})
    for name in models:
        n_max = cfg["sgais_max"][name]
        sizes = [n for n in cfg["reference_sizes"] if n <= max(n_max, 1000)]
        print(f"\n== {name}: SGAIS stream to N={n_max:.0e}", flush=True)
        stream = sgais_stream(name, n_max, SEED)
        h = stream["history"]
        print(f"   log Z = {h['log_evidence'][-1]:.2f} +/- {h['std'][-1]:.2f}, CPU {h['cpu_seconds'][-1]:.1f} s, "
              f"wall {h['wall_seconds'][-1]:.1f} s", flush=True)
        entry = dict(sgais=stream, references={}, git_commit=out["metadata"]["git_commit"])
        out["evidence"][name] = entry
        save()
        last_cost = {}  # method -> (n, cpu seconds) of its last run
        stopped = {}
        for n in sizes:
            model = paper_model(name)
            X, y = paper_data(name, n)
            refs = entry["references"].setdefault(str(n), {})
            for method in reference_methods(name, run_dynesty):
                if method in stopped:
                    predicted = last_cost[method][1] * n / last_cost[method][0]
                    refs[method] = dict(skipped=f"not run (> budget: predicted {predicted:.0f} CPU s)",
                                        predicted_cpu_seconds=predicted)
                    continue
                if method == "dynesty":
                    cached = cached_dynesty(name, n, SEED)
                    if cached is not None:
                        refs[method] = cached
                        last_cost[method] = (n, cached.get("cpu_seconds", cached["seconds"]))
                        _print_ref(name, n, method, cached)
                        continue
                    if not run_dynesty:
                        refs[method] = dict(skipped="not run (no cached result; --run-dynesty to run it)")
                        continue
                predicted = last_cost[method][1] * n / last_cost[method][0] if method in last_cost else None
                if predicted is not None and predicted > budget and method != "exact":
                    stopped[method] = f"not run (> budget: predicted {predicted:.0f} CPU s > {budget:.0f} s)"
                    refs[method] = dict(skipped=stopped[method], predicted_cpu_seconds=predicted)
                    print(f"   {name:8s} N={n:<8d} {method:10s} {stopped[method]}", flush=True)
                    continue
                if method == "dynesty" and predicted is None and n > 1000:
                    refs[method] = dict(skipped="not run (no smaller cached run to predict its time from)")
                    continue
                r = run_reference(method, name, n, model, X, y, cfg["laplace_samples"])
                refs[method] = r
                last_cost[method] = (n, r.get("cpu_seconds", r["seconds"]))
                _print_ref(name, n, method, r)
                save()
            sg = history_at(h, n)
            estimates = {m: (r["log_evidence"], r["std"]) for m, r in refs.items() if "log_evidence" in r}
            if sg is not None:
                estimates["sgais"] = (sg["log_evidence"], sg["std"])
            entry.setdefault("agreement", {})[str(n)] = pairwise_agreement(estimates)
            save()


def _print_ref(name, n, method, r):
    print(f"   {name:8s} N={n:<8d} {method:10s} {r['log_evidence']:14.3f} +/- {r['std']:.3f}  "
          f"calls {r['calls']:9.3g}  CPU {r.get('cpu_seconds', float('nan')):8.1f} s  wall {r['seconds']:8.1f} s"
          + ("  (cached)" if r.get("cached") else ""), flush=True)


# -- part 2: distribution shift ------------------------------------------------------------
def part_shift(cfg, out, save):
    """Mixtures K=3,5,7 through the selector on the shift stream, in order and shuffled (paper Fig. 5)."""
    n = cfg["shift_n"]
    result = dict(n=n, true_change_points=[c for c in SHIFT_CHANGE_POINTS if c < n], runs={},
                  git_commit=out["metadata"]["git_commit"])
    for order in ("in_order", "shuffled"):
        data = make_shift_stream(n, shuffle=order == "shuffled", random_state=0)
        selector = EvidenceModelSelector([(f"K={k}", BayesianMixture(k)) for k in (3, 5, 7)], random_state=SEED)
        chunk = 500
        c0, t0 = time.process_time(), time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for start in range(0, n, chunk):
                selector.partial_fit(data.X[start:start + chunk])
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        hist = selector.evidence_history_
        names = [name for name, _ in selector.estimators]
        run = dict(cpu_seconds=cpu, seconds=wall, chunk=chunk, n=[r.n_samples_seen for r in hist],
                   candidates={}, detected=detect_change_points(selector).tolist())
        for k, name in enumerate(names):
            records = [r.candidate_records[k] for r in hist]
            run["candidates"][name] = dict(
                log_evidence=[r.log_evidence for r in records], std=[r.log_evidence_std for r in records],
                log_predictive_per_datum=[r.log_predictive_per_datum for r in records],
                n_annealing_steps=[r.n_annealing_steps for r in records],
                detected=detect_change_points(records).tolist())
        run["model_probabilities"] = np.asarray(selector.model_probabilities_).tolist()
        result["runs"][order] = run
        per = ", ".join(f"{c}: {v['detected']}" for c, v in run["candidates"].items())
        final = ", ".join(f"{c}: {v['log_evidence'][-1] / n:.4f}" for c, v in run["candidates"].items())
        print(f"   shift {order:9s}: N={n}, CPU {cpu:.1f} s; detected {run['detected']} (per candidate: {per}); "
              f"final log Z/N {final}", flush=True)
        out["shift"] = result
        save()


# -- part 3: sensitivity -------------------------------------------------------------------
SENSITIVITY_GRID = {
    "n_particles": [5, 10, 20, 40],
    "target_ess": [0.5, 0.7, 0.9, 0.95],
    "n_mcmc_steps": [2, 5, 10, 20],
    "learning_rate": [0.01, 0.03, 0.1, 0.3, 1.0],
    "batch_size": [100, 250, 500, 1000, 2000],
}


def part_sensitivity(cfg, out, save):
    """Each parameter varied around the defaults; error against the exact / Laplace-IS reference and CPU time."""
    n = cfg["sens_n"]
    out["sensitivity"] = result = {}
    for name in cfg["sens_models"]:
        model = paper_model(name)
        X, y = paper_data(name, n)
        if name == "linear":
            reference = dict(method="exact", log_evidence=model.exact_log_evidence(X, y), std=0.0)
        else:
            z, s = laplace_importance_log_evidence(model, X, y, n_samples=cfg["laplace_samples"], random_state=SEED)
            reference = dict(method="laplace_is", log_evidence=z, std=s)
        defaults = paper_estimator(name).get_params()
        rows = []
        result[name] = dict(n=n, reference=reference, defaults={k: defaults[k] for k in SENSITIVITY_GRID}, rows=rows,
                            git_commit=out["metadata"]["git_commit"])
        for param, values in SENSITIVITY_GRID.items():
            for value in values:
                for seed in range(cfg["sens_seeds"]):
                    stream = sgais_stream(name, n, 100 + seed, params={param: value})
                    h = stream["history"]
                    rows.append(dict(param=param, value=value, seed=100 + seed, log_evidence=h["log_evidence"][-1],
                                     std=h["std"][-1], error=h["log_evidence"][-1] - reference["log_evidence"],
                                     cpu_seconds=h["cpu_seconds"][-1], seconds=h["wall_seconds"][-1],
                                     mean_annealing_steps=float(np.mean(h["n_annealing_steps"])),
                                     is_default=value == defaults[param]))
                r = [row for row in rows if row["param"] == param and row["value"] == value]
                print(f"   {name:8s} N={n} {param:14s}={value!s:6s} error {np.mean([x['error'] for x in r]):+8.3f} "
                      f"(std {np.mean([x['std'] for x in r]):.3f})  CPU {np.mean([x['cpu_seconds'] for x in r]):6.2f} s  "
                      f"steps/chunk {np.mean([x['mean_annealing_steps'] for x in r]):6.1f}", flush=True)
                save()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes and a 30 s budget (a few minutes)")
    parser.add_argument("--parts", nargs="+", choices=["evidence", "shift", "sensitivity"],
                        default=["evidence", "shift", "sensitivity"])
    parser.add_argument("--models", nargs="+", choices=PAPER_MODELS, default=list(PAPER_MODELS))
    parser.add_argument("--budget", type=float, default=None, help="CPU seconds allowed per reference run")
    parser.add_argument("--max-n", type=int, default=None,
                        help="cap on the SGAIS stream and the reference sizes (e.g. 100000 for a shorter full run)")
    parser.add_argument("--run-dynesty", action="store_true", help="run dynesty where no cached result exists")
    parser.add_argument("--output", default=None, help="JSON name in results/ (default paper.json / paper_quick.json)")
    parser.add_argument("--report-only", action="store_true", help="rewrite the markdown and figures from the JSON")
    args = parser.parse_args(argv)
    cfg = settings(args.quick)
    budget = args.budget if args.budget is not None else cfg["budget"]
    if args.max_n is not None:
        cfg["sgais_max"] = {m: min(n, args.max_n) for m, n in cfg["sgais_max"].items()}
        cfg["reference_sizes"] = [n for n in cfg["reference_sizes"] if n <= args.max_n]
    stem = (args.output or ("paper_quick.json" if args.quick else "paper.json")).removesuffix(".json")
    path = os.path.join(RESULTS_DIR, stem + ".json")
    if args.report_only:
        write_report(path)
        return
    import json

    out = {}
    if os.path.exists(path):  # runs of some parts/models update their entries and keep the others
        with open(path) as fh:
            out = json.load(fh)
    out["metadata"] = run_metadata([sys.argv[0]] + (argv if argv is not None else sys.argv[1:]))
    out["settings"] = dict(cfg, budget=budget, quick=args.quick, seed=SEED, backend_kwargs=BACKEND_KWARGS)

    def save():
        out["metadata"]["load_average_end"] = os.getloadavg()
        save_json(path, out)

    tic = time.perf_counter()
    if "evidence" in args.parts:
        print("Part 1: log evidence and time vs N (paper Fig. 2-4)", flush=True)
        part_evidence(cfg, args.models, budget, args.run_dynesty, out, save)
    if "shift" in args.parts:
        print("\nPart 2: distribution shift (paper Fig. 5)", flush=True)
        part_shift(cfg, out, save)
    if "sensitivity" in args.parts:
        print("\nPart 3: sensitivity (paper Sec. 7.3)", flush=True)
        part_sensitivity(cfg, out, save)
    out["metadata"]["total_wall_seconds"] = time.perf_counter() - tic
    save()
    print(f"\nwrote {path}")
    write_report(path)


if __name__ == "__main__":
    main()
