"""Coverage of ``log_evidence_std_``: how often the reported interval holds the reference (issue 16, item 4).

Usage::

    python benchmarks/bench_coverage.py                  # 20 seeds per case
    python benchmarks/bench_coverage.py --quick          # 8 seeds, fewer cases
    python benchmarks/bench_coverage.py --long-streams   # the 1e4- and 1e5-row streams instead
    python benchmarks/bench_coverage.py --save           # also benchmarks/saved/coverage.json (clean commit only)
    python benchmarks/bench_coverage.py --jobs 2         # two seeds at a time, each in its own process
    python benchmarks/bench_coverage.py --long-streams --save   # ... benchmarks/saved/coverage_long_streams.json
    python benchmarks/bench_coverage.py --replicates 2,4 # compare group counts at equal particle budget
    python benchmarks/bench_coverage.py --cases K=5 --set learning_rate=0.2  # other estimator settings
    python benchmarks/bench_coverage.py --check-mode-reference   # the long mixtures' reference against AIS

Prints a markdown table and writes ``benchmarks/results/coverage.json`` (``coverage_long_streams.json`` with
``--long-streams``); ``--save`` also writes the trimmed runs the validation page's tables are made from to
``benchmarks/saved/``.

Every case keeps its data fixed and varies the estimator's seed, so the spread is the
sampler's; the rows stream in the case's order (``shuffle=False``). For each run the pull is ``(SGAIS - reference) / hypot(std, reference std)``;
1-sigma coverage is the fraction of runs with ``|pull| <= 1`` (about 68% is right), 2-sigma
with ``|pull| <= 2`` (about 95%). A run is *flagged* when the estimator raised one of the package's
warnings; the table gives that fraction and the fraction of runs within 2 sigma or flagged.

Cases: linear (1000 rows, exact), softmax (1000 rows, Laplace importance sampling), the same two
models and the paper's mixture on 1e5-row streams, a two-class softmax whose first feature nearly separates
the classes on 5000 and 2e4 rows (streamed past its exact moves; Laplace importance sampling, which agrees
with bridge sampling to 0.01 nat on such data), a two-class softmax on 30 correlated features whose
posterior SGHMC cannot follow, on 12 000 rows (past the lag check's 5000; Laplace importance sampling), the
mixture also on 1e4 (the length at which an
error that grows with the stream shows; the mixture's reference is importance sampling at its best
posterior mode, ``_paper_mixture_mode_reference``, past the rows where the streams check themselves
against it), a linear stream whose coefficients change at row 500 (exact), every standardised real
case of ``bench_real.py`` (breast cancer at four prior scales in file, shuffled and class-sorted
order, wine, iris, digits, diabetes; chunks of 100, references from its cache), the paper's 2-d
five-component mixture on 1000 rows (a cached reference from two heavy AIS runs,
``_paper_mixture_reference``), and a 1-d two-cluster mixture whose second cluster appears at row 300
(bridge reference). ``--long-streams`` runs the 1e4- and 1e5-row cases (the linear, softmax and mixture
simulators, the nearly separable and the separating softmax), the default run the others. ``--cases`` picks cases by substring.
"""

import argparse
import ast
import json
import os
import sys
import time
import warnings

import numpy as np
from joblib import Parallel, delayed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PAPER_LINEAR, RESULTS_DIR, SAVED_DIR, require_clean_checkout, run_metadata, save_json, save_result  # noqa: E402,E501
from _laplace_reference import laplace_importance_log_evidence  # noqa: E402
from _tables import print_tables  # noqa: E402
from bench_real import _order, all_cases, load_case_data, make_estimator, reference_key, references  # noqa: E402,E501

from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture, log_evidence  # noqa: E402,E501
from evidence_select.datasets import make_linear_regression, make_mixture, make_softmax_classification  # noqa: E402,E501
from evidence_select.evidence._api import _model_and_data  # noqa: E402
from evidence_select.sgais._mode_check import mode_importance_log_evidence  # noqa: E402
from evidence_select.sgais._settings import ModeCheckSettings  # noqa: E402
from evidence_select.models import SoftmaxRegressionModel  # noqa: E402


def _shift_linear(n=1000, change=500):
    data = make_linear_regression(n, random_state=0)
    y = data.y.copy()
    rng = np.random.default_rng(1)
    w_new = rng.normal(size=data.X.shape[1])
    y[change:] = data.X[change:] @ w_new + rng.normal(size=n - change)
    return data.X, y


def _two_clusters(n=600, change=300):
    rng = np.random.default_rng(0)
    X = rng.normal(-2.0, 0.5, size=(n, 1))
    X[change:][rng.random(n - change) < 0.5] += 4.0
    return X


def _softmax_reference(X, y, n_classes=4):
    return laplace_importance_log_evidence(SoftmaxRegressionModel(X.shape[1], n_classes), X, y, n_samples=4000)


def _nearly_separable(n, seed=1):
    """Four standard normal features, two classes: the sign of the first feature plus noise of scale 0.05.

    The posterior keeps moving as rows arrive (the separating weight grows) and is far flatter than the
    softmax's curvature bound, which is what SGHMC's step scales assume.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] + 0.05 * rng.normal(size=n) > 0).astype(int)


def _separating_correlated(n, n_features=30, weight_norm=6.0, seed=0):
    """Two classes from a logistic model on ``n_features`` correlated, standardised features with true weights of
    norm ``weight_norm``: a posterior that SGHMC cannot follow (flat directions not along the axes), whose rows
    run past the exact moves' 1000 and the lag check's 5000 (``CheckSettings.lag_rows``)."""
    rng = np.random.default_rng(seed)
    mixing = np.eye(n_features) + rng.normal(size=(n_features, n_features)) / np.sqrt(n_features)
    X = rng.normal(size=(n, n_features)) @ mixing
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    weights = rng.normal(size=n_features)
    weights *= weight_norm / np.linalg.norm(weights)
    return X, (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ weights)))).astype(int)


def _long_stream_cases():
    """The linear, softmax and paper-mixture simulators on 1e5 rows (the mixture also on 1e4); references that
    need computing are computed when the case runs."""
    linear = make_linear_regression(100_000, random_state=0)
    softmax = make_softmax_classification(100_000, random_state=0)
    exact = log_evidence(BayesianLinearRegressor(**PAPER_LINEAR), linear.X, linear.y, method="exact").log_evidence
    out = {
        "linear N=1e5": (lambda s, p, g: BayesianLinearRegressor(**PAPER_LINEAR, random_state=s, n_particles=p,
                                                                 n_replicates=g, shuffle=False),
                         linear.X, linear.y, (exact, 0.0)),
        "softmax N=1e5": (lambda s, p, g: BayesianLogisticClassifier(random_state=s, n_particles=p, n_replicates=g, shuffle=False),
                          softmax.X, softmax.y, lambda: _softmax_reference(softmax.X, softmax.y)),
    }
    for label, n in (("5000", 5000), ("2e4", 20_000)):
        Xn, yn = _nearly_separable(n)
        out[f"softmax nearly separable N={label}"] = (
            lambda s, p, g: BayesianLogisticClassifier(random_state=s, n_particles=p, n_replicates=g, shuffle=False), Xn, yn,
            lambda Xn=Xn, yn=yn: _softmax_reference(Xn, yn, n_classes=2))
    Xs, ys = _separating_correlated(12_000)
    out["softmax separating, 30 correlated features N=12000"] = (
        lambda s, p, g: BayesianLogisticClassifier(random_state=s, n_particles=p, n_replicates=g, shuffle=False), Xs, ys,
        lambda: _softmax_reference(Xs, ys, n_classes=2))
    for label, n in (("1e4", 10_000), ("1e5", 100_000)):
        X = make_mixture(n, random_state=0).X
        out[f"mixture K=5 N={label} (paper)"] = (
            lambda s, p, g: BayesianMixture(5, random_state=s, n_particles=p, n_replicates=g, shuffle=False),
            X, None, lambda X=X: _paper_mixture_mode_reference(X))
    return out


def _paper_mixture_mode_reference(X, n_draws=20_000, seed=0):
    """``(value, std)`` of the paper mixture's evidence on many rows: importance sampling at its best posterior mode.

    The streams' own posterior-mode checks stop at ``ModeCheckSettings.max_rows`` rows; this one, with five times their
    draws, is the reference past them. Its ``Z`` is unbiased (a multivariate t at the mode, summed over the 120
    relabellings, covers everything) and reads low only if it misses mass; the five well-separated clusters
    leave the posterior one mode up to labels at these sizes. On the 1000 rows of the ``N=1000`` case it agrees
    with the two heavy AIS runs of :func:`_paper_mixture_reference` (``--check-mode-reference`` prints both).
    """
    model, X, _ = _model_and_data(BayesianMixture(5), X, None)
    settings = ModeCheckSettings(n_draws=n_draws, target_std=0.0)  # every draw: a reference, not a check
    check = mode_importance_log_evidence(model, X, None, np.random.default_rng(seed), settings)
    return check.log_evidence, check.std


def _selected(name, patterns):
    return not patterns or any(p in name for p in patterns)


def cases(quick, patterns=(), long_streams=False):
    """name -> (make_estimator(seed, n_particles, n_replicates), X, y, reference), for the names ``patterns`` select:
    the 1e4- and 1e5-row streams with ``long_streams``, the other cases without.

    The reference is ``(value, std)``, or a function returning it (computed only if the case runs).
    """
    if long_streams:
        return _long_stream_cases()
    out = {}
    X, y = make_linear_regression(1000, random_state=0).X, make_linear_regression(1000, random_state=0).y
    exact = log_evidence(BayesianLinearRegressor(**PAPER_LINEAR), X, y, method="exact").log_evidence
    out["linear N=1000"] = (lambda s, p, g: BayesianLinearRegressor(**PAPER_LINEAR, random_state=s, n_particles=p,
                                                                    n_replicates=g, shuffle=False),
                            X, y, (exact, 0.0))
    Xs, ys = _shift_linear()
    exact = log_evidence(BayesianLinearRegressor(**PAPER_LINEAR), Xs, ys, method="exact").log_evidence
    out["linear shift at 500 (chunks 100)"] = (
        lambda s, p, g: BayesianLinearRegressor(**PAPER_LINEAR, random_state=s, n_particles=p, n_replicates=g,
                                                shuffle=False, batch_size=100),
        Xs, ys, (exact, 0.0))
    data = make_softmax_classification(1000, random_state=0)
    out["softmax N=1000"] = (lambda s, p, g: BayesianLogisticClassifier(random_state=s, n_particles=p, n_replicates=g, shuffle=False),
                             data.X, data.y, lambda: _softmax_reference(data.X, data.y))
    real = all_cases()
    # every real case with a reference (the unscaled and raw-y cases are refused or flagged instead)
    names = ["bc_s1_shuffled"] if quick else [k for k, v in real.items() if v[3] != "none" and "raw" not in k]
    names = [name for name in names if _selected(name, patterns)]
    refs = references({k: real[k] for k in names}, recompute=False)
    for name in names:
        data_name, order, spec, _ = real[name]
        Xr, yr = _order(*load_case_data(data_name), order)
        ref = refs[reference_key(data_name, spec)]

        def factory(s, p, g, spec=spec):
            return make_estimator(spec, s).set_params(n_particles=p, n_replicates=g)

        out[name] = (factory, Xr, yr, (ref["value"], ref["std"]))
    if not quick:
        Xp = make_mixture(1000, random_state=0).X
        out["mixture K=5 N=1000 (paper)"] = (
            lambda s, p, g: BayesianMixture(5, random_state=s, n_particles=p, n_replicates=g, shuffle=False),
            Xp, None, lambda: _paper_mixture_reference(Xp))
        Xm = _two_clusters()
        out["mixture K=2, cluster at 300 (chunks 100)"] = (
            lambda s, p, g: BayesianMixture(2, random_state=s, n_particles=p, n_replicates=g, shuffle=False, batch_size=100),
            Xm, None, lambda: _bridge_reference(Xm))
    return out


#: AIS at four times the default chains and steps: at the defaults its groups disagree on this target (the
#: group_agreement check fails), and bridge sampling's chains do not mix (R-hat 1.5), so neither default is a
#: reference here.
PAPER_MIXTURE_AIS = dict(n_chains=1600, n_mcmc_steps=48)


def _paper_mixture_reference(X, seeds=(11, 12)):
    """``(value, std)`` of the paper mixture's evidence: two heavy AIS runs (``PAPER_MIXTURE_AIS``), cached.

    The value is their mean; the std the larger of their combined error and half their gap. Both runs and
    their verdicts are kept in ``benchmarks/results/paper_mixture_reference.json`` (the committed copy in
    ``benchmarks/saved/`` is read when the results have none).
    """
    path = os.path.join(RESULTS_DIR, "paper_mixture_reference.json")
    for cached in (path, os.path.join(SAVED_DIR, "paper_mixture_reference.json")):
        if os.path.exists(cached):
            with open(cached) as fh:
                saved = json.load(fh)
            if saved["n_rows"] == len(X) and saved["settings"] == PAPER_MIXTURE_AIS:
                return saved["value"], saved["std"]
    runs = []
    for seed in seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = log_evidence(BayesianMixture(5), X, method="ais", random_state=seed, **PAPER_MIXTURE_AIS)
        runs.append(dict(seed=seed, value=result.log_evidence, std=result.log_evidence_std,
                         converged=result.converged))
    values, stds = np.array([r["value"] for r in runs]), np.array([r["std"] for r in runs])
    value, std = float(values.mean()), float(max(np.sqrt(np.sum(stds**2)) / len(stds), np.ptp(values) / 2))
    save_json(path, dict(n_rows=len(X), settings=PAPER_MIXTURE_AIS, value=value, std=std, runs=runs))
    return value, std


def _bridge_reference(X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = log_evidence(BayesianMixture(2), X, method="bridge", random_state=0)
    return bridge.log_evidence, bridge.log_evidence_std


def run(case, seeds, n_particles_factor, n_replicates, settings=None, jobs=1):
    """One row per seed; ``settings`` (estimator parameters) are set on every case's estimator. With ``jobs`` > 1
    the seeds run in that many processes at once, each run with its own seed as it would run alone."""
    factory, X, y, reference = case
    ref, ref_std = reference() if callable(reference) else reference
    default = factory(0, 2, 2).__class__().get_params()["n_particles"]
    n_particles = max(2, int(round(default * n_particles_factor)))
    args = [(factory, X, y, seed, n_particles, n_replicates, settings) for seed in seeds]
    runs = Parallel(n_jobs=jobs)(delayed(_one_run)(*a) for a in args) if jobs > 1 else [_one_run(*a) for a in args]
    return [dict(row, reference=ref, reference_std=ref_std) for row in runs]


def _one_run(factory, X, y, seed, n_particles, n_replicates, settings):
    """The row of one seed's fit: its estimate, error, warnings, checks and CPU seconds."""
    est = factory(seed, n_particles, n_replicates).set_params(
        shuffle=False, **(settings or {}))  # each case streams in its own order (file, sorted, shifted)
    tic = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y) if y is not None else est.fit(X)
    flags = sorted({w.category.__name__ for w in caught if w.category.__module__.startswith("evidence_select")})
    return dict(seed=seed, value=float(est.log_evidence_), std=float(est.log_evidence_std_), warnings=flags,
                checks=sorted(est.evidence_checks_), first_chunk_lineages=int(est.evidence_history_[0].n_lineages),
                cpu_seconds=time.process_time() - tic)


def parse_settings(text):
    """``"a=1,b=x"`` -> ``{"a": 1, "b": "x"}``: values read as Python literals where they are, else as strings."""
    settings = {}
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SystemExit(f"--set expects NAME=VALUE items, got {item!r}")
        try:
            settings[name.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            settings[name.strip()] = value.strip()
    return settings


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--long-streams", action="store_true", help="the 1e4- and 1e5-row streams")
    parser.add_argument("--seeds", type=int, default=None, help="how many seeds per case (20; 8 with --quick)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first estimator seed")
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names")
    parser.add_argument("--replicates", default="2", help="comma-separated group counts, at the default "
                        "total particle budget (n_particles scaled by 2 / G)")
    parser.add_argument("--set", default="", metavar="NAME=VALUE[,NAME=VALUE]",
                        help="estimator parameters to change in every case (e.g. learning_rate=0.2), "
                        "stored with the runs")
    parser.add_argument("--jobs", type=int, default=1,
                        help="seeds run at once, each in its own process with its own seed, as it would run alone "
                        "(each run's CPU seconds are its own process's)")
    parser.add_argument("--save", action="store_true",
                        help="also write the runs to benchmarks/saved/ (the validation page's source; clean commit)")
    parser.add_argument("--check-mode-reference", action="store_true",
                        help="print the long mixture cases' reference method next to the heavy AIS reference on "
                        "the N=1000 paper rows, and exit")
    args = parser.parse_args(argv)
    name = "coverage_long_streams" if args.long_streams else "coverage"
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.save:
        require_clean_checkout(parser, name)
    if args.check_mode_reference:
        X = make_mixture(1000, random_state=0).X
        print("mode importance sampling: %.3f +/- %.3f" % _paper_mixture_mode_reference(X))
        print("heavy AIS (two runs):     %.3f +/- %.3f" % _paper_mixture_reference(X))
        return
    settings = parse_settings(args.set)
    seeds = range(args.first_seed, args.first_seed + (args.seeds or (8 if args.quick else 20)))
    out = dict(meta=dict(run_metadata(sys.argv), jobs=args.jobs), cases=[])  # the commit and load at the start
    patterns = [p for p in args.cases.split(",") if p]
    for case_name, case in cases(args.quick, patterns, args.long_streams).items():
        if not _selected(case_name, patterns):
            continue
        for n_replicates in (int(g) for g in args.replicates.split(",")):
            factor = 2.0 / n_replicates
            # Changed settings name the row, so rows of other settings never read as the defaults'.
            changed = dict(settings, **({"n_replicates": n_replicates} if n_replicates != 2 else {}))
            label = case_name + "".join(f" [{key}={value}]" for key, value in changed.items())
            out["cases"].append(dict(case=label, n_replicates=n_replicates, settings=settings,
                                     runs=run(case, seeds, factor, n_replicates, settings, args.jobs)))
            save_result(name, out)
            print(f"{label}: done", flush=True)
    paths = save_result(name, out, args.save)
    print_tables(name, out)
    print("\nwrote " + ", ".join(paths))


if __name__ == "__main__":
    main()
