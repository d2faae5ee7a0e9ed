"""Fixed-seed runs over every SGAIS code path, each summarised as a :class:`Fingerprint` (see test_sgais_regression.py)."""

import hashlib
import os
import platform
import tempfile
import warnings
from typing import NamedTuple

import numpy as np

from evidence_select import (BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture, load_checkpoint,
                             save_checkpoint)
from evidence_select.datasets import make_linear_regression, make_softmax_classification
from evidence_select.sgais._engine import PAPER_SETTINGS, SGAISConfig, evidence_estimate, sgais_init, sgais_update
from evidence_select.testing._shift_streams import mixture_shift as shift_mixture_data
from evidence_select.models import LinearGaussianModel, SoftmaxRegressionModel


class Fingerprint(NamedTuple):
    """What a case pins: its floats (compared to a relative tolerance) and a digest of its decisions (exact)."""

    floats: tuple  # log Z, its std, then sums of |x| and x**2 of the final state's arrays and the records' floats
    decisions: str  # sha256 (16 hex digits) of every integer the run decided: record counts and state counters


def float_summary(*arrays):
    """Sums of ``|x|`` and ``x**2`` of each array: one number per array and power, none cancelling to 0."""
    summary = []
    for array in arrays:
        array = np.asarray(array, dtype=float)
        summary += [float(np.sum(np.abs(array))), float(np.sum(array**2))]
    return tuple(summary)


def digest(*arrays):
    """sha256 (first 16 hex digits) of the integer arrays' bytes, in order."""
    sha = hashlib.sha256()
    for array in arrays:
        sha.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
    return sha.hexdigest()[:16]


def _kernels():
    """numpy's enabled SIMD extensions and the BLAS build and kernel architecture in use.

    Both choose code paths whose results differ in the last bits (a float64 ``log`` on AVX512 against AVX2, a
    GEMM kernel's summation order), and fixed-input probes miss some of them.
    """
    from threadpoolctl import threadpool_info

    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # a numpy that keeps it elsewhere: the probes below still tell most machines apart
        __cpu_features__ = {}
    blas = sorted(f"{info.get('internal_api')} {info.get('version')} {info.get('architecture')}"
                  for info in threadpool_info() if info.get("user_api") == "blas")
    return f"{sorted(k for k, on in __cpu_features__.items() if on)} {blas}"


def environment_key():
    """numpy's version, the machine, its SIMD and BLAS kernels and a digest of the maths library's last bits on
    fixed inputs.

    Runs whose Metropolis-Hastings decisions follow long HMC trajectories amplify a last-bit difference of
    ``exp`` or a matrix product until a decision flips; their pins hold only where this key is the same.
    """
    x = np.linspace(-30.0, 30.0, 4001)
    matrix = np.cov(np.sin(np.outer(np.arange(1.0, 9.0), x[:64])))
    wide = np.sin(np.outer(np.arange(1.0, 65.0), x[:256]))
    probes = [np.exp(x), np.log1p(np.exp(x)), np.tanh(x), np.exp(x.astype(np.float32)).astype(float),
              np.linalg.cholesky(matrix + np.eye(8)), matrix @ matrix, np.log(np.abs(x) + 1e-3),
              np.logaddexp(x, -x), wide @ wide.T, np.einsum("ij,ij->i", wide, wide)]
    sha = hashlib.sha256(f"numpy {np.__version__} on {platform.machine()}; {_kernels()}".encode())
    for probe in probes:
        sha.update(np.ascontiguousarray(probe, dtype=float).tobytes())
    return sha.hexdigest()[:16]


def record_summary(records):
    """The integer fields of every record, in order (all but the wall time are deterministic)."""
    return [(r.n_samples_seen, r.n_annealing_steps, r.n_resampled, r.n_reheat_steps, r.n_jumps_accepted,
             r.n_replayed) for r in records]


def counters(state):
    """The state's integer counters."""
    return np.array([state.n_samples_seen, state.n_chunks, state.n_datum_evaluations, state.n_reference,
                     state.reservoir.n_stored])


def fingerprint(log_z, std, state, records):
    step_scales = np.zeros(0) if state.step_scales is None else state.step_scales
    record_floats = [(r.log_evidence, r.log_evidence_std, r.ess) for r in records]
    floats = (float(log_z), float(std)) + float_summary(state.particles, state.log_weights, state.log_evidence,
                                                        state.log_evidence_variance, record_floats, step_scales)
    return Fingerprint(floats, digest(np.array(record_summary(records)), counters(state)))


def in_file_order(estimator):
    """The pins check the engine on the rows in their given order, not in ``fit``'s seeded shuffle."""
    return estimator.set_params(shuffle=False)


def summarise_estimator(estimator):
    return fingerprint(estimator.log_evidence_, estimator.log_evidence_std_, estimator.sgais_state_,
                       estimator.evidence_history_)


def run_engine(X, y, model, config, seed):
    state = sgais_init(np.random.default_rng(seed), model, config, X.shape[1], None if y is None else y.dtype)
    records = []
    for start in range(0, len(X), config.batch_size):
        chunk = slice(start, start + config.batch_size)
        state, record, _ = sgais_update(state, X[chunk], None if y is None else y[chunk], model, config)
        records.append(record)
    log_z, std = evidence_estimate(state)
    return fingerprint(log_z, std, state, records)


#: The cases pinned before the exact HMC kernel existed keep SGHMC throughout, so their pins still check the
#: SGHMC paths bit for bit; the ``*_exact_moves`` cases cover the exact kernel (the default on the first rows).
SGHMC_ONLY = dict(exact_move_rows=0)


#: The paper's known-noise linear model (the estimator's default integrates the noise and the scale out).
KNOWN_NOISE = dict(noise_variance=1.0, prior_scale=1.0)


def _linear():
    data = make_linear_regression(1200, random_state=1)
    return data.X, data.y


def _softmax():
    data = make_softmax_classification(600, n_features=3, n_classes=3, random_state=2)
    return data.X, data.y


def case_linear_estimator():
    X, y = _linear()
    return summarise_estimator(BayesianLinearRegressor(**KNOWN_NOISE, n_particles=8, **SGHMC_ONLY, batch_size=300,
                                                       random_state=0, shuffle=False).fit(X, y))


def case_linear_no_resampling_sghmc_data_schedule():
    X, y = _linear()
    est = BayesianLinearRegressor(**KNOWN_NOISE, n_particles=8, **SGHMC_ONLY, batch_size=300, resample_threshold=0.0,
                                  integrator="sghmc",
                                  step_size_schedule="data", random_state=1)
    return summarise_estimator(in_file_order(est).fit(X, y))


def case_linear_no_control_variates():
    X, y = _linear()
    est = BayesianLinearRegressor(**KNOWN_NOISE, n_particles=8, **SGHMC_ONLY, batch_size=300, control_variates=False,
                                  random_state=2)
    return summarise_estimator(in_file_order(est).fit(X, y))


def case_linear_beyond_reservoir():
    X, y = _linear()
    est = BayesianLinearRegressor(**KNOWN_NOISE, n_particles=8, **SGHMC_ONLY, batch_size=200, reservoir_size=300,
                                  random_state=3)
    return summarise_estimator(in_file_order(est).fit(X, y))


def case_linear_paper_settings():
    X, y = _linear()
    config = SGAISConfig(**{**PAPER_SETTINGS, **SGHMC_ONLY, "n_mcmc_steps": 5, "n_replicates": 2, "batch_size": 300})
    return run_engine(X, y, LinearGaussianModel(5), config, 4)


def case_linear_reheat_cap_warns():
    X, y = _linear()
    config = SGAISConfig(**SGHMC_ONLY, n_particles=8, n_replicates=2, batch_size=400, reheat_after_steps=1,
                         max_annealing_steps=8, target_ess=0.99)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_engine(X, y, LinearGaussianModel(5), config, 5)


def case_linear_restart_growth():
    X, y = _linear()
    config = SGAISConfig(**SGHMC_ONLY, n_particles=8, n_replicates=2, batch_size=150, restart_on_surprise=True, restart_growth=2.0,
                         reservoir_size=700, reheat_after_steps=1)
    return run_engine(X, y, LinearGaussianModel(5), config, 6)


def case_linear_surprise_flag():
    X, y = _linear()
    config = SGAISConfig(**SGHMC_ONLY, n_particles=8, n_replicates=2, batch_size=300, surprise_threshold=1e-12,
                         reheat_target_ess=0.99)
    return run_engine(X, y, LinearGaussianModel(5), config, 7)


def case_logistic_estimator():
    X, y = _softmax()
    est = BayesianLogisticClassifier(n_particles=8, **SGHMC_ONLY, batch_size=200, n_mcmc_steps=4, random_state=0)
    return summarise_estimator(in_file_order(est).fit(X, y))


def case_logistic_beyond_reservoir_reheat():
    X, y = _softmax()
    config = SGAISConfig(**SGHMC_ONLY, n_particles=8, n_replicates=2, batch_size=100, n_mcmc_steps=4, reservoir_size=150,
                         reheat_after_steps=1)
    return run_engine(X, y, SoftmaxRegressionModel(3, 3), config, 1)


def case_mixture_restarts():
    X = shift_mixture_data(900, 300, 0)
    est = BayesianMixture(2, n_particles=8, **SGHMC_ONLY, batch_size=150, n_mcmc_steps=4, initial_mcmc_factor=2, random_state=0)
    return summarise_estimator(in_file_order(est).fit(X))


def case_mixture_no_restarts():
    X = shift_mixture_data(900, 300, 0)
    est = BayesianMixture(2, n_particles=8, **SGHMC_ONLY, batch_size=150, n_mcmc_steps=4, initial_mcmc_factor=2, restarts=False,
                          random_state=1)
    return summarise_estimator(in_file_order(est).fit(X))


def case_mixture_surprise_threshold():
    X = shift_mixture_data(900, 300, 0)
    est = BayesianMixture(2, n_particles=8, **SGHMC_ONLY, batch_size=150, n_mcmc_steps=4, initial_mcmc_factor=2,
                          surprise_threshold=0.05, random_state=2)
    return summarise_estimator(in_file_order(est).fit(X))


def case_mixture_beyond_reservoir():
    # the shift comes after the reservoir (250 rows) is full: restarts stop, the excursion runs on the reservoir
    X = shift_mixture_data(900, 450, 1)
    est = BayesianMixture(2, n_particles=8, **SGHMC_ONLY, batch_size=150, n_mcmc_steps=4, initial_mcmc_factor=2, reservoir_size=250,
                          surprise_threshold=0.05, random_state=3)
    return summarise_estimator(in_file_order(est).fit(X))


def case_mixture_beyond_reservoir_no_cv():
    X = shift_mixture_data(900, 450, 1)
    est = BayesianMixture(2, n_particles=8, **SGHMC_ONLY, batch_size=150, n_mcmc_steps=4, initial_mcmc_factor=2, reservoir_size=250,
                          control_variates=False, restarts=False, reheat_after_steps=2, random_state=4)
    return summarise_estimator(in_file_order(est).fit(X))


def case_mixture_checkpoint_resume():
    X = shift_mixture_data(900, 300, 0)
    est = BayesianMixture(2, n_particles=8, **SGHMC_ONLY, batch_size=150, n_mcmc_steps=4, initial_mcmc_factor=2, reservoir_size=500,
                          random_state=5)
    est.partial_fit(X[:450])
    with tempfile.TemporaryDirectory() as directory:
        path = save_checkpoint(est, os.path.join(directory, "mixture.joblib"))
        resumed = load_checkpoint(path)
    return summarise_estimator(resumed.partial_fit(X[450:]))


def case_linear_exact_moves():
    X, y = _linear()  # exact moves on the first 600 rows, SGHMC after
    est = BayesianLinearRegressor(**KNOWN_NOISE, n_particles=8, batch_size=300, exact_move_rows=600, random_state=8)
    return summarise_estimator(in_file_order(est).fit(X, y))


def case_logistic_exact_moves():
    X, y = _softmax()
    est = BayesianLogisticClassifier(n_particles=8, batch_size=200, n_mcmc_steps=4, random_state=9)
    return summarise_estimator(in_file_order(est).fit(X, y))


def case_mixture_exact_moves():
    X = shift_mixture_data(900, 300, 0)
    est = BayesianMixture(2, n_particles=8, batch_size=150, n_mcmc_steps=4, initial_mcmc_factor=2, exact_move_rows=1000,
                          random_state=10)
    return summarise_estimator(in_file_order(est).fit(X))


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}

if __name__ == "__main__":
    import time

    print(f"PINNED_ENVIRONMENT = {environment_key()!r}")
    for name, fn in CASES.items():
        tic = time.perf_counter()
        print(f"    {name!r}: {fn()!r},  # {time.perf_counter() - tic:.1f}s")
