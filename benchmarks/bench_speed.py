"""Speed targets of the SGAIS estimators (issue 57), default parameters.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_speed.py [--seeds 5] \
        [--only linear softmax mixture mixture-2jobs mixture-norestarts mixture-1e6 loop demo choose-k]

Streams 1e6 linear rows, 1e5 softmax rows and 1e5 rows of the paper's mixture
(``BayesianMixture(5)``) through ``fit`` and reports wall and CPU seconds and
the median time per chunk at n ~ 1e4 and in the last 10% of the stream
(targets: <= 1.2 s, <= 3 s, <= 6 s, late/early <= 1.3); ``mixture-1e6`` streams 1e6 mixture rows (target:
<= 60 s; past the reservoir's 1e5 rows no restart runs); ``mixture-2jobs`` runs the
mixture's restart replays on two workers (``n_jobs=2``) and checks that it
gives the same evidence bits as ``mixture`` with the same seed;
``mixture-norestarts`` runs it with ``restarts=False`` and prints, beside the
default's, its time, evidence, error and failed checks, both scored against the
rows' reference evidence (what the periodic replays cost and what they change;
the reference adds about 10 s per seed). ``demo``: the
README's main job, ``evidence-select demo`` without its figure, in a fresh
process as a user runs it, ``--seeds`` times (target: <= 12 s wall, imports
and worker start-up included; CPU counts every process). ``loop``: the 1e6 linear
rows through a ``partial_fit`` loop in chunks of 500 against ``fit`` on the
same rows in the same order (``shuffle=False``), same seed (target: CPU and wall within 1.15x; the two give the same
bits). ``choose-k`` (issue 57): ``EvidenceModelSelector`` over ``BayesianMixture(K)``
for K = 1..5 on 1e5 paper rows, defaults, ``n_jobs=1`` and ``2`` (twice: with the workers to start, as a
session's first selection, then with them started), beside
scikit-learn's ``GaussianMixture(K, covariance_type="diag")`` + BIC and
``BayesianGaussianMixture(K)`` (the largest lower bound) on the same rows in the
same process: wall and CPU seconds (the selector's CPU counts its joblib
workers), the K each picks (the data have 5 components), the selector's passes
(per-datum evaluations per row per particle, summed over candidates; the floor
is one per candidate) and whether ``n_jobs=2`` gives the same evidence bits;
also the compiled kernels' first-call time in a fresh process with an empty
numba cache, and with the cache a first process wrote (target: the selector on
2 cores within 10x of GaussianMixture + BIC's wall). Run it on a quiet machine: wall time is what the targets mean, and it is
only comparable to CPU time when nothing else runs. Writes
``benchmarks/results/speed.json``.
"""

import argparse
import functools
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import CHECKOUT, PAPER_LINEAR, run_metadata, save_json  # noqa: E402  (also puts the checkout on the path)

import psutil  # noqa: E402  (the bench extra)
from joblib.externals.loky import get_reusable_executor  # noqa: E402

from evidence_select import (BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture,  # noqa: E402
                             EvidenceModelSelector)
from evidence_select.datasets import make_linear_regression, make_mixture, make_softmax_classification  # noqa: E402
from evidence_select.datasets import MIXTURE_WEIGHTS  # noqa: E402

CASES = [("linear", 1_000_000, make_linear_regression, functools.partial(BayesianLinearRegressor, **PAPER_LINEAR), 1.2),
         ("softmax", 100_000, make_softmax_classification, BayesianLogisticClassifier, 3.0),
         ("mixture", 100_000, make_mixture, functools.partial(BayesianMixture, 5), 6.0),
         # The same with its restarts' replicate groups on two workers (CPU s counts this process only).
         ("mixture-2jobs", 100_000, make_mixture, functools.partial(BayesianMixture, 5, n_jobs=2), 6.0),
         # Without restarts: what the periodic replays cost, and what their evidence adds (same seeds).
         ("mixture-norestarts", 100_000, make_mixture, functools.partial(BayesianMixture, 5, restarts=False), 6.0),
         # Ten times the rows.
         ("mixture-1e6", 1_000_000, make_mixture, functools.partial(BayesianMixture, 5), 60.0)]
#: What runs without --only: every case.
DEFAULT_CASES = [c[0] for c in CASES] + ["loop", "demo", "choose-k"]
LOOP_CHUNK, LOOP_TARGET = 500, 1.15
CHOOSE_K_ROWS, CHOOSE_K_MAX, CHOOSE_K_TARGET = 100_000, 5, 10.0  # the selector's wall within 10x of GMM + BIC's
DEMO_TARGET = 12.0  # seconds of wall for the README's main job, the first-call compile included


def time_fit(make, estimator, n, seed):
    data = make(n, random_state=seed)
    est = estimator(random_state=seed)
    cpu, wall = time.process_time(), time.perf_counter()
    est.fit(data.X, getattr(data, "y", None))  # the mixture's data have no targets
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    seconds = np.array([r.seconds for r in est.evidence_history_])
    seen = np.array([r.n_samples_seen for r in est.evidence_history_])
    window = seconds[(seen > 5000) & (seen <= 20000)]
    early = float(np.median(window)) if len(window) else float("nan")
    late = float(np.median(seconds[seen > 0.9 * n]))
    steps = int(sum(r.n_annealing_steps for r in est.evidence_history_))
    return dict(n=n, seed=seed, wall=wall, cpu=cpu, ms_per_chunk_1e4=1e3 * early, ms_per_chunk_late=1e3 * late,
                annealing_steps=steps, log_evidence=est.log_evidence_, log_evidence_std=est.log_evidence_std_,
                evidence_checks=list(est.evidence_checks_))


#: Importance draws of the mixture's reference: enough that its std (printed beside it) stays far below the
#: streams' errors, at a fraction of a stream's time.
REFERENCE_DRAWS = 4000


def compare_mixture_variants(rows):
    """Add to the rows, and print, how ``mixture-2jobs`` and ``mixture-norestarts`` compare with ``mixture`` per seed.

    With ``mixture-norestarts`` both are also scored against the rows' reference evidence (importance sampling
    at the best posterior mode, ``bench_coverage.py``'s reference for these streams), so the comparison says
    which of the two is nearer the truth, in nats and in each one's reported errors.
    """
    serial = {r["seed"]: r for r in rows if r["model"] == "mixture"}
    for row in (r for r in rows if r["model"] == "mixture-2jobs" and r["seed"] in serial):
        row["identical_to_one_job"] = bool(row["log_evidence"] == serial[row["seed"]]["log_evidence"])
        row["wall_ratio_to_one_job"] = row["wall"] / serial[row["seed"]]["wall"]
        print(f"mixture-2jobs seed {row['seed']}: wall {row['wall_ratio_to_one_job']:.2f}x one job's, "
              f"identical evidence: {row['identical_to_one_job']}")
    without = [r for r in rows if r["model"] == "mixture-norestarts" and r["seed"] in serial]
    if not without:
        return
    from bench_coverage import _paper_mixture_mode_reference  # the reference of the coverage suite's long streams
    print("\n| seed | restarts | wall s | log Z | +/- | failed checks | reference | error (nats) | error / +/- |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in without:
        default = serial[row["seed"]]
        value, std = _paper_mixture_mode_reference(make_mixture(row["n"], random_state=row["seed"]).X,
                                                   n_draws=REFERENCE_DRAWS)
        for restarts, scored in (("yes", default), ("no", row)):
            scored.update(reference_log_evidence=value, reference_std=std,
                          error=scored["log_evidence"] - value,
                          error_in_stds=(scored["log_evidence"] - value) / math.hypot(scored["log_evidence_std"], std))
            print(f"| {row['seed']} | {restarts} | {scored['wall']:.2f} | {scored['log_evidence']:.2f} | "
                  f"{scored['log_evidence_std']:.2f} | {', '.join(scored['evidence_checks']) or 'none'} | "
                  f"{value:.2f} +/- {std:.2f} | {scored['error']:+.2f} | {scored['error_in_stds']:+.2f} |")
        row["wall_ratio_to_restarts"] = row["wall"] / default["wall"]


def time_loop(n, seed):
    """``fit`` against a ``partial_fit`` loop in chunks of ``LOOP_CHUNK`` on the same linear rows, in the same
    order (``fit`` without its shuffle, which a loop of ``partial_fit`` calls does not do)."""
    data = make_linear_regression(n, random_state=seed)
    est = BayesianLinearRegressor(**PAPER_LINEAR, shuffle=False, random_state=seed)
    cpu, wall = time.process_time(), time.perf_counter()
    est.fit(data.X, data.y)
    fit_cpu, fit_wall, fit_z = time.process_time() - cpu, time.perf_counter() - wall, est.log_evidence_
    est = BayesianLinearRegressor(**PAPER_LINEAR, shuffle=False, random_state=seed)
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, n, LOOP_CHUNK):
        est.partial_fit(data.X[start:start + LOOP_CHUNK], data.y[start:start + LOOP_CHUNK])
    loop_cpu, loop_wall = time.process_time() - cpu, time.perf_counter() - wall
    return dict(n=n, seed=seed, fit_wall=fit_wall, fit_cpu=fit_cpu, loop_wall=loop_wall, loop_cpu=loop_cpu,
                cpu_ratio=loop_cpu / fit_cpu, wall_ratio=loop_wall / fit_wall,
                identical=bool(est.log_evidence_ == fit_z))


def time_demo(repeat):
    """The README's main job, ``evidence-select demo``, in a fresh process as a user runs it (no figure or bar)."""
    # This checkout's package, as in this process.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [CHECKOUT, os.environ.get("PYTHONPATH")])))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        done = subprocess.run([sys.executable, "-m", "evidence_select", "demo", "--no-plot", "--no-progress"],
                              cwd=directory, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    streamed = re.search(r"streamed in ([0-9.]+) s", done.stdout)
    return dict(repeat=repeat, wall=wall, streamed=float(streamed.group(1)) if streamed else float("nan"),
                cpu=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime))


def _process_cpu(process):
    """CPU seconds of ``process`` and of its live children (joblib's loky workers outlive each call)."""
    total = sum(process.cpu_times()[:2])
    for child in process.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:  # a worker that ended meanwhile
            pass
    return total


def _timed(call):
    """``(result, wall seconds, CPU seconds of this process and its children)`` of ``call()``."""
    process = psutil.Process()
    cpu, wall = _process_cpu(process), time.perf_counter()
    result = call()
    return result, time.perf_counter() - wall, _process_cpu(process) - cpu


def time_first_call():
    """Seconds of the mixture kernels' first calls in fresh processes (the package already imported): with an
    empty numba cache (numba's import and compilation), then with the cache the first one wrote (import, loading)."""
    code = ("import time; import numpy as np; from evidence_select.models import GaussianMixtureModel; "
            "m = GaussianMixtureModel(5, 2); th = m.sample_prior(np.random.default_rng(0), 4); X = np.zeros((10, 2)); "
            "t = time.perf_counter(); m.grad_log_joint(th, X, None, 1.0); m.log_likelihood_sum(th, X); "
            "m.grad_log_prior(th); print(time.perf_counter() - t)")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache,
                   PYTHONPATH=os.pathsep.join(filter(None, [CHECKOUT, os.environ.get("PYTHONPATH")])))
        return [float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                     check=True).stdout) for _ in range(2)]


def time_choose_k(seed):
    """The selector over K = 1..CHOOSE_K_MAX (n_jobs 1 and 2) and scikit-learn's two ways, on the same rows."""
    from sklearn.mixture import BayesianGaussianMixture, GaussianMixture

    X = make_mixture(CHOOSE_K_ROWS, random_state=seed).X
    ks = range(1, CHOOSE_K_MAX + 1)
    rows = []

    def gmm_bic():
        return [GaussianMixture(k, covariance_type="diag", random_state=seed).fit(X).bic(X) for k in ks]

    def bayesian_gmm():
        return [BayesianGaussianMixture(n_components=k, covariance_type="diag", random_state=seed).fit(X).lower_bound_
                for k in ks]

    bics, wall, cpu = _timed(gmm_bic)
    rows.append(dict(method="GaussianMixture diag + BIC", n_jobs=1, wall=wall, cpu=cpu, picked=int(np.argmin(bics)) + 1))
    bounds, wall, cpu = _timed(bayesian_gmm)
    rows.append(dict(method="BayesianGaussianMixture diag (lower bound)", n_jobs=1, wall=wall, cpu=cpu,
                     picked=int(np.argmax(bounds)) + 1))
    evidences = []
    # n_jobs=2 twice: first with the workers to start (as a first selection in a session), then with them started.
    for n_jobs, workers in ((1, ""), (2, "started by the call"), (2, "already started")):
        if workers == "started by the call":
            get_reusable_executor().shutdown(wait=True)
        selector = EvidenceModelSelector([(f"K={k}", BayesianMixture(k)) for k in ks], n_jobs=n_jobs,
                                         random_state=seed)
        _, wall, cpu = _timed(lambda: selector.fit(X))
        evidences.append(selector.log_evidences_)
        n_rows_particles = sum(CHOOSE_K_ROWS * e.n_particles * e.n_replicates for e in selector.estimators_)
        passes = sum(e.sgais_state_.n_datum_evaluations for e in selector.estimators_) / n_rows_particles
        rows.append(dict(method="EvidenceModelSelector(BayesianMixture(K))", n_jobs=n_jobs, workers=workers,
                         wall=wall, cpu=cpu, picked=int(selector.best_index_) + 1, passes=passes * len(ks),
                         probability=float(np.max(selector.model_probabilities_)),
                         log_evidences=selector.log_evidences_.tolist()))
        if n_jobs > 1:
            rows[-1]["identical_to_one_job"] = bool(np.array_equal(evidences[0], evidences[-1]))
    for row in rows:
        row.update(seed=seed, true_k=len(MIXTURE_WEIGHTS), right=row["picked"] == len(MIXTURE_WEIGHTS),
                   wall_ratio_to_bic=row["wall"] / rows[0]["wall"])
    return rows


def run_choose_k(seeds):
    """``time_choose_k`` rows and the first-call times, printed as tables."""
    first, cached = time_first_call()
    print(f"\nmixture kernels' first call in a fresh process: {first:.2f} s with an empty numba cache "
          f"(numba import + compile), {cached:.2f} s with the cache (numba import + load)")
    print(f"\n| choose K = 1..{CHOOSE_K_MAX}, {CHOOSE_K_ROWS:.0e} paper rows | seed | n_jobs | wall s | CPU s | "
          "wall / BIC's | picked K (true 5) | passes | same bits as n_jobs=1 |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for seed in range(seeds):
        for row in time_choose_k(seed):
            rows.append(row)
            passes = f"{row['passes']:.1f}" if "passes" in row else ""
            same = str(row.get("identical_to_one_job", ""))
            jobs = f"{row['n_jobs']}" + (f" (workers {row['workers']})" if row.get("workers") else "")
            print(f"| {row['method']} | {seed} | {jobs} | {row['wall']:.2f} | {row['cpu']:.2f} | "
                  f"{row['wall_ratio_to_bic']:.1f} | {row['picked']} | {passes} | {same} |", flush=True)
    for workers in ("started by the call", "already started"):
        two_jobs = [r["wall_ratio_to_bic"] for r in rows if r.get("workers") == workers]
        print(f"choose-k: selector (n_jobs=2, workers {workers}) median wall {np.median(two_jobs):.1f}x "
              f"GaussianMixture + BIC's (target {CHOOSE_K_TARGET:g}x)")
    return dict(first_call_seconds=first, cached_first_call_seconds=cached, rows=rows)


def run_fits(cases, seeds):
    """``time_fit`` rows of every case and seed, printed as a table with each case's medians."""
    rows = []
    if not cases:
        return rows
    print("| model | N | seed | wall s | CPU s | target s | ms/chunk n~1e4 | ms/chunk late | annealing steps |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, n, make, estimator, target in cases:
        for seed in range(seeds):
            row = dict(model=name, target_seconds=target, **time_fit(make, estimator, n, seed))
            rows.append(row)
            print(f"| {name} | {n:.0e} | {seed} | {row['wall']:.2f} | {row['cpu']:.2f} | {target:g} | "
                  f"{row['ms_per_chunk_1e4']:.2f} | {row['ms_per_chunk_late']:.2f} | {row['annealing_steps']} |",
                  flush=True)
    for name, _, _, _, target in cases:
        walls = [r["wall"] for r in rows if r["model"] == name]
        cpus = [r["cpu"] for r in rows if r["model"] == name]
        print(f"{name}: median wall {np.median(walls):.2f} s, CPU {np.median(cpus):.2f} s (target {target:g} s)")
    compare_mixture_variants(rows)
    return rows


def run_loops(seeds):
    """``time_loop`` rows, printed as a table with the median CPU ratio."""
    loops = []
    print(f"\n| partial_fit loop (chunks of {LOOP_CHUNK}) vs fit, linear 1e6 | seed | fit wall s | fit CPU s | "
          "loop wall s | loop CPU s | CPU ratio | wall ratio | identical |")
    print("|---|---|---|---|---|---|---|---|---|")
    for seed in range(seeds):
        row = time_loop(1_000_000, seed)
        loops.append(row)
        print(f"| | {seed} | {row['fit_wall']:.2f} | {row['fit_cpu']:.2f} | {row['loop_wall']:.2f} | "
              f"{row['loop_cpu']:.2f} | {row['cpu_ratio']:.3f} | {row['wall_ratio']:.3f} | {row['identical']} |",
              flush=True)
    print(f"loop: median CPU ratio {np.median([r['cpu_ratio'] for r in loops]):.3f} (target {LOOP_TARGET})")
    return loops


def run_demos(repeats):
    """``time_demo`` rows, printed as a table with the median wall."""
    demos = []
    print("\n| README demo (fresh process) | repeat | wall s | streamed s | CPU s (all processes) | target s |")
    print("|---|---|---|---|---|---|")
    for repeat in range(repeats):
        row = time_demo(repeat)
        demos.append(row)
        print(f"| | {repeat} | {row['wall']:.1f} | {row['streamed']:.1f} | {row['cpu']:.1f} | {DEMO_TARGET:g} |",
              flush=True)
    print(f"demo: median wall {np.median([r['wall'] for r in demos]):.1f} s (target {DEMO_TARGET:g} s)")
    return demos


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="seeds per case; also the loop's, and the demo's repeats")
    parser.add_argument("--only", nargs="+", choices=[c[0] for c in CASES] + ["loop", "demo", "choose-k"],
                        default=DEFAULT_CASES)
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "results", "speed.json"))
    args = parser.parse_args(argv)
    print(f"load average at start {os.getloadavg()} on {os.cpu_count()} cores")
    rows = run_fits([case for case in CASES if case[0] in args.only], args.seeds)
    loops = run_loops(args.seeds) if "loop" in args.only else []
    demos = run_demos(args.seeds) if "demo" in args.only else []
    choose_k = run_choose_k(args.seeds) if "choose-k" in args.only else {}
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"load average at end {os.getloadavg()}")
    save_json(args.output, dict(run_metadata(sys.argv), rows=rows, loops=loops, demos=demos, choose_k=choose_k,
                                peak_rss_mb=peak_rss_mb, load_average_end=os.getloadavg()))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
