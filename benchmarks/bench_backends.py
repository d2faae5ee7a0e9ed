"""Reference evidence backends (NS, AIS, bridge) against each other, exact answers and dynesty.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_backends.py --quick
    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_backends.py            # full: N=1e3,1e4; 20 seeds
    ... --dynesty 1000                                                            # also dynesty at N=1e3

Part 1: the paper's three models (linear d=5, softmax d=10 K=4, mixture K=5 d=2)
at each N: log Z, reported error, likelihood calls (full-data evaluations of one
parameter vector; dynesty's ``ncall``), seconds; agreement of the backends within
``max(3 x combined error, 0.5)``. dynesty (optional ``bench`` extra) runs with its
default settings only when ``--dynesty`` lists that N (it takes ~25 min per model
at N=1e3 on this machine).

Part 2: calibration over seeds on analytic targets and the exact linear
evidence: fraction of runs with ``|error| <= 3 x reported`` and the ratio of the
mean reported error to the observed spread (sd of the estimates over seeds).

Writes ``benchmarks/results/backends.json``.
"""

import argparse
import json
import os
import time

import sys

import numpy as np
from scipy import special, stats

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout
from evidence_select.datasets import make_linear_regression, make_mixture, make_softmax_classification
from evidence_select.evidence._ais import ais_log_evidence
from evidence_select.evidence._bridge import bridge_log_evidence
from evidence_select.evidence._ns import nested_sampling_log_evidence
from evidence_select.models import GaussianMixtureModel, LinearGaussianModel, SoftmaxRegressionModel
from evidence_select.models._targets import (BimodalTarget, BoxGaussianTarget, GaussianTarget,
                                             correlated_gaussian_target)

BACKENDS = {"ns": nested_sampling_log_evidence, "ais": ais_log_evidence, "bridge": bridge_log_evidence}


def paper_problem(name, n):
    if name == "linear":
        d = make_linear_regression(n, n_features=5, random_state=0)
        return LinearGaussianModel(5), d.X, d.y
    if name == "softmax":
        d = make_softmax_classification(n, n_features=10, n_classes=4, random_state=0)
        return SoftmaxRegressionModel(10, 4), d.X, d.y
    d = make_mixture(n, random_state=0)
    return GaussianMixtureModel(5, 2), d.X, None


# -- dynesty (optional) -------------------------------------------------------------------
def _prior_transform(model):
    """Unit cube -> the model's unconstrained prior (dynesty needs the inverse CDF)."""
    if isinstance(model, (LinearGaussianModel, SoftmaxRegressionModel)):
        sd = np.sqrt(model.prior_variances)
        return lambda u: special.ndtri(u) * sd
    K, d = model.n_components, model.n_features
    alpha, a, b, c, m0 = (model.weight_concentration, model.variance_shape, model.variance_scale,
                          model.mean_variance_factor, model.mean_prior_loc)

    def transform(u):
        # Dirichlet(alpha) by stick breaking: v_k ~ Beta(alpha, (K - k - 1) alpha).
        rest, weights = 1.0, np.empty(K)
        for k in range(K - 1):
            v = stats.beta.ppf(u[k], alpha, (K - k - 1) * alpha)
            weights[k], rest = rest * v, rest * (1.0 - v)
        weights[-1] = rest
        weights = np.maximum(weights, 1e-300)
        u_mean = u[K - 1: K - 1 + K * d]
        u_var = u[K - 1 + K * d:]
        variances = b / stats.gamma.ppf(1.0 - u_var, a)  # inverse gamma by its inverse CDF
        means = m0 + np.sqrt(c * variances) * special.ndtri(u_mean)
        return model.pack(weights[None], means[None], variances[None])[0]

    return transform


def run_dynesty(model, X, y, seed):
    import dynesty  # optional extra "bench"

    transform = _prior_transform(model)
    counter = [0]

    def log_lik(theta):
        counter[0] += 1
        return float(model.log_likelihood_sum(theta[None], X, y)[0])

    t0 = time.perf_counter()
    sampler = dynesty.NestedSampler(log_lik, transform, model.n_params, rstate=np.random.default_rng(seed))
    sampler.run_nested(print_progress=False)
    res = sampler.results
    return dict(log_evidence=float(res.logz[-1]), std=float(res.logzerr[-1]), calls=float(np.sum(res.ncall)),
                seconds=time.perf_counter() - t0)


# -- part 1 ------------------------------------------------------------------------------
def part_models(sizes, dynesty_sizes, backend_kwargs, seed=1):
    rows = []
    for n in sizes:
        for name in ("linear", "softmax", "mixture"):
            model, X, y = paper_problem(name, n)
            row = dict(model=name, n=n, results={})
            if name == "linear":
                row["exact"] = model.exact_log_evidence(X, y)
            for method, fn in BACKENDS.items():
                res = fn(model, X, y, random_state=seed, **backend_kwargs.get(method, {}))
                row["results"][method] = dict(log_evidence=res.log_evidence, std=res.log_evidence_std,
                                              calls=res.n_likelihood_calls, seconds=res.seconds)
                print(f"  {name:8s} N={n:<6d} {method:7s} {res.log_evidence:12.3f} +/- {res.log_evidence_std:.3f}"
                      f"  calls={res.n_likelihood_calls:10.3g}  {res.seconds:7.1f} s", flush=True)
            if n in dynesty_sizes:
                try:
                    row["results"]["dynesty"] = run_dynesty(model, X, y, seed)
                except ImportError:
                    print("  dynesty not installed (pip install evidence-select[bench]); skipped")
            ours = [row["results"][m] for m in BACKENDS]
            spread = max(r["log_evidence"] for r in ours) - min(r["log_evidence"] for r in ours)
            tol = max(3 * max(np.hypot(a["std"], b["std"]) for a in ours for b in ours), 0.5)
            row["max_disagreement"], row["agreement_tolerance"] = spread, tol
            rows.append(row)
    return rows


# -- part 2 ------------------------------------------------------------------------------
def analytic_problems(full):
    X0 = np.zeros((1, 1))
    problems = [
        ("gauss_d10", GaussianTarget(np.full(10, 0.3), cov=0.01), X0, None),
        ("correlated_d20", correlated_gaussian_target(20, correlation=0.9), X0, None),
        ("box_d5", BoxGaussianTarget(np.full(5, 0.5), 0.1), X0, None),
        ("bimodal_d5", BimodalTarget(5, separation=1.0, scale=0.1), X0, None),
    ]
    for n in ((100, 1000, 10000) if full else (100, 1000)):
        d = make_linear_regression(n, n_features=5, random_state=0)
        problems.append((f"linear_N{n}", LinearGaussianModel(5), d.X, d.y))
    return problems


def part_calibration(n_seeds, full, backend_kwargs):
    rows = []
    for name, model, X, y in analytic_problems(full):
        truth = model.exact_log_evidence(X, y)
        for method, fn in BACKENDS.items():
            if method == "bridge" and name.startswith("bimodal"):
                continue  # single-mode proposal: not applicable to a genuinely bimodal posterior
            est, std, secs = [], [], []
            for seed in range(n_seeds):
                res = fn(model, X, y, random_state=1000 + seed, **backend_kwargs.get(method, {}))
                est.append(res.log_evidence)
                std.append(res.log_evidence_std)
                secs.append(res.seconds)
            est, std = np.array(est), np.array(std)
            err = est - truth
            row = dict(problem=name, method=method, n_seeds=n_seeds, mean_error=float(err.mean()),
                       observed_sd=float(est.std(ddof=1)), mean_reported=float(std.mean()),
                       within_3sigma=int(np.sum(np.abs(err) <= 3 * std)),
                       ratio_reported_to_observed=float(std.mean() / est.std(ddof=1)),
                       seconds_per_run=float(np.mean(secs)))
            rows.append(row)
            print(f"  {name:15s} {method:7s} within3s={row['within_3sigma']:2d}/{n_seeds}  "
                  f"mean err={row['mean_error']:+.3f}  reported={row['mean_reported']:.3f}  "
                  f"observed sd={row['observed_sd']:.3f}  ratio={row['ratio_reported_to_observed']:.2f}  "
                  f"{row['seconds_per_run']:.1f} s/run", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N=1e3 only, 5 seeds, lighter settings")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--dynesty", type=int, nargs="*", default=[], help="sizes N at which to run dynesty")
    parser.add_argument("--skip-models", action="store_true")
    parser.add_argument("--skip-calibration", action="store_true")
    args = parser.parse_args()
    sizes = (1000,) if args.quick else (1000, 10000)
    n_seeds = args.seeds or (5 if args.quick else 20)
    model_kwargs = {"ns": dict(n_live=200 if args.quick else 500), "ais": dict(n_chains=100 if args.quick else 200)}
    calib_kwargs = {"ns": dict(n_live=200), "ais": dict(n_chains=100)}
    out = dict(settings=dict(quick=args.quick, sizes=sizes, n_seeds=n_seeds, model_kwargs=model_kwargs,
                             calibration_kwargs=calib_kwargs, dynesty_sizes=args.dynesty))
    if not args.skip_models:
        print("Part 1: paper models")
        out["models"] = part_models(sizes, set(args.dynesty), model_kwargs)
        print("\n| model | N | method | log Z | reported err | likelihood calls | seconds |")
        print("|---|---|---|---|---|---|---|")
        for row in out["models"]:
            if "exact" in row:
                print(f"| {row['model']} | {row['n']} | exact | {row['exact']:.3f} | 0 | - | - |")
            for method, r in row["results"].items():
                print(f"| {row['model']} | {row['n']} | {method} | {r['log_evidence']:.3f} | {r['std']:.3f} | "
                      f"{r['calls']:.3g} | {r['seconds']:.1f} |")
            print(f"| {row['model']} | {row['n']} | spread of ours | {row['max_disagreement']:.3f} | "
                  f"tol {row['agreement_tolerance']:.3f} | | |")
    if not args.skip_calibration:
        print(f"\nPart 2: calibration over {n_seeds} seeds")
        out["calibration"] = part_calibration(n_seeds, not args.quick, calib_kwargs)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "backends.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1, default=float)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
