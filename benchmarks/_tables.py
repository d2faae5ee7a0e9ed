"""The validation page's tables: pure functions from a saved result file to table cells, and the writers.

Each published table is made from one canonical result file, ``benchmarks/saved/<name>.json``, which one
benchmark command writes (its ``--save`` option, at a clean commit; the file's ``meta`` records the
command, the commit and the machine's load). :data:`TABLES` maps every table of
``doc/user_guide/validation.rst`` to its file and renderer; ``python benchmarks/make_tables.py`` writes them
all to ``doc/user_guide/generated/`` (the documentation build runs it). The benchmark scripts print the same
tables with the same renderers. Nothing here imports evidence_select: a table depends on its saved file only.
"""

import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SAVED_DIR = os.path.join(HERE, "saved")

#: Runs within this many nats of the exact evidence count as within tolerance whatever their error bar
#: (calibration suite).
CALIBRATION_MIN_TOLERANCE = 0.5


# -- calibration suite (bench_calibration.py) ------------------------------------------------
def calibration_summary(rows, method):
    """Per-backend summary over every run of ``method`` in the calibration ``rows``, or None without runs."""
    pairs = [(r, row) for row in rows for r in row["runs"] if r["method"] == method]
    if not pairs:
        return None
    runs = [r for r, _ in pairs]
    misses = [r for r in runs if not r["within"]]
    pulls = np.array([r["pull"] for r in runs if np.isfinite(r["pull"])])
    converged = [r for r in runs if r["converged"]]
    close = [r for r, row in pairs
             if r["converged"] and abs(r["estimate"] - row["exact"]) <= CALIBRATION_MIN_TOLERANCE]
    converged_pulls = np.array([r["pull"] for r in converged if np.isfinite(r["pull"])])
    return dict(method=method, n_runs=len(runs), within=1.0 - len(misses) / len(runs), n_misses=len(misses),
                misses_flagged=(sum(not r["converged"] for r in misses) / len(misses)) if misses else 1.0,
                pull_std=float(np.std(pulls)) if len(pulls) > 1 else float("nan"),
                pull_std_converged=float(np.std(converged_pulls)) if len(converged_pulls) > 1 else float("nan"),
                n_converged=len(converged), converged_within_half_nat=len(close) / max(len(converged), 1),
                median_calls=float(np.nanmedian([r["calls"] for r in runs])),
                cpu_seconds=float(sum(r["cpu_seconds"] for r in runs)))


CALIBRATION_SUMMARY_HEADER = ("backend", "runs", "within max(3σ, 0.5)", "misses", "misses flagged", "std of pulls",
                              "std of pulls (converged runs)", "converged runs within 0.5 nat", "median calls",
                              "CPU s")


def percent(share):
    """``share`` as a percentage to a tenth, and 0% or 100% only where it is exactly that: one run of 210 left
    out, or one of 1140 flagged, shows.

    >>> percent(209 / 210), percent(1 / 1140), percent(1.0), percent(0.98)
    ('99.5%', '0.1%', '100%', '98%')
    """
    value = round(100.0 * share, 1)
    if 0.0 < share < 1.0:
        value = min(max(value, 0.1), 99.9)
    return f"{value:g}%"


def calibration_summary_table(saved):
    """Header and rows of the per-backend summary of a calibration run."""
    cells = []
    for method in saved["backends"]:
        s = calibration_summary(saved["rows"], method)
        if s is not None:
            cells.append((s["method"], str(s["n_runs"]), percent(s["within"]), str(s["n_misses"]),
                          percent(s["misses_flagged"]), f"{s['pull_std']:.2f}", f"{s['pull_std_converged']:.2f}",
                          f"{percent(s['converged_within_half_nat'])} of {s['n_converged']}",
                          f"{s['median_calls']:.3g}", f"{s['cpu_seconds']:.0f}"))
    return CALIBRATION_SUMMARY_HEADER, cells


def calibration_cases_table(saved):
    """Per case, ``within/runs`` per backend, with the flagged and unflagged misses; ``-`` where it did not run."""
    methods = saved["backends"]
    cells = []
    for row in saved["rows"]:
        entries = []
        for method in methods:
            runs = [r for r in row["runs"] if r["method"] == method]
            if not runs:
                entries.append("-")
                continue
            within = sum(r["within"] for r in runs)
            flagged = [r for r in runs if not r["within"] and not r["converged"]]
            unflagged = len(runs) - within - len(flagged)
            text = f"{within}/{len(runs)}"
            if flagged:
                checks = sorted({check for r in flagged for check in r["failed"]})
                text += f", {len(flagged)} flagged ({', '.join(checks)})"
            if unflagged:
                text += f", **{unflagged} unflagged**"
            entries.append(text)
        cells.append((row["case"], f"{row['exact']:.3f}", *entries))
    return ("case", "exact log Z", *methods), cells


# -- coverage of the error bars (bench_coverage.py) ------------------------------------------
COVERAGE_HEADER = ("case", "runs", "mean error", "seed spread", "mean reported std", "1-sigma", "2-sigma",
                   "flagged", "2-sigma or flagged", "CPU s/run")


def coverage_table(saved):
    """Per case: the mean error and spread over seeds, the mean reported std, how often one and two reported
    errors (combined with the reference's) hold the reference, and how often the estimator warned; then every
    case pooled."""
    cells, pooled = [], []
    for entry in saved["cases"]:
        runs = entry["runs"]
        pooled += runs
        errors = np.array([r["value"] - r["reference"] for r in runs])
        cells.append((entry["case"], str(len(runs)), f"{errors.mean():+.2f}", f"{errors.std(ddof=1):.2f}",
                      f"{np.mean([r['std'] for r in runs]):.2f}", *_coverage_cells(runs),
                      f"{np.mean([r['cpu_seconds'] for r in runs]):.2f}"))
    if len(saved["cases"]) > 1:
        cells.append(("all cases pooled", str(len(pooled)), "", "", "", *_coverage_cells(pooled), ""))
    return COVERAGE_HEADER, cells


def _coverage_cells(runs):
    """1-sigma, 2-sigma, flagged and 2-sigma-or-flagged fractions of ``runs``."""
    errors = np.array([r["value"] - r["reference"] for r in runs])
    pulls = np.abs(errors) / np.hypot([r["std"] for r in runs], [r["reference_std"] for r in runs])
    flagged = np.array([bool(r["warnings"]) for r in runs])
    return (percent(np.mean(pulls <= 1)), percent(np.mean(pulls <= 2)), percent(flagged.mean()),
            percent(np.mean((pulls <= 2) | flagged)))


# -- real data sets (bench_real.py) ----------------------------------------------------------
REAL_HEADER = ("case", "SGAIS mean", "reported std", "seed spread", "reference +/- std", "max pull",
               "within max(3 sigma, 2)", "warnings", "verdict", "CPU s/run")


def real_table(saved):
    """One row per case: the runs' mean, reported std and spread against the reference, and the verdict."""
    cells = [(r["case"], f"{r['mean']:.2f}", f"{r['mean_std']:.2f}", f"{r['spread']:.2f}",
              f"{r['reference']:.2f} +/- {r['reference_std']:.2f}", f"{r['max_pull']:.1f}",
              f"{r['n_within']}/{r['n_runs']}", ", ".join(r["warnings"]) or "none", r["verdict"],
              f"{r['cpu_seconds']:.1f}") for r in saved["rows"]]
    return REAL_HEADER, cells


# -- model selection (bench_selection_held_out.py, bench_selector.py) -----------------------
SELECTION_HEADER = ("data", "order", "chunks", "seed", "pick (P)", "references' pick (P)",
                    "references' P of the pick", "checks of the pick", "verdict")


def selection_table(saved):
    """One row per selector run: its pick and probability against the reference evidences' pick."""
    cells = []
    for r in saved["rows"]:
        k, ref_k = r["candidates"][r["pick"]], r["candidates"][r["reference_pick"]]
        cells.append((r["data"], r["order"], str(r["batch_size"]), str(r["seed"]),
                      f"K={k} ({r['probabilities'][r['pick']]:.3f})",
                      f"K={ref_k} ({r['reference_probabilities'][r['reference_pick']]:.3f})",
                      f"{r['reference_probabilities'][r['pick']]:.3f}", ", ".join(r["checks"][r["pick"]]) or "none",
                      r["verdict"]))
    return SELECTION_HEADER, cells


SHIFT_HEADER = ("seed", "K", "log Z in order", "log Z shuffled", "shuffled - in order", "3 errors", "agree",
                "seconds in order, shuffled")


def shift_table(saved):
    """Per seed and candidate: the final log evidence of the stream in order and shuffled, and whether they agree
    within three combined reported errors."""
    cells = [(str(r["seed"]), str(k), f"{r['log_z_in_order'][i]:.1f} ± {r['std_in_order'][i]:.1f}",
              f"{r['log_z_shuffled'][i]:.1f} ± {r['std_shuffled'][i]:.1f}", f"{r['shortfall'][i]:.1f}",
              f"{r['three_errors'][i]:.1f}", str(r["agree"][i]),
              f"{r['seconds_in_order']:.0f}, {r['seconds_shuffled']:.0f}")
             for r in saved["rows"] for i, k in enumerate(r["k"])]
    return SHIFT_HEADER, cells


# -- cost over long streams (bench_cost.py) --------------------------------------------------
COST_HEADER = ("case", "rows", "eval/row/particle: first", "median", "largest", "last", "largest/median",
               "surprise/ordinary (budget)", "replayed rows", "degraded chunks", "CPU s/1e4 rows: early", "late",
               "CPU s total")


def cost_table(saved):
    """One row per stream: per-datum evaluations per row and particle over its windows, and CPU per 1e4 rows."""
    cells = [(s["case"], str(s["rows"]), f"{s['first']:.1f}", f"{s['median']:.1f}", f"{s['largest']:.1f}",
              f"{s['last']:.1f}", f"{s['largest_over_median']:.2f}",
              f"{s['surprise_over_ordinary']:.2f} ({s['surprise_budget']:g})", str(s["replayed_rows"]),
              str(s["degraded_chunks"]), f"{s['cpu_early']:.3f}", f"{s['cpu_late']:.3f}", f"{s['cpu_total']:.1f}")
             for s in saved["summaries"]]
    return COST_HEADER, cells


#: Every table of the validation page: table name -> (saved result file without ``.json``, renderer).
TABLES = {
    "calibration_summary": ("calibration", calibration_summary_table),
    "calibration_cases": ("calibration", calibration_cases_table),
    "coverage": ("coverage", coverage_table),
    "coverage_long_streams": ("coverage_long_streams", coverage_table),
    "real_data": ("real_data", real_table),
    "real_data_mixtures": ("real_data_mixtures", real_table),
    "real_data_held_out": ("real_data_held_out", real_table),
    "selection_held_out": ("selection_held_out", selection_table),
    "selector_shift": ("selector_shift", shift_table),
    "cost": ("cost", cost_table),
}
#: The canonical result files (``benchmarks/saved/<name>.json``) of the published tables and the command that
#: writes each (from the repository root, at a clean commit).
SAVED_COMMANDS = {
    "calibration": "python benchmarks/bench_calibration.py --ns-max-dim 16 --jobs 2 --save",
    "coverage": "python benchmarks/bench_coverage.py --jobs 2 --save",
    "coverage_long_streams": "python benchmarks/bench_coverage.py --long-streams --jobs 2 --save",
    "real_data": "python benchmarks/bench_real.py --save",
    "real_data_mixtures": "python benchmarks/bench_real.py --suite real_data_mixtures --save",
    "real_data_held_out": "python benchmarks/bench_real.py --suite real_data_held_out --save",
    "selection_held_out": "python benchmarks/bench_selection_held_out.py --save",
    "selector_shift": "python benchmarks/bench_selector.py --only shift --save",
    "cost": "python benchmarks/bench_cost.py --save",
}
SAVED_RESULTS = tuple(SAVED_COMMANDS)


# -- writers ---------------------------------------------------------------------------------
def load_saved(name, directory=SAVED_DIR):
    """The saved result ``<directory>/<name>.json``; refuses one that was not run at a clean commit."""
    path = os.path.join(directory, f"{name}.json")
    with open(path) as fh:
        saved = json.load(fh)
    meta = saved["meta"]
    if not meta.get("clean_checkout"):
        raise ValueError(f"{path} was not written from a clean commit ({meta.get('git_commit')}); "
                         "rerun its command with --save at a clean commit")
    return saved


def provenance(name, meta):
    """The sentence above a table: its saved file, the command that wrote it, the commit, the date and the load."""
    load = ", ".join(f"{value:.1f}" for value in meta["load_average_start"])
    return (f"From ``benchmarks/saved/{name}.json``, written by ``{meta['command']}`` at commit "
            f"``{meta['git_commit'][:12]}`` on {meta['date'][:10]} (numpy {meta['numpy']}, scipy {meta['scipy']}; "
            f"{meta['cpu_count']} cores, load average {load} at the start).")


def markdown_lines(header, cells):
    """The lines of a markdown table."""
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(row) + " |" for row in cells])


def rst_lines(header, cells):
    """The lines of a reStructuredText grid table."""
    widths = [max(len(text) for text in column) for column in zip(header, *cells)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(row):
        return "| " + " | ".join(text.ljust(w) for text, w in zip(row, widths)) + " |"

    lines = [rule, line(header), rule.replace("-", "=")]
    for row in cells:
        lines += [line(row), rule]
    return lines


def render(table, directory=SAVED_DIR):
    """The reStructuredText of ``table`` (a key of :data:`TABLES`), provenance sentence first; a sentence naming
    the command that writes its result file where the file is missing."""
    name, renderer = TABLES[table]
    if not os.path.exists(os.path.join(directory, f"{name}.json")):
        return (f"``benchmarks/saved/{name}.json`` is not in this checkout: ``{SAVED_COMMANDS[name]}`` writes it, "
                "then ``python benchmarks/make_tables.py`` this table.\n")
    saved = load_saved(name, directory)
    return "\n".join([provenance(name, saved["meta"]), "", *rst_lines(*renderer(saved))]) + "\n"


def print_tables(name, saved):
    """Print, as markdown, every table made from the result ``saved`` of the canonical file ``name``."""
    for table, (source, renderer) in TABLES.items():
        if source == name:
            print(f"\n{table}:\n")
            print("\n".join(markdown_lines(*renderer(saved))))
