"""Data as users have it: files sorted by their target, raw columns, and the demo's time estimates (issue 59).

Usage::

    python benchmarks/bench_user_data.py                    # all parts
    python benchmarks/bench_user_data.py --only sorted      # sorted classification files through fit
    python benchmarks/bench_user_data.py --only cv          # cross_val_score with the selector on sorted rows
    python benchmarks/bench_user_data.py --only scale       # mixtures on raw columns
    python benchmarks/bench_user_data.py --only demo        # the demo's reference cost curve and speed probe

Prints markdown tables and writes ``benchmarks/results/user_data.json``.

- ``sorted``: breast cancer, wine and digits (scikit-learn's copies; columns standardised, constant ones dropped;
  the digits also as their first three principal components, the tests' case), rows sorted by class, through ``EvidenceModelSelector`` of ``BayesianLogisticClassifier(prior_scale=s)``,
  ``s`` in 0.3, 1, 3 (the command line's classification candidates), ``fit`` with its default seeded shuffle,
  against the same selector on the rows shuffled beforehand, and against ``shuffle=False`` (the file order).
  Target: the sorted file's evidences within 3 combined standard errors of the shuffled rows', no
  ``degraded`` flag, in about the shuffled run's time.
- ``cv``: ``cross_val_score`` (5 stratified folds, no shuffling of its own) of the same selector on the sorted and
  the shuffled breast-cancer and wine rows. Target: the sorted folds within 2x the time of the shuffled folds.
- ``scale``: ``BayesianMixture(K)``, ``K`` = 1 and 2, defaults, on raw columns of real data sets none of the
  defaults was tuned on: of each data set, the first two columns (in file order) whose root-mean-square lies in
  [1e2, 1e4]. ``K = 1`` against its exact evidence, ``K = 2`` against bridge sampling; the same columns
  standardised (the cure the warning names) as a control. Target: each raw run either warns
  (``FeatureScaleWarning``, raised before the first chunk is annealed) or lands within ``max(3 sigma, 2 nats)``
  of its reference.
- ``demo``: the demo's cumulative time at its phase ends, default phases and ``--full``, its candidates one after
  another in this process, with the speed probe before and after: the constants of ``evidence_select/_demo.py``.

Times are wall seconds on this machine with its load at the time (printed); compare ratios within one run.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

from _common import RESULTS_DIR, run_metadata, save_json  # noqa: E402
from _tables import markdown_lines  # noqa: E402

from sklearn import datasets
from sklearn.decomposition import PCA
from sklearn.model_selection import cross_val_score
from sklearn.preprocessing import StandardScaler

from evidence_select import (BayesianLogisticClassifier, BayesianMixture, EvidenceModelSelector,
                             FeatureScaleWarning, log_evidence)
from evidence_select.evidence import exact_log_evidence

PRIOR_SCALES = (0.3, 1.0, 3.0)
SCALE_BAND = (1e2, 1e4)


# -- sorted classification files ---------------------------------------------------------------------
def classification_file(name):
    """``(X, y)`` of a real classification set sorted by class: standardised, constant columns dropped;
    ``digits_pca3``: the digits' first three principal components (the tests' case)."""
    loader = {"breast_cancer": datasets.load_breast_cancer, "wine": datasets.load_wine,
              "digits": datasets.load_digits, "digits_pca3": datasets.load_digits}[name]
    data = loader()
    X = data.data[:, data.data.std(axis=0) > 0]
    if name == "digits_pca3":
        X = PCA(3, random_state=0).fit_transform(X)
    order = np.argsort(data.target, kind="stable")
    return StandardScaler().fit_transform(X)[order], data.target[order]


def selector(**params):
    return EvidenceModelSelector([(f"prior={s:g}", BayesianLogisticClassifier(prior_scale=s))
                                  for s in PRIOR_SCALES], random_state=0, **params)


def timed_fit(estimator, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tic = time.perf_counter()
        estimator.fit(X, y)
        seconds = time.perf_counter() - tic
    return estimator, seconds, sorted({w.category.__name__ for w in caught})


def sorted_case(name, in_order):
    """The selector on the sorted rows and on the shuffled rows through ``fit``; with ``in_order``, also on the
    sorted rows as given (``shuffle=False``), which on the full digits takes far longer than the rest."""
    X, y = classification_file(name)
    shuffled = np.random.default_rng(1).permutation(len(y))
    runs = {}
    variants = [("sorted, fit", np.arange(len(y)), {}), ("shuffled, fit", shuffled, {})]
    if in_order:
        variants.append(("sorted, shuffle=False", np.arange(len(y)), {"shuffle": False}))
    for label, rows, params in variants:
        fitted, seconds, caught = timed_fit(selector(**params), X[rows], y[rows])
        runs[label] = dict(log_evidences=fitted.log_evidences_, stds=fitted.log_evidence_stds_,
                           checks=[list(c) for c in fitted.evidence_checks_], seconds=seconds, warnings=caught)
        print(f"  {name} {label}: {seconds:.1f} s", flush=True)
    return dict(case=name, n_rows=len(y), n_features=X.shape[1], n_classes=len(np.unique(y)), runs=runs)


def sorted_rows(results):
    cells = []
    for case in results:
        base = case["runs"]["shuffled, fit"]
        for label, run in case["runs"].items():
            pulls = np.abs(run["log_evidences"] - base["log_evidences"]) / np.hypot(run["stds"], base["stds"])
            agree = bool(np.all(pulls < 3.0))
            degraded = any("degraded" in c for c in run["checks"])
            cells.append([case["case"], label,
                          " ".join(f"{z:.1f}+/-{s:.1f}" for z, s in zip(run["log_evidences"], run["stds"])),
                          f"{pulls.max():.1f}", "; ".join(",".join(c) or "-" for c in run["checks"]),
                          f"{run['seconds']:.1f}", f"{run['seconds'] / base['seconds']:.2f}",
                          "yes" if agree and not degraded else "NO"])
    return ["data", "rows", "log Z per prior 0.3/1/3", "max pull vs shuffled", "checks", "s", "time / shuffled",
            "ok"], cells


# -- cross_val_score ----------------------------------------------------------------------------------
def cv_case(name):
    X, y = classification_file(name)
    shuffled = np.random.default_rng(1).permutation(len(y))
    out = dict(case=name)
    for label, rows in (("sorted", np.arange(len(y))), ("shuffled", shuffled)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tic = time.perf_counter()
            scores = cross_val_score(selector(), X[rows], y[rows], cv=5)
            seconds = time.perf_counter() - tic
        out[label] = dict(scores=scores, seconds=seconds, n_warnings=len(caught),
                          warnings=sorted({w.category.__name__ for w in caught}))
        print(f"  cv {name} {label}: {seconds:.1f} s, accuracy {scores.mean():.3f}", flush=True)
    return out


def cv_rows(results):
    cells = [[r["case"], f"{r['sorted']['scores'].mean():.3f}", f"{r['shuffled']['scores'].mean():.3f}",
              f"{r['sorted']['seconds']:.1f}", f"{r['shuffled']['seconds']:.1f}",
              f"{r['sorted']['seconds'] / r['shuffled']['seconds']:.2f}",
              f"{r['sorted']['n_warnings']} ({', '.join(r['sorted']['warnings']) or '-'})",
              "yes" if r["sorted"]["seconds"] <= 2 * r["shuffled"]["seconds"] else "NO"] for r in results]
    return ["data", "accuracy sorted", "accuracy shuffled", "s sorted", "s shuffled", "ratio",
            "warnings (sorted)", "within 2x"], cells


# -- raw scales ---------------------------------------------------------------------------------------
def raw_columns(name):
    """The first two columns (file order) of a real data set whose root-mean-square lies in ``SCALE_BAND``."""
    X = {"wine": lambda: datasets.load_wine().data, "diabetes": lambda: datasets.load_diabetes(scaled=False).data,
         "breast_cancer": lambda: datasets.load_breast_cancer().data,
         "linnerud": lambda: np.column_stack([datasets.load_linnerud().data, datasets.load_linnerud().target])}[name]()
    rms = np.sqrt(np.mean(X**2, axis=0))
    columns = np.flatnonzero((rms >= SCALE_BAND[0]) & (rms <= SCALE_BAND[1]))[:2]
    return X[:, columns], columns, rms[columns]


def mixture_run(X, K, reference_cache):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tic = time.perf_counter()
        est = BayesianMixture(K, random_state=0).fit(X)
        seconds = time.perf_counter() - tic
    names = [w.category.__name__ for w in caught]
    warned_first = bool(names) and names[0] == "FeatureScaleWarning"
    key = (X.tobytes(), K)
    if key not in reference_cache:
        if K == 1:
            reference_cache[key] = (exact_log_evidence(est.model_, X), 0.0, "exact")
        else:
            result = log_evidence(BayesianMixture(K), X, method="bridge", random_state=0)
            reference_cache[key] = (result.log_evidence, result.log_evidence_std, "bridge")
    reference, reference_std, method = reference_cache[key]
    error = est.log_evidence_ - reference
    within = abs(error) <= max(3.0 * np.hypot(est.log_evidence_std_, reference_std), 2.0)
    return dict(K=K, log_evidence=est.log_evidence_, std=est.log_evidence_std_, reference=reference,
                reference_std=reference_std, reference_method=method, error=error, within=bool(within),
                scale_warning=warned_first, checks=list(est.evidence_checks_), seconds=seconds,
                warnings=sorted(set(names)))


def scale_case(name, reference_cache):
    X, columns, rms = raw_columns(name)
    out = dict(case=name, columns=columns, rms=rms, n_rows=len(X), runs=[])
    for label, data in (("raw", X), ("standardised", StandardScaler().fit_transform(X))):
        for K in (1, 2):
            run = mixture_run(data, K, reference_cache)
            run["columns"] = label
            out["runs"].append(run)
            print(f"  {name} {label} K={K}: {run['log_evidence']:.1f} +/- {run['std']:.1f} vs "
                  f"{run['reference']:.1f} ({run['seconds']:.1f} s)", flush=True)
    return out


def scale_rows(results):
    cells = []
    for case in results:
        for run in case["runs"]:
            met = run["scale_warning"] or run["within"]
            cells.append([case["case"], f"{case['columns'].tolist()} (rms {', '.join(f'{v:.3g}' for v in case['rms'])})",
                          run["columns"], run["K"], f"{run['log_evidence']:.1f} +/- {run['std']:.1f}",
                          f"{run['reference']:.1f} ({run['reference_method']})", f"{run['error']:+.1f}",
                          "yes" if run["scale_warning"] else "no", ", ".join(run["checks"]) or "-",
                          "yes" if met else "NO"])
    return ["data", "columns", "as", "K", "SGAIS", "reference", "error", "scale warning first", "checks",
            "target met"], cells


# -- the demo's reference curve -----------------------------------------------------------------------
def demo_case(full):
    from evidence_select._demo import DEMO_COMPONENTS, call_bounds, speed_probe
    from evidence_select.datasets._shift import PAPER_PHASES, shift_stream

    phases = PAPER_PHASES if full else (1000, 1500, 1500)
    X = shift_stream(phases, random_state=0).X
    probe_before = speed_probe()
    # One candidate after another in this process: the probe and the run then share the machine alike.
    sel = EvidenceModelSelector([(f"K={k}", BayesianMixture(k, batch_size=250)) for k in DEMO_COMPONENTS],
                                n_jobs=1, shuffle=False, random_state=0)
    ends, cumulative = np.cumsum(phases).tolist(), []
    tic = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for start, stop in call_bounds(len(X), 250, ends):
            sel.partial_fit(X[start:stop])
            if stop in ends:
                cumulative.append(time.perf_counter() - tic)
    probe_after = speed_probe()
    return dict(phases=phases, ends=ends, cumulative_seconds=cumulative, probe_before=probe_before,
                probe_after=probe_after)


def demo_rows(results):
    cells = [[str(r["phases"]), ", ".join(f"({e}, {t:.1f})" for e, t in zip(r["ends"], r["cumulative_seconds"])),
              f"{r['probe_before']:.4f}", f"{r['probe_after']:.4f}"] for r in results]
    return ["phases", "(rows, cumulative s) at phase ends", "probe before (s)", "probe after (s)"], cells


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", choices=["sorted", "cv", "scale", "demo"],
                        default=["sorted", "cv", "scale", "demo"])
    parser.add_argument("--sorted-cases", nargs="*", default=["breast_cancer", "wine", "digits_pca3", "digits"])
    parser.add_argument("--in-order-cases", nargs="*", default=["breast_cancer", "wine", "digits_pca3"],
                        help="sorted cases also streamed as given (shuffle=False)")
    parser.add_argument("--cv-cases", nargs="*", default=["breast_cancer", "wine"])
    parser.add_argument("--scale-cases", nargs="*", default=["wine", "diabetes", "breast_cancer", "linnerud"])
    parser.add_argument("--output", default="user_data.json")
    args = parser.parse_args(argv)
    out = dict(meta=run_metadata(sys.argv))
    print(f"load average at start: {os.getloadavg()}")
    tables = []
    if "sorted" in args.only:
        out["sorted"] = [sorted_case(name, name in args.in_order_cases) for name in args.sorted_cases]
        tables.append(("Sorted classification files through fit", sorted_rows(out["sorted"])))
    if "cv" in args.only:
        out["cv"] = [cv_case(name) for name in args.cv_cases]
        tables.append(("cross_val_score with the selector", cv_rows(out["cv"])))
    if "scale" in args.only:
        cache = {}
        out["scale"] = [scale_case(name, cache) for name in args.scale_cases]
        tables.append(("Mixtures on raw columns", scale_rows(out["scale"])))
    if "demo" in args.only:
        out["demo"] = [demo_case(full) for full in (False, True)]
        tables.append(("The demo's reference curve", demo_rows(out["demo"])))
    out["meta"]["load_average_end"] = os.getloadavg()
    for title, (header, cells) in tables:
        print(f"\n### {title}\n")
        print("\n".join(markdown_lines(header, [[str(c) for c in row] for row in cells])))
    print(f"\nload average at end: {os.getloadavg()}")
    save_json(os.path.join(RESULTS_DIR, args.output), out)


if __name__ == "__main__":
    main()
