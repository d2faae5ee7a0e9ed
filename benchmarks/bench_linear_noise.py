"""Linear regression with the noise variance and the weights' scale learned (issue 56).

Usage::

    python benchmarks/bench_linear_noise.py            # every case, 3 SGAIS seeds per order
    python benchmarks/bench_linear_noise.py --quick    # fewer cases, 2 seeds
    python benchmarks/bench_linear_noise.py --no-speed # without the 1e5-row timing

Prints markdown tables and writes ``benchmarks/results/linear_noise.json``.

1. **Exact against brute force.** ``LinearHyperModel``'s exact evidence (closed forms given ``g`` and a
   quadrature over ``log g``) against an independent brute-force quadrature of the Gaussian marginal evidence over
   ``(log sigma2, log g)`` (:mod:`evidence_select.testing._linear_quadrature`), for the default model and with one
   of the two scales fixed. Target: within 1e-6 relative.
2. **SGAIS against exact.** ``BayesianLinearRegressor()`` (both scales learned) streamed in file order, shuffled
   and sorted by ``y`` (``shuffle=False``, chunks of 100 rows up to 5000 rows, else 500), several seeds. Target:
   ``|SGAIS - exact| <= max(3 sigma, 2 nats)``.
3. **Speed.** 1e5 rows (5 features): the learned model against the known-noise model on the same rows, in one
   process (a ratio, so the machine's load matters less; the load is printed).

Cases: simulated data of the paper's generator (raw: ``40 y + 150``; standardised), rows independent of the
features, scikit-learn's diabetes (raw y ~ 152 +/- 77, and standardised) and California housing where scikit-learn
has it cached (no download). None of them tuned any default.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS_DIR, run_metadata, save_json  # noqa: E402
from _tables import markdown_lines  # noqa: E402

from evidence_select import BayesianLinearRegressor  # noqa: E402
from evidence_select.datasets import make_linear_regression  # noqa: E402
from evidence_select.models import LinearHyperModel  # noqa: E402
from evidence_select.testing._linear_quadrature import linear_hyper_evidence_by_quadrature  # noqa: E402

EXACT_TARGET = 1e-6
SGAIS_FLOOR = 2.0


def _standardise(values):
    return (values - values.mean(axis=0)) / values.std(axis=0)


def _datasets(quick):
    """``name -> (X, y)`` (features standardised)."""
    from sklearn import datasets

    out = {}
    for n, p, seed in ([(300, 3, 0), (3000, 8, 1)] if quick else [(300, 3, 0), (3000, 8, 1), (20_000, 5, 2)]):
        data = make_linear_regression(n, n_features=p, noise_variance=0.5, random_state=seed)
        out[f"sim n={n} p={p} raw"] = (data.X, 40.0 * data.y + 150.0)
        out[f"sim n={n} p={p} std"] = (data.X, _standardise(data.y))
    rng = np.random.default_rng(3)
    out["no signal n=1000 p=5"] = (rng.normal(size=(1000, 5)), 7.0 * rng.normal(size=1000) - 20.0)
    X, y = datasets.load_diabetes(return_X_y=True)
    out["diabetes raw"] = (_standardise(X), y)
    out["diabetes std"] = (_standardise(X), _standardise(y))
    try:
        housing = datasets.fetch_california_housing(download_if_missing=False)
    except OSError:
        print("California housing is not cached: skipped (no download)")
    else:
        out["california raw"] = (_standardise(housing.data), housing.target)
        out["california std"] = (_standardise(housing.data), _standardise(housing.target))
    return out


def exact_against_brute_force(cases):
    rows = []
    for name, (X, y) in cases.items():
        for label, settings in (("both learned", {}), ("noise learned, scale 1", dict(prior_scale=1.0)),
                                ("noise 1, scale learned", dict(noise_variance=float(np.var(y) / 2)))):
            model = LinearHyperModel(X.shape[1], **settings)
            tic = time.perf_counter()
            value, bound = model.exact_log_evidence_and_error(X, y)
            seconds = time.perf_counter() - tic
            reference, reference_error = linear_hyper_evidence_by_quadrature(model, X, y)
            relative = abs(value - reference) / abs(reference)
            rows.append(dict(case=name, model=label, exact=value, bound=bound, brute=reference,
                             brute_error=reference_error, relative=relative, ok=relative <= EXACT_TARGET,
                             exact_ms=1e3 * seconds))
    return rows


def _orders(y, seed):
    return {"file": np.arange(len(y)), "shuffled": np.random.default_rng(100 + seed).permutation(len(y)),
            "sorted": np.argsort(y, kind="stable")}


def _batch_size(n_rows):
    """Chunks of 100 rows up to 5000 rows (so that the order of a small data set matters), else the default 500."""
    return 100 if n_rows <= 5000 else 500


def sgais_against_exact(cases, n_seeds):
    rows = []
    for name, (X, y) in cases.items():
        exact = LinearHyperModel(X.shape[1]).exact_log_evidence(X, y)
        for seed in range(n_seeds):
            for order, index in _orders(y, seed).items():
                tic = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    est = BayesianLinearRegressor(batch_size=_batch_size(len(y)), shuffle=False,
                                                  random_state=seed).fit(X[index], y[index])
                error = est.log_evidence_ - exact
                rows.append(dict(case=name, order=order, seed=seed, n=len(y), exact=exact, sgais=est.log_evidence_,
                                 std=est.log_evidence_std_, error=error,
                                 ok=abs(error) <= max(3 * est.log_evidence_std_, SGAIS_FLOOR),
                                 seconds=time.perf_counter() - tic,
                                 first_chunk_steps=est.evidence_history_[0].n_annealing_steps,
                                 warnings=sorted({w.category.__name__ for w in caught})))
    return rows


def speed(n_rows=100_000):
    data = make_linear_regression(n_rows, random_state=0)
    out = {}
    for label, params in (("learned noise and scale", {}), ("known noise (paper)", dict(noise_variance=1.0,
                                                                                        prior_scale=1.0))):
        tic = time.perf_counter()
        BayesianLinearRegressor(random_state=0, **params).fit(data.X, data.y)
        out[label] = time.perf_counter() - tic
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--output", default=os.path.join(RESULTS_DIR, "linear_noise.json"))
    args = parser.parse_args(argv)
    meta = run_metadata(sys.argv)
    cases = _datasets(args.quick)

    exact_rows = exact_against_brute_force(cases)
    print("\n## Exact evidence against brute-force quadrature over (log sigma2, log g)\n")
    print("\n".join(markdown_lines(
        ["case", "model", "exact", "bound", "brute force", "its error", "relative diff", f"<= {EXACT_TARGET:g}",
         "exact ms"],
        [[r["case"], r["model"], f"{r['exact']:.6f}", f"{r['bound']:.1e}", f"{r['brute']:.6f}",
          f"{r['brute_error']:.1e}", f"{r['relative']:.1e}", "ok" if r["ok"] else "MISS", f"{r['exact_ms']:.1f}"]
         for r in exact_rows])))

    sgais_rows = sgais_against_exact(cases, 2 if args.quick else 3)
    print("\n## SGAIS (both scales learned) against the exact evidence\n")
    print("\n".join(markdown_lines(
        ["case", "order", "seed", "exact", "SGAIS", "std", "error", "z", "within max(3 sd, 2)", "s", "warnings"],
        [[r["case"], r["order"], str(r["seed"]), f"{r['exact']:.2f}", f"{r['sgais']:.2f}", f"{r['std']:.2f}",
          f"{r['error']:+.2f}", f"{r['error'] / r['std']:+.2f}", "ok" if r["ok"] else "MISS", f"{r['seconds']:.1f}",
          ", ".join(r["warnings"])] for r in sgais_rows])))
    errors = np.array([r["error"] for r in sgais_rows])
    z = np.array([r["error"] / r["std"] for r in sgais_rows])
    print(f"\n{sum(r['ok'] for r in sgais_rows)}/{len(sgais_rows)} within max(3 sd, 2 nats); mean error "
          f"{errors.mean():+.3f} nats, mean z {z.mean():+.2f}, sd of z {z.std():.2f}, "
          f"|z| <= 1: {np.mean(np.abs(z) <= 1):.0%}, |z| <= 2: {np.mean(np.abs(z) <= 2):.0%}")

    timing = None if args.no_speed else speed()
    if timing:
        base = timing["known noise (paper)"]
        print(f"\n## fit of 1e5 rows x 5 features (load average {os.getloadavg()[0]:.1f})\n")
        print("\n".join(markdown_lines(["model", "seconds", "ratio"],
                                       [[k, f"{v:.2f}", f"{v / base:.1f}"] for k, v in timing.items()])))
    save_json(args.output, dict(meta=meta, exact=exact_rows, sgais=sgais_rows, speed=timing))
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
