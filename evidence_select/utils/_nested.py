"""Nested parallelism: where parallel work started inside a parallel task runs.

A selector advances its candidates as parallel tasks: joblib jobs (loky
processes or threads), dask tasks through joblib's dask backend, or tasks
resident on dask workers (``parallel="dask"``). Inside such a task a candidate
may start parallel work of its own (a restart replays its replicate groups as
independent runs). Sent to the pool the task itself occupies, that work can
wait for ever: with more tasks than workers, every worker holds a parent that
waits for children no worker is free to run. (Joblib's dask backend lets a
waiting parent give up its thread, but the freed thread then starts the next
candidate's update, which waits for the parent's warning-recording lock.)

So every inner dispatch asks :func:`inner_pool`, which applies one rule:

- **Outside any parallel task** (the user's own process), the caller's joblib
  context decides: its backend and ``n_jobs``, or the estimator's ``n_jobs``. A
  dask backend there sends the work to the cluster from the client, which
  occupies none of the cluster's threads.
- **Inside a parallel task** (:func:`in_parallel_task`), the work runs in that
  task, one run after another, unless the caller explicitly gives it resources.
  An estimator's own ``n_jobs`` (:func:`granted_n_jobs`) gives it a pool of that
  many processes of its own (loky), never the pool or cluster the task occupies,
  where processes can start (not in a daemonic process, which dask's workers are
  by default). A dask task whose submitter made sure that nothing else can take
  its thread while it waits (:func:`granted_cluster`) shares its work with the
  cluster's idle threads: it submits all but the first run, runs the first
  itself, then gives up its thread (:func:`distributed.secede`) while it waits
  for the rest.
- Threads never run inner work side by side, in or out of a task: each run
  records its warnings, which swaps process-wide state (:mod:`warnings`).

No path therefore waits on tasks that cannot be scheduled.
"""

import contextlib
import contextvars
import multiprocessing
import sys
import threading
from typing import NamedTuple

import numpy as np
from joblib import Parallel, effective_n_jobs, parallel_config
from joblib.parallel import get_active_backend

__all__ = ["CLUSTER", "InnerPool", "aligned", "granted_cluster", "granted_n_jobs", "in_parallel_task", "inner_pool",
           "run_inner"]

#: The backend of the pool :func:`granted_cluster` gives.
CLUSTER = "cluster"

#: The workers a caller explicitly gave the inner work of this thread's current call (None: none given).
_GRANT = contextvars.ContextVar("evidence_select_inner_n_jobs", default=None)
#: Whether this thread's dask task may share its inner work with the cluster (:func:`granted_cluster`).
_SHARED_CLUSTER = contextvars.ContextVar("evidence_select_shared_cluster", default=False)

#: Arrays larger than this travel to a shared run's worker as their own dask data, not inside the task's message
#: (which the scheduler would then carry).
_SCATTER_BYTES = 1 << 20


class InnerPool(NamedTuple):
    """Where a batch of independent inner tasks runs (see :func:`inner_pool`)."""

    n_jobs: int  # workers; 1 runs the tasks here, in the calling thread, one after another
    backend: str = None  # the joblib backend to run them on; None: the caller's
    reason: str = ""  # why, in a few words (logs and tests)

    def run(self, tasks):
        """The results of ``tasks`` (joblib ``delayed`` calls), in order."""
        if self.n_jobs == 1:
            return [function(*args, **kwargs) for function, args, kwargs in tasks]
        if self.backend == CLUSTER:
            return _shared_with_cluster(tasks)
        with parallel_config(backend=self.backend) if self.backend else contextlib.nullcontext():
            return Parallel(n_jobs=self.n_jobs)(tasks)


@contextlib.contextmanager
def _setting(variable, value):
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)


def granted_n_jobs(n_jobs):
    """Give the inner work started inside the block ``n_jobs`` workers (``-1`` all cores); ``None`` leaves the
    caller's grant, if any, in force.

    An estimator's ``n_jobs`` enters this around its stream. Outside a parallel
    task it acts as :func:`joblib.parallel_config` ``(n_jobs=n_jobs)`` would; inside
    one it is what lets the inner work leave the task (:func:`inner_pool`).

    Examples
    --------
    >>> with granted_n_jobs(2):
    ...     inner_pool(n_tasks=4).n_jobs
    2
    >>> inner_pool(n_tasks=4).n_jobs
    1
    """
    return contextlib.nullcontext() if n_jobs is None else _setting(_GRANT, n_jobs)


def granted_cluster():
    """Let the inner work started inside the block share the dask cluster that runs this task.

    Only for a dask task that nothing can deadlock: while it waits for the runs
    it submitted, its worker must not start any task that waits for this one
    (the selector chains the candidates of a worker, so the freed thread can only
    run such shared runs, which wait for nothing), and every worker must be a
    one-thread process of its own (two runs side by side in one process would
    swap the warning filters under each other). Outside a dask task the grant
    gives nothing; inside one, an estimator's ``n_jobs`` still takes precedence
    where it can start processes.
    """
    return _setting(_SHARED_CLUSTER, True)


def in_parallel_task():
    """Whether this thread runs a task of a parallel run: a joblib job (any backend) or a dask worker's task.

    A joblib job runs under the nested backend its ``Parallel`` set, whose
    nesting level is positive; a dask task runs with its worker set in a context
    variable (:func:`distributed.get_worker`), however it was submitted.
    """
    backend, _ = get_active_backend()
    return (getattr(backend, "nesting_level", None) or 0) > 0 or _dask_worker() is not None


def _dask_worker():
    """The dask worker whose task this thread runs, or None."""
    worker = sys.modules.get("distributed.worker")  # never imported here: a dask task has imported it already
    if worker is None:
        return None
    try:
        return worker.get_worker()
    except ValueError:
        return None


def inner_pool(n_tasks, n_jobs=None, *, threads_take_turns=False):
    """Where ``n_tasks`` independent inner tasks run, by the module's rule (an :class:`InnerPool`).

    Parameters
    ----------
    n_tasks : int
        Tasks to run; never more workers than tasks.
    n_jobs : int or None, default=None
        Workers the caller explicitly asks for; None reads the grant of
        :func:`granted_n_jobs` (none outside one).
    threads_take_turns : bool, default=False
        Whether the tasks serialise their warning recording themselves
        (:func:`~evidence_select.utils._warnings.recorded_warnings`), so that a
        thread-based backend may run them; otherwise threads run them here, one
        after another.

    Examples
    --------
    >>> inner_pool(3)  # the user's process, no joblib context
    InnerPool(n_jobs=1, backend=None, reason='no workers asked for')
    >>> from joblib import parallel_config
    >>> with parallel_config(backend="threading", n_jobs=2):
    ...     inner_pool(3).reason
    'threads would swap the warning filters under each other'
    """
    if n_jobs is None:
        n_jobs = _GRANT.get()
    if in_parallel_task():
        return _pool_in_task(n_tasks, n_jobs)
    backend, _ = get_active_backend()
    with parallel_config(n_jobs=n_jobs) if n_jobs is not None else contextlib.nullcontext():
        workers = min(effective_n_jobs(None), n_tasks)
    if workers <= 1:
        return InnerPool(1, None, "no workers asked for")
    if getattr(backend, "uses_threads", False) and not threads_take_turns:
        return InnerPool(1, None, "threads would swap the warning filters under each other")
    return InnerPool(workers, None, "the caller's joblib context")


def _pool_in_task(n_tasks, n_jobs):
    """:func:`inner_pool` inside a parallel task: processes of its own, the shared cluster, or the task itself."""
    if n_jobs is not None and _can_start_processes():
        with parallel_config(backend="loky"):  # the task's own backend would count its pool's workers
            workers = min(effective_n_jobs(n_jobs), n_tasks)
        return InnerPool(workers, "loky" if workers > 1 else None, "inside a parallel task, processes granted")
    if n_jobs != 1 and _SHARED_CLUSTER.get() and n_tasks > 1 and _dask_worker() is not None:
        return InnerPool(n_tasks, CLUSTER, "inside a dask task, the cluster shared")
    return InnerPool(1, None, "inside a parallel task, nothing granted that can run elsewhere")


def _can_start_processes():
    """Whether loky may start worker processes here: not in a daemonic process (a dask worker's, by default), nor
    in a thread of a joblib job (joblib would refuse both, with a warning, and run one job at a time)."""
    if multiprocessing.current_process().daemon:
        return False
    backend, _ = get_active_backend()
    return threading.current_thread() is threading.main_thread() or not getattr(backend, "nesting_level", 0)


def run_inner(tasks):
    """Run independent inner ``tasks`` (joblib ``delayed`` calls) where :func:`inner_pool` says; their results.

    The tasks' results must not depend on where they run (seeds drawn before).
    """
    tasks = list(tasks)
    return inner_pool(len(tasks)).run(tasks)


def _shared_with_cluster(tasks):
    """Run ``tasks`` from inside a dask task: all but the first submitted to the cluster, the first here; then
    this thread leaves the worker's pool while it waits (see :func:`granted_cluster`)."""
    from distributed import get_client, rejoin, secede

    client = get_client()
    worker = _dask_worker().address
    # Ahead of the candidates' own updates (priority 0), so that a thread freed by a waiting candidate, or an idle
    # worker, takes them first.
    futures = [client.submit(_shared_run, function, *[_scattered(client, arg, worker) for arg in args],
                             pure=False, priority=1, **kwargs) for function, args, kwargs in tasks[1:]]
    first = tasks[0]
    results = [first[0](*first[1], **first[2])]
    secede()
    try:
        results += client.gather(futures)
    finally:
        rejoin()
    return results


def _scattered(client, arg, worker):
    """A large array as dask data kept on ``worker`` (fetched by the run's worker), anything else as it is."""
    if isinstance(arg, np.ndarray) and arg.nbytes > _SCATTER_BYTES:
        return client.scatter(arg, workers=[worker], hash=False)
    return arg


def _shared_run(function, *args, **kwargs):
    """``function(*args, **kwargs)`` as a shared run's task, with unaligned arrays copied (:func:`aligned`)."""
    return function(*(aligned(arg) for arg in args), **kwargs)


def aligned(array):
    """``array``, or an aligned copy of it when its data are not aligned for its type.

    Dask deserialises an array in place in its message frame, at any byte
    offset; numpy and BLAS then take other code paths (``X.T @ X`` leaves BLAS
    for numpy's own loop), whose sums differ in the last bit from those on the
    same values aligned, as the sending process has them: results would then
    depend on where a task runs.

    Examples
    --------
    >>> values = np.arange(4.0)
    >>> aligned(values) is values
    True
    """
    if isinstance(array, np.ndarray) and not array.flags.aligned:
        return np.array(array, copy=True)
    return array
