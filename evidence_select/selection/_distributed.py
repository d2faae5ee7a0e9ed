"""Where a selector's candidates are advanced: in joblib jobs, or resident on dask.distributed workers.

Both paths take the candidates and one call's data and return the advanced
candidates with a :class:`CandidateSummary` each, which is all the selector
needs to update its evidences and history.

- ``parallel="joblib"``: every call ships each candidate to a joblib job and
  back (loky workers pickle it both ways). A call runs in this process
  instead, one candidate after another, when the last call's update times and
  the overhead the workers' last call measured predict that the workers would
  take longer (cheap candidates, small chunks: :func:`use_joblib_workers`).
- ``parallel="dask"``: each candidate lives on a dask worker between calls. A
  call scatters the chunk once to the workers, runs each candidate's update as
  a task pinned to a worker (the input is the candidate's previous future, so a
  candidate that stays puts nothing on the wire), and gathers only the small
  summaries. :class:`ResidentCandidates` fetches the fitted candidates
  themselves on first access (predictions, pickling, ``estimators_[k]``).
  Candidates are placed round-robin; each call starts them where their update
  times so far split the work evenly (:func:`planned_homes`), and a worker that
  runs out of its own candidates takes the ones still waiting elsewhere, and a
  call's last candidates go to whichever worker frees first
  (:func:`_dispatch`): a moved candidate's state travels once and stays at its
  new worker. A worker's candidates run one after another, each task waiting
  for the one before it there; when every worker is a one-thread process of its
  own, a candidate's restart shares its replicate groups with the cluster's
  idle threads (:func:`~evidence_select.utils._nested.granted_cluster`).

Wherever a candidate runs, the parallel work it starts itself follows the
nested-parallelism rule of :mod:`~evidence_select.utils._nested`.
"""

import contextlib
import copy
import itertools
import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from joblib import delayed

from ..evidence._api import log_evidence
from .._result import failed_checks
from ..utils._nested import InnerPool, aligned, granted_cluster, inner_pool
from ._streaming import evidence_step_rows
from ..utils._threads import single_threaded_blas
from ..utils._warnings import recorded_warnings, warn

__all__ = ["CandidateSummary", "JoblibPayoff", "ResidentCandidates", "ResidentNamedCandidates", "advance_candidates",
           "candidate_pool", "after_joblib_call", "aligned", "first_fit_size", "longest_first", "longest_first_resident",
           "parallel_seconds", "planned_homes", "relay_warnings", "use_joblib_workers", "dask_client",
           "PARALLEL_OPTIONS"]

PARALLEL_OPTIONS = ("joblib", "dask")


class CandidateSummary(NamedTuple):
    """What the selector reads from one advanced candidate (a few numbers and the new records)."""

    log_evidence: float
    log_evidence_std: float
    new_records: list  # the candidate's ChunkRecords of this call
    result: object  # the reference backend's EvidenceResult, None for "sgais"
    seconds: float = 0.0  # wall time of the candidate's update in its worker (the placement's cost estimate)
    warnings: tuple = ()  # (category, message) of every warning the update raised, in order (relay_warnings)
    checks: tuple = ()  # names of the checks that flag its evidence (evidence_checks_, or the backend's failed ones)


class AdvanceTask(NamedTuple):
    """One call's work, the same for every candidate (data, backend and its settings)."""

    method: str  # "fit" or "partial_fit"
    X: object
    y: object
    fit_params: dict
    backend: str
    X_all: object  # all rows seen (reference backends), else None
    y_all: object
    backend_params: dict


def _private_copy(estimator):
    """A deep copy of ``estimator`` whose ``evidence_history_`` list is copied but its records shared.

    Records are immutable, and a history grows by one per chunk: copying it
    element by element would make every update's cost grow with the stream.
    """
    history = getattr(estimator, "evidence_history_", None)
    memo = {id(history): list(history)} if isinstance(history, list) else {}
    return copy.deepcopy(estimator, memo)


def _advance(estimator, task, backend_seed, history_length):
    """Advance a deep copy of ``estimator`` by ``task``; return ``(copy, CandidateSummary)``.

    The copy leaves the input untouched whatever happens, so a failure in one
    candidate cannot leave the selector (or a dask worker's resident state)
    half-updated. The reference backend runs under a one-thread BLAS, as the
    streaming does: a matrix product's summation order depends on the thread
    count, and joblib workers, dask workers and the main process have
    different defaults.
    """
    tic = time.perf_counter()
    estimator = _private_copy(estimator)
    # Recorded, all of them, wherever this runs: a worker's warnings would otherwise reach only its stderr or log,
    # past the user's filters. The selector raises them again in the calling process (relay_warnings).
    with recorded_warnings() as caught:
        getattr(estimator, task.method)(*((task.X,) if task.y is None else (task.X, task.y)), **task.fit_params)
        result = None if task.backend == "sgais" else _reference_evidence(estimator, task, backend_seed)
    checks = (tuple(getattr(estimator, "evidence_checks_", ())) if result is None
              else tuple(failed_checks(result.diagnostics)))
    summary = CandidateSummary(float(estimator.log_evidence_), float(estimator.log_evidence_std_),
                               list(estimator.evidence_history_[history_length:]), result,
                               time.perf_counter() - tic, tuple((w.category, str(w.message)) for w in caught), checks)
    return estimator, summary


def _reference_evidence(estimator, task, backend_seed):
    """The reference backend's :class:`EvidenceResult` for the fitted ``estimator``'s model on all rows seen
    (a pipeline's: its last step's, on the rows through its preprocessing)."""
    estimator, X_all = evidence_step_rows(estimator, task.X_all)
    model = getattr(estimator, "model_", None)
    if model is None:
        raise TypeError(f"backend={task.backend!r} needs candidates that expose their model as `model_` after "
                        f"fitting (evidence_select estimators do); {type(estimator).__name__} does not")
    with single_threaded_blas():
        return log_evidence(model, X_all, task.y_all, method=task.backend, random_state=backend_seed,
                            **task.backend_params)


def relay_warnings(names, summaries):
    """Raise the candidates' recorded warnings here, each at the user's line and naming its candidate.

    The candidate's name goes at the end of the message, so that filters on a
    message's opening (``warnings.filterwarnings("ignore", "SGAIS: after")``)
    match as they would on the estimator alone. The user's filters decide: an
    ``"error"`` filter raises here, before the selector commits the call. A
    warning that several candidates raised with the same text (the same cause,
    e.g. a sorted target) is raised once, naming them all.
    """
    raised_by = {}
    for name, summary in zip(names, summaries):
        for category, message in summary.warnings:
            raised_by.setdefault((category, message), []).append(name)
    for (category, message), candidates in raised_by.items():
        who = (f"candidate {candidates[0]!r}" if len(candidates) == 1
               else f"candidates {', '.join(repr(name) for name in candidates)}")
        warn(f"{message} [{who}]", category)


class JoblibPayoff(NamedTuple):
    """What the joblib workers cost a selector's recent calls (:func:`use_joblib_workers`)."""

    overhead: float = None  # seconds a call on the workers took beyond its updates' parallel time; None: untried
    calls_since_workers: int = 0  # calls run in this process since the workers' last call
    last_seconds: tuple = ()  # the candidates' update times in the last call
    workers_started: bool = False  # a call of this selector ran on the workers (they may have started for it)


#: Calls in this process after which the workers are tried again whatever the prediction: their overhead can
#: change (a warm pool costs less than the first call's start-up; larger reservoirs cost more to ship).
_MAX_CALLS_IN_PROCESS = 64


def parallel_seconds(seconds, n_workers):
    """Wall time of updates taking ``seconds`` each on ``n_workers`` workers with no overhead: the longer of
    their even share and the longest update."""
    return max(sum(seconds) / n_workers, max(seconds, default=0.0))


def use_joblib_workers(payoff, n_workers):
    """Whether the next call should go to the joblib workers, predicted from the last call.

    Run here, one after another, the next call's updates should take about as
    long as the last call's (``payoff.last_seconds``) summed; on the workers,
    about :func:`parallel_seconds` plus the overhead the workers' last call
    measured (shipping the candidates both ways, scheduling). The workers are
    used when that is shorter, when they were never tried, and after
    ``_MAX_CALLS_IN_PROCESS`` calls here.

    Examples
    --------
    >>> use_joblib_workers(JoblibPayoff(overhead=0.05, last_seconds=(0.002, 0.002)), n_workers=2)
    False
    >>> use_joblib_workers(JoblibPayoff(overhead=0.05, last_seconds=(1.5, 0.9)), n_workers=2)
    True
    """
    if payoff.overhead is None or payoff.calls_since_workers >= _MAX_CALLS_IN_PROCESS:
        return True
    return payoff.overhead + parallel_seconds(payoff.last_seconds, n_workers) < sum(payoff.last_seconds)


def after_joblib_call(payoff, on_workers, wall, seconds, n_workers):
    """The :class:`JoblibPayoff` after a call of ``wall`` seconds whose updates took ``seconds``.

    The first call on the workers may have waited for them to start and import
    the package, a cost paid once per process pool, so its overhead is not
    kept: the next call goes to the workers too and measures a warm pool's.
    """
    seconds = tuple(float(t) for t in seconds)
    if not on_workers:
        return payoff._replace(calls_since_workers=payoff.calls_since_workers + 1, last_seconds=seconds)
    overhead = max(wall - parallel_seconds(seconds, n_workers), 0.0) if payoff.workers_started else None
    return JoblibPayoff(overhead, 0, seconds, workers_started=True)


def candidate_pool(n_candidates, n_jobs):
    """Where a call's ``n_candidates`` candidate updates run on joblib (an :class:`~..utils._nested.InnerPool`):
    the candidates' updates serialise their warning recording (recorded_warnings), so threads may run them."""
    return inner_pool(n_candidates, n_jobs, threads_take_turns=True)


def advance_candidates(candidates, task, backend_seeds, history_lengths, *, parallel, n_jobs, names,
                       payoff=JoblibPayoff()):
    """Advance every candidate by ``task``; return ``(fitted, summaries, payoff)``.

    ``fitted`` is a list (joblib) or a :class:`ResidentCandidates` (dask);
    ``payoff`` what the joblib workers cost so far (:class:`JoblibPayoff`, for
    :func:`use_joblib_workers`; passed through on dask). Which process runs an
    update does not change its result.
    """
    if parallel == "dask":
        fitted, summaries = _advance_on_dask(candidates, task, backend_seeds, history_lengths, names)
        return fitted, summaries, payoff
    if isinstance(candidates, ResidentCandidates):  # switching from dask back to joblib: fetch once
        candidates = list(candidates)
    shape = getattr(task.X, "shape", ())
    order = longest_first(candidates, shape[1] if len(shape) == 2 else None)
    shipped = [_with_recent_history(est, start) for est, start in zip(candidates, history_lengths)]
    jobs = [delayed(_advance)(shipped[i][0], task, backend_seeds[i], shipped[i][1]) for i in order]
    pool = candidate_pool(len(candidates), n_jobs)
    n_workers = pool.n_jobs
    on_workers = n_workers > 1 and use_joblib_workers(payoff, n_workers)
    tic = time.perf_counter()
    dispatched = (pool if on_workers else InnerPool(1)).run(jobs)
    if n_workers > 1:
        payoff = after_joblib_call(payoff, on_workers, time.perf_counter() - tic,
                                   [summary.seconds for _, summary in dispatched], n_workers)
    outputs = [None] * len(candidates)
    for i, (advanced, summary) in zip(order, dispatched):
        outputs[i] = (_with_full_history(advanced, candidates[i], shipped[i]), summary)
    return [est for est, _ in outputs], [summary for _, summary in outputs], payoff


#: Records of its history a candidate takes to a joblib job: its collapse check reads the last
#: ``DEGENERATE_CHUNKS`` (10), and the records before them would be pickled both ways on every call, a cost that
#: grows with the stream.
_SHIPPED_RECORDS = 16


def _with_recent_history(estimator, history_length):
    """``(candidate, history_length)`` to dispatch: a shallow copy holding only the last records of a long
    history, and its history length as the job will see it."""
    history = getattr(estimator, "evidence_history_", None)
    if not isinstance(history, list) or len(history) <= _SHIPPED_RECORDS:
        return estimator, history_length
    light = copy.copy(estimator)
    light.evidence_history_ = history[-_SHIPPED_RECORDS:]
    return light, history_length - (len(history) - _SHIPPED_RECORDS)


def _with_full_history(advanced, original, shipped):
    """``advanced`` (from the shipped copy) with the records the shipped copy left behind put back in front."""
    dropped = len(getattr(original, "evidence_history_", [])) - len(getattr(shipped[0], "evidence_history_", []))
    if dropped > 0:
        advanced.evidence_history_ = original.evidence_history_[:dropped] + advanced.evidence_history_
    return advanced


def longest_first(candidates, n_features=None):
    """Indices of ``candidates``, those whose last chunk took longest first (ties in list order).

    Longest-processing-time scheduling: with fewer workers than candidates, the
    slowest candidate started last would run on alone while the other workers
    idle. On a first call (no candidate has a history yet; the rows have
    ``n_features`` columns) their sizes stand in for the times
    (:func:`first_fit_size`): candidates listed from the simplest up, as a
    choice of K is, would otherwise start the largest last. The order changes
    only when each update starts; every candidate's result is its own (its
    seed and data do not depend on the order).
    """
    def last_chunk_seconds(estimator):
        history = getattr(estimator, "evidence_history_", None)
        return float(getattr(history[-1], "seconds", 0.0)) if history else 0.0

    if n_features is not None and not any(getattr(estimator, "evidence_history_", None) for estimator in candidates):
        cost = [first_fit_size(estimator, n_features) for estimator in candidates]
    else:
        cost = [last_chunk_seconds(estimator) for estimator in candidates]
    return sorted(range(len(candidates)), key=lambda i: -cost[i])


def first_fit_size(estimator, n_features):
    """An unfitted candidate's expected update cost on rows of ``n_features`` columns, in its particles times its
    model's parameters (``_first_fit_size``; 0 for an estimator that does not say, or whose model cannot be
    built here: its own fit then reports why)."""
    size = getattr(estimator, "_first_fit_size", None)
    try:
        value = None if size is None else size(n_features)
    except Exception:  # an invalid parameter: the candidate's fit raises the error the user should see
        value = None
    return 0.0 if value is None else max(float(value), 0.0)


# -- dask.distributed ----------------------------------------------------------------------
def dask_client():
    """The current dask.distributed client (the one the user created), with a clear error without one."""
    try:
        from distributed import get_client
    except ImportError as exc:  # optional extra
        raise ImportError("parallel='dask' needs dask.distributed (pip install 'evidence-select[distributed]')"
                          ) from exc
    try:
        return get_client()
    except ValueError as exc:
        raise ValueError("parallel='dask' needs a running dask.distributed Client: create one first, e.g. "
                         "`Client(LocalCluster(threads_per_worker=1))` or `Client('tcp://scheduler:8786')`") from exc


def _place(client, candidates, names):
    """Scatter local candidates round-robin over the workers; return their futures, homes, the workers, and
    whether the candidates' inner work may share the cluster (:func:`_one_thread_per_process`)."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    workers = sorted(info)
    if not workers:
        raise ValueError("the dask cluster has no workers")
    threads = {worker: info[worker].get("nthreads", 1) for worker in workers}
    _warn_threaded_workers(threads)
    homes = list(itertools.islice(itertools.cycle(workers), len(candidates)))
    futures = [client.scatter((est, None), workers=[home], hash=False) for est, home in zip(candidates, homes)]
    return futures, homes, workers, _one_thread_per_process(client, threads)


def _one_thread_per_process(client, threads):
    """Whether every worker is a process of its own with one thread (``threads``: worker -> its thread count).

    Only then may a candidate share its replays with the cluster: two runs side
    by side in one process (a worker's second thread, or workers that are threads
    of one process, this one's included) would swap the warning filters under
    each other.
    """
    if set(threads.values()) != {1}:
        return False
    processes = list(client.run(_process_identity).values())
    return len(set(processes)) == len(processes) and _process_identity() not in processes


def _process_identity():
    return socket.gethostname(), os.getpid()


def _warn_threaded_workers(threads):
    """A UserWarning when workers have several threads (``threads``: worker -> its thread count).

    Each update records its warnings (:func:`~evidence_select.utils._warnings.recorded_warnings`), which swaps
    process-wide state, so the updates that share a worker's process take turns: its extra threads stay idle.
    """
    threaded = sorted(count for count in threads.values() if count > 1)
    if threaded:
        warn(f"parallel='dask': {len(threaded)} of the cluster's {len(threads)} workers have more than one thread "
             f"(up to {threaded[-1]}), but the candidates' updates in one worker process run one at a time (each "
             "records its warnings, which swaps process-wide state), so the extra threads stay idle. Start the "
             "workers with one thread each and more processes, e.g. "
             "LocalCluster(n_workers=<cores>, threads_per_worker=1)", UserWarning)


def _advance_on_dask(candidates, task, backend_seeds, history_lengths, names):
    client = dask_client()
    resident = isinstance(candidates, ResidentCandidates) and candidates.client is client
    if resident:
        futures, workers, shared = candidates.futures, candidates.cluster_workers, candidates.share_cluster
        homes = planned_homes(candidates.workers, candidates.seconds, workers)
    else:
        futures, homes, workers, shared = _place(client, list(candidates), names)
    # A worker runs its own candidates; others take part only if some worker holds more than one.
    crowded = any(homes.count(worker) > 1 for worker in workers)
    workers_used = list(workers) if crowded else sorted(set(homes))
    # The chunk goes once to each of them; reference backends also need all rows seen.
    names_present = [key for key in ("X", "y", "X_all", "y_all") if getattr(task, key) is not None]
    arrays = client.scatter([getattr(task, key) for key in names_present], workers=workers_used,
                            broadcast=True, hash=False)
    scattered = dict(zip(names_present, arrays))
    remote_task = task._replace(X=None, y=None, X_all=None, y_all=None)  # the data travel as futures
    call = uuid.uuid4().hex[:12]

    def submit(k, worker, after):
        # Each resident value is a pair (candidate, its last summary): one task advances it, a second on the
        # same worker reads the summary off, so only the summaries travel. ``after`` (the task this worker runs
        # before it) is only waited for.
        pinned = dict(workers=[worker], allow_other_workers=False, pure=False)
        advanced = client.submit(_advance_with_data, futures[k], remote_task, scattered, backend_seeds[k],
                                 history_lengths[k], after, shared, key=f"candidate-{names[k]}-{call}", **pinned)
        return advanced, client.submit(_summary, advanced, key=f"summary-{names[k]}-{call}", **pinned)

    seconds_so_far = candidates.seconds if resident else [0.0] * len(futures)
    new_futures, summaries, ran_on = _dispatch(submit, seconds_so_far, homes, workers_used)
    seconds = [before + summary.seconds for before, summary in zip(seconds_so_far, summaries)]
    return ResidentCandidates(client, new_futures, ran_on, seconds, workers, shared), summaries


#: Updates a worker holds at once in a call while more candidates wait than there are workers: the one it runs
#: and the next, which starts without waiting for a round trip to this process.
_QUEUED_PER_WORKER = 2


def _dispatch(submit, seconds, homes, workers):
    """Run every candidate's update once; return ``(futures, summaries, workers they ran on)`` by candidate.

    ``submit(k, worker, after)`` starts candidate ``k``'s update on ``worker``
    after the task ``after`` and returns the futures of its new pair and its
    summary; ``seconds`` are the candidates' update times so far. The
    candidates start longest first (:func:`longest_first_resident`). While
    more candidates wait than there are workers, each worker takes its own
    (``homes``) and holds ``_QUEUED_PER_WORKER`` updates, each chained after
    the one before it there (no round trip between them); a worker with none of
    its own left takes the longest still waiting. The last candidates of a call
    (no more than the workers) are not queued behind a running update: each
    goes to the first worker that frees, the longest first (its own among
    equally long ones), as a list schedule does, because a call's costs differ
    from the last calls' (a restart, a mode check) and a candidate queued on a
    busy worker can leave another idle. A moved candidate's state travels once
    and stays at its new worker. A worker never runs two updates at once: while
    a candidate waits for the replays it shares with the cluster
    (:func:`~evidence_select.utils._nested.granted_cluster`), its worker's freed
    thread can then only run such replays, never another candidate's update,
    which would wait for the first one's warning-recording lock.
    """
    from distributed import as_completed

    waiting = longest_first_resident(seconds)
    new_futures, summary_futures, ran_on = [None] * len(seconds), [None] * len(seconds), list(homes)
    last_on, worker_of, completed = {}, {}, as_completed()
    running = dict.fromkeys(workers, 0)  # updates started on each worker and not yet finished

    def next_for(worker, take_others):
        own = [k for k in waiting if homes[k] == worker]
        if len(waiting) > len(workers) or not take_others:
            return own[0] if own else (waiting[0] if take_others else None)
        # The call's last candidates: the longest waiting, this worker's own among equally long ones.
        return next((k for k in own if seconds[k] >= seconds[waiting[0]]), waiting[0]) if waiting else None

    def start_next(worker, take_others):
        k = next_for(worker, take_others)
        if k is None:
            return
        waiting.remove(k)
        new_futures[k], summary_futures[k] = submit(k, worker, last_on.get(worker))
        last_on[worker], ran_on[k], worker_of[summary_futures[k].key] = new_futures[k], worker, worker
        running[worker] += 1
        completed.add(summary_futures[k])

    def queue_more(worker):
        return running[worker] == 0 or (running[worker] < _QUEUED_PER_WORKER and len(waiting) > len(workers))

    for take_others in (False, True):  # their own first; then the others', where a worker has none left
        for _ in range(_QUEUED_PER_WORKER):
            for worker in workers:
                if queue_more(worker):
                    start_next(worker, take_others)
    for future in completed:
        if future.status == "error":
            future.result()  # raises the candidate's error here; the caller keeps its candidates as they were
        worker = worker_of[future.key]
        running[worker] -= 1
        if queue_more(worker):
            start_next(worker, take_others=True)
    return new_futures, [future.result() for future in summary_futures], ran_on


def longest_first_resident(seconds):
    """Indices of resident candidates, those with the longest update time so far first (ties in list order): a
    worker's long updates start first, so that their replays reach idle threads early, and the short ones are
    left for whichever worker frees first.

    Examples
    --------
    >>> longest_first_resident([1.0, 3.0, 1.0, 2.0])
    [1, 3, 0, 2]
    """
    return sorted(range(len(seconds)), key=lambda k: -seconds[k])


#: A candidate leaves its worker at the start of a call only where another worker's planned load is below its own
#: by more than this fraction of a worker's even share of the time so far: a move sends its whole state (its
#: reservoir), and measured times are noisy.
_MOVE_SLACK = 0.05


def planned_homes(homes, seconds, workers):
    """Where each candidate starts the next call: a longest-first split of ``seconds`` over ``workers`` that
    keeps each candidate on its present worker (``homes``) unless another's load is lower by ``_MOVE_SLACK``.

    ``seconds[k]`` is candidate ``k``'s update time summed over the calls so
    far, a call's prediction: its bursts (the first chunk, a restart) come to
    every candidate in the same call, each in proportion to its own cost. What
    the prediction misses, the call's dispatch corrects (:func:`_dispatch`).

    Examples
    --------
    >>> planned_homes(["a", "b", "a", "b"], [2.0, 3.0, 5.0, 7.0], ["a", "b"])  # 7 | 10 -> 8 | 9
    ['b', 'a', 'a', 'b']
    >>> planned_homes(["a", "b", "a"], [9.8, 9.6, 0.2], ["a", "b"])  # balanced enough: nothing moves
    ['a', 'b', 'a']
    """
    load = dict.fromkeys(workers, 0.0)
    slack = _MOVE_SLACK * sum(seconds) / max(len(workers), 1)
    planned = list(homes)
    for k in longest_first_resident(seconds):
        here = homes[k] if homes[k] in load else None
        idlest = min(workers, key=lambda worker: load[worker])
        planned[k] = here if here is not None and load[here] - slack <= load[idlest] else idlest
        load[planned[k]] += seconds[k]
    return planned


def _advance_with_data(resident, task, data, backend_seed, history_length, after=None, share_cluster=False):
    """:func:`_advance` on a worker of the candidate in the ``resident`` pair; ``data`` holds the scattered
    arrays (dask resolves them to values); ``after`` is the pair of the candidate that ran before it on this
    worker (only waited for). With ``share_cluster`` the candidate's inner work (a restart's replicate groups)
    may run on the cluster's idle threads (:func:`~evidence_select.utils._nested.granted_cluster`). Returns the
    next pair ``(candidate, CandidateSummary)``."""
    data = {key: aligned(value) for key, value in data.items()}
    with granted_cluster() if share_cluster else contextlib.nullcontext():
        return _advance(resident[0], task._replace(**data), backend_seed, history_length)


def _summary(resident):
    return resident[1]


class ResidentCandidates(Sequence):
    """The fitted candidates of a selector, kept on the dask workers that advance them.

    Indexing or iterating fetches all of them once (then cached): copies, so
    changing one does not change the worker's. Pickling or deep-copying a
    selector stores the fetched candidates as a plain list; its next
    ``parallel="dask"`` call places them on the workers again.

    Parameters
    ----------
    client : distributed.Client
    futures : list of distributed.Future
        One per candidate, each held by its worker: the pair (candidate, its
        last :class:`CandidateSummary`, None before its first update there).
    workers : list of str
        The worker address of each candidate.
    seconds : list of float
        Each candidate's update time summed over the calls on these workers,
        from which the next call's split is planned (:func:`planned_homes`).
        The sum, not the last call: a stream's cost comes in bursts (a first
        chunk, a restart) that every candidate meets in the same call, each in
        proportion to its own cost.
    cluster_workers : list of str
        The cluster's workers when the candidates were placed (asking the
        scheduler on every call would cost a round trip).
    share_cluster : bool, default=False
        Whether the candidates' inner work may run on the cluster's idle
        threads (every worker was a one-thread process of its own when they
        were placed).
    """

    def __init__(self, client, futures, workers, seconds, cluster_workers, share_cluster=False):
        self.client = client
        self.futures = futures
        self.workers = workers
        self.seconds = list(seconds)
        self.cluster_workers = list(cluster_workers)
        self.share_cluster = bool(share_cluster)
        self._fetched = None

    def __len__(self):
        return len(self.futures)

    def __getitem__(self, index):
        if self._fetched is None:
            self._fetched = [candidate for candidate, _ in self.client.gather(self.futures)]
        return self._fetched[index]

    def __reduce__(self):
        return list, (list(self),)

    def __repr__(self):
        return f"ResidentCandidates({len(self)} candidates on {sorted(set(self.workers))})"


class ResidentNamedCandidates(Mapping):
    """``named_estimators_`` over :class:`ResidentCandidates`: name -> fitted candidate, fetched on access."""

    def __init__(self, names, candidates):
        self._index = {name: k for k, name in enumerate(names)}
        self._candidates = candidates

    def __getitem__(self, name):
        return self._candidates[self._index[name]]

    def __iter__(self):
        return iter(self._index)

    def __len__(self):
        return len(self._index)

    def __reduce__(self):
        return dict, (dict(self.items()),)
