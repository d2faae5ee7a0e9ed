"""Calibration suite: NS, AIS and bridge sampling against exact evidence (issue 15 targets).

Usage (one heavy job at a time on a shared machine)::

    # the validation page's tables: every backend on every case up to 64 dimensions (NS up to 16), 3 seeds,
    # two runs at a time, saved to benchmarks/saved/calibration.json (needs a clean commit; hours of CPU)
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 10 \\
        python benchmarks/bench_calibration.py --ns-max-dim 16 --jobs 2 --save
    # a quick look: every family up to 8 dimensions, one seed
    python benchmarks/bench_calibration.py --quick
    # a few families, one backend, dynesty (default settings) alongside
    python benchmarks/bench_calibration.py --cases funnel,banana --backends bridge --dynesty --max-dim 16
    # every backend and dynesty up to 8 dimensions, dynesty stopped at the 2e6 calls the references may spend at 64-d
    python benchmarks/bench_calibration.py --quick --dynesty --dynesty-maxcall 2000000
    # the held-out targets instead of the suite (writes benchmarks/results/calibration_held_out.json)
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/bench_calibration.py --held-out --seeds 1

Every case of :func:`evidence_select.testing.calibration_cases` (exact ``log Z``
known by construction) runs through ``log_evidence(model, X, y, method=...)``
with the backend's documented defaults and seeds ``0 .. seeds-1``. Per run: the
estimate, its reported std, the pull ``(estimate - exact) / std``, whether it is
within ``max(3 std, 0.5)`` nats, the backend's own verdict (``result.converged``;
an exception or an :class:`~evidence_select.exceptions.EvidenceConvergenceWarning`
counts as flagged), likelihood calls and wall / CPU seconds. NS runs up to ``--ns-max-dim`` dimensions
(32 by default: beyond, a run costs tens of CPU minutes). ``--jobs`` runs that many at once, each in its own
process with its own seed: the estimates and calls are the same whatever the number.

Summary per backend: the fraction of runs within tolerance, the fraction of the
misses that the backend flagged itself, the standard deviation of the pulls
(calibrated errors give ~1), the fraction within 0.5 nat among runs that
reported convergence, and the cost. The targets: >= 95% within, every miss
flagged, and a pull std in [0.7, 1.5].

``--held-out`` replaces the suite by the held-out targets of
``benchmarks/_held_out_targets.py`` (funnel, rotated bananas, heavy-tailed
two-peak products and a ring chain in uniform box priors, never used to tune the
backends), built at the suite's dimensions up to ``--max-dim`` and named
``<target>_d<dim>``; ``--cases`` filters them the same way, and every run is
judged and summarised as above.

Writes ``benchmarks/results/calibration.json`` (``calibration_held_out.json`` with ``--held-out``) after every
case, so a run cut short keeps what it measured; ``--save`` also writes ``benchmarks/saved/calibration.json``,
from which ``benchmarks/make_tables.py`` makes the validation page's tables.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from scipy import special, stats

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import require_clean_checkout, run_metadata, save_result  # noqa: E402
from _held_out_targets import BoxTarget, held_out_cases  # noqa: E402
from _tables import calibration_summary, print_tables  # noqa: E402
from evidence_select import log_evidence  # noqa: E402
from evidence_select.evidence._api import no_data  # noqa: E402
from evidence_select._result import failed_checks  # noqa: E402
from evidence_select.exceptions import EvidenceConvergenceWarning  # noqa: E402
from evidence_select.models import LinearGaussianModel  # noqa: E402
from evidence_select.testing import (BetaBinomialModel, BoxBananaTarget, BoxProductTarget, PoissonGammaModel,  # noqa: E402
                                     calibration_cases)

BACKENDS = ("ns", "ais", "bridge")
MIN_TOLERANCE = 0.5
N_SIGMA = 3.0


# -- one run ---------------------------------------------------------------------------------
def judge(estimate, std, exact):
    """Pull and the within-tolerance verdict ``|estimate - exact| <= max(3 std, 0.5)``."""
    error = estimate - exact
    pull = error / std if std > 0 else (0.0 if error == 0 else np.copysign(np.inf, error))
    within = bool(np.isfinite(estimate) and abs(error) <= max(N_SIGMA * std, MIN_TOLERANCE))
    return float(pull), within


def run_backend(case, method, seed):
    """One ``log_evidence`` call; exceptions and convergence warnings become a flagged record."""
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", EvidenceConvergenceWarning)
        try:
            r = log_evidence(case.model, case.X, case.y, method=method, random_state=seed)
        except Exception as exc:  # a crash is a loud (flagged) failure, recorded rather than fatal
            return dict(method=method, seed=seed, estimate=float("nan"), std=float("nan"), pull=float("nan"),
                        within=False, converged=False, failed=[f"{type(exc).__name__}: {exc}"], calls=float("nan"),
                        seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)
    warned = any(issubclass(w.category, EvidenceConvergenceWarning) for w in caught)
    pull, within = judge(r.log_evidence, r.log_evidence_std, case.exact)
    return dict(method=method, seed=seed, estimate=float(r.log_evidence), std=float(r.log_evidence_std), pull=pull,
                within=within, converged=bool(r.converged and not warned), failed=failed_checks(r.diagnostics),
                diagnostics=r.diagnostics, calls=float(r.n_likelihood_calls), grad_calls=_gradient_calls(r),
                seconds=time.perf_counter() - t0,
                cpu_seconds=time.process_time() - c0)


def _gradient_calls(result):
    """NS's likelihood-and-gradient evaluations (its Galilean steps), counted once each in ``calls`` as dynesty
    counts a likelihood call; reported apart so the cost can be weighed with a gradient's price (0 elsewhere)."""
    return float(result.info.get("galilean", {}).get("n_likelihood_calls", 0))


# -- dynesty (optional extra "bench") --------------------------------------------------------
def prior_transform(model):
    """Unit cube -> the model's unconstrained prior, by the inverse CDF of each coordinate."""
    if isinstance(model, (BoxProductTarget, BoxBananaTarget, BoxTarget)):
        return special.logit
    if isinstance(model, PoissonGammaModel):
        return lambda u: np.log(stats.gamma.ppf(u, model.shape, scale=1.0 / model.rate))
    if isinstance(model, BetaBinomialModel):
        return lambda u: special.logit(stats.beta.ppf(u, model.a, model.b))
    if isinstance(model, LinearGaussianModel):
        sd = np.sqrt(model.prior_variances)
        return lambda u: special.ndtri(u) * sd
    return lambda u: special.ndtri(u) * model.prior_scale  # every other case: N(0, prior_scale^2 I)


def run_dynesty(case, seed, maxcall=None):
    """dynesty with its default settings on the same case; its ``ncall`` as the cost. With ``maxcall`` it stops
    there (its own ``maxcall``), and a run that reached it is reported as not converged (``"maxcall"``): its
    estimate is that of an unfinished run."""
    import dynesty

    X = no_data() if case.X is None else case.X

    def log_lik(theta):
        return float(case.model.log_likelihood_sum(theta[None], X, case.y)[0])

    t0, c0 = time.perf_counter(), time.process_time()
    sampler = dynesty.NestedSampler(log_lik, prior_transform(case.model), case.dim,
                                    rstate=np.random.default_rng(seed))
    sampler.run_nested(print_progress=False, maxcall=maxcall)
    res = sampler.results
    estimate, std = float(res.logz[-1]), float(res.logzerr[-1])
    pull, within = judge(estimate, std, case.exact)
    calls = float(np.sum(res.ncall))
    stopped = maxcall is not None and calls >= maxcall
    return dict(method="dynesty", seed=seed, estimate=estimate, std=std, pull=pull, within=within,
                converged=not stopped, failed=["maxcall"] if stopped else [], calls=calls,
                seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)


# -- tables ----------------------------------------------------------------------------------
def _cell(r):
    if not np.isfinite(r["estimate"]):
        return f"error: {r['failed'][0][:40]} | - | no | no | - | {r['seconds']:.1f}/{r['cpu_seconds']:.1f}"
    flag = "yes" if r["converged"] else "no (" + ", ".join(r["failed"]) + ")" if r["failed"] else "no"
    return (f"{r['estimate']:.2f} ± {r['std']:.2f} | {r['pull']:+.1f} | {'yes' if r['within'] else '**no**'} | "
            f"{flag} | {r['calls']:.3g}{_gradient_note(r)} | {r['seconds']:.1f}/{r['cpu_seconds']:.1f}")


def _gradient_note(r):
    """The share of ``calls`` that also took a gradient, where there is one."""
    return f" ({r['grad_calls']:.2g} with gradient)" if r.get("grad_calls") else ""


def print_table(rows, methods):
    head = "| case | dim | seed | exact |" + "".join(f" {m} est ± std | pull | within | converged | calls | wall/CPU s |"
                                                     for m in methods)
    print("\n" + head)
    print("|" + "---|" * (4 + 6 * len(methods)))
    for row in rows:
        by_seed = {}
        for r in row["runs"]:
            by_seed.setdefault(r["seed"], {})[r["method"]] = r
        for seed, runs in sorted(by_seed.items()):
            cells = "".join(f" {_cell(runs[m])} |" if m in runs else " - | - | - | - | - | - |" for m in methods)
            print(f"| {row['case']} | {row['dim']} | {seed} | {row['exact']:.3f} |{cells}")


# -- driver ------------------------------------------------------------------------------------
def select_cases(max_dim, patterns, held_out=False):
    cases = held_out_cases(max_dim) if held_out else calibration_cases(max_dim)
    if patterns:
        cases = [c for c in cases if any(p in c.name for p in patterns)]
    return cases


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="dimensions up to 8 and one seed")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated subset of ns,ais,bridge")
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names (e.g. funnel,_d16)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    parser.add_argument("--max-dim", type=int, default=64)
    parser.add_argument("--ns-max-dim", type=int, default=32, help="run NS only up to this dimension")
    parser.add_argument("--dynesty", action="store_true", help="also run dynesty with its default settings")
    parser.add_argument("--dynesty-maxcall", type=int, default=None,
                        help="stop each dynesty run after this many likelihood calls (its maxcall; a run stopped "
                             "there is reported as not converged): with its uniform ellipsoid sampling some cases "
                             "take it hours")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once, each in its own process (the estimates are the same whatever the "
                             "number; each run's seconds are measured beside the others')")
    parser.add_argument("--held-out", action="store_true",
                        help="judge on the held-out targets (benchmarks/_held_out_targets.py) instead of the suite")
    parser.add_argument("--save", action="store_true",
                        help="also write benchmarks/saved/calibration.json, the validation page's source "
                             "(the default suite, from a clean commit)")
    args = parser.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b]
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown:
        parser.error(f"unknown backends {unknown}; choose from {BACKENDS}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    args.methods = args.backends + (["dynesty"] if args.dynesty else [])  # what each case runs, in this order
    args.name = "calibration_held_out" if args.held_out else "calibration"
    if args.quick:
        args.max_dim, args.seeds = min(args.max_dim, 8), 1
    if args.save:
        require_clean_checkout(parser, args.name)
    return args


def trimmed(result):
    """What the published tables read: every run without its diagnostics (their failed checks stay)."""
    return dict(result, rows=[dict(row, runs=[{k: v for k, v in r.items() if k != "diagnostics"} for r in row["runs"]])
                              for row in result["rows"]])


def _run(case, method, seed, dynesty_maxcall):
    """One run of ``method`` (a backend or ``"dynesty"``) on ``case``: a task for :func:`_runs`."""
    if method == "dynesty":
        return run_dynesty(case, seed, dynesty_maxcall)
    return run_backend(case, method, seed)


def _tasks(args, cases):
    """Every run the arguments ask for, as ``(case, method, seed)`` in case, then seed, then method order."""
    return [(case, method, seed) for case in cases for seed in range(args.first_seed, args.first_seed + args.seeds)
            for method in args.methods if method != "ns" or case.dim <= args.ns_max_dim]


def _runs(args, tasks):
    """The runs' records in task order, as they finish; ``args.jobs`` processes (1: in this one). Each run has
    its own seed and shares nothing with the others, so the estimates do not depend on ``jobs``."""
    if args.jobs == 1:
        return (_run(case, method, seed, args.dynesty_maxcall) for case, method, seed in tasks)
    return Parallel(n_jobs=args.jobs, return_as="generator")(
        delayed(_run)(case, method, seed, args.dynesty_maxcall) for case, method, seed in tasks)


def main(argv=None):
    args = parse_args(argv)
    cases = select_cases(args.max_dim, [p for p in args.cases.split(",") if p], args.held_out)
    out = dict(meta=dict(run_metadata(sys.argv), jobs=args.jobs), backends=args.methods, seeds=args.seeds, rows=[])
    tasks = _tasks(args, cases)
    runs = iter(_runs(args, tasks))
    for case in cases:
        n_runs = sum(task[0] is case for task in tasks)
        row = dict(case=case.name, family=case.family, dim=case.dim, exact=case.exact,
                   runs=[next(runs) for _ in range(n_runs)])
        out["rows"].append(row)
        line = "  ".join(f"{r['method']}:{r['estimate'] - case.exact:+.2f}{'' if r['within'] else '!'}"
                         f"{'' if r['converged'] else '(flagged)'}" for r in row["runs"])
        print(f"{case.name:22s} exact {case.exact:10.3f}  {line}", flush=True)
        out["summary"] = [s for s in (calibration_summary(out["rows"], m) for m in args.methods) if s]
        save_result(args.name, out)  # after every case, so a run cut short keeps what it measured
    paths = save_result(args.name, out, args.save, trimmed)
    print_table(out["rows"], args.methods)
    print_tables("calibration", out)
    print("\nwrote " + ", ".join(paths))


if __name__ == "__main__":
    main()
