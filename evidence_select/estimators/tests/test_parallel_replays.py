"""A restart's replay runs its replicate groups as independent tasks: ``n_jobs`` changes where, never the bits."""

import os
import threading
import time
import warnings

import numpy as np
import pytest
from joblib import parallel_config

from evidence_select import BayesianLinearRegressor, BayesianMixture
from evidence_select.datasets import make_mixture
from evidence_select.sgais._engine import SamplerDegeneracyWarning
from evidence_select.sgais._policy import replay_from_prior
from evidence_select.sgais._state import ErrorWidening
from evidence_select.exceptions import EvidenceConvergenceWarning
from evidence_select.utils import make_generator

# Restarts each time the rows seen double from batch_size: after 200, 400 and 800 rows.
_SMALL = dict(n_particles=8, n_mcmc_steps=3, initial_mcmc_factor=2, batch_size=100)


def _mixture_run(**params):
    data = make_mixture(800, random_state=3)
    return BayesianMixture(2, random_state=0, **_SMALL, **params).fit(data.X)


def _fingerprint(est):
    state = est.sgais_state_
    return (est.log_evidence_, est.log_evidence_std_, state.particles.tobytes(), state.log_weights.tobytes(),
            [(r.log_evidence, r.n_replayed) for r in est.evidence_history_])


@pytest.mark.slow
def test_replays_on_two_workers_give_the_same_bits():
    serial = _mixture_run()
    assert sum(r.n_replayed > 0 for r in serial.evidence_history_) >= 2  # the restarts this test is about ran
    assert _fingerprint(_mixture_run(n_jobs=2)) == _fingerprint(serial)


@pytest.mark.slow
def test_a_callers_parallel_config_reaches_the_replays():
    serial = _mixture_run()
    with parallel_config(n_jobs=2):
        parallel = _mixture_run()
    assert _fingerprint(parallel) == _fingerprint(serial)


@pytest.mark.slow
def test_a_replay_of_the_groups_left_behind_gives_the_same_bits_on_two_workers():
    # Two of three groups set 2000 nats low before the periodic restart at 800 rows: the gate replays those two
    # alone, side by side on two workers, each group's order and seed drawn first whether it replays or not.
    from evidence_select.sgais.tests.test_replay_gate import _GatedEarly, _three_clusters
    X = _three_clusters(800, 0)
    runs = []
    for n_jobs in (1, 2):
        est = _GatedEarly(3, batch_size=100, n_particles=10, n_replicates=3, random_state=0, n_jobs=n_jobs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X[:700])
            state = est.sgais_state_
            est.sgais_state_ = state._replace(log_evidence=state.log_evidence - np.array([0.0, 2000.0, 2000.0]))
            est.partial_fit(X[700:])
        assert est.evidence_history_[-1].n_replayed == 800
        runs.append(_fingerprint(est))
    assert runs[0] == runs[1]


class _PidState:
    """Stands in for a stream's final state: one particle at (process id, thread id) of the worker."""

    def __init__(self):
        self.particles = np.array([[float(os.getpid()), float(threading.get_ident())]])
        self.log_weights = np.zeros((1, 1))
        self.log_evidence = np.zeros(1)
        self.log_evidence_variance = np.zeros(1)
        self.reference = self.reference_grad = None
        self.widening, self.n_datum_evaluations, self.n_reference = ErrorWidening(), 1, 1


def _pid_stream(rng, model, config, X, y):
    time.sleep(0.5)  # long enough that one worker cannot take both tasks before the other starts
    return _PidState()


def _warning_stream(rng, model, config, X, y):
    warnings.warn("a replay's degraded chunk", EvidenceConvergenceWarning)
    warnings.warn("a replay's sampler degenerated", SamplerDegeneracyWarning)
    return _PidState()


def _small_mixture():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 100 rows and 8 particles: warned as too few, which they are
        return BayesianMixture(2, random_state=0, **_SMALL).fit(make_mixture(100, random_state=0).X)


def _replay(est, stream_fn, **config):
    state_config = est.sgais_config_._replace(n_replicates=2)
    with parallel_config(**config):
        replay = replay_from_prior(make_generator(0), est.sgais_state_.reservoir, (np.zeros((5, 2)), None),
                                   est.model_, state_config, stream_fn)
    return replay.particles


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_replays_warnings_reach_the_caller_from_any_worker_except_its_own_degradation(n_jobs):
    est = _small_mixture()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _replay(est, _warning_stream, n_jobs=n_jobs)
    assert [(w.category, str(w.message)) for w in caught] == [(SamplerDegeneracyWarning,
                                                               "a replay's sampler degenerated")] * 2


def _replay_threads(**config):
    """The (process id, thread id) pairs that ran a two-group replay under ``parallel_config(**config)``."""
    return set(map(tuple, _replay(_small_mixture(), _pid_stream, **config).theta.tolist()))


def test_replay_groups_run_in_separate_workers_only_when_asked():
    here = (float(os.getpid()), float(threading.get_ident()))
    assert _replay_threads(n_jobs=1) == {here}
    workers = _replay_threads(n_jobs=2)
    assert len({pid for pid, _ in workers}) == 2 and here[0] not in {pid for pid, _ in workers}


def test_threads_run_the_replay_groups_in_the_calling_thread():
    # Each group records its warnings, which swaps the process-wide warning filters: threads would race on them.
    assert _replay_threads(backend="threading", n_jobs=2) == {(float(os.getpid()), float(threading.get_ident()))}


@pytest.mark.parametrize("n_jobs", [0, 1.5, "2"])
def test_bad_n_jobs_is_refused_before_any_work(n_jobs):
    est = BayesianLinearRegressor(n_jobs=n_jobs)
    with pytest.raises(ValueError, match="n_jobs"):
        est.fit(np.zeros((10, 2)), np.zeros(10))
    assert not hasattr(est, "sgais_state_")


def test_estimators_pickled_without_n_jobs_load_with_the_default():
    est = BayesianLinearRegressor()
    state = est.__getstate__()
    del state["n_jobs"]
    loaded = BayesianLinearRegressor.__new__(BayesianLinearRegressor)
    loaded.__setstate__(state)
    assert loaded.get_params()["n_jobs"] is None
