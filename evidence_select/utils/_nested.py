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
  task, one run after another, unless the caller explicitly gives it resources
  (:func:`granted_n_jobs`: an estimator's own ``n_jobs``); it then gets a pool
  of that many processes of its own (loky), never the pool or cluster the task
  occupies.
- Threads never run inner work side by side, in or out of a task: each run
  records its warnings, which swaps process-wide state (:mod:`warnings`).

No path therefore waits on tasks that cannot be scheduled.
"""

import contextlib
import contextvars
import sys
from typing import NamedTuple

from joblib import Parallel, effective_n_jobs, parallel_config
from joblib.parallel import get_active_backend

__all__ = ["InnerPool", "granted_n_jobs", "in_parallel_task", "inner_pool", "run_inner"]

#: The workers a caller explicitly gave the inner work of this thread's current call (None: none given).
_GRANT = contextvars.ContextVar("evidence_select_inner_n_jobs", default=None)


class InnerPool(NamedTuple):
    """Where a batch of independent inner tasks runs (see :func:`inner_pool`)."""

    n_jobs: int  # workers; 1 runs the tasks here, in the calling thread, one after another
    backend: str = None  # the joblib backend to run them on; None: the caller's
    reason: str = ""  # why, in a few words (logs and tests)

    def run(self, tasks):
        """The results of ``tasks`` (joblib ``delayed`` calls), in order."""
        if self.n_jobs == 1:
            return [function(*args, **kwargs) for function, args, kwargs in tasks]
        with parallel_config(backend=self.backend) if self.backend else contextlib.nullcontext():
            return Parallel(n_jobs=self.n_jobs)(tasks)


@contextlib.contextmanager
def granted_n_jobs(n_jobs):
    """Give the inner work started inside the block ``n_jobs`` workers (``None`` gives none; ``-1`` all cores).

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
    token = _GRANT.set(n_jobs)
    try:
        yield
    finally:
        _GRANT.reset(token)


def in_parallel_task():
    """Whether this thread runs a task of a parallel run: a joblib job (any backend) or a dask worker's task.

    A joblib job runs under the nested backend its ``Parallel`` set, whose
    nesting level is positive; a dask task runs with its worker set in a context
    variable (:func:`distributed.get_worker`), however it was submitted.
    """
    backend, _ = get_active_backend()
    if (getattr(backend, "nesting_level", None) or 0) > 0:
        return True
    worker = sys.modules.get("distributed.worker")  # never imported here: a dask task has imported it already
    if worker is None:
        return False
    try:
        worker.get_worker()
    except ValueError:
        return False
    return True


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
        if n_jobs is None:
            return InnerPool(1, None, "inside a parallel task, no workers granted")
        workers = min(effective_n_jobs(n_jobs), n_tasks)
        return InnerPool(workers, "loky" if workers > 1 else None, "inside a parallel task, workers granted")
    backend, _ = get_active_backend()
    with parallel_config(n_jobs=n_jobs) if n_jobs is not None else contextlib.nullcontext():
        workers = min(effective_n_jobs(None), n_tasks)
    if workers <= 1:
        return InnerPool(1, None, "no workers asked for")
    if getattr(backend, "uses_threads", False) and not threads_take_turns:
        return InnerPool(1, None, "threads would swap the warning filters under each other")
    return InnerPool(workers, None, "the caller's joblib context")


def run_inner(tasks):
    """Run independent inner ``tasks`` (joblib ``delayed`` calls) where :func:`inner_pool` says; their results.

    The tasks' results must not depend on where they run (seeds drawn before).
    """
    tasks = list(tasks)
    return inner_pool(len(tasks)).run(tasks)
