"""Error bars of flagged online runs: as wide as the evidence says, no wider (issue 55, item 6).

    python benchmarks/bench_error_bars.py                 # every case, 3 seeds
    python benchmarks/bench_error_bars.py --seeds 5 --cases sorted

A flagged run (one that raised an ``EvidenceConvergenceWarning`` or names a failed check) widens its reported
standard error by the gap it measured. This prints, per run, the error against the case's reference, the reported
std and their ratio, and then the median ratio ``std / |error|`` over the flagged runs: near 1-3 the widening says
how far off the run is; far above it, the error bar is honest but useless. Cases, from the trust suites where
flagged runs occur:

- ``bench_real.py``'s class- or column-sorted mixtures and the two-class digits sorted by class (cached
  references from ``benchmarks/saved/real_references.json``);
- ``bench_long_streams.py``'s linear streams that shift after the reservoir filled or past the exact moves, with
  SGHMC past 1000 rows as in ``sgais/tests/test_long_streams.py`` (exact references);
- a sorted Poisson-gamma stream through ``log_evidence(method="sgais")`` (exact reference): every later chunk
  arrives beyond the previous ones, past the exact moves' rows.

Writes ``benchmarks/results/error_bars.json``.
"""

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PAPER_LINEAR, RESULTS_DIR, run_metadata, save_json  # noqa: E402
from bench_real import (_order, all_cases, held_out_separable_cases, load_case_data, make_estimator,  # noqa: E402
                        reference_key, references)

from evidence_select import BayesianLinearRegressor, EvidenceConvergenceWarning, log_evidence  # noqa: E402
from evidence_select.testing import PoissonGammaModel  # noqa: E402
from evidence_select.testing._shift_streams import linear_shift  # noqa: E402

REAL_CASES = ("mix_k2_bc5_X_sorted", "mix_k2_wine_X_sorted", "mix_k2_digits_pca2_sorted", "mix_k3_iris_X_sorted",
              "sep_digits0_rest_sorted")


def _sorted_counts(n=4000, seed=0):
    """Two Poisson count columns (rates 3 and 7), rows sorted by the first column."""
    counts = np.random.default_rng(seed).poisson([3.0, 7.0], size=(n, 2)).astype(float)
    return counts[np.argsort(counts[:, 0], kind="stable")]


def _real_run(case, seed):
    data_name, order, spec, _ = case
    X, y = _order(*load_case_data(data_name), order)
    est = make_estimator(spec, seed).set_params(shuffle=False).fit(X, y)  # the case's order
    return est.log_evidence_, est.log_evidence_std_, tuple(est.evidence_checks_)


def _linear_run(shift_at, reservoir_size, seed):
    X, y = linear_shift(2000, shift_at, 0)
    # SGHMC past 1000 rows (the estimator's default draws exactly from the summed statistics at any n, unflagged)
    est = BayesianLinearRegressor(**PAPER_LINEAR, batch_size=250, reservoir_size=reservoir_size, exact_move_rows=1000,
                                  shuffle=False, random_state=seed).fit(X, y)
    return est.log_evidence_, est.log_evidence_std_, tuple(est.evidence_checks_)


def _poisson_run(seed):
    result = log_evidence(PoissonGammaModel(2), _sorted_counts(), method="sgais", random_state=seed, batch_size=100)
    failed = tuple(name for name, entry in result.diagnostics.items() if not entry["passed"])
    return result.log_evidence, result.log_evidence_std, failed


def cases():
    """Name -> (reference value, reference std, run(seed) -> (log Z, std, failed checks))."""
    real = {**all_cases(), **held_out_separable_cases()}
    cached = references({name: real[name] for name in REAL_CASES}, recompute=False)
    out = {}
    for name in REAL_CASES:
        data_name, _, spec, _ = real[name]
        reference = cached[reference_key(data_name, spec)]
        out[name] = (reference["value"], reference["std"], lambda seed, case=real[name]: _real_run(case, seed))
    for label, shift_at, reservoir in (("linear_shift_beyond_reservoir", 1000, 500),
                                       ("linear_shift_whole_stream", 1000, 2000)):
        X, y = linear_shift(2000, shift_at, 0)
        exact = log_evidence(BayesianLinearRegressor(**PAPER_LINEAR), X, y, method="exact").log_evidence
        out[label] = (exact, 0.0, lambda seed, s=shift_at, r=reservoir: _linear_run(s, r, seed))
    out["poisson_sorted"] = (PoissonGammaModel(2).exact_log_evidence(_sorted_counts()), 0.0, _poisson_run)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--cases", default="", help="run only the cases whose name contains this text")
    args = parser.parse_args()
    rows = []
    print("| case | seed | error | std | std / abs(error) | flagged by |")
    print("|---|---|---|---|---|---|")
    for name, (reference, reference_std, run) in cases().items():
        if args.cases not in name:
            continue
        for seed in range(args.seeds):
            tic = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value, std, failed = run(seed)
            warned = any(issubclass(w.category, EvidenceConvergenceWarning) for w in caught)
            error = value - reference
            row = dict(case=name, seed=seed, log_evidence=value, std=std, reference=reference,
                       reference_std=reference_std, error=error, failed_checks=list(failed), warned=warned,
                       flagged=bool(warned or failed), ratio=std / max(abs(error), 1e-12),
                       seconds=time.perf_counter() - tic)
            rows.append(row)
            print(f"| {name} | {seed} | {error:+.2f} | {std:.2f} | {row['ratio']:.1f} | "
                  f"{', '.join(failed) or ('warning' if warned else '')} |", flush=True)
    flagged = [r for r in rows if r["flagged"] and math.isfinite(r["ratio"])]
    unusable = [r for r in rows if not math.isfinite(r["log_evidence"])]
    if unusable:
        print(f"\nunusable runs (NaN estimate, error bar over CheckSettings.unusable_std): {len(unusable)} of "
              f"{len(rows)}, left out of the ratios")
    if flagged:
        ratios = np.array([r["ratio"] for r in flagged])
        print(f"\nflagged runs: {len(flagged)} of {len(rows)}; median std / |error| {np.median(ratios):.1f} "
              f"(quartiles {np.percentile(ratios, 25):.1f}, {np.percentile(ratios, 75):.1f}); "
              f"within 1 std {np.mean(ratios >= 1):.0%}, within 2 std {np.mean(ratios >= 0.5):.0%}")
    save_json(os.path.join(RESULTS_DIR, "error_bars.json"),
              dict(metadata=run_metadata(["bench_error_bars.py", *sys.argv[1:]]), rows=rows))


if __name__ == "__main__":
    main()
