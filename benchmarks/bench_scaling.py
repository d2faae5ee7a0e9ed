"""Scaling of EvidenceModelSelector with candidates and workers (issues 17 and 60).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_scaling.py            # ~10 min on a quiet 2-core machine
    OMP_NUM_THREADS=1 python benchmarks/bench_scaling.py --quick    # fewer rows, candidates up to 8
    OMP_NUM_THREADS=1 python benchmarks/bench_scaling.py --only mixture --repeats 3   # medians of 3 rounds
    OMP_NUM_THREADS=1 python benchmarks/bench_scaling.py --only mixture --candidates 4 8   # the nested case

1. ``grid``: 1, 2, 4, 8, 16 ``BayesianLinearRegressor`` candidates (noise
   variances 0.5..2) streamed with ``partial_fit`` in chunks of 500, on joblib
   (``n_jobs`` 1 and 2) and on dask (``parallel="dask"``, ``LocalCluster`` of 1
   and 2 worker processes, 1 thread each, dask's default worker environment).
   Wall and CPU seconds (this process plus its worker processes), wall relative
   to ``n_jobs=1`` with the same candidates, and "passes": the SGAIS CPU time
   per candidate divided by the time of one log-likelihood evaluation of every
   row for every particle (the cost floor of any method that looks at all the
   data once).
2. ``mixture``: 4 ``BayesianMixture`` candidates (K = 2, 3, 5, 7) on the
   paper's mixture data, 4500 rows in chunks of 500 (``--quick``: 1500), then 8
   and 16 candidates (the same K, each with 2 or 4 weight concentrations;
   ``--candidates``) on the same 2 workers. Executors: ``n_jobs`` 1 and 2,
   ``parallel="dask"`` (2 workers, 1 thread each), scikit-learn's way to use
   dask (``joblib.parallel_config(backend="dask")`` around ``n_jobs=2`` on the
   same cluster: every candidate's update a dask task, its restarts' replays run
   inside that task), and dask with quiet workers (:data:`QUIET_WORKERS`: no
   statistical profiler, an event-loop health check every second; what dask's
   own periodic machinery costs these Python-heavy updates). Targets (issues 17 and
   60), for every candidate count: ``n_jobs=2`` <= 0.6x, ``parallel="dask"`` <=
   0.65x and the joblib dask backend <= 0.75x the ``n_jobs=1`` wall; a stalled
   executor would never return, so each run has a deadline (``--deadline``, in
   multiples of the ``n_jobs=1`` wall) after which it is reported as stalled and
   the study goes on. The machine's own limit is measured too: one mixture fit
   run next to a copy of itself, against alone. Printed beside the timings: the
   wall the best fixed placement of these candidates and the best placement
   chosen anew for each call allow (:func:`placement_bounds`, from the calls'
   measured update times; up to 8 candidates), since each call ends when its busiest
   worker does. A last table says where each run's time went: the candidates' update
   seconds summed over its calls, as measured where they ran, against the ``n_jobs=1``
   sum (an update slowed down by what shares its worker), and this process's CPU
   seconds (the caller and a LocalCluster's scheduler, which compete with the workers
   for the cores).
3. ``shipping``: what joblib's copies cost. 4 linear candidates streamed to
   ``--shipping-rows`` rows (their reservoirs full), then one more call with
   chunks of 500, 5000 and 50000 rows on each executor (3 repeats, best): time
   per row against ``n_jobs=1``. Each joblib call sends every candidate's state
   (reservoir included) to a worker and back; dask keeps them where they are.
   The timed call always goes to the workers: the grid shows what a user gets,
   where the selector runs calls that the workers do not speed up in-process.
4. ``allocator``: one ``BayesianMixture(5)`` stream (the mixture case's rows)
   in a fresh process, with this environment and with the one dask's nanny
   gives its workers (``distributed.nanny.pre-spawn-environ``, which sets
   ``MALLOC_TRIM_THRESHOLD_`` and so pins glibc's mmap threshold): CPU seconds
   and minor page faults of the stream, alternating, medians of ``--repeats``
   (at least 2). The engine should not care which allocator settings it gets.

Every configuration's log evidences are compared bit for bit with ``n_jobs=1``
("identical"). Wall-time ratios only mean something on a quiet machine: the
load average at start and end is printed and saved. Each executor streams once
untimed first (worker start-up and imports are not part of a stream's cost).
Writes ``benchmarks/results/scaling.json``.
"""

import argparse
import contextlib
import itertools
import json
import os
import resource
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import run_metadata, save_json  # noqa: E402  (benchmarks/; also puts the checkout on the path)

from evidence_select import (BayesianLinearRegressor, BayesianMixture, EvidenceConvergenceWarning,  # noqa: E402
                             EvidenceModelSelector, SamplerDegeneracyWarning)
from evidence_select.datasets import make_linear_regression, make_mixture  # noqa: E402
from evidence_select.selection import _selector  # noqa: E402
from evidence_select.selection._distributed import JoblibPayoff  # noqa: E402

CHUNK = 500
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "scaling.json")


def cpu_times():
    """CPU seconds of this process and of each of its descendants (loky and dask worker processes), by pid."""
    times = {os.getpid(): time.process_time()}
    for child in psutil.Process().children(recursive=True):
        try:
            spent = child.cpu_times()
            times[child.pid] = spent.user + spent.system
        except psutil.Error:  # exited meanwhile
            pass
    return times


def cpu_seconds_since(before):
    """CPU seconds spent since the :func:`cpu_times` snapshot ``before`` by this process and its descendants.

    Process by process: a worker process that was counted in ``before`` and has exited since (the last executor's,
    shutting down) would otherwise subtract its whole lifetime's CPU from the run's.
    """
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in cpu_times().items())


#: The dask settings of the "quiet workers" executor (:class:`Executor`).
QUIET_WORKERS = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s"}


class Executor:
    """One way of running the candidates: joblib with ``n_jobs``, dask with a LocalCluster of ``n_workers``
    (``parallel="dask"``), or joblib's dask backend on such a cluster (``"joblib-dask"``: ``n_jobs`` in a
    ``joblib.parallel_config(backend="dask")``, the way scikit-learn's ``n_jobs`` estimators use dask).

    ``quiet=True`` starts the dask workers without their statistical profiler (dask's default samples the running
    task's stack every 10 ms) and with their event loops' health check every second instead of every 20 ms
    (``distributed.admin.tick.interval``): each wakes a thread that takes the GIL from the update, which on a
    machine with no core to spare also waits for a core. It measures what dask's periodic machinery costs our
    updates.
    """

    def __init__(self, kind, n_workers, quiet=False):
        self.kind, self.n_workers, self.quiet = kind, n_workers, quiet
        self.name = f"{kind} x{n_workers}" + (", quiet workers" if quiet else "")
        self._cluster = self._client = None

    def __enter__(self):
        if self.kind in ("dask", "joblib-dask"):
            import dask
            from distributed import Client, LocalCluster

            settings = QUIET_WORKERS if self.quiet else {}
            with dask.config.set(settings):
                self._cluster = LocalCluster(n_workers=self.n_workers, threads_per_worker=1, processes=True,
                                             dashboard_address=None)
                self._client = Client(self._cluster)
            got = self._client.run(lambda: {key: dask.config.get(key) for key in settings})
            assert all(value == settings for value in got.values()), got  # the workers got the settings
        return self

    def __exit__(self, *exc):
        if self._client is not None:
            self._client.close()
            self._cluster.close()

    def params(self):
        return dict(parallel="dask") if self.kind == "dask" else dict(n_jobs=self.n_workers)

    def context(self):
        """The joblib context a stream runs in (thread-local: entered by the thread that streams)."""
        from joblib import parallel_config

        return parallel_config(backend="dask") if self.kind == "joblib-dask" else contextlib.nullcontext()


def stream(candidates, X, y, executor):
    """``(selector, wall, cpu)`` of streaming ``X`` through a fresh selector in chunks of ``CHUNK``."""
    selector = EvidenceModelSelector(candidates, random_state=0, **executor.params())
    cpu, wall = cpu_times(), time.perf_counter()
    with executor.context():
        for start in range(0, len(X), CHUNK):
            stop = start + CHUNK
            selector.partial_fit(X[start:stop]) if y is None else selector.partial_fit(X[start:stop], y[start:stop])
    return selector, time.perf_counter() - wall, cpu_seconds_since(cpu)


def stream_within(seconds, *args):
    """:func:`stream`, or None when it has not returned after ``seconds`` (a stall: it runs in a daemon thread,
    which the executor's cluster closing then ends)."""
    outcome = {}

    def run():
        try:
            outcome["value"] = stream(*args)
        except BaseException as exc:  # raised again in the calling thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def one_pass_seconds(estimator, X, y):
    """Time of one log-likelihood evaluation of every row of ``(X, y)`` for every particle (best of 3)."""
    model, particles = estimator.model_, estimator.particles_
    best = np.inf
    for _ in range(3):
        tic = time.process_time()
        model.log_likelihood(particles, X, y)
        best = min(best, time.process_time() - tic)
    return best


def linear_candidates(n):
    return [(f"s2={v:.3f}", BayesianLinearRegressor(noise_variance=v, prior_scale=1.0))
            for v in np.geomspace(0.5, 2.0, n)]


def mixture_candidates(n=4):
    """``n`` (a multiple of 4) mixtures: K = 2, 3, 5, 7, each with ``n / 4`` weight concentrations."""
    return [(f"K={k},a={a:g}", BayesianMixture(k, weight_concentration=a))
            for a in np.geomspace(1.0, 0.5 ** (n // 4 - 1), n // 4) for k in (2, 3, 5, 7)]


@contextlib.contextmanager
def recorded_update_seconds():
    """Collect each selector call's per-candidate update times (the summaries' ``seconds``) into a list of rows.

    Wraps the selector's ``advance_candidates`` for the duration (a few microseconds per call).
    """
    calls, advance = [], _selector.advance_candidates

    def recording(*args, **kwargs):
        fitted, summaries, payoff = advance(*args, **kwargs)
        calls.append([summary.seconds for summary in summaries])
        return fitted, summaries, payoff

    _selector.advance_candidates = recording
    try:
        yield calls
    finally:
        _selector.advance_candidates = advance


def placement_bounds(seconds, n_workers):
    """Summed per-call maxima of the workers' update times ``(fixed, per_call)`` for ``seconds`` (calls x candidates).

    Each call ends when its busiest worker does. ``fixed``: the best placement kept for the whole stream (what
    resident candidates can reach); ``per_call``: the best placement chosen anew for every call (which moves
    states; joblib's longest-first dispatch approaches it). No dask or joblib overhead is in either.
    """
    seconds = np.asarray(seconds, dtype=float)
    maxima = []
    for placement in itertools.product(range(n_workers), repeat=seconds.shape[1]):
        loads = np.zeros((len(seconds), n_workers))
        for k, worker in enumerate(placement):
            loads[:, worker] += seconds[:, k]
        maxima.append(loads.max(axis=1))
    maxima = np.array(maxima)
    return float(maxima.sum(axis=1).min()), float(maxima.min(axis=0).sum())


def shipping(executors, n_rows, chunks=(500, 5000, 50000), repeats=3):
    """Time per row of one call with chunks of ``chunks`` rows after ``n_rows`` rows, per executor."""
    import copy

    data = make_linear_regression(n_rows + max(chunks), random_state=0)
    warm = EvidenceModelSelector(linear_candidates(4), random_state=0, n_jobs=1)
    for start in range(0, n_rows, 5000):
        warm.partial_fit(data.X[start:start + 5000], data.y[start:start + 5000])
    rows, reference = [], {}
    for executor in executors:
        with executor:
            for chunk in chunks:
                X, y = data.X[n_rows:n_rows + chunk], data.y[n_rows:n_rows + chunk]
                best = np.inf
                for _ in range(repeats):
                    selector = copy.deepcopy(warm).set_params(**executor.params())
                    selector.partial_fit(X[:10], y[:10])  # places the candidates (dask) or starts the workers
                    # The study measures the copies: the timed call goes to the workers even where the selector
                    # would run it in this process (an untried JoblibPayoff: see use_joblib_workers).
                    selector._joblib_payoff = JoblibPayoff()
                    tic = time.perf_counter()
                    selector.partial_fit(X, y)
                    best = min(best, time.perf_counter() - tic)
                reference.setdefault(chunk, best)
                rows.append(dict(executor=executor.name, rows_seen=n_rows, chunk=chunk, ms_per_call=1e3 * best,
                                 us_per_row=1e6 * best / chunk, ratio=best / reference[chunk]))
                print(f"| {executor.name} | {n_rows} | {chunk} | {1e3 * best:.1f} | {1e6 * best / chunk:.2f} | "
                      f"{best / reference[chunk]:.2f} |", flush=True)
    return rows


def grid(executors, counts, n_rows):
    data = make_linear_regression(n_rows, random_state=0)
    rows, reference = [], {}
    for executor in executors:
        with executor:
            stream(linear_candidates(2), data.X[:2 * CHUNK], data.y[:2 * CHUNK], executor)  # warm-up
            for n in counts:
                selector, wall, cpu = stream(linear_candidates(n), data.X, data.y, executor)
                if executor.name == "joblib x1":
                    reference[n] = (selector.log_evidences_, wall)
                    floor = one_pass_seconds(selector.estimators_[0], data.X, data.y)
                    passes = cpu / n / floor
                else:
                    passes = float("nan")
                z_ref, wall_ref = reference[n]
                rows.append(dict(executor=executor.name, candidates=n, rows=n_rows, wall=wall, cpu=cpu,
                                 wall_ratio=wall / wall_ref, passes=passes,
                                 identical=bool(np.array_equal(selector.log_evidences_, z_ref)),
                                 load=os.getloadavg()[0]))
                print_row(rows[-1])
    return rows


#: Wall-time targets of the mixture study, as fractions of the ``n_jobs=1`` wall (issues 17 and 60).
MIXTURE_TARGETS = {"joblib x2": 0.6, "dask x2": 0.65, "joblib-dask x2": 0.75}


def mixture(executors, n_rows, repeats, counts, deadline):
    """Each candidate count of ``counts``, each executor in turn, ``repeats`` rounds; each round's ratios are to
    its own ``n_jobs=1`` wall (a shared machine's load drifts between rounds), and a last row per executor gives
    the median over rounds. Each row keeps its calls' per-candidate update times and, for up to 8 candidates, their
    :func:`placement_bounds` on 2 workers (on dask, the times measured on the workers). A run that has not ended
    after ``deadline`` times the round's ``n_jobs=1`` wall is reported as stalled."""
    X = make_mixture(n_rows, random_state=0).X
    # The study times the executors; the candidates' accuracy warnings (the same on each) would only bury the table.
    for category in (EvidenceConvergenceWarning, SamplerDegeneracyWarning):
        warnings.filterwarnings("ignore", category=category)
    rows = []
    for n in counts:
        for round_ in range(repeats):
            reference = None
            for executor in executors:
                rows.append(mixture_row(executor, n, X, reference, deadline, round_))
                if reference is None:
                    reference = (rows[-1]["log_evidences"], rows[-1]["wall"])
                print_row(rows[-1])
        if repeats > 1:
            rows += median_rows(rows, executors, n, repeats)
    return rows


def mixture_row(executor, n, X, reference, deadline, round_):
    """One timed stream of ``n`` mixture candidates on ``executor`` (the first of a round is the reference)."""
    with executor, recorded_update_seconds() as update_seconds:
        stream(mixture_candidates(4)[:2], X[:CHUNK], None, executor)  # warm-up
        del update_seconds[:]
        timeout = None if reference is None else deadline * reference[1]
        own_cpu = time.process_time()
        done = stream_within(timeout, mixture_candidates(n), X, None, executor)
        own_cpu = time.process_time() - own_cpu
    row = dict(executor=executor.name, candidates=n, rows=len(X), passes=float("nan"), load=os.getloadavg()[0],
               round=round_, target=MIXTURE_TARGETS.get(executor.name), update_seconds=update_seconds,
               own_cpu=own_cpu)
    if done is None:
        return dict(row, wall=float("nan"), cpu=float("nan"), wall_ratio=float("nan"), identical=False,
                    stalled=True, log_evidences=None)
    selector, wall, cpu = done
    if n <= 8:  # every placement of the candidates on 2 workers: 2 ** n of them
        bounds = placement_bounds(update_seconds, n_workers=2)
        row["placement_bounds"] = dict(zip(("fixed", "per_call"), bounds))
        if reference is None:
            print_placement_bounds(bounds, wall)
    z_ref, wall_ref = reference or (selector.log_evidences_, wall)
    return dict(row, wall=wall, cpu=cpu, wall_ratio=wall / wall_ref, stalled=False,
                identical=bool(np.array_equal(selector.log_evidences_, z_ref)),
                log_evidences=selector.log_evidences_.tolist())


def print_update_costs(rows):
    """Where each mixture run's time went: the candidates' update seconds summed over its calls (measured where
    they ran: in this process, in loky workers or on dask workers) against its round's ``n_jobs=1`` sum, and the
    CPU seconds of this process, which holds the caller and, for a LocalCluster, dask's scheduler.

    An update that costs more on a worker than in this process pays for what shares that worker's process and the
    machine's cores (on dask: the worker's event loop and profiler, which take the interpreter's lock from it, its
    nanny, and the scheduler in this process, whose CPU competes with the workers for the cores).
    """
    print("\nWhere the time went (mixture study): update seconds summed over the calls, and this process's CPU\n")
    print("| executor | candidates | round | updates s | / n_jobs=1's | this process CPU s |")
    print("|---|---|---|---|---|---|")
    reference = {}
    for row in rows:
        if row["round"] == "median" or row.get("stalled"):
            continue
        total = float(sum(map(sum, row["update_seconds"])))
        key = (row["candidates"], row["round"])
        reference.setdefault(key, total)  # each round's first run is n_jobs=1
        row["update_total"] = total
        print(f"| {row['executor']} | {row['candidates']} | {row['round']} | {total:.2f} | "
              f"{total / reference[key]:.2f} | {row['own_cpu']:.2f} |")


def median_rows(rows, executors, n, repeats):
    """A row per executor with the medians of its ``repeats`` rounds with ``n`` candidates."""
    out = []
    for executor in executors:
        mine = [row for row in rows if row["executor"] == executor.name and row["candidates"] == n]
        median = {key: float(np.median([row[key] for row in mine])) for key in ("wall", "cpu", "wall_ratio")}
        out.append(dict(mine[0], **median, executor=f"{executor.name} (median of {repeats})",
                        identical=all(row["identical"] for row in mine), load=os.getloadavg()[0], round="median",
                        stalled=any(row["stalled"] for row in mine)))
        print_row(out[-1])
    return out


def print_placement_bounds(bounds, wall, n_workers=2):
    fixed, per_call = bounds
    print(f"placement: these calls' update times (n_jobs=1) leave {fixed:.2f} s of per-call maxima on {n_workers} "
          f"workers with the best fixed placement ({fixed / wall:.2f}x the n_jobs=1 wall, before any executor's "
          f"overhead) and {per_call:.2f} s ({per_call / wall:.2f}x) with the best placement chosen anew each call")


def _timed_fit(X):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tic = time.process_time()
        BayesianMixture(3, random_state=0).fit(X)
        return time.process_time() - tic


def side_by_side_slowdown(X, repeats=2):
    """CPU time of one mixture fit run next to a copy of itself, over its time alone (both in loky workers).

    The machine's own limit on parallel speed-up (shared caches, memory bandwidth, clock): no executor on 2
    workers can beat ``slowdown / 2`` of the one-worker wall.
    """
    from joblib import Parallel, delayed

    alone, paired = [], []
    with Parallel(n_jobs=2) as parallel:
        parallel(delayed(_timed_fit)(X[:CHUNK]) for _ in range(2))  # start the workers
        for _ in range(repeats):
            alone += parallel(delayed(_timed_fit)(X) for _ in range(1))
            paired += parallel(delayed(_timed_fit)(X) for _ in range(2))
    return float(np.median(paired) / np.median(alone))


def allocator_child():
    """Stream the allocator study's mixture in this process; print its CPU seconds and minor page faults."""
    import warnings

    X = make_mixture(4500, random_state=0).X
    estimator = BayesianMixture(5, random_state=0)
    before = resource.getrusage(resource.RUSAGE_SELF)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for start in range(0, len(X), CHUNK):
            estimator.partial_fit(X[start:start + CHUNK])
    after = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps(dict(cpu=after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                          system=after.ru_stime - before.ru_stime, minor_faults=after.ru_minflt - before.ru_minflt,
                          log_evidence=estimator.log_evidence_)))


def allocator(repeats):
    """The allocator study: the same stream in fresh processes with this environment and with dask's workers'."""
    import dask
    import distributed  # noqa: F401  (registers the distributed.* settings)

    nanny = {key: str(value) for key, value in dask.config.get("distributed.nanny.pre-spawn-environ").items()}
    environments = {"this process's": dict(os.environ), "dask worker's": dict(os.environ, **nanny)}
    runs = {name: [] for name in environments}
    for _ in range(max(repeats, 2)):
        for name, env in environments.items():
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--allocator-child"], env=env,
                                  capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("| environment | CPU s | system s | minor page faults | identical |")
    print("|---|---|---|---|---|")
    reference = runs["this process's"][0]["log_evidence"]
    rows = []
    for name, mine in runs.items():
        row = dict(environment=name, extra=nanny if name == "dask worker's" else {},
                   **{key: float(np.median([run[key] for run in mine])) for key in ("cpu", "system", "minor_faults")},
                   identical=all(run["log_evidence"] == reference for run in mine), runs=mine)
        rows.append(row)
        print(f"| {name} | {row['cpu']:.2f} | {row['system']:.2f} | {row['minor_faults']:.0f} | {row['identical']} |")
    return rows


def print_header(title):
    print(f"\n{title}\n")
    print("| executor | candidates | rows | wall s | CPU s | wall / n_jobs=1 | passes | identical | load |")
    print("|---|---|---|---|---|---|---|---|---|")


def print_row(row):
    passes = "" if np.isnan(row["passes"]) else f"{row['passes']:.0f}"
    if row.get("stalled"):
        print(f"| {row['executor']} | {row['candidates']} | {row['rows']} | stalled | | | | | {row['load']:.1f} |",
              flush=True)
        return
    target = row.get("target")
    met = "" if target is None else f" ({'met' if row['wall_ratio'] <= target else 'MISSED'}: <= {target})"
    print(f"| {row['executor']} | {row['candidates']} | {row['rows']} | {row['wall']:.2f} | {row['cpu']:.2f} | "
          f"{row['wall_ratio']:.2f}{met} | {passes} | {row['identical']} | {row['load']:.1f} |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="+", choices=["grid", "mixture", "shipping", "allocator"],
                        default=["grid", "mixture", "shipping", "allocator"])
    parser.add_argument("--allocator-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--shipping-rows", type=int, default=100_000,
                        help="rows streamed before the shipping study's timed call")
    parser.add_argument("--repeats", type=int, default=1,
                        help="rounds of the mixture case and the allocator study (median reported)")
    parser.add_argument("--candidates", type=int, nargs="+", default=[4, 8, 16], choices=[4, 8, 12, 16],
                        help="candidate counts of the mixture study")
    parser.add_argument("--deadline", type=float, default=3.0,
                        help="a mixture run not done after this many n_jobs=1 walls is reported as stalled")
    parser.add_argument("--output", default=RESULTS)
    args = parser.parse_args(argv)
    if args.allocator_child:
        return allocator_child()
    meta = run_metadata(sys.argv)
    print(f"machine: {meta['machine']}, {os.cpu_count()} cores, load average at start "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}; BLAS threads {meta['threads']}")
    executors = [Executor("joblib", 1), Executor("joblib", 2), Executor("dask", 1), Executor("dask", 2)]
    out = dict(meta)
    if "grid" in args.only:
        print_header("Linear candidates (grid)")
        out["grid"] = grid(executors, (1, 2, 4, 8) if args.quick else (1, 2, 4, 8, 16),
                           5000 if args.quick else 20000)
    if "mixture" in args.only:
        print_header(f"{', '.join(map(str, args.candidates))} BayesianMixture candidates on 2 workers (targets: "
                     + ", ".join(f"{name} <= {target}" for name, target in MIXTURE_TARGETS.items()) + ")")
        out["mixture"] = mixture([executors[0], executors[1], executors[3], Executor("joblib-dask", 2),
                                  Executor("dask", 2, quiet=True)],
                                 1500 if args.quick else 4500, args.repeats, args.candidates, args.deadline)
        print_update_costs(out["mixture"])
        out["side_by_side_slowdown"] = side_by_side_slowdown(make_mixture(1500, random_state=1).X)
        print(f"\nmachine: a mixture fit run next to a copy of itself takes {out['side_by_side_slowdown']:.2f}x its "
              f"CPU time alone, so no 2-worker run can beat {out['side_by_side_slowdown'] / 2:.2f}x the n_jobs=1 wall")
    if "shipping" in args.only:
        print("\nShipping: one call of 4 linear candidates after their reservoirs filled\n")
        print("| executor | rows seen | chunk | ms per call | us per row | / n_jobs=1 |")
        print("|---|---|---|---|---|---|")
        out["shipping"] = shipping([executors[0], executors[1], executors[3]],
                                   20_000 if args.quick else args.shipping_rows)
    if "allocator" in args.only:
        print("\nAllocator: one BayesianMixture(5) stream of 4500 rows in a fresh process (medians)\n")
        out["allocator"] = allocator(args.repeats)
    out["load_average_end"] = os.getloadavg()
    print(f"\nload average at end {', '.join(f'{v:.2f}' for v in out['load_average_end'])} on {os.cpu_count()} cores")
    save_json(args.output, out)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
