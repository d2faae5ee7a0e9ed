"""
Distribution shift: change points from the online evidence (paper Fig. 5)
=========================================================================

The paper's stream gains clusters (3 -> 5 -> 7). Each chunk's per-datum log
predictive drops and its number of annealing steps spikes when the data
shift; :func:`~evidence_select.detect_change_points` reads both from the
evidence history. On the same rows in shuffled order nothing is detected.
The phases are shortened here to 1000, 1500 and 1500 rows (shifts at 1000
and 2500) so that it runs in seconds; ``make_shift_stream(100_000)`` is the
paper's stream (shifts at 1000 and 10 000).
"""

import matplotlib.pyplot as plt
import numpy as np

from evidence_select import BayesianMixture, EvidenceModelSelector, detect_change_points
from evidence_select.datasets import make_shift_stream

full = make_shift_stream(11_500, random_state=0)
rows = np.r_[0:1000, 1000:2500, 10_000:11_500]  # first rows of each phase (rows are i.i.d. within a phase)
X_in_order = full.X[rows]
X_shuffled = X_in_order[np.random.default_rng(0).permutation(len(rows))]

fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True, constrained_layout=True)
for shuffle, X, style in ((False, X_in_order, "-"), (True, X_shuffled, "--")):
    selector = EvidenceModelSelector([(f"K={k}", BayesianMixture(k, batch_size=250, n_replicates=2))
                                      for k in (3, 5, 7)], random_state=0).fit(X)
    found = detect_change_points(selector)
    print(f"{'shuffled' if shuffle else 'in order'}: detected {found.tolist()}, true {[] if shuffle else [1000, 2500]}")
    history = selector.evidence_history_
    n = [r.n_samples_seen for r in history]
    for k, (name, _) in enumerate(selector.estimators):
        axes[0].plot(n, [r.log_evidences[k] / r.n_samples_seen for r in history], style, color=f"C{k}",
                     label=f"{name}{' shuffled' if shuffle else ''}")
        if not shuffle:
            axes[1].plot(n, [r.candidate_records[k].n_annealing_steps for r in history], color=f"C{k}", label=name)
    for c in found:
        for ax in axes:
            ax.axvline(c, color="red", linestyle=":")
axes[0].set_ylabel("log evidence per datum")
axes[1].set(xlabel="samples seen", ylabel="annealing steps per chunk")
axes[0].legend(ncol=2, fontsize=8)
axes[1].legend(fontsize=8)
plt.show()
