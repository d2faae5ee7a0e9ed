"""EvidenceModelSelector targets of issue 5.

Usage::

    python benchmarks/bench_selector.py            # all three studies (~10 min on a quiet 2-core machine)
    python benchmarks/bench_selector.py --quick    # smaller: 3 seeds, N=5000, shorter timing streams
    python benchmarks/bench_selector.py --only mixture linear cost shift
    python benchmarks/bench_selector.py --only shift --save   # also benchmarks/saved/selector_shift.json

Prints markdown tables and writes ``benchmarks/results/selector.json`` (the shift study also
``benchmarks/results/selector_shift.json``; with ``--save``, at a clean commit and the study's defaults,
``benchmarks/saved/selector_shift.json``, the validation page's source).

1. ``mixture``: candidates ``BayesianMixture(K)``, K = 1..7, on the paper's 2-d
   mixture (true K = 5), N = 5000 (``--n-mixture``), 5 seeds. Target: the best
   candidate is K = 5, or its log evidence is within 2 combined standard
   errors of K = 5's.
2. ``linear``: ``BayesianLinearRegressor`` candidates differing only in
   ``noise_variance`` (true 1.0); SGAIS model probabilities against those from
   the exact evidences, in units of the propagated (delta-method) error.
3. ``cost``: wall time of streaming the same chunks through one candidate's
   ``partial_fit`` (mean over 3 seeds: its cost varies with the seed) and
   through a 3-candidate selector's, with n_jobs=1 and 2.
   Target: ratio <= ~3 with n_jobs=1, less with n_jobs=2. This process and the
   worker pool stream once untimed first (see ``_warm_process``; the one-off
   warm-up is printed separately).
4. ``shift``: the paper's shift stream (Sec. 6.2) with phases of 1000, 1500 and
   1500 rows, chunks of 250, candidates with 3, 5 and 7 components as in the
   change-point test, in order and shuffled, 3 seeds. Target: the final log
   evidences agree within 3 combined reported errors. Not in the default run.
   ``--surprise-threshold 0.05`` and ``--no-restart`` run the candidates with
   those ``BayesianMixture`` parameters.
5. ``shift-full``: the paper's full shift stream (1000, 9000 and 90,000 rows),
   chunks of 250, one ``BayesianMixture`` per K = 3, 5, 7 (seed 0), in order
   and shuffled (``--no-restart``: in order with the excursion instead), two
   runs at a time. Same target.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
from joblib import Parallel, delayed

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout
from evidence_select import (BayesianLinearRegressor, BayesianMixture, EvidenceModelSelector,  # noqa: E402
                             log_evidence)
from evidence_select.datasets import make_linear_regression, make_mixture  # noqa: E402
from evidence_select.selection._averaging import log_model_prior, log_model_probabilities  # noqa: E402
from evidence_select.datasets._shift import shift_stream  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import require_clean_checkout, run_metadata, save_result  # noqa: E402
from _tables import print_tables  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "selector.json")


def mixture_study(n_samples, seeds, n_jobs):
    rows = []
    X_all = {seed: make_mixture(n_samples, random_state=seed).X for seed in seeds}
    for seed in seeds:
        selector = EvidenceModelSelector([(f"K={k}", BayesianMixture(k)) for k in range(1, 8)], n_jobs=n_jobs,
                                         random_state=seed)
        tic = time.perf_counter()
        selector.fit(X_all[seed])
        z, s = selector.log_evidences_, selector.log_evidence_stds_
        best = selector.best_index_
        gap = z[best] - z[4]
        within = best == 4 or gap < 2 * np.hypot(s[best], s[4])
        rows.append(dict(seed=seed, n=n_samples, log_z=z.tolist(), std=s.tolist(), best_k=best + 1,
                         gap_to_k5=float(gap), ok=bool(within), seconds=time.perf_counter() - tic))
        print(f"  seed {seed}: best K={best + 1}, gap to K=5 {gap:.2f} nats, {rows[-1]['seconds']:.0f} s",
              flush=True)
    return rows


def linear_study(sizes, seeds, variances):
    rows = []
    prior = log_model_prior(None, len(variances))
    for seed in seeds:
        data = make_linear_regression(max(sizes), noise_variance=1.0, random_state=seed)
        selector = EvidenceModelSelector([(f"s2={v:g}", BayesianLinearRegressor(noise_variance=v, prior_scale=1.0))
                                          for v in variances],
                                         random_state=seed)
        done = 0
        for n in sizes:
            selector.partial_fit(data.X[done:n], data.y[done:n])
            done = n
            exact = np.array([log_evidence(est, data.X[:n], data.y[:n], method="exact").log_evidence
                              for _, est in selector.estimators])
            p_exact = np.exp(log_model_probabilities(exact, prior))
            p, p_std = selector.model_probabilities_, selector.model_probabilities_std_
            with np.errstate(divide="ignore", invalid="ignore"):
                z_scores = np.where(p_std > 0, (p - p_exact) / p_std, 0.0)
            rows.append(dict(seed=seed, n=n, p=p.tolist(), p_std=p_std.tolist(), p_exact=p_exact.tolist(),
                             max_abs_diff=float(np.max(np.abs(p - p_exact))),
                             max_z=float(np.max(np.abs(z_scores))),
                             log_z_error=(selector.log_evidences_ - exact).tolist(),
                             log_z_std=selector.log_evidence_stds_.tolist()))
    return rows


def _time_stream(fit_chunk, X, chunk):
    tic = time.perf_counter()
    for start in range(0, len(X), chunk):
        fit_chunk(X[start:start + chunk])
    return time.perf_counter() - tic


def _warm_process(n_samples=10000, chunk=500):
    """Stream once through a mixture, untimed: the first stream in a fresh process runs up to 2x slower.

    Measured (cProfile, same calls): the first stream's array arithmetic is 2-3x slower, and with glibc's
    MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_/MALLOC_TOP_PAD_ raised it is not (5.2 -> 2.5 s), so it is
    the allocator returning freed memory to the system and faulting fresh pages in until its dynamic
    thresholds settle. Fresh joblib workers pay it too, which made the first n_jobs=2 stream slow.
    """
    X = make_mixture(n_samples, random_state=1).X
    _time_stream(BayesianMixture(3, random_state=1).partial_fit, X, chunk)
    return os.getpid()


def _start_workers(n_jobs):
    """Start joblib's worker pool and warm every worker and this process (one-off costs); returns seconds."""
    from joblib import Parallel, delayed

    tic = time.perf_counter()
    _warm_process()
    Parallel(n_jobs=n_jobs)(delayed(_warm_process)() for _ in range(n_jobs))
    return time.perf_counter() - tic


def cost_study(n_samples, chunk, repeats):
    rows = []
    X = make_mixture(n_samples, random_state=0).X
    startup = _start_workers(2)
    print(f"  warm-up of this process and the n_jobs=2 workers (not in the times below): {startup:.1f} s",
          flush=True)
    for k in (3, 5):
        for repeat in range(repeats):
            # One candidate's cost varies with its seed (whether a chunk triggers an excursion), so the
            # reference is the mean over 3 seeds, like the selector's 3 candidates.
            singles = [_time_stream(BayesianMixture(k, random_state=3 * repeat + i).partial_fit, X, chunk)
                       for i in range(3)]
            t_single = float(np.mean(singles))
            times = {}
            for n_jobs in (1, 2):
                selector = EvidenceModelSelector([(f"c{i}", BayesianMixture(k)) for i in range(3)], n_jobs=n_jobs,
                                                 random_state=repeat)
                times[n_jobs] = _time_stream(selector.partial_fit, X, chunk)
            rows.append(dict(candidate=f"BayesianMixture({k})", repeat=repeat, n=n_samples, chunk=chunk,
                             worker_startup_s=startup, single_seeds_s=singles,
                             single_s=t_single, selector_1job_s=times[1], selector_2jobs_s=times[2],
                             ratio_1job=times[1] / t_single, ratio_2jobs=times[2] / t_single))
            print(f"  K={k} repeat {repeat}: single {', '.join(f'{t:.1f}' for t in singles)} s (3 seeds), "
                  f"3 candidates n_jobs=1 {times[1]:.1f} s, "
                  f"n_jobs=2 {times[2]:.1f} s", flush=True)
    return rows


def shift_study(seeds, surprise_threshold=None, restarts=True, phases=(1000, 1500, 1500), chunk=250):
    rows = []
    for seed in seeds:
        fitted = {}
        for order in ("in order", "shuffled"):
            X = shift_stream(phases, shuffle=order == "shuffled", random_state=0).X
            selector = EvidenceModelSelector(
                [(f"K={k}", BayesianMixture(k, batch_size=chunk, n_replicates=2, surprise_threshold=surprise_threshold,
                                            restarts=restarts)) for k in (3, 5, 7)],
                shuffle=False, random_state=seed)  # the stream's own order (shuffled by shift_stream or not)
            tic = time.perf_counter()
            selector.fit(X)
            fitted[order] = (selector.log_evidences_, selector.log_evidence_stds_, time.perf_counter() - tic)
        (z_in, s_in, t_in), (z_sh, s_sh, t_sh) = fitted["in order"], fitted["shuffled"]
        three_errors = 3 * np.hypot(s_in, s_sh)
        rows.append(dict(seed=seed, surprise_threshold=surprise_threshold, restarts=restarts,
                         k=[3, 5, 7], log_z_in_order=z_in.tolist(),
                         std_in_order=s_in.tolist(), log_z_shuffled=z_sh.tolist(), std_shuffled=s_sh.tolist(),
                         shortfall=(z_sh - z_in).tolist(), three_errors=three_errors.tolist(),
                         agree=(np.abs(z_sh - z_in) < three_errors).tolist(), seconds_in_order=t_in,
                         seconds_shuffled=t_sh))
        print(f"  seed {seed}: shortfall {np.round(z_sh - z_in, 1)} nats, 3 errors {np.round(three_errors, 1)}, "
              f"{t_in:.0f} s in order, {t_sh:.0f} s shuffled", flush=True)
    return rows


def _full_shift_run(k, order, restarts):
    X = shift_stream(shuffle=order == "shuffled", random_state=0).X
    estimator = BayesianMixture(k, batch_size=250, restarts=restarts, shuffle=False, random_state=0)
    tic = time.perf_counter()
    estimator.fit(X)
    restarts_at = [r.n_samples_seen for r in estimator.evidence_history_ if r.n_replayed]
    return dict(k=k, order=order, restarts=restarts, log_z=estimator.log_evidence_, std=estimator.log_evidence_std_,
                groups=estimator.sgais_state_.log_evidence.tolist(), seconds=time.perf_counter() - tic,
                restarts_at=restarts_at)


def full_shift_study(restarts=True):
    runs = [(k, order) for order in ("in order", "shuffled") for k in (7, 5, 3)]
    results = Parallel(n_jobs=2)(delayed(_full_shift_run)(k, order, restarts or order == "shuffled")
                                 for k, order in runs)
    rows = []
    for k in (3, 5, 7):
        (in_order,), (shuffled,) = ([r for r in results if r["k"] == k and r["order"] == o]
                                    for o in ("in order", "shuffled"))
        three_errors = 3 * float(np.hypot(in_order["std"], shuffled["std"]))
        shortfall = shuffled["log_z"] - in_order["log_z"]
        rows.append(dict(k=k, in_order=in_order, shuffled=shuffled, shortfall=shortfall, three_errors=three_errors,
                         agree=abs(shortfall) < three_errors))
    return rows


def _print_markdown(header, cells):
    print("\n| " + " | ".join(header) + " |")
    print("|---" * len(header) + "|")
    for row in cells:
        print("| " + " | ".join(row) + " |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="+", choices=["mixture", "linear", "cost", "shift", "shift-full"],
                        default=["mixture", "linear", "cost"])
    parser.add_argument("--n-mixture", type=int, default=5000)
    parser.add_argument("--n-jobs", type=int, default=1, help="for the mixture study")
    parser.add_argument("--surprise-threshold", type=float, default=None, help="BayesianMixture's, for the shift study")
    parser.add_argument("--no-restart", action="store_true",
                        help="BayesianMixture(restarts=False) for the shift study: the excursion instead")
    parser.add_argument("--shift-seeds", type=int, default=3, help="seeds of the shift study (default: 3)")
    parser.add_argument("--save", action="store_true",
                        help="with --only shift: also write benchmarks/saved/selector_shift.json (the validation "
                             "page's source; clean commit, the study's default settings)")
    args = parser.parse_args(argv)
    if args.save:
        if args.only != ["shift"] or args.surprise_threshold is not None or args.no_restart:
            parser.error("--save saves the shift study at its default settings: use it with --only shift alone")
        require_clean_checkout(parser, "selector_shift")
    seeds = list(range(3 if args.quick else 5))
    out = {"argv": sys.argv[1:], "load_average": os.getloadavg()}

    if "mixture" in args.only:
        print(f"\n## Mixture K=1..7 on make_mixture (true K=5), N={args.n_mixture}", flush=True)
        rows = out["mixture"] = mixture_study(args.n_mixture, seeds, args.n_jobs)
        print("\n| seed | best K | gap K=5 (nats) | " + " | ".join(f"log Z K={k}" for k in range(1, 8)) + " | ok |")
        print("|---" * 11 + "|")
        for r in rows:
            cells = " | ".join(f"{z:.1f}±{s:.1f}" for z, s in zip(r["log_z"], r["std"]))
            print(f"| {r['seed']} | {r['best_k']} | {r['gap_to_k5']:.2f} | {cells} | {r['ok']} |")
        print(f"\nbest is K=5 or within error of it in {sum(r['ok'] for r in rows)} of {len(rows)} seeds")

    if "linear" in args.only:
        variances = [0.8, 0.9, 1.0, 1.1, 1.25]
        sizes = [1000, 10000] if args.quick else [1000, 10000, 100000]
        print(f"\n## Linear noise-variance candidates {variances} vs exact evidence", flush=True)
        rows = out["linear"] = linear_study(sizes, seeds, variances)
        print("\n| seed | N | SGAIS P(s2=1) | exact P(s2=1) | max abs diff | max |diff|/std | max |log Z err| |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['seed']} | {r['n']} | {r['p'][2]:.4f}±{r['p_std'][2]:.4f} | {r['p_exact'][2]:.4f} | "
                  f"{r['max_abs_diff']:.4f} | {r['max_z']:.2f} | {max(abs(e) for e in r['log_z_error']):.3f} |")

    if "cost" in args.only:
        n, chunk, repeats = (5000, 500, 1) if args.quick else (10000, 500, 2)
        print(f"\n## Cost of partial_fit: 3 candidates vs 1 ({n} rows, chunks of {chunk})", flush=True)
        rows = out["cost"] = cost_study(n, chunk, repeats)
        print("\n| candidate | single, mean of 3 seeds (s) | 3 cand., n_jobs=1 (s) | ratio "
              "| 3 cand., n_jobs=2 (s) | ratio |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['candidate']} | {r['single_s']:.2f} | {r['selector_1job_s']:.2f} | {r['ratio_1job']:.2f} | "
                  f"{r['selector_2jobs_s']:.2f} | {r['ratio_2jobs']:.2f} |")
    if "shift" in args.only:
        print("\n## Shift stream 3 -> 5 -> 7 clusters (1000/1500/1500 rows): in order vs shuffled, "
              f"surprise_threshold={args.surprise_threshold}, restarts={not args.no_restart}", flush=True)
        meta = run_metadata(sys.argv)
        rows = out["shift"] = shift_study(list(range(args.shift_seeds)), args.surprise_threshold, not args.no_restart)
        name = "selector_shift" + ("_no_restart" if args.no_restart else "") + (
            "" if args.surprise_threshold is None else f"_surprise{args.surprise_threshold:g}")
        shift = dict(meta=meta, rows=rows)
        paths = save_result(name, shift, args.save)
        print_tables("selector_shift", shift)
        print("wrote " + ", ".join(paths))
    if "shift-full" in args.only:
        print(f"\n## The paper's full shift stream (100,000 rows): in order (restarts={not args.no_restart}) vs "
              "shuffled", flush=True)
        rows = out["shift_full"] = full_shift_study(not args.no_restart)
        header = ["K", "log Z in order", "log Z shuffled", "shortfall (nats)", "3 errors", "agree",
                  "seconds in order, shuffled"]
        cells = [[str(r["k"]), f"{r['in_order']['log_z']:.1f} ± {r['in_order']['std']:.1f}",
                  f"{r['shuffled']['log_z']:.1f} ± {r['shuffled']['std']:.1f}", f"{r['shortfall']:.1f}",
                  f"{r['three_errors']:.1f}", str(r["agree"]),
                  f"{r['in_order']['seconds']:.0f}, {r['shuffled']['seconds']:.0f}"] for r in rows]
        _print_markdown(header, cells)
    out["load_average_end"] = os.getloadavg()
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    if os.path.exists(RESULTS):  # --only runs update their studies and keep the others
        with open(RESULTS) as fh:
            out = {**json.load(fh), **out}
    with open(RESULTS, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
