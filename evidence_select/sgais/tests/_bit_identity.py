"""Bit-identity check of an engine restructure: every evidence, error bar, particle and record, bit for bit.

Runs the regression cases of :mod:`._regression_cases` and a few more paths (the posterior-mode check of a stuck
mixture, ``log_evidence(method="sgais")`` on a model, a stream sorted past its exact moves) in the package tree
given, and writes each run's bits (floats as ``float.hex``, arrays as sha256 of their bytes) to a JSON file; a
second call compares two such files::

    python evidence_select/sgais/tests/_bit_identity.py run /path/to/old/tree old.json
    python evidence_select/sgais/tests/_bit_identity.py run . new.json
    python evidence_select/sgais/tests/_bit_identity.py compare old.json new.json

Only public estimators, ``log_evidence`` and the state's particle arrays are read, so trees whose internals differ
compare alike. Run both trees on the same machine: the bits are those of its numpy and BLAS.
"""

import hashlib
import json
import os
import sys
import warnings

#: The record fields compared (``seconds`` is wall time); a field a tree lacks compares as absent.
RECORD_FIELDS = ("n_samples_seen", "log_evidence", "log_evidence_std", "n_annealing_steps", "ess",
                 "log_predictive_per_datum", "n_resampled", "n_reheat_steps", "n_jumps_accepted", "n_replayed",
                 "n_surprise_evaluations", "degraded", "log_evidence_widening", "fallback", "n_correlated_moves",
                 "population_bias", "n_lineages", "mode_log_evidence", "mode_log_evidence_std")
STATE_ARRAYS = ("particles", "log_weights", "log_evidence", "log_evidence_variance", "reference", "reference_grad",
                "step_scales")


def _bits(value):
    import numpy as np

    if value is None:
        return None
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, (int, str, bool)):
        return repr(value)
    if isinstance(value, np.ndarray):
        return hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16] + str(value.shape)
    if isinstance(value, np.floating):
        return float(value).hex()
    if isinstance(value, np.integer):
        return repr(int(value))
    return str(value)


def _record_bits(record):
    return {name: _bits(getattr(record, name)) for name in RECORD_FIELDS if hasattr(record, name)}


def _run_bits(log_z, std, state, records):
    out = {"log_evidence": _bits(float(log_z)), "log_evidence_std": _bits(float(std))}
    for name in STATE_ARRAYS:
        out["state." + name] = _bits(getattr(state, name, None))
    out["rng"] = repr(state.rng.bit_generator.state)
    reservoir = state.reservoir
    out["reservoir"] = _bits(reservoir.X[:reservoir.n_stored]) + f" {reservoir.n_stored} {reservoir.n_seen}"
    out["records"] = [_record_bits(r) for r in records]
    return out


def _extra_cases():
    """Paths the regression cases do not reach: the mode check failing, the model path, a sorted stream."""
    import numpy as np
    from sklearn import datasets

    from evidence_select import BayesianLogisticClassifier, BayesianMixture, log_evidence
    from evidence_select.models import GaussianMixtureModel
    from evidence_select.testing import PoissonGammaModel

    iris = datasets.load_iris().data
    iris = (iris - iris.mean(axis=0)) / iris.std(axis=0)
    sorted_iris = iris[np.argsort(iris[:, 0], kind="stable")]
    counts = np.random.default_rng(0).poisson([3.0, 7.0], size=(2000, 2)).astype(float)
    counts = counts[np.argsort(counts[:, 0], kind="stable")]

    def in_given_order(est):  # fit's seeded shuffle off, in trees that have it: the rows stream as given
        return est.set_params(shuffle=False) if "shuffle" in est.get_params() else est

    def stuck_mixture():
        est = in_given_order(BayesianMixture(3, batch_size=100, random_state=2)).fit(sorted_iris)
        return _run_bits(est.log_evidence_, est.log_evidence_std_, est.sgais_state_, est.evidence_history_)

    def mixture_partial_fit_loop():
        est = BayesianMixture(3, batch_size=40, random_state=1)
        for start in range(0, 150, 40):
            est.partial_fit(sorted_iris[start:start + 40])
        return _run_bits(est.log_evidence_, est.log_evidence_std_, est.sgais_state_, est.evidence_history_)

    def model_path(model, X, **settings):
        result = log_evidence(model, X, method="sgais", **settings)
        return {"log_evidence": _bits(float(result.log_evidence)),
                "log_evidence_std": _bits(float(result.log_evidence_std)),
                "samples": _bits(np.asarray(result.samples)), "log_weights": _bits(np.asarray(result.log_weights)),
                "diagnostics": repr(sorted((k, v["passed"]) for k, v in result.diagnostics.items()))}

    def sorted_classifier():
        X, y = datasets.load_breast_cancer(return_X_y=True)
        X = (X - X.mean(axis=0)) / X.std(axis=0)
        order = np.argsort(y, kind="stable")
        est = in_given_order(BayesianLogisticClassifier(batch_size=100, exact_move_rows=200, random_state=0))
        est = est.fit(X[order], y[order])
        return _run_bits(est.log_evidence_, est.log_evidence_std_, est.sgais_state_, est.evidence_history_)

    return {"extra_stuck_mixture": stuck_mixture, "extra_mixture_partial_fit_loop": mixture_partial_fit_loop,
            "extra_sorted_classifier": sorted_classifier,
            "extra_model_path": lambda: model_path(GaussianMixtureModel(3, 4), sorted_iris, random_state=0,
                                                   batch_size=100, n_mcmc_steps=2, initial_mcmc_factor=1),
            "extra_sorted_poisson": lambda: model_path(PoissonGammaModel(2), counts, random_state=1, batch_size=100)}


def run(tree, output):
    tree = os.path.abspath(tree)
    sys.path.insert(0, tree)
    import evidence_select
    from evidence_select.sgais.tests import _regression_cases as cases
    from evidence_select.utils._threads import single_threaded_blas

    assert evidence_select.__file__.startswith(tree + os.sep), evidence_select.__file__
    cases.fingerprint = _run_bits  # every case ends in fingerprint(log_z, std, state, records)
    runs = {**cases.CASES, **_extra_cases()}
    results = {}
    for name, case in sorted(runs.items()):
        with warnings.catch_warnings(), single_threaded_blas():
            warnings.simplefilter("ignore")
            results[name] = case()
        print(name, results[name]["log_evidence"], flush=True)
    with open(output, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


def compare(old_path, new_path):
    with open(old_path) as f:
        old = json.load(f)
    with open(new_path) as f:
        new = json.load(f)
    differences = 0
    for name in sorted(set(old) | set(new)):
        if name not in old or name not in new:
            print(f"{name}: only in {'new' if name in new else 'old'}")
            differences += 1
            continue
        a, b = old[name], new[name]
        for key in sorted(set(a) | set(b)):
            if key == "records":
                for i, (ra, rb) in enumerate(zip(a[key], b[key])):
                    for field in sorted(set(ra) & set(rb)):
                        if ra[field] != rb[field]:
                            print(f"{name}: record {i} {field}: {ra[field]} != {rb[field]}")
                            differences += 1
                if len(a[key]) != len(b[key]):
                    print(f"{name}: {len(a[key])} records != {len(b[key])}")
                    differences += 1
            elif a.get(key) != b.get(key):
                print(f"{name}: {key}: {a.get(key)} != {b.get(key)}")
                differences += 1
    n_values = sum(len(run) - 1 + sum(len(r) for r in run.get("records", ())) for run in old.values())
    print(f"{len(old)} runs, {n_values} values compared: {differences} difference(s)")
    return differences


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    else:
        sys.exit(1 if compare(sys.argv[2], sys.argv[3]) else 0)
