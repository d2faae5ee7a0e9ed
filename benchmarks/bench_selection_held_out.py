"""Model selection on held-out real data: does EvidenceModelSelector pick what the reference evidences pick?

Usage::

    python benchmarks/bench_selection_held_out.py                      # 3 seeds, chunks of 100 and 500
    python benchmarks/bench_selection_held_out.py --seeds 5 --batch-sizes 500
    python benchmarks/bench_selection_held_out.py --save   # also benchmarks/saved/selection_held_out.json

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

Prints a markdown table and writes ``benchmarks/results/selection_held_out.json``; ``--save`` (at a clean
commit) also writes ``benchmarks/saved/selection_held_out.json``, the validation page's source.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import require_clean_checkout, run_metadata, save_result  # noqa: E402
from _tables import markdown_lines, print_tables, selection_table  # noqa: E402
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
                                     shuffle=False, random_state=seed)  # the order is the case
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


def markdown(rows):
    return markdown_lines(*selection_table(dict(rows=rows)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch-sizes", default="100,500", help="comma-separated chunk sizes (500: the default)")
    parser.add_argument("--save", action="store_true",
                        help="also write benchmarks/saved/selection_held_out.json (the validation page's source; "
                             "clean commit)")
    args = parser.parse_args(argv)
    if args.save:
        require_clean_checkout(parser, "selection_held_out")
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
    out = dict(meta=meta, rows=rows)
    paths = save_result("selection_held_out", out, args.save)
    print_tables("selection_held_out", out)
    verdicts = [r["verdict"] for r in rows]
    print(f"\n{len(rows)} runs: " + ", ".join(f"{v} {verdicts.count(v)}" for v in
                                            ("ok", "close call", "flagged", "WRONG")))
    print("wrote " + ", ".join(paths))


if __name__ == "__main__":
    main()
