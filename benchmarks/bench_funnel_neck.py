"""Why AIS reads low on the held-out box-prior funnel with every check passing (a documented limitation).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_funnel_neck.py [--dims 8 32] [--seeds 2] [--ns]

The held-out funnel (:class:`_held_out_targets.Funnel`: ``v ~ N(0, 9)``, ``x_i | v ~ N(0, e^v)``, uniform prior on
the box ``[-10, 10]^d``) has a neck that holds a third of the mass (``v < -1``). Under the geometric path the
tempered density favours the wide mouth by its volume until the temperature reaches 1, and by then the neck is too
narrow for the HMC moves to enter: the final population never goes below the mouth, every group misses the same
mass, and their spread cannot show it. For each dimension and seed the table gives the AIS estimate against the
exact value, its failed checks, and the quantiles of the final particles' ``v`` against the exact posterior's
(quadrature); ``--ns`` adds nested sampling on the same target, whose live points do enter the neck. Writes
``benchmarks/results/funnel_neck.json``.
"""

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS_DIR, run_metadata, save_json  # noqa: E402  (benchmarks/; puts the checkout on the path)
from _held_out_targets import held_out_case  # noqa: E402

from evidence_select import log_evidence  # noqa: E402
from evidence_select.utils._logspace import normalize_log_weights  # noqa: E402

QUANTILES = (0.01, 0.16, 0.5, 0.84)


def weighted_quantiles(values, log_weights, quantiles=QUANTILES):
    """Quantiles of ``values`` weighted by ``exp(log_weights)``, interpolated in their cumulative weight."""
    order = np.argsort(values)
    cdf = np.cumsum(np.exp(normalize_log_weights(np.asarray(log_weights, dtype=float)[order])))
    return np.interp(quantiles, cdf, np.asarray(values)[order])


def exact_v_quantiles(model):
    """Quantiles of the posterior's log-scale coordinate ``v`` (:meth:`Funnel.log_scale_marginal` on a fine grid)."""
    grid = np.linspace(-model.half_width, model.half_width, 8001)
    return weighted_quantiles(grid, model.log_scale_marginal(grid))


def sampled_v_quantiles(model, result):
    """Quantiles of ``v`` over the result's draws, weighted by ``result.log_weights`` when it has them."""
    v = model.to_box(result.samples)[:, 0]
    return weighted_quantiles(v, np.zeros(len(v)) if result.log_weights is None else result.log_weights)


def run(method, dim, seed):
    case = held_out_case("funnel", dim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = log_evidence(case.model, method=method, random_state=seed)
    failed = [name for name, check in result.diagnostics.items() if not check["passed"]]
    return dict(method=method, dim=dim, seed=seed, exact=case.exact, estimate=result.log_evidence,
                std=result.log_evidence_std, pull=(result.log_evidence - case.exact) / result.log_evidence_std,
                failed=failed, v_quantiles=sampled_v_quantiles(case.model, result).tolist(),
                exact_v_quantiles=exact_v_quantiles(case.model).tolist())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--ns", action="store_true", help="also nested sampling (minutes per run above 16 dims)")
    args = parser.parse_args(argv)
    out = dict(meta=run_metadata(sys.argv), rows=[])
    names = "/".join(f"{int(100 * q)}%" for q in QUANTILES)
    print(f"| method | dim | seed | error ± std | pull | failed checks | v quantiles {names} | exact |")
    print("|---|---|---|---|---|---|---|---|")
    for dim in args.dims:
        for seed in range(args.seeds):
            for method in ("ais", "ns") if args.ns else ("ais",):
                row = run(method, dim, seed)
                out["rows"].append(row)
                print(f"| {method} | {dim} | {seed} | {row['estimate'] - row['exact']:+.2f} ± {row['std']:.2f} | "
                      f"{row['pull']:+.1f} | {', '.join(row['failed']) or '-'} | "
                      f"{' / '.join(f'{q:.2f}' for q in row['v_quantiles'])} | "
                      f"{' / '.join(f'{q:.2f}' for q in row['exact_v_quantiles'])} |", flush=True)
                save_json(os.path.join(RESULTS_DIR, "funnel_neck.json"), out)
    print(f"wrote {os.path.join(RESULTS_DIR, 'funnel_neck.json')}")


if __name__ == "__main__":
    main()
