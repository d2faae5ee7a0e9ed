"""make_model against the hand-written models: the same evidences, and what the convenience costs in time.

Two parts, each printing a table and saving JSON to ``results/bench_make_model.json``:

1. **Calibration cases with data** (linear, Poisson-gamma, beta-binomial, tiny mixture; exact evidence known):
   ``log_evidence(model, X, y, method="sgais")`` for the hand-written model and its make_model twins (NumPy with a
   user gradient, JAX, finite differences; see ``evidence_select/models/tests/_made_calibration.py``) on the same rows
   and seeds. Per variant: the mean z-score against the exact evidence, the largest ``|z|``, the mean difference
   from the hand-written model on the same seed, and the CPU time relative to it.
2. **A Poisson regression stream** (``--rows`` rows, 3 features): ``EvidenceRegressor`` over the hand-written
   :class:`~evidence_select.models.PoissonRegressionModel`, over :func:`~evidence_select.models.poisson_regression_model`
   (make_model, NumPy gradient) and over a make_model model written in ``jax.numpy`` with JAX gradients. Each variant
   runs twice per seed (the first JAX run includes compiling); times are CPU seconds of the process, ratios against
   the hand-written model's in the same run.

Usage::

    python benchmarks/bench_make_model.py [--seeds 5] [--dims 2 8] [--rows 20000] [--quick]
"""

import argparse
import os
import time

import numpy as np

from _common import RESULTS_DIR, run_metadata, save_json  # noqa: F401  (sets sys.path to the checkout)

from evidence_select import EvidenceRegressor, log_evidence
from evidence_select.models import PoissonRegressionModel, poisson_regression_model
from evidence_select.models._jax import jax_installed
from evidence_select.models.tests._made_calibration import MADE_FAMILIES, made_model
from evidence_select.testing import calibration_cases


def _timed(fn):
    tic = time.process_time()
    out = fn()
    return out, time.process_time() - tic


def calibration_part(dims, seeds, backends):
    """Rows of part 1: per case and variant, z-scores against the exact evidence, gaps and time ratios."""
    rows = []
    for case in calibration_cases(max(dims), families=MADE_FAMILIES, dims=dims):
        variants = {"hand": case.model, **{backend: made_model(case, backend) for backend in backends}}
        results = {name: [] for name in variants}
        for seed in seeds:
            for name, model in variants.items():
                result, seconds = _timed(lambda: log_evidence(model, case.X, case.y, method="sgais",
                                                              random_state=seed))
                results[name].append((result.log_evidence, result.log_evidence_std, seconds))
        hand = np.array(results["hand"])
        for name, values in results.items():
            values = np.array(values)
            z = (values[:, 0] - case.exact) / values[:, 1]
            rows.append(dict(case=case.name, variant=name, mean_z=float(z.mean()), max_abs_z=float(np.abs(z).max()),
                             mean_gap_to_hand=float(np.mean(values[:, 0] - hand[:, 0])),
                             mean_std=float(values[:, 1].mean()), seconds=float(values[:, 2].sum()),
                             time_ratio=float(values[:, 2].sum() / hand[:, 2].sum()),
                             log_evidence=values[:, 0].tolist(), exact=case.exact))
    return rows


def _jax_poisson_model():
    import jax.numpy as jnp
    from jax.scipy.special import gammaln
    from scipy import stats

    from evidence_select.models import make_model

    def log_lik(params, X, y):
        log_rate = X @ params["w"] + params["b"]
        return y * log_rate - jnp.exp(log_rate) - gammaln(y + 1.0)

    return make_model(log_lik, {"w": (stats.norm(0, 1), "n_features"), "b": stats.norm(0, 3)}, gradient="jax")


def poisson_part(n_rows, seeds, with_jax):
    """Rows of part 2: the Poisson regression stream, twice per variant and seed."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, 3))
    y = rng.poisson(np.exp(X @ [0.5, -0.3, 0.2] + 0.8)).astype(float)
    variants = {"hand": PoissonRegressionModel(3, intercept_scale=3.0),
                "make_model numpy": poisson_regression_model(intercept_scale=3.0)}
    if with_jax:
        variants["make_model jax"] = _jax_poisson_model()
    rows = []
    for seed in seeds:
        for repeat in (1, 2):
            timings = {}
            for name, model in variants.items():
                est, seconds = _timed(lambda: EvidenceRegressor(model, random_state=seed).fit(X, y))
                timings[name] = seconds
                rows.append(dict(variant=name, seed=seed, run=repeat, log_evidence=est.log_evidence_,
                                 log_evidence_std=est.log_evidence_std_, seconds=seconds,
                                 time_ratio=seconds / timings["hand"]))
    return rows


def _print_calibration(rows):
    print(f"{'case':<18}{'variant':<9}{'mean z':>8}{'max|z|':>8}{'gap to hand':>13}{'mean std':>10}"
          f"{'CPU s':>8}{'x hand':>8}")
    for r in rows:
        print(f"{r['case']:<18}{r['variant']:<9}{r['mean_z']:>8.2f}{r['max_abs_z']:>8.2f}{r['mean_gap_to_hand']:>13.3f}"
              f"{r['mean_std']:>10.3f}{r['seconds']:>8.2f}{r['time_ratio']:>8.2f}")


def _print_poisson(rows):
    print(f"{'variant':<18}{'seed':>5}{'run':>5}{'log Z':>12}{'std':>7}{'CPU s':>8}{'x hand':>8}")
    for r in rows:
        print(f"{r['variant']:<18}{r['seed']:>5}{r['run']:>5}{r['log_evidence']:>12.2f}{r['log_evidence_std']:>7.2f}"
              f"{r['seconds']:>8.2f}{r['time_ratio']:>8.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--rows", type=int, default=20000, help="rows of the Poisson regression stream")
    parser.add_argument("--quick", action="store_true", help="2 seeds, d=2, 5000 rows")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.dims, args.rows = 2, [2], 5000
    seeds = list(range(args.seeds))
    with_jax = jax_installed()
    backends = ["numpy", "finite"] + (["jax"] if with_jax else [])
    meta = run_metadata(["bench_make_model.py"] + (argv or []))
    print(f"load average at start: {os.getloadavg()}; JAX {'installed' if with_jax else 'not installed'}")
    calibration = calibration_part(args.dims, seeds, backends)
    _print_calibration(calibration)
    poisson = poisson_part(args.rows, seeds[:3], with_jax)
    _print_poisson(poisson)
    print(f"load average at end: {os.getloadavg()}")
    save_json(os.path.join(RESULTS_DIR, "bench_make_model.json"),
              dict(meta=meta, calibration=calibration, poisson=poisson, load_average_end=os.getloadavg()))


if __name__ == "__main__":
    main()
