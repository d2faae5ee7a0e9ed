"""Where candidates run must not change results: n_jobs, joblib backends and resident dask candidates.

The dask tests start a real ``LocalCluster`` (2 worker processes, 1 thread each): with
``processes=False`` nothing would be serialised, so "not transferred" would prove nothing.
"""

import pickle
import time
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from joblib import parallel_config
from threadpoolctl import threadpool_info, threadpool_limits

from evidence_select import BayesianLinearRegressor, EvidenceModelSelector
from evidence_select.datasets import make_linear_regression, make_mixture
from evidence_select.estimators import FeatureScaleWarning
from evidence_select.selection import _distributed
from evidence_select.sgais.tests._mixtures import PriorReplayMixture
from evidence_select.utils import _nested

distributed = pytest.importorskip("distributed")

# Worker start-up and cross-backend runs: the whole module is long (CI runs it with -m "not extended").
pytestmark = pytest.mark.slow

FAST = dict(n_particles=8, n_replicates=2, batch_size=100, reservoir_size=1000)
# The reference backends here are tested for bit-identity, not accuracy: the cheapest runs that still go through
# each backend's whole path (NS: two runs, Galilean moves, the probe; bridge: tempered starts, HMC warmup, the
# bridge of two halves), with checks loose enough that these tiny runs pass them (a failed check would warn).
BACKEND_PARAMS = {"sgais": None, "ais": {"n_chains": 16, "n_repeats": 2},
                  "ns": {"n_live": 8, "n_replace": 4, "n_galilean_steps": 2, "dlogz": 1.0, "n_simulations": 20},
                  "bridge": {"n_chains": 2, "n_warmup": 20, "n_draws": 60, "n_init_particles": 8, "max_leapfrog": 8,
                             "rhat_threshold": 1.5, "min_ess": 5, "min_draws_per_tau": 5, "max_unseen_modes": 1.0}}
N_ROWS, CHUNK = 200, 100


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    return make_linear_regression(N_ROWS, n_features=2, random_state=3)


def _selector(backend="sgais", **params):
    candidates = [(f"s2={v:g}", BayesianLinearRegressor(noise_variance=v, prior_scale=1.0, **FAST)) for v in (0.5, 2.0)]
    return EvidenceModelSelector(candidates, backend=backend, backend_params=BACKEND_PARAMS[backend],
                                 random_state=0, **params)


def _stream(selector, data):
    for start in range(0, N_ROWS, CHUNK):
        selector.partial_fit(data.X[start:start + CHUNK], data.y[start:start + CHUNK])
    return selector


@pytest.fixture(scope="module")
def one_process(data):
    """``one_process(backend)``: the n_jobs=1 stream of ``_selector(backend)``, run once for the module's tests,
    which only read it."""
    streams = {}

    def stream(backend="sgais"):
        if backend not in streams:
            streams[backend] = _stream(_selector(backend, n_jobs=1), data)
        return streams[backend]

    return stream


def _assert_same_results(a, b):
    np.testing.assert_array_equal(a.log_evidences_, b.log_evidences_)
    np.testing.assert_array_equal(a.log_evidence_stds_, b.log_evidence_stds_)
    assert len(a.evidence_history_) == len(b.evidence_history_)
    for ra, rb in zip(a.evidence_history_, b.evidence_history_):
        np.testing.assert_array_equal(ra.log_evidences, rb.log_evidences)
        # Everything but the wall time of each chunk.
        np.testing.assert_equal([r._replace(seconds=0) for r in ra.candidate_records],
                                [r._replace(seconds=0) for r in rb.candidate_records])


def _candidate_keys_sent(client):
    """Keys of resident candidates any worker sent to a peer or to the client, from the workers' transfer logs."""
    logs = client.run(lambda dask_worker: [list(entry["keys"]) for entry in dask_worker.transfer_outgoing_log])
    return [key for entries in logs.values() for keys in entries for key in keys if str(key).startswith("candidate-")]


def _bytes_received_from_peers(client):
    logs = client.run(lambda dask_worker: sum(entry["total"] for entry in dask_worker.transfer_incoming_log))
    return sum(logs.values())


def test_dask_without_client_is_a_clear_error(data):
    # Runs before the module's cluster fixture starts a client.
    if distributed.client._get_global_client() is not None:
        pytest.skip("a default client exists in this process")
    with pytest.raises(ValueError, match="dask.distributed Client"):
        _selector(parallel="dask").fit(data.X, data.y)


def test_reference_backends_run_with_one_blas_thread(monkeypatch, data):
    # BLAS splits a long dot product's sum between its threads, so its last bits depend on the thread count;
    # the main process (all cores) and loky workers (one thread each) differ, hence one thread everywhere.
    threads, real = [], _distributed.log_evidence

    def recording(*args, **kwargs):
        threads.append(max(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"))
        return real(*args, **kwargs)

    monkeypatch.setattr(_distributed, "log_evidence", recording)
    with threadpool_limits(2, user_api="blas"):
        _selector("ais").partial_fit(data.X[:CHUNK], data.y[:CHUNK])
    assert threads == [1, 1]


@pytest.fixture
def always_workers(monkeypatch):
    """Every call with n_jobs > 1 on the joblib workers, however cheap (see test_cheap_calls_run_in_process...)."""
    monkeypatch.setattr(_distributed, "use_joblib_workers", lambda payoff, n_workers: True)


@pytest.mark.parametrize("backend", ["sgais", "ais", "ns", "bridge"])
def test_results_do_not_depend_on_n_jobs(backend, data, always_workers, one_process):
    # Every backend: the same seeds per candidate and a one-thread BLAS in the main process and the loky workers.
    parallel = _stream(_selector(backend, n_jobs=2), data)
    _assert_same_results(one_process(backend), parallel)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_dispatch_order_does_not_change_results(monkeypatch, data, n_jobs, always_workers, one_process):
    # Candidates are dispatched longest first; results must come back to their own candidates whatever the order.
    expected = one_process()
    monkeypatch.setattr(_distributed, "longest_first",
                        lambda candidates, n_features=None: list(range(len(candidates)))[::-1])
    _assert_same_results(expected, _stream(_selector(n_jobs=n_jobs), data))


def test_cheap_calls_run_in_process_and_the_workers_are_tried_again(monkeypatch):
    # Workers whose overhead never pays (a call's wall time injected at 1 s): the first two calls go to the
    # workers (the first may have started them, so its overhead is not kept), the next 64 run here, then the
    # workers are tried again; results as with n_jobs=1, bit for bit.
    data = make_linear_regression(68 * 10, n_features=2, random_state=3)
    real_parallel, worker_calls, calls = _nested.Parallel, [], [0]

    def counting_parallel(*args, **kwargs):
        worker_calls.append(calls[0])
        return real_parallel(*args, **kwargs)

    real_after = _distributed.after_joblib_call
    monkeypatch.setattr(_nested, "Parallel", counting_parallel)
    monkeypatch.setattr(_distributed, "after_joblib_call",
                        lambda payoff, on_workers, wall, seconds, n: real_after(payoff, on_workers, 1.0, seconds, n))
    sequential, parallel = _selector(n_jobs=1), _selector(n_jobs=2)
    for start in range(0, 680, 10):
        calls[0] += 1
        sequential.partial_fit(data.X[start:start + 10], data.y[start:start + 10])
        parallel.partial_fit(data.X[start:start + 10], data.y[start:start + 10])
    assert worker_calls == [1, 2, 67]
    assert parallel._joblib_payoff.calls_since_workers == 1
    _assert_same_results(sequential, parallel)


def test_joblib_workers_are_used_when_they_are_predicted_to_pay():
    payoff = _distributed.JoblibPayoff
    assert _distributed.use_joblib_workers(payoff(), 2)  # never tried
    # Two updates of 0.4 s: 0.8 s here, 0.4 s + overhead on 2 workers.
    assert _distributed.use_joblib_workers(payoff(0.3, 5, (0.4, 0.4)), 2)
    assert not _distributed.use_joblib_workers(payoff(0.5, 5, (0.4, 0.4)), 2)
    assert not _distributed.use_joblib_workers(payoff(0.3, 5, (0.7, 0.1)), 2)  # the longest update bounds the wall
    assert _distributed.use_joblib_workers(payoff(0.5, 64, (0.4, 0.4)), 2)  # tried again after 64 calls here
    # The first call on the workers may have started them: its overhead is not kept, and the next goes there too.
    first = _distributed.after_joblib_call(payoff(), True, wall=3.0, seconds=[0.6, 0.2, 0.4], n_workers=2)
    assert first == payoff(None, 0, (0.6, 0.2, 0.4), workers_started=True)
    assert _distributed.use_joblib_workers(first, 2)
    after = _distributed.after_joblib_call(first, True, wall=1.0, seconds=[0.6, 0.2, 0.4], n_workers=2)
    assert after == payoff(pytest.approx(0.4), 0, (0.6, 0.2, 0.4), True)  # 1.0 s against max(1.2 / 2, 0.6)
    assert _distributed.after_joblib_call(after, False, 9.0, [0.1], 2) == payoff(after.overhead, 1, (0.1,), True)


def test_longest_first_orders_by_the_last_chunk_time():
    class Fitted:
        def __init__(self, seconds):
            self.evidence_history_ = [SimpleNamespace(seconds=s) for s in seconds]

    unfitted = BayesianLinearRegressor()
    candidates = [Fitted([9.0, 0.1]), Fitted([0.5]), unfitted, Fitted([0.5, 2.0])]
    assert _distributed.longest_first(candidates) == [3, 1, 0, 2]  # ties keep list order


def test_a_first_call_starts_the_largest_candidates_first():
    """Before any candidate has a history, particles times parameters order them (a choice of K listed from one
    component up would otherwise start the slowest last); a candidate that does not say (a classifier, whose
    model follows its classes) or whose model cannot be built counts as smallest, in list order; once every
    candidate has a history, the last chunk's time orders them again."""
    from evidence_select import BayesianLogisticClassifier, BayesianMixture

    candidates = [BayesianMixture(1), BayesianMixture(3), BayesianLogisticClassifier(), BayesianMixture(2),
                  BayesianMixture(2, n_particles=40), BayesianMixture(None), BayesianMixture(-1)]
    # 20 particles x 2 groups x (K - 1 + 2 K d) parameters
    assert [_distributed.first_fit_size(c, 2) for c in candidates] == [160.0, 560.0, 0.0, 360.0, 720.0, 0.0, 0.0]
    assert _distributed.longest_first(candidates, n_features=2) == [4, 1, 3, 0, 2, 5, 6]
    assert _distributed.longest_first(candidates) == [0, 1, 2, 3, 4, 5, 6]  # no rows given: list order
    fitted = [BayesianMixture(k, n_particles=4, n_replicates=1, random_state=0).fit(make_mixture(40, random_state=0).X)
              for k in (1, 3)]
    fitted[0].evidence_history_[-1] = fitted[0].evidence_history_[-1]._replace(seconds=2.0)
    fitted[1].evidence_history_[-1] = fitted[1].evidence_history_[-1]._replace(seconds=1.0)
    assert _distributed.longest_first(fitted, n_features=2) == [0, 1]


def test_the_first_call_dispatches_by_size(monkeypatch, data):
    """advance_candidates passes the call's columns to the ordering, so a first call is ordered by size."""
    seen = []
    real = _distributed.longest_first

    def recording(candidates, n_features=None):
        seen.append(n_features)
        return real(candidates, n_features)

    monkeypatch.setattr(_distributed, "longest_first", recording)
    _selector(n_jobs=1).partial_fit(data.X[:50], data.y[:50])
    assert seen == [data.X.shape[1]]


@pytest.mark.parametrize("backend", ["sgais", "ais", "ns", "bridge"])
def test_dask_resident_candidates_match_n_jobs_1(backend, client, data, one_process):
    resident = _stream(_selector(backend, parallel="dask"), data)
    _assert_same_results(one_process(backend), resident)


def _mixture_selector(n_jobs_each, **params):
    # Restarts each time the rows seen double from batch_size, so every candidate replays three times.
    small = dict(n_particles=8, n_mcmc_steps=3, initial_mcmc_factor=2, batch_size=100)
    candidates = [(f"K={k}", PriorReplayMixture(k, n_jobs=n_jobs_each, **small)) for k in (1, 2)]
    return EvidenceModelSelector(candidates, random_state=0, **params)


def _stream_mixture(selector):
    X = make_mixture(800, random_state=3).X
    for start in range(0, len(X), 200):
        selector.partial_fit(X[start:start + 200])
    return selector


@pytest.fixture(scope="module")
def mixture_one_process():
    """The mixture selector streamed in one process, once for the module's tests (which only read it)."""
    return _stream_mixture(_mixture_selector(None, n_jobs=1))


@pytest.mark.parametrize("where", ["loky", "joblib-dask", "dask"])
def test_candidates_replaying_on_their_own_workers_match_one_process(where, client, always_workers,
                                                                     mixture_one_process):
    # Each candidate's n_jobs grants its restarts' replicate groups two workers: processes of its own in a loky
    # worker; in a dask worker (daemonic, so no processes) the cluster's idle thread (parallel="dask") or its own
    # task (joblib's dask backend). Never the pool the candidate's task occupies, and still the bits of one process.
    expected = mixture_one_process
    assert sum(r.n_replayed > 0 for r in expected.estimators_[1].evidence_history_) >= 2
    params = dict(parallel="dask") if where == "dask" else dict(n_jobs=2)
    with parallel_config(backend="dask") if where == "joblib-dask" else parallel_config():
        _assert_same_results(expected, _stream_mixture(_mixture_selector(2, **params)))


class AlignmentRecordingRegressor(BayesianLinearRegressor):
    """Records whether each chunk reached ``partial_fit`` aligned (a module-level class, so workers import it)."""

    def partial_fit(self, X, y, **params):
        self.chunks_aligned_ = getattr(self, "chunks_aligned_", []) + [X.flags.aligned and y.flags.aligned]
        return super().partial_fit(X, y, **params)


def test_scattered_chunks_reach_the_updates_aligned(client, data):
    # Dask deserialises a scattered chunk at any byte offset of its message frame; unaligned, X.T @ X leaves BLAS
    # and sums differently in the last bit, so results would depend on the worker (seen with 16 candidates).
    selector = _selector(parallel="dask").set_params(
        estimators=[("a", AlignmentRecordingRegressor(**FAST)), ("b", AlignmentRecordingRegressor(**FAST))])
    _stream(selector, data)
    assert [est.chunks_aligned_ for est in selector.estimators_] == [[True, True], [True, True]]


def test_aligned_copies_only_unaligned_arrays():
    values = np.random.default_rng(0).normal(size=(500, 11))
    raw = np.frombuffer(memoryview(bytearray(values.nbytes + 8))[3:3 + values.nbytes], dtype=np.uint8)
    raw[:] = values.view(np.uint8).ravel()
    unaligned = raw.view(np.float64).reshape(values.shape)  # the same values, 3 bytes off a float's boundary
    assert not unaligned.flags.aligned
    assert not np.array_equal(unaligned.T @ unaligned, values.T @ values)  # why it matters
    fixed = _distributed.aligned(unaligned)
    assert fixed.flags.aligned and np.array_equal(fixed.T @ fixed, values.T @ values)
    assert _distributed.aligned(values) is values


def test_dask_candidates_stay_on_their_workers(client, data):
    selector = _selector(parallel="dask")
    selector.partial_fit(data.X[:CHUNK], data.y[:CHUNK])  # places the candidates (one scatter each)
    homes = list(selector.estimators_.workers)
    assert len(set(homes)) == 2  # round-robin over both workers
    client.run(lambda dask_worker: (dask_worker.transfer_outgoing_log.clear(),
                                    dask_worker.transfer_incoming_log.clear()))
    for start in range(CHUNK, N_ROWS, CHUNK):
        selector.partial_fit(data.X[start:start + CHUNK], data.y[start:start + CHUNK])
        held = client.who_has(selector.estimators_.futures)
        assert [list(held[f.key]) for f in selector.estimators_.futures] == [[home] for home in homes]
    # Per chunk, the only data a worker fetched from a peer is the chunk itself (X and y: 24 bytes a row);
    # a candidate's state (reservoir, particles) never left its worker.
    assert _candidate_keys_sent(client) == []
    assert _bytes_received_from_peers(client) <= (N_ROWS - CHUNK) * 24
    # The check can fail: reading the fitted candidates fetches them from their workers.
    assert selector.estimators_[0].n_samples_seen_ == N_ROWS
    assert len(_candidate_keys_sent(client)) == 2


def test_planned_homes_move_candidates_only_when_it_pays():
    # Round-robin put the two slow candidates on one worker: 10 + 10 against 1 + 1 seconds per call.
    assert _distributed.planned_homes(["a", "b", "a", "b"], [10.0, 1.0, 10.0, 1.0], ["a", "b"]) == \
        ["a", "b", "b", "a"]  # a swap: 11 | 11
    assert _distributed.planned_homes(["a", "b", "b"], [6.0, 3.0, 3.0], ["a", "b"]) == ["a", "b", "b"]  # balanced
    assert _distributed.planned_homes(["a", "a"], [3.0, 3.0], ["a", "b"]) == ["a", "b"]  # a move: 6 | 0 -> 3 | 3
    # Within the slack: 10 | 9.6 could become 9.8 | 9.8, not worth sending a state.
    assert _distributed.planned_homes(["a", "b", "a"], [9.8, 9.6, 0.2], ["a", "b"]) == ["a", "b", "a"]
    # A worker that left the cluster's list keeps no candidate.
    assert _distributed.planned_homes(["gone", "b"], [1.0, 1.0], ["a", "b"]) == ["a", "b"]


def _candidates(n, **params):
    return _selector(**params).set_params(estimators=[(f"s2={v:g}", BayesianLinearRegressor(noise_variance=v, **FAST))
                                                      for v in np.geomspace(0.5, 4.0, n)])


def test_dask_moves_slow_candidates_apart_with_the_same_results(client, data):
    selector = _candidates(4, parallel="dask").partial_fit(data.X[:CHUNK], data.y[:CHUNK])
    homes = list(selector.estimators_.workers)
    # Where the first call's last two candidates ran depends on which worker freed first; two of the four share
    # a worker either way. As if those two were ten times slower: the next call starts them on different workers.
    slow = next([a, b] for a in range(4) for b in range(a + 1, 4) if homes[a] == homes[b])
    selector.estimators_.seconds = [10.0 if k in slow else 1.0 for k in range(4)]
    client.run(lambda dask_worker: dask_worker.transfer_outgoing_log.clear())
    selector.partial_fit(data.X[CHUNK:], data.y[CHUNK:])
    moved = list(selector.estimators_.workers)
    assert moved[slow[0]] != moved[slow[1]]
    # Each state that changed workers travelled once, and no other state travelled.
    assert len(_candidate_keys_sent(client)) == sum(h != m for h, m in zip(homes, moved)) >= 1
    _assert_same_results(_stream(_candidates(4, n_jobs=1), data), selector)


def test_a_worker_without_candidates_left_takes_the_others_waiting_ones(client, data):
    selector = _candidates(6, parallel="dask").partial_fit(data.X[:CHUNK], data.y[:CHUNK])
    crowded = selector.estimators_.workers[0]
    # As if every candidate lived on one worker, with nothing measured to plan by: it queues two updates, the
    # other worker takes the waiting ones (and each candidate stays where it ran).
    selector.estimators_.workers = [crowded] * 6
    selector.estimators_.seconds = [0.0] * 6
    selector.partial_fit(data.X[CHUNK:], data.y[CHUNK:])
    ran_on = list(selector.estimators_.workers)
    assert ran_on.count(crowded) < 6 and len(set(ran_on)) == 2
    held = client.who_has(selector.estimators_.futures)
    assert [list(held[future.key]) for future in selector.estimators_.futures] == [[worker] for worker in ran_on]
    _assert_same_results(_stream(_candidates(6, n_jobs=1), data), selector)


def _sleep_after(seconds, _after):
    time.sleep(seconds)
    return seconds


def test_a_calls_last_candidates_go_to_the_first_worker_that_frees(client):
    # Planned as two per worker, but this call candidate 0 (planned first) costs far more than its time so far
    # said: the last two wait for a free worker instead of queueing behind it, the longest first.
    workers = sorted(client.scheduler_info()["workers"])
    durations = [2.0, 0.05, 0.05, 0.05]
    seconds_so_far = [4.0, 3.0, 2.0, 1.0]
    homes = [workers[0], workers[1], workers[0], workers[1]]

    def submit(k, worker, after):
        future = client.submit(_sleep_after, durations[k], after, workers=[worker], allow_other_workers=False,
                               pure=False)
        return future, future

    futures, summaries, ran_on = _distributed._dispatch(submit, seconds_so_far, homes, workers)
    assert summaries == durations
    assert ran_on == [workers[0], workers[1], workers[1], workers[1]]
    assert client.who_has(futures[2])[futures[2].key] == (workers[1],)


class FailingSecondCallRegressor(BayesianLinearRegressor):
    """A candidate whose update fails once it has seen rows (a worker task that raises)."""

    def partial_fit(self, X, y, **params):
        if getattr(self, "n_samples_seen_", 0):
            raise RuntimeError("this candidate fails on its second call")
        return super().partial_fit(X, y, **params)


def test_a_candidate_failing_on_a_worker_leaves_the_dask_selector_as_it_was(client, data):
    selector = _candidates(6, parallel="dask")
    selector.estimators[4] = ("failing", FailingSecondCallRegressor(noise_variance=2.0, **FAST))
    selector.partial_fit(data.X[:CHUNK], data.y[:CHUNK])
    before = selector.log_evidences_.copy()
    with pytest.raises(RuntimeError, match="fails on its second call"):
        selector.partial_fit(data.X[CHUNK:], data.y[CHUNK:])
    assert selector.n_samples_seen_ == CHUNK
    np.testing.assert_array_equal(selector.log_evidences_, before)
    assert [est.n_samples_seen_ for est in selector.estimators_] == [CHUNK] * 6


def test_dask_selector_pickles_and_resumes_with_joblib(client, data):
    resident = _selector(parallel="dask").partial_fit(data.X[:CHUNK], data.y[:CHUNK])
    restored = pickle.loads(pickle.dumps(resident))
    assert isinstance(restored.estimators_, list) and isinstance(restored.named_estimators_, dict)
    restored.set_params(parallel="joblib").partial_fit(data.X[CHUNK:], data.y[CHUNK:])
    local = _selector().partial_fit(data.X[:CHUNK], data.y[:CHUNK]).partial_fit(data.X[CHUNK:], data.y[CHUNK:])
    _assert_same_results(local, restored)
    resident.partial_fit(data.X[CHUNK:], data.y[CHUNK:])  # continues on the workers
    _assert_same_results(local, resident)
    np.testing.assert_array_equal(local.predict(data.X[:5]), resident.predict(data.X[:5]))


@pytest.fixture(params=["n_jobs=1", "n_jobs=2", "dask"])
def executor(request, monkeypatch):
    """Selector parameters for each place a candidate can run (joblib workers forced for n_jobs=2)."""
    if request.param == "dask":
        request.getfixturevalue("client")
        return dict(parallel="dask")
    monkeypatch.setattr(_distributed, "use_joblib_workers", lambda payoff, n_workers: True)
    return dict(n_jobs=int(request.param[-1]))


def test_candidates_warnings_reach_the_caller_wherever_they_run(executor, data):
    # A feature of scale 1e4 makes each candidate warn in its own process; the caller gets every warning, at its
    # own line, naming the candidate (a worker's warnings used to reach only its stderr or log).
    X = data.X * [1.0, 1e4]
    with pytest.warns(FeatureScaleWarning) as caught:
        _selector(**executor).partial_fit(X[:CHUNK], data.y[:CHUNK])
    relayed = [w for w in caught if issubclass(w.category, FeatureScaleWarning)]
    assert sorted(str(w.message).rsplit(" [", 1)[1] for w in relayed) == ["candidate 's2=0.5']", "candidate 's2=2']"]
    assert {w.filename for w in relayed} == {__file__}


def test_an_error_filter_on_a_candidates_warning_leaves_the_selector_as_it_was(executor, data):
    selector = _selector(**executor).partial_fit(data.X[:CHUNK], data.y[:CHUNK])
    before = selector.log_evidences_.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        # Both candidates raise the same warning, which the relay raises once, naming both (relay_warnings).
        with pytest.raises(FeatureScaleWarning, match=r"\[candidates 's2=0.5', 's2=2'\]"):
            selector.partial_fit(data.X[CHUNK:] * [1.0, 1e4], data.y[CHUNK:])
    assert selector.n_samples_seen_ == CHUNK
    np.testing.assert_array_equal(selector.log_evidences_, before)
    assert selector.estimators_[0].n_samples_seen_ == CHUNK


@pytest.mark.filterwarnings("ignore::evidence_select.EvidenceConvergenceWarning",
                            "ignore::evidence_select.SamplerDegeneracyWarning")
def test_failed_checks_outlive_the_records_a_job_carries(executor, data):
    # Two particles cannot keep three lineages: the first chunk fails the lineage check. A joblib job carries only
    # the last 16 records, so after 20 chunks only the selector's own memory of the check keeps it.
    candidates = [("tiny", BayesianLinearRegressor(n_particles=2, batch_size=10, random_state=0)),
                  ("fine", BayesianLinearRegressor(**FAST))]
    selector = EvidenceModelSelector(candidates, random_state=0, **executor)
    for start in range(0, N_ROWS, 10):
        selector.partial_fit(data.X[start:start + 10], data.y[start:start + 10])
    assert "lineages" in selector.evidence_checks_[0]
    assert selector.evidence_checks_ == [est.evidence_checks_ for est in selector.estimators_]


def test_workers_with_several_threads_are_warned_about_once_placed(data):
    # Updates in one worker process take turns (recording warnings swaps process-wide state), so a worker's extra
    # threads stay idle; the placement says so. One-thread workers (the module's cluster) get no such warning.
    with pytest.warns(UserWarning, match="one thread each"):
        _distributed._warn_threaded_workers({"a": 1, "b": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _distributed._warn_threaded_workers({"a": 1, "b": 1})
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) \
            as cluster, distributed.Client(cluster):
        selector = _selector(parallel="dask")
        with pytest.warns(UserWarning, match=r"1 of the cluster's 1 workers have more than one thread \(up to 2\)"):
            selector.partial_fit(data.X[:CHUNK], data.y[:CHUNK])
        with warnings.catch_warnings():  # placed once: later calls keep the candidates where they are, silently
            warnings.simplefilter("error", UserWarning)
            selector.partial_fit(data.X[CHUNK:], data.y[CHUNK:])


def test_one_thread_workers_get_no_threads_warning(client, data):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _stream(_selector(parallel="dask"), data)
    assert not [w for w in caught if "thread" in str(w.message)]
