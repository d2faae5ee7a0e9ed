"""Model selection on held-out real data: does EvidenceModelSelector pick what the reference evidences pick?

Usage::

    python benchmarks/bench_selection_held_out.py                      # 3 seeds, chunks of 100 and 500
    python benchmarks/bench_selection_held_out.py --seeds 5 --batch-sizes 500
    python benchmarks/bench_selection_held_out.py --from-json benchmarks/saved/selection_held_out.json \
        --doc-table doc/user_guide/generated

A selector whose candidates' evidences each sit within their error bars can still be confidently wrong
when two candidates are close: the worst failure of a model-selection tool. Here ``BayesianMixture``
candidates with K = 2..5 components stream the held-out density data of ``bench_real.py`` (the first
principal components of digits 0/1/6 and 0/1/6/7, which no default was tuned on), shuffled and with
their classes arriving one after another, through one selector per seed. Each run's pick is compared
with the pick of the reference evidences (two heavy AIS runs per K, ``bench_real``'s cached
``mixture_ais`` references), and with the probabilities the references give every candidate:

- *ok*: the selector picks the references' candidate;
- *close call*: it picks another, to which the references give at least 5%;
- *flagged*: it picks another, but a failed check names its pick or the references' pick
  (``evidence_checks_``, shown by ``selector.summary()``);
- *WRONG*: none of these, a confident wrong choice that nothing flags.

Prints a markdown table and writes ``benchmarks/results/selection_held_out.json``.
"""

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS_DIR, markdown_table, run_metadata, save_json, write_rst_table  # noqa: E402
from bench_real import _order, load_case_data, reference_key, references  # noqa: E402

from evidence_select import BayesianMixture, EvidenceModelSelector  # noqa: E402

#: The candidates' component counts on each held-out density data set (3 and 4 digit classes).
CANDIDATES = {"digits016_pca2": (2, 3, 4, 5), "digits0167_pca3": (2, 3, 4, 5)}
ORDERS = {"shuffled": "shuffled", "file": "classes_late"}
#: The references' probability below which a pick other than theirs counts as confidently wrong.
CLOSE_CALL = 0.05


def _spec(k):
    return dict(kind="mixture", n_components=k)


def reference_probabilities(refs, data_name):
    """The candidates' model probabilities from the reference log evidences (equal prior)."""
    values = np.array([refs[reference_key(data_name, _spec(k))]["value"] for k in CANDIDATES[data_name]])
    weights = np.exp(values - values.max())
    return weights / weights.sum()


def verdict(pick, reference_pick, reference_p, checks):
    """The run's verdict (module docstring) from the two picks, the references' probabilities and the checks."""
    if pick == reference_pick:
        return "ok"
    if reference_p[pick] >= CLOSE_CALL:
        return "close call"
    return "flagged" if checks[pick] or checks[reference_pick] else "WRONG"


def run_selection(data_name, order, batch_size, seed, reference_p):
    """One selector over the data set's candidates: its pick, probabilities, checks and verdict."""
    X, _ = _order(*load_case_data(data_name), order)
    ks = CANDIDATES[data_name]
    selector = EvidenceModelSelector([(f"K={k}", BayesianMixture(k, batch_size=batch_size)) for k in ks],
                                     shuffle=False, random_state=seed)  # the case's order
    tic = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checks below say what the warnings said
        selector.fit(X)
    pick, reference_pick = selector.best_index_, int(np.argmax(reference_p))
    checks = [list(c) for c in selector.evidence_checks_]
    return dict(data=data_name, order=ORDERS[order], batch_size=batch_size, seed=seed, candidates=list(ks),
                log_evidences=selector.log_evidences_.tolist(), log_evidence_stds=selector.log_evidence_stds_.tolist(),
                probabilities=selector.model_probabilities_.tolist(), reference_probabilities=reference_p.tolist(),
                pick=pick, reference_pick=reference_pick, checks=checks,
                verdict=verdict(pick, reference_pick, reference_p, checks), cpu_seconds=time.process_time() - tic)


def table_cells(rows):
    header = ["data", "order", "chunks", "seed", "pick (P)", "references' pick (P)", "references' P of the pick",
              "checks of the pick", "verdict"]
    cells = []
    for r in rows:
        k, ref_k = r["candidates"][r["pick"]], r["candidates"][r["reference_pick"]]
        cells.append([r["data"], r["order"], str(r["batch_size"]), str(r["seed"]),
                      f"K={k} ({r['probabilities'][r['pick']]:.3f})",
                      f"K={ref_k} ({r['reference_probabilities'][r['reference_pick']]:.3f})",
                      f"{r['reference_probabilities'][r['pick']]:.3f}", ", ".join(r["checks"][r["pick"]]) or "none",
                      r["verdict"]])
    return header, cells


def markdown(rows):
    return markdown_table(*table_cells(rows))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch-sizes", default="100,500", help="comma-separated chunk sizes (500: the default)")
    parser.add_argument("--output", default="selection_held_out.json",
                        help="file name in benchmarks/results/, or a path")
    parser.add_argument("--from-json", default=None, metavar="PATH", help="tabulate saved runs instead of running")
    parser.add_argument("--doc-table", default=None, metavar="DIR",
                        help="also write the table as DIR/selection_held_out.rst")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as fh:
            rows = json.load(fh)["rows"]
    else:
        meta = run_metadata(sys.argv)
        cases = {f"{d}_k{k}": (d, "shuffled", _spec(k), "mixture_ais") for d, ks in CANDIDATES.items() for k in ks}
        refs = references(cases, recompute=False)
        rows = []
        for data_name in CANDIDATES:
            reference_p = reference_probabilities(refs, data_name)
            for order in ORDERS:
                for batch_size in (int(b) for b in args.batch_sizes.split(",")):
                    for seed in range(args.seeds):
                        rows.append(run_selection(data_name, order, batch_size, seed, reference_p))
                        print(markdown(rows[-1:])[-1], flush=True)
        output = args.output if os.path.dirname(args.output) else os.path.join(RESULTS_DIR, args.output)
        save_json(output, dict(meta=meta, rows=rows))
        print(f"wrote {output}")
    print("\n".join(markdown(rows)))
    verdicts = [r["verdict"] for r in rows]
    print(f"\n{len(rows)} runs: " + ", ".join(f"{v} {verdicts.count(v)}" for v in
                                            ("ok", "close call", "flagged", "WRONG")))
    if args.doc_table:
        write_rst_table(os.path.join(args.doc_table, "selection_held_out.rst"), *table_cells(rows),
                        "bench_selection_held_out.py", argv, sources=[args.from_json] if args.from_json else None)


if __name__ == "__main__":
    main()
