"""More candidates than worker threads, with restarts inside: every executor finishes, with the bits of one process.

A mixture's restart replays its replicate groups as independent tasks from inside the candidate's own task. Sent to
the pool that task occupies (joblib's dask backend did), parents wait for children no thread is free to run, and the
stream stalls for ever. Each run here has a deadline, so a stall fails the test instead of hanging the suite.
"""

import threading
import time

import numpy as np
import pytest
from joblib import parallel_config

from evidence_select import BayesianMixture, EvidenceModelSelector
from evidence_select.datasets import make_mixture
from evidence_select.selection import _distributed
from evidence_select.sgais._settings import EngineTuning, ModeCheckSettings

distributed = pytest.importorskip("distributed")

# Worker start-up and several streams per executor (CI runs it with -m "not extended").
pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::evidence_select.EvidenceConvergenceWarning",
                                         "ignore::evidence_select.SamplerDegeneracyWarning")]

# Restarts when the rows seen double from batch_size: every candidate replays its two groups at 200 rows.
SMALL = dict(n_particles=8, n_mcmc_steps=3, initial_mcmc_factor=2, batch_size=100)


class _ReplayingMixture(BayesianMixture):
    """A mixture whose restarts replay from the prior whatever the posterior-mode check says (no replay gate, no
    draws at the mode): the replays are what this module runs in parallel."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(gate_draws=0, restart_share=0.0))


N_ROWS, CHUNK = 400, 200
# A short reference backend: it runs inside each candidate's task, after the candidate's own stream.
BACKEND_PARAMS = {"sgais": None, "ais": dict(n_chains=16, n_repeats=2, schedule="sigmoid", n_temperatures=20,
                                             n_mcmc_steps=2)}


@pytest.fixture(scope="module")
def client():
    # Two one-thread worker processes for three candidates: one worker always holds two.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


def _selector(backend, **params):
    candidates = [(f"K={k}", _ReplayingMixture(k, **SMALL)) for k in (1, 2, 3)]
    return EvidenceModelSelector(candidates, backend=backend, backend_params=BACKEND_PARAMS[backend],
                                 random_state=0, **params)


def _stream(selector, context=None):
    X = make_mixture(N_ROWS, random_state=3).X
    with context or parallel_config():
        for start in range(0, N_ROWS, CHUNK):
            selector.partial_fit(X[start:start + CHUNK])
    return selector


class Reference(dict):
    """The in-process streams by backend, and the deadline of the runs compared with them."""

    deadline = 0.0


@pytest.fixture(scope="module")
def reference():
    """The ``n_jobs=1`` streams, and a deadline for the others: far beyond any run on a loaded machine (it scales
    with the in-process wall time, which a load slows too), far below a stall (which never ends)."""
    runs = Reference()
    tic = time.perf_counter()
    for backend in BACKEND_PARAMS:
        runs[backend] = _stream(_selector(backend, n_jobs=1))
    runs.deadline = 60.0 + 10.0 * (time.perf_counter() - tic) / len(BACKEND_PARAMS)
    assert all(sum(r.n_replayed > 0 for r in est.evidence_history_) >= 1  # the restarts this module is about
               for est in runs["sgais"].estimators_)
    return runs


def within_deadline(function, seconds, on_stall=None):
    """``function()``'s value, or a failed test when it has not returned after ``seconds`` (then ``on_stall()``).

    The call runs in a daemon thread, so a stalled call leaves the test (and the run) free to go on.
    """
    outcome = {}

    def call():
        try:
            outcome["value"] = function()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if on_stall is not None:
            on_stall()
        pytest.fail(f"the stream had not finished after {seconds:.0f} s: it stalled")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _assert_same_results(a, b):
    np.testing.assert_array_equal(a.log_evidences_, b.log_evidences_)
    np.testing.assert_array_equal(a.log_evidence_stds_, b.log_evidence_stds_)
    for ra, rb in zip(a.evidence_history_, b.evidence_history_, strict=True):
        np.testing.assert_equal([r._replace(seconds=0) for r in ra.candidate_records],
                                [r._replace(seconds=0) for r in rb.candidate_records])


def _restart_workers(client):
    """Free the workers of a stalled stream (their threads wait for ever), so that the next tests can run."""
    client.restart(timeout=120)


@pytest.mark.parametrize("backend", list(BACKEND_PARAMS))
@pytest.mark.parametrize("executor", ["loky", "joblib-dask", "dask"])
def test_more_candidates_than_worker_threads_finish_with_the_same_bits(executor, backend, client, reference,
                                                                       monkeypatch):
    # Every joblib call on the workers, however cheap (the selector may run cheap calls in this process).
    monkeypatch.setattr(_distributed, "use_joblib_workers", lambda payoff, n_workers: True)
    if executor == "loky":
        run = lambda: _stream(_selector(backend, n_jobs=2))  # noqa: E731
    elif executor == "joblib-dask":  # the scikit-learn way: every n_jobs on the cluster
        run = lambda: _stream(_selector(backend, n_jobs=2), parallel_config(backend="dask"))  # noqa: E731
    else:
        run = lambda: _stream(_selector(backend, parallel="dask"))  # noqa: E731
    selector = within_deadline(run, reference.deadline, on_stall=lambda: _restart_workers(client))
    _assert_same_results(reference[backend], selector)


def _shared_runs_by_worker(client):
    """How many shared runs (a candidate's replay groups sent to the cluster) each worker has executed so far."""
    return client.run(lambda dask_worker: sum(1 for entry in dask_worker.state.log
                                              if str(entry[0]).startswith("_shared_run") and entry[2] == "memory"))


def test_resident_candidates_share_their_replays_with_an_idle_worker(client, reference):
    # One candidate on two workers: while it replays its first group, the other worker runs its second.
    before = _shared_runs_by_worker(client)
    selector = EvidenceModelSelector([("K=2", _ReplayingMixture(2, **SMALL))], random_state=0, parallel="dask")
    selector = within_deadline(lambda: _stream(selector), reference.deadline)
    assert selector.estimators_.share_cluster
    after = _shared_runs_by_worker(client)
    home = selector.estimators_.workers[0]
    assert [after[worker] - before[worker] for worker in after if worker != home] == [1]  # the one restart's
    expected = _stream(EvidenceModelSelector([("K=2", _ReplayingMixture(2, **SMALL))], random_state=0))
    _assert_same_results(expected, selector)


class _RunOnly:
    """A client whose workers report the process they run in (for _one_thread_per_process)."""

    def __init__(self, identities):
        self.identities = identities

    def run(self, function):
        return self.identities


def test_replays_are_shared_only_between_one_thread_processes():
    here = _distributed._process_identity()
    apart = {"a": ("host", 1), "b": ("host", 2)}
    assert _distributed._one_thread_per_process(_RunOnly(apart), {"a": 1, "b": 1})
    assert not _distributed._one_thread_per_process(_RunOnly(apart), {"a": 1, "b": 2})  # a second thread
    assert not _distributed._one_thread_per_process(_RunOnly({"a": ("host", 1), "b": ("host", 1)}),
                                                    {"a": 1, "b": 1})  # two workers in one process
    assert not _distributed._one_thread_per_process(_RunOnly({"a": here, "b": ("host", 2)}),
                                                    {"a": 1, "b": 1})  # a worker in this process
