"""Coverage of ``log_evidence_std_``: how often the reported interval holds the reference (issue 16, item 4).

Usage::

    python benchmarks/bench_coverage.py                  # 20 seeds per case
    python benchmarks/bench_coverage.py --quick          # 8 seeds, fewer cases
    python benchmarks/bench_coverage.py --first-seed 20 --seeds 40 --output coverage_more.json  # fresh seeds
    python benchmarks/bench_coverage.py --replicates 2,4 # compare group counts at equal particle budget
    python benchmarks/bench_coverage.py --cases K=5 --set learning_rate=0.2  # other estimator settings
    python benchmarks/bench_coverage.py --from-json benchmarks/results/coverage.json \
        --doc-table doc/user_guide/generated
    python benchmarks/bench_coverage.py --cases "N=1e5" --output benchmarks/results/coverage_long.json \
        --doc-table doc/user_guide/generated --doc-name coverage_long_streams.rst
    python benchmarks/bench_coverage.py --check-mode-reference   # the long mixtures' reference against AIS
    # a G=2,4 comparison, then a later G=2 run replacing its G=2 rows (runs of other seeds are added)
    python benchmarks/bench_coverage.py --from-json coverage_g24.json,coverage_g2.json

Prints markdown tables and writes ``benchmarks/results/coverage.json``.

Every case keeps its data fixed and varies the estimator's seed, so the spread is the
sampler's. For each run the pull is ``(SGAIS - reference) / hypot(std, reference std)``;
1-sigma coverage is the fraction of runs with ``|pull| <= 1`` (target 55-80%), 2-sigma
with ``|pull| <= 2`` (target >= 90%). Runs store their per-group evidences, so the table
also scores other rules for combining the groups on the very same runs:

- ``reported``: the estimator's own ``log_evidence_std_`` (:func:`combine_replicates`);
- ``spread``: the groups' final spread alone (``combine_replicates`` without the per-chunk spread and
  the weight variances).

``--from-json ... --rescore`` reports saved runs with the std this code gives them
(:func:`rescored_std`, from the groups' stored per-chunk evidences), for a change
that alters the error bar but not the estimates.

A run is *flagged* when the estimator raised one of the package's warnings (e.g. a
``FeatureScaleWarning`` for a misfitting stream); two columns give that fraction
and the fraction of runs within 2 sigma or flagged. Two more check the pieces of the
error bar group by group: the groups' mean weight variance over the observed variance
of their log evidences (1 when calibrated), and the correlation between the groups of
one run (0 when they are independent, as the combined error assumes).

Cases: linear (1000 rows, exact), softmax (1000 rows, Laplace importance sampling), the same two
models and the paper's mixture on 1e5-row streams, a two-class softmax whose first feature nearly separates
the classes on 5000 and 2e4 rows (streamed past its exact moves; Laplace importance sampling, which agrees
with bridge sampling to 0.01 nat on such data), the mixture also on 1e4 (the length at which an
error that grows with the stream shows; the mixture's reference is importance sampling at its best
posterior mode, ``_paper_mixture_mode_reference``, past the rows where the streams check themselves
against it), a linear stream whose coefficients change at row 500 (exact), every standardised real
case of ``bench_real.py`` (breast cancer at four prior scales in file, shuffled and class-sorted
order, wine, iris, digits, diabetes; chunks of 100, references from its cache), the paper's 2-d
five-component mixture on 1000 rows (a cached reference from two heavy AIS runs,
``_paper_mixture_reference``), and a 1-d two-cluster mixture whose second cluster appears at row 300
(bridge reference). ``--cases`` picks cases by substring.
"""

import argparse
import ast
import json
import os
import sys
import time
import types
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS_DIR, SAVED_DIR, run_metadata, save_json, write_rst_table  # noqa: E402
from _laplace_reference import laplace_importance_log_evidence  # noqa: E402
from bench_real import _order, all_cases, load_case_data, make_estimator, reference_key, references  # noqa: E402,E501

from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture, log_evidence  # noqa: E402,E501
from evidence_select.datasets import make_linear_regression, make_mixture, make_softmax_classification  # noqa: E402,E501
from evidence_select.evidence._api import _model_and_data  # noqa: E402
from evidence_select.sgais._mode_check import mode_importance_log_evidence  # noqa: E402
from evidence_select.sgais._settings import ModeCheckSettings  # noqa: E402
from evidence_select.sgais._state import (ErrorWidening, combine_replicates, evidence_estimate,  # noqa: E402
                                          increment_spread)
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


def _long_stream_cases():
    """The linear, softmax and paper-mixture simulators on 1e5 rows (the mixture also on 1e4); references that
    need computing are computed when the case runs."""
    linear = make_linear_regression(100_000, random_state=0)
    softmax = make_softmax_classification(100_000, random_state=0)
    exact = log_evidence(BayesianLinearRegressor(), linear.X, linear.y, method="exact").log_evidence
    out = {
        "linear N=1e5": (lambda s, p, g: BayesianLinearRegressor(random_state=s, n_particles=p, n_replicates=g),
                         linear.X, linear.y, (exact, 0.0)),
        "softmax N=1e5": (lambda s, p, g: BayesianLogisticClassifier(random_state=s, n_particles=p, n_replicates=g),
                          softmax.X, softmax.y, lambda: _softmax_reference(softmax.X, softmax.y)),
    }
    for label, n in (("5000", 5000), ("2e4", 20_000)):
        Xn, yn = _nearly_separable(n)
        out[f"softmax nearly separable N={label}"] = (
            lambda s, p, g: BayesianLogisticClassifier(random_state=s, n_particles=p, n_replicates=g), Xn, yn,
            lambda Xn=Xn, yn=yn: _softmax_reference(Xn, yn, n_classes=2))
    for label, n in (("1e4", 10_000), ("1e5", 100_000)):
        X = make_mixture(n, random_state=0).X
        out[f"mixture K=5 N={label} (paper)"] = (
            lambda s, p, g: BayesianMixture(5, random_state=s, n_particles=p, n_replicates=g),
            X, None, lambda X=X: _paper_mixture_mode_reference(X))
    return out


def _paper_mixture_mode_reference(X, n_draws=20_000, seed=0):
    """``(value, std)`` of the paper mixture's evidence on many rows: importance sampling at its best posterior mode.

    The streams' own posterior-mode checks stop at ``MODE_CHECK_ROWS`` rows; this one, with five times their
    draws, is the reference past them. Its ``Z`` is unbiased (a multivariate t at the mode, summed over the 120
    relabellings, covers everything) and reads low only if it misses mass; the five well-separated clusters
    leave the posterior one mode up to labels at these sizes. On the 1000 rows of the ``N=1000`` case it agrees
    with the two heavy AIS runs of :func:`_paper_mixture_reference` (``--check-mode-reference`` prints both).
    """
    model, X, _ = _model_and_data(BayesianMixture(5), X, None)
    check = mode_importance_log_evidence(model, X, None, np.random.default_rng(seed),
                                         ModeCheckSettings(n_draws=n_draws))
    return check.log_evidence, check.std


def _selected(name, patterns):
    return not patterns or any(p in name for p in patterns)


def cases(quick, patterns=()):
    """name -> (make_estimator(seed, n_particles, n_replicates), X, y, reference), for the names ``patterns`` select.

    The reference is ``(value, std)``, or a function returning it (computed only if the case runs).
    """
    out = {}
    X, y = make_linear_regression(1000, random_state=0).X, make_linear_regression(1000, random_state=0).y
    exact = log_evidence(BayesianLinearRegressor(), X, y, method="exact").log_evidence
    out["linear N=1000"] = (lambda s, p, g: BayesianLinearRegressor(random_state=s, n_particles=p, n_replicates=g),
                            X, y, (exact, 0.0))
    Xs, ys = _shift_linear()
    exact = log_evidence(BayesianLinearRegressor(), Xs, ys, method="exact").log_evidence
    out["linear shift at 500 (chunks 100)"] = (
        lambda s, p, g: BayesianLinearRegressor(random_state=s, n_particles=p, n_replicates=g, batch_size=100),
        Xs, ys, (exact, 0.0))
    data = make_softmax_classification(1000, random_state=0)
    out["softmax N=1000"] = (lambda s, p, g: BayesianLogisticClassifier(random_state=s, n_particles=p, n_replicates=g),
                             data.X, data.y, lambda: _softmax_reference(data.X, data.y))
    if not quick:
        out.update(_long_stream_cases())
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
            lambda s, p, g: BayesianMixture(5, random_state=s, n_particles=p, n_replicates=g),
            Xp, None, lambda: _paper_mixture_reference(Xp))
        Xm = _two_clusters()
        out["mixture K=2, cluster at 300 (chunks 100)"] = (
            lambda s, p, g: BayesianMixture(2, random_state=s, n_particles=p, n_replicates=g, batch_size=100),
            Xm, None, lambda: _bridge_reference(Xm))
    return out


#: AIS at four times the default chains and steps: at the defaults its groups disagree by 11 nats on this
#: target, and bridge sampling's chains do not mix (R-hat 1.5), so neither default is a reference here.
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


def _record_group_evidence(est):
    """Make ``est`` append its per-group log evidences after every chunk to the returned list.

    The estimator streams through its ``_stream`` generator; the wrapper only reads the
    states it yields, so the run itself is unchanged.
    """
    recorded, stream = [], est._stream

    def recording_stream(*args, **kwargs):
        for state, record in stream(*args, **kwargs):
            recorded.append(state.log_evidence.tolist())
            yield state, record

    est._stream = recording_stream
    return recorded


def run(case, seeds, n_particles_factor, n_replicates, settings=None):
    """One row per seed; ``settings`` (estimator parameters) are set on every case's estimator."""
    factory, X, y, reference = case
    ref, ref_std = reference() if callable(reference) else reference
    rows = []
    for seed in seeds:
        default = factory(seed, 2, 2).__class__().get_params()["n_particles"]
        est = factory(seed, max(2, int(round(default * n_particles_factor))), n_replicates).set_params(
            shuffle=False, **(settings or {}))  # each case streams in its own order (file, sorted, shifted)
        chunk_groups = _record_group_evidence(est)
        tic = time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(X, y) if y is not None else est.fit(X)
        state = est.sgais_state_
        flags = sorted({w.category.__name__ for w in caught if w.category.__module__.startswith("evidence_select")})
        rows.append(dict(seed=seed, value=float(est.log_evidence_), std=float(est.log_evidence_std_), warnings=flags,
                         group_log_evidence=state.log_evidence.tolist(), chunk_group_log_evidence=chunk_groups,
                         group_variance=state.log_evidence_variance.tolist(),
                         degraded_variance=float(state.widening.degraded_variance),
                         mode_gap_variance=float(state.widening.mode_gap_variance), reference=ref, reference_std=ref_std,
                         first_chunk_lineages=int(est.evidence_history_[0].n_lineages),
                         cpu_seconds=time.process_time() - tic))
    return rows


def rescored_std(row):
    """The std this code's :func:`evidence_estimate` gives a saved run, from the run's stored group evidences.

    The groups' final and per-chunk log evidences and weight variances are all the
    combination reads, so a saved run whose estimate this code reproduces (same
    seed, same evidences) is rescored exactly, without running it again.
    """
    before, increment_variance = np.zeros(len(row["group_log_evidence"])), 0.0
    for after in row["chunk_group_log_evidence"]:
        increment_variance += increment_spread(before, after)
        before = np.asarray(after)
    state = types.SimpleNamespace(log_evidence=np.asarray(row["group_log_evidence"]),
                                  log_evidence_variance=np.asarray(row["group_variance"]),
                                  increment_variance=increment_variance,
                                  widening=ErrorWidening(degraded_variance=row.get("degraded_variance", 0.0),
                                                         mode_gap_variance=row.get("mode_gap_variance", 0.0)))
    return float(evidence_estimate(state)[1])


def rule_std(row, rule):
    groups = np.asarray(row["group_log_evidence"])
    if rule == "reported":
        return row["std"]
    return combine_replicates(groups)[1]  # "spread": the groups' final spread alone


def coverage(rows, rule):
    pulls = np.array([(r["value"] - r["reference"]) / np.hypot(rule_std(r, rule), r["reference_std"]) for r in rows])
    return float(np.mean(np.abs(pulls) <= 1)), float(np.mean(np.abs(pulls) <= 2)), pulls


HEADER = ("case", "G", "particles/group", "runs", "mean error", "seed spread", "mean reported std",
          "1-sigma (reported)", "2-sigma (reported)", "1-sigma (spread only)", "2-sigma (spread only)", "flagged",
          "2-sigma or flagged", "weight variance / group variance", "group correlation", "CPU s/run")


def group_cells(rows):
    """How well each group's own error estimate reads, from all groups of all runs.

    The mean of the groups' weight variances (``log_evidence_variance``) over the
    observed variance of their log evidences across seeds (about 1 when the
    weight variance is calibrated), and the mean correlation between two groups
    of one run (0 when the groups are independent, as the combined error assumes).
    """
    if not all("group_variance" in r for r in rows):
        return "n/a", "n/a"
    groups = np.array([r["group_log_evidence"] for r in rows]) - np.array([r["reference"] for r in rows])[:, None]
    ratio = np.mean([r["group_variance"] for r in rows]) / np.var(groups, ddof=1)
    pairs = [(a, b) for a in range(groups.shape[1]) for b in range(a + 1, groups.shape[1])]
    correlation = np.mean([np.corrcoef(groups[:, a], groups[:, b])[0, 1] for a, b in pairs]) if pairs else np.nan
    return f"{ratio:.2f}", f"{correlation:+.2f}"


def entry_cells(entry):
    """One table row from a case's runs at one group count (a live or a saved entry)."""
    rows = entry["runs"]
    errors = np.array([r["value"] - r["reference"] for r in rows])
    one, two, pulls = coverage(rows, "reported")
    one_s, two_s, _ = coverage(rows, "spread")
    recorded = all("warnings" in r for r in rows)  # runs saved before the warnings were recorded have none
    flagged = np.array([bool(r.get("warnings")) for r in rows])
    flag_cells = ((f"{flagged.mean():.0%}", f"{np.mean((np.abs(pulls) <= 2) | flagged):.0%}") if recorded
                  else ("n/a", "n/a"))
    return (entry["case"], str(entry["n_replicates"]), f"{entry.get('particles_per_group', float('nan')):.0f}",
            str(len(rows)), f"{errors.mean():+.2f}", f"{errors.std(ddof=1):.2f}",
            f"{np.mean([r['std'] for r in rows]):.2f}", f"{one:.0%}", f"{two:.0%}", f"{one_s:.0%}", f"{two_s:.0%}",
            *flag_cells, *group_cells(rows), f"{np.mean([r['cpu_seconds'] for r in rows]):.2f}")


def pooled_lines(entries):
    """Coverage pooled over every case, per group count."""
    lines = []
    for n_replicates in sorted({e["n_replicates"] for e in entries}):
        runs = [r for e in entries if e["n_replicates"] == n_replicates for r in e["runs"]]
        one, two, _ = coverage(runs, "reported")
        lines.append(f"G={n_replicates}, all cases pooled ({len(runs)} runs): 1-sigma {one:.0%}, 2-sigma {two:.0%} "
                     "(targets 55-80%, >= 90%)")
    return lines


def report(entries, doc_table=None, argv=None, sources=None, doc_name="coverage.rst"):
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for entry in entries:
        print("| " + " | ".join(entry_cells(entry)) + " |")
    print("\n" + "\n".join(pooled_lines(entries)))
    if doc_table:
        write_rst_table(os.path.join(doc_table, doc_name), HEADER, [entry_cells(e) for e in entries],
                        "bench_coverage.py", argv, sources=sources)


def load_saved(paths, rescore=False):
    """Entries of saved runs, one per case and group count, in first-seen order.

    A later file's run replaces an earlier one of the same case, group count and
    seed; runs of other seeds are added (so fresh seeds extend a saved table).
    With ``rescore`` each run's ``std`` is :func:`rescored_std` (the one it ran
    with is kept as ``std_as_run``).
    """
    entries, runs = {}, {}
    for path in paths:
        with open(path) as fh:
            for entry in json.load(fh)["cases"]:
                key = entry["case"], entry["n_replicates"]
                entries[key] = entry
                runs.setdefault(key, {}).update((r["seed"], r) for r in entry["runs"])
    if rescore:
        for by_seed in runs.values():
            by_seed.update((seed, dict(r, std=rescored_std(r), std_as_run=r["std"])) for seed, r in by_seed.items())
    return [dict(entry, runs=sorted(runs[key].values(), key=lambda r: r["seed"])) for key, entry in entries.items()]


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
    parser.add_argument("--seeds", type=int, default=None, help="how many seeds per case (20; 8 with --quick)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first estimator seed (seeds not used before are a held-out check)")
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names")
    parser.add_argument("--replicates", default="2", help="comma-separated group counts, at the default "
                        "total particle budget (n_particles scaled by 2 / G)")
    parser.add_argument("--output", default="coverage.json",
                        help="file name in benchmarks/results/, or a path (default: coverage.json)")
    parser.add_argument("--from-json", default=None, metavar="PATH[,PATH]",
                        help="report saved runs and exit (a later file's run of a case, G and seed replaces an "
                        "earlier one's; other seeds are added)")
    parser.add_argument("--rescore", action="store_true",
                        help="with --from-json: the std this code reports for each saved run (rescored_std)")
    parser.add_argument("--doc-table", default=None, metavar="DIR", help="also write the table there")
    parser.add_argument("--doc-name", default="coverage.rst", help="the table's file name in --doc-table")
    parser.add_argument("--set", default="", metavar="NAME=VALUE[,NAME=VALUE]",
                        help="estimator parameters to change in every case (e.g. learning_rate=0.2), "
                        "stored with the runs")
    parser.add_argument("--check-mode-reference", action="store_true",
                        help="print the long mixture cases' reference method next to the heavy AIS reference on "
                        "the N=1000 paper rows, and exit")
    args = parser.parse_args(argv)
    if args.check_mode_reference:
        X = make_mixture(1000, random_state=0).X
        print("mode importance sampling: %.3f +/- %.3f" % _paper_mixture_mode_reference(X))
        print("heavy AIS (two runs):     %.3f +/- %.3f" % _paper_mixture_reference(X))
        return
    settings = parse_settings(args.set)
    if args.from_json:
        sources = args.from_json.split(",")
        report(load_saved(sources, args.rescore), args.doc_table, argv, sources, args.doc_name)
        return
    seeds = range(args.first_seed, args.first_seed + (args.seeds or (8 if args.quick else 20)))
    entries, meta = [], run_metadata(sys.argv)  # the commit and load at the start
    patterns = [p for p in args.cases.split(",") if p]
    for name, case in cases(args.quick, patterns).items():
        if not _selected(name, patterns):
            continue
        for n_replicates in (int(g) for g in args.replicates.split(",")):
            factor = 2.0 / n_replicates
            particles = settings.get("n_particles", case[0](0, 2, 2).__class__().get_params()["n_particles"] * factor)
            # Changed settings name the row, so --from-json never pools their runs with the defaults'.
            label = name + "".join(f" [{key}={value}]" for key, value in settings.items())
            entries.append(dict(case=label, n_replicates=settings.get("n_replicates", n_replicates),
                                particles_per_group=particles,
                                settings=settings, runs=run(case, seeds, factor, n_replicates, settings)))
            print("| " + " | ".join(entry_cells(entries[-1])) + " |", flush=True)
    report(entries, args.doc_table, argv, doc_name=args.doc_name)
    output = args.output if os.path.dirname(args.output) else os.path.join(RESULTS_DIR, args.output)
    save_json(output, dict(meta=meta, cases=entries))
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
