"""SGAIS on scikit-learn's real data sets against reference evidences (issue 16).

Usage::

    python benchmarks/bench_real.py                 # the classifier and regressor cases, 3 seeds, chunks of 100
    python benchmarks/bench_real.py --suite real_data_mixtures   # the mixture cases, chunks of 100 and 500
    python benchmarks/bench_real.py --suite real_data_held_out   # the held-out cases, chunks of 100 and 500
    python benchmarks/bench_real.py --suite real_data_held_out --save   # also to benchmarks/saved/ (clean commit)
    python benchmarks/bench_real.py --quick         # breast cancer prior 1/10 file+sorted, iris, diabetes; 2 seeds
    python benchmarks/bench_real.py --recompute     # recompute the cached references (hours)
    python benchmarks/bench_real.py --cases bc_s10_sorted,iris
    python benchmarks/bench_real.py --exact-move-rows 0   # SGHMC from the first row (no exact moves)

Prints a markdown table and writes ``benchmarks/results/<suite>.json``; ``--save`` also writes
``benchmarks/saved/<suite>.json``, from which ``benchmarks/make_tables.py`` makes the validation page's table.

Cases (features standardised unless the case says "unscaled"; chunks of 100 rows):

- breast cancer (569 rows, 30 features), ``BayesianLogisticClassifier(prior_scale=s)``
  for ``s`` in 0.3, 1, 3, 10, rows in file order, shuffled (seed 0) and sorted by class;
- wine (3 classes, 13 features) and iris (3 classes, 4 features), shuffled;
- digits, classes 3 and 8 (357 rows, 64 features; the constant pixel columns are
  kept: standardised they are zero, so their weights are prior-only parameters);
- diabetes, ``BayesianLinearRegressor`` against the exact evidence, with ``y``
  standardised and raw (raw ``y`` has variance ~6000 against ``noise_variance=1``:
  the estimator must refuse it or warn);
- breast cancer unscaled (prior 1): must warn (no reference computed);
- ``BayesianMixture(K)`` (``K`` = 1, 2, 3, its defaults but the chunks) on standardised
  real rows, in file order, shuffled and sorted by the first column (each chunk then lies
  beyond the last): iris and wine features, the first five breast-cancer features, the
  diabetes target as one column, and the first two principal components of all 1797
  digits. ``K = 1`` has an exact evidence (normal-inverse-gamma); ``K >= 2`` is checked
  against two heavy AIS runs (1600 chains, 48 moves per temperature), the converged
  ones pooled by their mean ``Z`` (see ``MIXTURE_AIS`` and ``pooled_ais``).

Held-out cases (suite ``real_data_held_out``, names ``ho_*`` and ``sep_*``): digit subsets no
other case uses, never used to tune a default, each streamed shuffled and with its
classes arriving one after another (a late shift): ``BayesianLogisticClassifier`` on
4 vs 9 (prior scales 1 and 3, the latter nearly separable) and on 3/5/8 (softmax), and
``BayesianMixture`` with K = 3 on the first two principal components of digits 0/1/6 and
K = 4 on the first three of 0/1/6/7 (constant pixel columns dropped, columns standardised), and
``BayesianLinearRegressor`` (exact references) on the digits' first principal component against the
next eleven and on wine's alcohol against its other columns. The same data also stream in two more orders:
sorted by the rows' first principal component (``*_feature_drift``: the features drift while every class keeps
arriving) and, for the regressions, sorted by the target (``*_target_drift``). Two-class problems on all 1797
digits (names ``sep_*``), a zero against the rest (separable) and even against odd digits, shuffled and one
class after the other, run past the exact moves' first rows.

Reference for the classifiers: AIS (100 chains) and bridge sampling on the full data;
where they agree within ``max(3 x combined std, 0.5)`` the bridge value is used, otherwise
the one whose own convergence checks passed (AIS when both or neither did), and the
verdict says "backends disagree". References are cached in
``benchmarks/results/real_references.json`` keyed by case data and model; those computed so far are also
committed in ``benchmarks/saved/real_references.json``, which a fresh checkout reads.
A case is *ok* when ``|SGAIS - reference| <= max(3 sigma, 2 nats)`` with
``sigma = hypot(reported std, reference std)``, or when a warning was emitted.
"""

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (PAPER_LINEAR, RESULTS_DIR, SAVED_DIR, pairwise_agreement, require_clean_checkout,  # noqa: E402
                     run_metadata, save_json, save_result)
from _tables import markdown_lines, print_tables, real_table  # noqa: E402

from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture, log_evidence  # noqa: E402,E501

REFERENCE_PATH = os.path.join(RESULTS_DIR, "real_references.json")
#: The references as committed (heavy AIS and bridge runs that take hours), read where the results cache lacks one.
SAVED_REFERENCE_PATH = os.path.join(SAVED_DIR, "real_references.json")
CHUNK = 100
AIS_CHAINS = 100
#: The mixtures' reference: AIS at 16 times the default chains and 4 times the moves, two seeds. At the
#: defaults AIS and bridge sampling both miss modes of the paper's five-component mixture (see bench_coverage).
MIXTURE_AIS = dict(n_chains=1600, n_mcmc_steps=48)
MIXTURE_AIS_SEEDS = (0, 1)
#: Density data sets of the mixture cases (standardised columns).
MIXTURE_DATA = ("iris_X", "wine_X", "bc5_X", "diabetes_target", "digits_pca2")
MIXTURE_COMPONENTS = {"iris_X": (1, 2, 3), "wine_X": (1, 2), "bc5_X": (1, 2), "diabetes_target": (1, 2, 3),
                      "digits_pca2": (1, 2)}
#: Held-out data: digit classes of the classifier cases, and (classes, principal components) of the mixture cases,
#: whose rows come sorted by class (their "file" order: one cluster after another).
HELD_OUT_CLASSES = {"digits49": (4, 9), "digits358": (3, 5, 8)}
HELD_OUT_DENSITY = {"digits016_pca2": ((0, 1, 6), 2), "digits0167_pca3": ((0, 1, 6, 7), 3)}
#: Held-out regressions (exact references), rows sorted by class in their "file" order: the first principal
#: component of the digits on the next eleven, and wine's alcohol on its other columns.
HELD_OUT_REGRESSION = ("digits_pc1", "wine_alcohol")
#: Held-out two-class problems on all 1797 digits (the longest real stream here, so most of it is annealed by
#: SGHMC after the exact moves' first rows): a zero against every other digit (linearly separable in the pixels)
#: and even against odd digits. Rows sorted by class in their "file" order.
HELD_OUT_BINARY = {"digits0_rest": (0,), "digits_even_odd": (0, 2, 4, 6, 8)}


# -- data ----------------------------------------------------------------------------------
def _standardise(values):
    values = np.asarray(values, dtype=float)
    scale = values.std(axis=0)
    return (values - values.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def _order(X, y, order):
    """The rows in file order, shuffled (seed 0), sorted by class or target (by the first column without ``y``),
    or sorted by the rows' first principal component (``"by_pc1"``: a drift of the features, not of the labels)."""
    if order == "shuffled":
        index = np.random.default_rng(0).permutation(len(X))
    elif order == "sorted":
        index = np.argsort(X[:, 0] if y is None else y, kind="stable")
    elif order == "by_pc1":
        centred = X - X.mean(axis=0)
        index = np.argsort(centred @ np.linalg.svd(centred, full_matrices=False)[2][0], kind="stable")
    else:
        index = np.arange(len(X))
    return X[index], (None if y is None else y[index])


def load_case_data(name):
    """``(X, y)`` of a data set name: bc, bc_unscaled, wine, iris, digits38, diabetes, diabetes_raw."""
    from sklearn import datasets

    if name in ("bc", "bc_unscaled"):
        X, y = datasets.load_breast_cancer(return_X_y=True)
        return (X if name == "bc_unscaled" else _standardise(X)), y
    if name in ("wine", "iris"):
        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        return _standardise(X), y
    if name == "digits38":
        X, y = datasets.load_digits(return_X_y=True)
        keep = (y == 3) | (y == 8)
        return _standardise(X[keep]), (y[keep] == 8).astype(int)
    if name in ("diabetes", "diabetes_raw"):
        X, y = datasets.load_diabetes(return_X_y=True)
        return _standardise(X), (_standardise(y) if name == "diabetes" else y.astype(float))
    if name in MIXTURE_DATA:
        return _density_data(name), None
    if name in HELD_OUT_CLASSES or name in HELD_OUT_DENSITY:
        return _held_out_digits(name)
    if name in HELD_OUT_REGRESSION:
        return _held_out_regression(name)
    if name in HELD_OUT_BINARY:
        return _held_out_binary(name)
    raise ValueError(f"unknown data set {name!r}")


def _density_data(name):
    """The mixture cases' rows (no targets), every column standardised."""
    from sklearn import datasets
    from sklearn.decomposition import PCA

    if name in ("iris_X", "wine_X"):
        return _standardise(getattr(datasets, f"load_{name[:-2]}")().data)
    if name == "bc5_X":
        return _standardise(datasets.load_breast_cancer().data[:, :5])
    if name == "diabetes_target":
        return _standardise(datasets.load_diabetes().target[:, None])
    return _standardise(PCA(2, random_state=0).fit_transform(datasets.load_digits().data))


def _held_out_digits(name):
    """A held-out digit subset: ``(X, y)`` for a classifier, ``(X, None)`` sorted by class for a mixture."""
    from sklearn import datasets
    from sklearn.decomposition import PCA

    X, y = datasets.load_digits(return_X_y=True)
    classes, n_components = HELD_OUT_DENSITY.get(name, (HELD_OUT_CLASSES.get(name), None))
    keep = np.isin(y, classes)
    X, y = X[keep], np.searchsorted(classes, y[keep])
    if n_components is None:
        return _standardise(X[:, X.std(axis=0) > 0]), y
    by_class = np.argsort(y, kind="stable")
    return _standardise(PCA(n_components, random_state=0).fit_transform(X))[by_class], None


def _held_out_regression(name):
    """A held-out regression ``(X, y)``, standardised, its rows sorted by class (stable)."""
    from sklearn import datasets
    from sklearn.decomposition import PCA

    if name == "digits_pc1":
        pixels, label = datasets.load_digits(return_X_y=True)
        components = _standardise(PCA(12, random_state=0).fit_transform(pixels))
        X, y = components[:, 1:], components[:, 0]
    else:
        wine = datasets.load_wine()
        X, y, label = _standardise(wine.data[:, 1:]), _standardise(wine.data[:, 0]), wine.target
    by_class = np.argsort(label, kind="stable")
    return X[by_class], y[by_class]


def all_cases():
    """Case name -> (data name, order, estimator factory, reference kind)."""
    cases = {}
    for scale in (0.3, 1, 3, 10):
        for order in ("file", "shuffled", "sorted"):
            cases[f"bc_s{scale}_{order}"] = ("bc", order, dict(kind="classifier", prior_scale=scale), "backends")
    # No reference: the backends need hours on a posterior this ill-conditioned; the case must warn.
    cases["bc_unscaled_s1_file"] = ("bc_unscaled", "file", dict(kind="classifier", prior_scale=1), "none")
    for name in ("wine", "iris", "digits38"):
        cases[name] = (name, "shuffled", dict(kind="classifier", prior_scale=1), "backends")
    cases["diabetes"] = ("diabetes", "file", dict(kind="regressor", **PAPER_LINEAR), "exact")
    cases["diabetes_raw_y"] = ("diabetes_raw", "file", dict(kind="regressor", **PAPER_LINEAR), "exact")
    for data_name in MIXTURE_DATA:
        for k in MIXTURE_COMPONENTS[data_name]:
            for order in ("file", "shuffled", "sorted"):
                cases[f"mix_k{k}_{data_name}_{order}"] = (data_name, order, dict(kind="mixture", n_components=k),
                                                         "exact" if k == 1 else "mixture_ais")
    return cases


def _held_out_binary(name):
    """All digits' non-constant pixels, standardised; ``y`` 1 for the digits of ``HELD_OUT_BINARY[name]``."""
    from sklearn import datasets

    X, digit = datasets.load_digits(return_X_y=True)
    return _standardise(X[:, X.std(axis=0) > 0]), np.isin(digit, HELD_OUT_BINARY[name]).astype(int)


def held_out_cases():
    """The held-out cases (``--held-out``), in the form of :func:`all_cases`."""
    cases = {}
    for scale in (1, 3):
        for order in ("shuffled", "sorted"):
            cases[f"ho_digits49_s{scale}_{order}"] = ("digits49", order, dict(kind="classifier", prior_scale=scale),
                                                    "backends")
    for order in ("shuffled", "sorted"):
        cases[f"ho_digits358_{order}"] = ("digits358", order, dict(kind="classifier", prior_scale=1), "backends")
    for data_name, (classes, _) in HELD_OUT_DENSITY.items():
        k = len(classes)
        for order, label in (("shuffled", "shuffled"), ("file", "classes_late")):
            cases[f"ho_mix_k{k}_{data_name}_{label}"] = (data_name, order, dict(kind="mixture", n_components=k),
                                                        "mixture_ais")
    for data_name in HELD_OUT_REGRESSION:
        for order, label in (("shuffled", "shuffled"), ("file", "classes_late")):
            cases[f"ho_lin_{data_name}_{label}"] = (data_name, order, dict(kind="regressor", **PAPER_LINEAR),
                                                    "exact")
    return cases


def held_out_separable_cases():
    """Two-class problems on all digits (names ``sep_*``), shuffled and with one class after the other: longer
    than ``exact_move_rows``, on a posterior far flatter than the softmax's curvature bound, which SGHMC cannot
    follow past those rows (the engine's lag check must hand them back to the exact moves)."""
    return {f"sep_{data_name}_{order}": (data_name, order, dict(kind="classifier", prior_scale=1), "backends")
            for data_name in HELD_OUT_BINARY for order in ("shuffled", "sorted")}


def held_out_drift_cases():
    """Other orders of the held-out data: rows sorted by their first principal component (the features drift while every class keeps arriving), and
    regressions sorted by their target (the response drifts). The mixtures' columns are principal components, so
    their ``"sorted"`` order is the first component's."""
    cases = {}
    for name, (data_name, _, spec, ref_kind) in held_out_cases().items():
        if not name.endswith("_shuffled"):
            continue
        stem = name[: -len("_shuffled")]
        if spec["kind"] == "classifier":
            cases[f"{stem}_feature_drift"] = (data_name, "by_pc1", spec, ref_kind)
        elif spec["kind"] == "mixture":
            cases[f"{stem}_feature_drift"] = (data_name, "sorted", spec, ref_kind)
        else:
            cases[f"{stem}_target_drift"] = (data_name, "sorted", spec, ref_kind)
            cases[f"{stem}_feature_drift"] = (data_name, "by_pc1", spec, ref_kind)
    return cases


QUICK_CASES = ("bc_s1_file", "bc_s1_sorted", "bc_s10_file", "bc_s10_sorted", "iris", "diabetes", "diabetes_raw_y",
               "bc_unscaled_s1_file")


def make_estimator(spec, seed):
    """The case's estimator; its rows stream in the case's order (``shuffle=False``: the order is the case)."""
    params = dict({k: v for k, v in spec.items() if k != "kind"}, batch_size=CHUNK, random_state=seed, shuffle=False)
    if spec["kind"] == "classifier":
        return BayesianLogisticClassifier(**params)
    if spec["kind"] == "mixture":
        return BayesianMixture(**params)
    return BayesianLinearRegressor(**params)


# -- references ----------------------------------------------------------------------------
def reference_key(data_name, spec):
    return f"{data_name}|" + ",".join(f"{k}={v}" for k, v in sorted(spec.items()))


def compute_reference(data_name, spec, ref_kind):
    X, y = load_case_data(data_name)
    est = make_estimator(spec, 0)
    if ref_kind == "none":
        return dict(value=float("nan"), std=float("nan"), backends={}, agree=True)
    if ref_kind == "exact":
        return dict(value=float(log_evidence(est, X, y, method="exact").log_evidence), std=0.0, backends={},
                    agree=True)
    if ref_kind == "mixture_ais":
        return _mixture_reference(est, X)
    backends = {method: _backend_run(est, X, y, method, 0, settings)
                for method, settings in (("ais", dict(n_chains=AIS_CHAINS)), ("bridge", {}))}
    pairs = pairwise_agreement({m: (b["value"], b["std"]) for m, b in backends.items()})
    agree = all(p["agree"] for p in pairs)
    chosen = backends[_reference_backend(backends, agree)]
    return dict(value=chosen["value"], std=chosen["std"], backends=backends, agree=agree, pairs=pairs)


def _reference_backend(backends, agree):
    """Which of the ``"ais"`` and ``"bridge"`` runs is the reference.

    Bridge sampling is the more precise of two that agree. Where they disagree, the one whose own checks passed;
    AIS (many chains, adaptive schedule, no posterior-shape assumption) when both or neither did. The table
    flags the case either way.
    """
    if agree:
        return "bridge"
    if backends["bridge"]["converged"] and not backends["ais"]["converged"]:
        return "bridge"
    return "ais"


def _backend_run(est, X, y, method, seed, settings):
    """One reference backend's run: its value, std, verdict and cost (its warnings silenced: the verdict says)."""
    tic, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = log_evidence(est, X, y, method=method, random_state=seed, **settings)
    return dict(value=float(result.log_evidence), std=float(result.log_evidence_std), converged=bool(result.converged),
                seconds=time.perf_counter() - tic, cpu_seconds=time.process_time() - cpu)


def _mixture_reference(est, X):
    """Two heavy AIS runs (``MIXTURE_AIS``); those that pass their own convergence checks (all, if none does)
    pooled by their mean ``Z`` (unbiased, as each run's ``Z`` is). ``agree`` says whether the runs agree
    within ``max(3 x combined std, 0.5)``."""
    backends = {f"ais_{seed}": _backend_run(est, X, None, "ais", seed, MIXTURE_AIS) for seed in MIXTURE_AIS_SEEDS}
    return dict(pooled_ais(backends), backends=backends,
                agree=all(p["agree"] for p in pairwise_agreement({name: (b["value"], b["std"])
                                                                  for name, b in backends.items()})))


def pooled_ais(backends):
    """``value`` and ``std`` of the mean ``Z`` of the converged runs among ``backends`` (all, if none is)."""
    used = [b for b in backends.values() if b["converged"]] or list(backends.values())
    values = np.array([b["value"] for b in used])
    stds = np.array([b["std"] for b in used])
    # Var of the mean Z relative to its square, from the runs' own relative variances (delta method).
    share = np.exp(values - values.max()) / np.sum(np.exp(values - values.max()))
    pooled_std = float(np.sqrt(np.sum((share * stds) ** 2)))
    pooled = float(values.max() + np.log(np.mean(np.exp(values - values.max()))))
    return dict(value=pooled, std=pooled_std)


def references(cases, recompute):
    """Reference per case key: the results cache's, else the committed one's, else computed (and cached)."""
    cache = {}
    for path in (SAVED_REFERENCE_PATH, REFERENCE_PATH):
        if os.path.exists(path) and not recompute:
            with open(path) as fh:
                cache.update(json.load(fh))
    for name, (data_name, _, spec, ref_kind) in cases.items():
        key = reference_key(data_name, spec)
        if key not in cache:
            print(f"reference for {key} ...", flush=True)
            cache[key] = compute_reference(data_name, spec, ref_kind)
            save_json(REFERENCE_PATH, cache)
    return cache


# -- SGAIS runs ----------------------------------------------------------------------------
def run_case(case, seeds, settings=None):
    """Every seed's run of ``case``; ``settings`` are extra estimator parameters (e.g. ``exact_move_rows``)."""
    data_name, order, spec, _ = case
    X, y = _order(*load_case_data(data_name), order)
    runs = []
    for seed in seeds:
        tic, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                est = make_estimator(spec, seed).set_params(shuffle=False, **(settings or {})).fit(X, y)  # the case's order
                value, std = float(est.log_evidence_), float(est.log_evidence_std_)
                error = None
            except ValueError as exc:  # a refusal (e.g. unscaled target) is a valid outcome
                value, std, error = float("nan"), float("nan"), str(exc)
        names = sorted({w.category.__name__ for w in caught if not issubclass(w.category, DeprecationWarning)})
        runs.append(dict(seed=seed, value=value, std=std, refused=error, warnings=names,
                         seconds=time.perf_counter() - tic, cpu_seconds=time.process_time() - cpu))
    return runs


def summarise(name, runs, reference):
    values = np.array([r["value"] for r in runs])
    stds = np.array([r["std"] for r in runs])
    warned = sorted({w for r in runs for w in r["warnings"]})
    refused = [r["refused"] for r in runs if r["refused"]]
    sigma = np.hypot(stds, reference["std"])
    errors = values - reference["value"]
    within = np.abs(errors) <= np.maximum(3 * sigma, 2.0)
    if refused:
        verdict = "refused"
    elif np.isnan(reference["value"]):
        verdict = "flagged" if warned else "WRONG (no warning)"
    elif np.all(within):
        verdict = "ok"
    elif warned:
        verdict = "flagged"
    else:
        verdict = "WRONG"
    if not reference.get("agree", True):
        verdict += " (backends disagree)"
    return dict(case=name, mean=float(np.mean(values)), values=values.tolist(), mean_std=float(np.mean(stds)),
                spread=float(np.std(values, ddof=1)) if len(values) > 1 else float("nan"),
                reference=reference["value"], reference_std=reference["std"],
                max_pull=float(np.max(np.abs(errors) / sigma)) if not refused else float("nan"),
                n_within=int(np.sum(within)), n_runs=len(runs), warnings=warned, verdict=verdict,
                cpu_seconds=float(np.mean([r["cpu_seconds"] for r in runs])),
                refusal=refused[0] if refused else None)


def table(rows):
    return markdown_lines(*real_table(dict(rows=rows)))


def suites():
    """Suite name -> (case name -> case, chunk sizes): what each published table runs."""
    held_out = held_out_cases() | held_out_drift_cases() | held_out_separable_cases()
    return {"real_data": ({k: v for k, v in all_cases().items() if not k.startswith("mix_")}, (CHUNK,)),
            "real_data_mixtures": ({k: v for k, v in all_cases().items() if k.startswith("mix_")}, (CHUNK, 500)),
            "real_data_held_out": (held_out, (CHUNK, 500))}


def trimmed(result):
    """What the published table reads: the per-case summaries (with their runs), not the reference details."""
    return {key: value for key, value in result.items() if key != "references"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=sorted(suites()), default="real_data")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--recompute", action="store_true", help="recompute the cached references")
    parser.add_argument("--cases", default=None, help="comma-separated case names (default: the suite's)")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--exact-move-rows", type=int, default=None,
                        help="the estimators' exact_move_rows (default: theirs; 0 runs SGHMC from the first row)")
    parser.add_argument("--batch-size", default=None,
                        help=f"comma-separated batch sizes (default: the suite's; {CHUNK} for real_data); "
                             f"case names get _b<size> where it is not {CHUNK}")
    parser.add_argument("--save", action="store_true",
                        help="also write benchmarks/saved/<suite>.json (the validation page's source; clean commit)")
    args = parser.parse_args(argv)
    if args.save:
        require_clean_checkout(parser, args.suite)
    out = dict(meta=run_metadata(sys.argv))  # the commit and load at the start
    out["rows"], out["references"] = run_cases(parser, args)
    paths = save_result(args.suite, out, args.save, trimmed)
    print_tables(args.suite, out)
    print("\nwrote " + ", ".join(paths))


def run_cases(parser, args):
    """Run the chosen cases' seeds at each chunk size: one summary row per case and size (runs included, printed
    as it completes), and the references."""
    every = all_cases() | held_out_cases() | held_out_drift_cases() | held_out_separable_cases()
    suite_cases, batch_sizes = suites()[args.suite]
    chosen = args.cases.split(",") if args.cases else list(QUICK_CASES if args.quick else suite_cases)
    unknown = sorted(set(chosen) - set(every))
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {sorted(every)}")
    if args.batch_size:
        batch_sizes = tuple(int(b) for b in args.batch_size.split(","))
    cases = {name: every[name] for name in chosen}
    seeds = range(args.seeds or (2 if args.quick else 3))
    refs = references(cases, args.recompute)
    rows = []
    for batch_size in batch_sizes:
        for name, case in cases.items():
            settings = dict(batch_size=batch_size, **({} if args.exact_move_rows is None
                                                      else {"exact_move_rows": args.exact_move_rows}))
            runs = run_case(case, seeds, settings)
            label = name if batch_size == CHUNK else f"{name}_b{batch_size}"
            rows.append(summarise(label, runs, refs[reference_key(case[0], case[2])]) | dict(runs=runs))
            print(table([rows[-1]])[-1], flush=True)
    return rows, refs


if __name__ == "__main__":
    main()
