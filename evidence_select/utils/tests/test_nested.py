"""The nested-parallelism rule: inner work leaves a parallel task only when granted, never to wait on its own pool."""

import os
import threading

import numpy as np
import pytest
from joblib import Parallel, delayed, parallel_config

from evidence_select.utils import _nested
from evidence_select.utils._nested import (granted_cluster, granted_n_jobs, in_parallel_task, inner_pool,
                                           run_inner)


def _decision(grant=None):
    """``(in a task, workers, backend)`` of a 4-task inner dispatch here, under ``granted_n_jobs(grant)``."""
    with granted_n_jobs(grant):
        pool = inner_pool(4)
    return in_parallel_task(), pool.n_jobs, pool.backend


def _cluster_decisions():
    """The ``(workers, backend)`` of a 3-task inner dispatch under ``granted_cluster()``, with an estimator's
    ``n_jobs`` of None (leaves the grant), 2 and 1."""
    decisions = []
    for n_jobs in (None, 2, 1):
        with granted_cluster(), granted_n_jobs(n_jobs):
            pool = inner_pool(3)
        decisions.append((pool.n_jobs, pool.backend))
    return decisions


def _shared_sums():
    """Three runs sharing the cluster from inside a dask task, each on 2.4 MB (sent as dask data, not in the
    task's message): ``(sum, aligned, thread)`` of each, and this task's thread."""
    values = np.arange(300_000, dtype=float)
    with granted_cluster():
        return run_inner([delayed(_sum_where)(values + k) for k in range(3)]), threading.get_ident()


def _sum_where(values):
    return float(values.sum()), bool(values.flags.aligned), threading.get_ident()


def _where():
    return os.getpid(), threading.get_ident()


def test_outside_a_task_the_callers_context_decides():
    assert _decision() == (False, 1, None)
    assert _decision(grant=2) == (False, 2, None)  # the estimator's n_jobs, on the caller's backend
    assert _decision(grant=-1)[1] == min(os.cpu_count(), 4)
    with parallel_config(n_jobs=3):
        assert _decision() == (False, 3, None)
        assert _decision(grant=1) == (False, 1, None)  # an explicit n_jobs wins over the context
    with parallel_config(n_jobs=8):
        assert inner_pool(2).n_jobs == 2  # never more workers than tasks
    with parallel_config(backend="threading", n_jobs=2):  # each task would swap the warning filters
        assert _decision() == (False, 1, None)
        assert inner_pool(4, threads_take_turns=True).n_jobs == 2


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_inside_a_joblib_job_inner_work_stays_unless_granted(backend):
    with parallel_config(backend=backend, n_jobs=2):  # the job's context says 2: not a grant
        decisions = Parallel(n_jobs=2)(delayed(_decision)(grant) for grant in (None, 2, 1))
    # Granted processes start from a process's main thread; joblib refuses them below its threads.
    granted = (True, 2, "loky") if backend == "loky" else (True, 1, None)
    assert decisions == [(True, 1, None), granted, (True, 1, None)]


@pytest.mark.slow  # starts a pool of processes inside each of two pool processes
def test_a_grant_inside_a_job_runs_on_processes_of_its_own():
    here = _where()
    jobs = [delayed(_where)() for _ in range(2)]
    assert {tuple(w) for w in run_inner(jobs)} == {here}  # no grant: this thread, one after another
    inner = Parallel(n_jobs=2)(delayed(_granted_where)() for _ in range(2))
    for job_pid, inner_pids in inner:  # each job's inner tasks ran in other processes than the job itself
        assert job_pid not in inner_pids and os.getpid() not in inner_pids


def _granted_where():
    with granted_n_jobs(2):
        return os.getpid(), {pid for pid, _ in run_inner(delayed(_slow_where)() for _ in range(2))}


def _slow_where():
    threading.Event().wait(0.3)  # long enough that one worker cannot take both tasks before the other starts
    return _where()


def test_inside_a_dask_task_inner_work_stays_unless_granted(monkeypatch):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        # Submitted directly (parallel="dask") and through joblib's dask backend (the scikit-learn way).
        assert client.submit(_decision, pure=False).result() == (True, 1, None)
        assert client.submit(_decision, 2, pure=False).result() == (True, 2, "loky")
        with parallel_config(backend="dask"):
            assert Parallel(n_jobs=2)(delayed(_decision)(grant) for grant in (None, 2)) == [(True, 1, None),
                                                                                           (True, 2, "loky")]
            # In the client the cluster is the caller's to use: the inner work goes there.
            assert _decision() == (False, 2, None)
        # Sharing the cluster is for dask tasks only (the selector's resident candidates grant it); an estimator's
        # explicit n_jobs takes precedence where it can start processes.
        assert client.submit(_cluster_decisions, pure=False).result() == [(3, "cluster"), (2, "loky"), (1, None)]
        runs, task_thread = client.submit(_shared_sums, pure=False).result()
        assert [(total, is_aligned) for total, is_aligned, _ in runs] == [(np.arange(300_000.0).sum() + 300_000 * k,
                                                                          True) for k in range(3)]
        assert runs[0][2] == task_thread and len({thread for _, _, thread in runs}) > 1  # the first run here
        # A daemonic process (dask's worker processes by default) cannot start any: the grant then gives nothing,
        # unless the cluster is shared.
        monkeypatch.setattr(_nested, "_can_start_processes", lambda: False)
        assert client.submit(_decision, 2, pure=False).result() == (True, 1, None)
        assert client.submit(_cluster_decisions, pure=False).result() == [(3, "cluster"), (3, "cluster"), (1, None)]
    monkeypatch.undo()
    assert _cluster_decisions() == [(1, None), (2, None), (1, None)]
    in_jobs = Parallel(n_jobs=2)(delayed(_cluster_decisions)() for _ in range(2))
    assert in_jobs == [[(1, None), (2, "loky"), (1, None)]] * 2
