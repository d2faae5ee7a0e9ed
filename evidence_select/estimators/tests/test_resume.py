"""Exact resume: an estimator saved after chunk k (pickle, joblib.dump, save_checkpoint) and loaded in a
fresh Python process continues the stream bit for bit as the uninterrupted run (issue 6).

The streams are small but reach every state the engine carries: the reservoir fills and then replaces
rows (Algorithm R draws from the generator), control-variate references are re-centred, and groups are
resampled, so a generator, reservoir or reference that did not travel with the pickle would show.
"""

import os
import pickle
import subprocess
import sys

import joblib
import numpy as np
import pytest

from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture, save_checkpoint
from evidence_select.datasets import make_linear_regression, make_mixture, make_softmax_classification

from ._state import fingerprint

CHUNK, N_CHUNKS = 60, 8
POSITIONS = (1, 2, 3, 5, 7)  # resume after these chunks (of 8)
SETTINGS = dict(n_particles=5, n_replicates=2, batch_size=CHUNK, n_mcmc_steps=2, reservoir_size=150, random_state=7)
FORMATS = ("pickle", "joblib", "checkpoint")


def _stream(kind):
    n = CHUNK * N_CHUNKS
    if kind == "linear":
        data = make_linear_regression(n, random_state=1)
        return BayesianLinearRegressor(**SETTINGS), data.X, data.y, {}
    if kind == "logistic":
        data = make_softmax_classification(n, n_features=3, random_state=1)
        return BayesianLogisticClassifier(**SETTINGS), data.X, data.y, {"classes": [0, 1, 2, 3]}
    return BayesianMixture(2, **SETTINGS), make_mixture(n, random_state=1).X, None, {}


def continue_stream(est, X, y, first_chunk):
    """Feed chunks ``first_chunk..N_CHUNKS-1`` one ``partial_fit`` at a time (the ``classes`` call is chunk 0)."""
    for k in range(first_chunk, N_CHUNKS):
        rows = slice(k * CHUNK, (k + 1) * CHUNK)
        est.partial_fit(X[rows], None if y is None else y[rows])
    return est


def _dump(est, path, fmt):
    if fmt == "pickle":
        with open(path, "wb") as stream:
            pickle.dump(est, stream)
    elif fmt == "joblib":
        joblib.dump(est, path)
    else:
        save_checkpoint(est, path)


def _load(path, fmt):
    """Load with the reader matching ``fmt`` (``load_checkpoint`` for checkpoints)."""
    from evidence_select import load_checkpoint

    if fmt == "pickle":
        with open(path, "rb") as stream:
            return pickle.load(stream)
    return joblib.load(path) if fmt == "joblib" else load_checkpoint(path)


def resume_all(job_path):
    """Child-process entry: load every saved estimator in the job, continue it, return the fingerprints."""
    with open(job_path, "rb") as stream:
        job = pickle.load(stream)
    X, y = job["X"], job["y"]
    return {(k, fmt): fingerprint(continue_stream(_load(path, fmt), X, y, k)) for (k, fmt), path in job["saved"].items()}


def _run_in_fresh_process(job_path):
    script = ("import pickle, sys; from evidence_select.estimators.tests.test_resume import resume_all; "
              f"sys.stdout.buffer.write(pickle.dumps(resume_all({str(job_path)!r})))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return pickle.loads(result.stdout)


# reservoir_size=150 is smaller than the stream on purpose (the reservoir must replace rows), so the mixture's
# periodic restarts are skipped with a warning.
@pytest.mark.filterwarnings("ignore:SGAIS. the periodic restart at row .* was skipped:"
                            "evidence_select.EvidenceConvergenceWarning")
@pytest.mark.parametrize("kind", ["linear", pytest.param("logistic", marks=pytest.mark.slow),
                                  pytest.param("mixture", marks=pytest.mark.slow)])
def test_resume_in_fresh_process_is_bit_identical(kind, tmp_path):
    est, X, y, first_kwargs = _stream(kind)
    est.partial_fit(X[:CHUNK], None if y is None else y[:CHUNK], **first_kwargs)
    saved = {}
    for k in range(1, N_CHUNKS):  # k chunks are in
        if k in POSITIONS:
            for fmt in FORMATS:
                saved[k, fmt] = tmp_path / f"after{k}.{fmt}"
                _dump(est, saved[k, fmt], fmt)
        est.partial_fit(X[k * CHUNK:(k + 1) * CHUNK], None if y is None else y[k * CHUNK:(k + 1) * CHUNK])
    # The reference is a separate, never-saved run (saving must not disturb the stream either).
    reference_est, *_ = _stream(kind)
    reference_est.partial_fit(X[:CHUNK], None if y is None else y[:CHUNK], **first_kwargs)
    reference = fingerprint(continue_stream(reference_est, X, y, 1))
    assert fingerprint(est) == reference
    state = reference_est.sgais_state_
    # The stream reached the states a resume has to carry over.
    assert state.reservoir.n_seen > state.reservoir.capacity and state.n_reference > CHUNK
    assert sum(record.n_resampled for record in reference_est.evidence_history_) > 0

    job_path = tmp_path / "job.pkl"
    with open(job_path, "wb") as stream:
        pickle.dump(dict(X=X, y=y, saved={key: str(path) for key, path in saved.items()}), stream)
    resumed = _run_in_fresh_process(job_path)
    assert sorted(resumed) == sorted(saved) and len(resumed) == len(POSITIONS) * len(FORMATS)
    mismatched = sorted(key for key, value in resumed.items() if value != reference)
    assert not mismatched, f"resumed runs that differ from the uninterrupted one: {mismatched}"


def test_fingerprint_sees_a_generator_that_did_not_travel():
    """Control: a resume whose generator restarted from the seed differs (the comparison can fail)."""
    est, X, y, first_kwargs = _stream("linear")
    est.partial_fit(X[:CHUNK], y[:CHUNK], **first_kwargs)
    for k in range(1, 4):
        est.partial_fit(X[k * CHUNK:(k + 1) * CHUNK], y[k * CHUNK:(k + 1) * CHUNK])
    reference = fingerprint(continue_stream(pickle.loads(pickle.dumps(est)), X, y, 4))
    broken = pickle.loads(pickle.dumps(est))
    broken.sgais_state_ = broken.sgais_state_._replace(rng=np.random.default_rng(SETTINGS["random_state"]))
    assert fingerprint(continue_stream(broken, X, y, 4))[1] != reference[1]  # the history itself differs
