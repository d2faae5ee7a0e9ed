"""
How many clusters? Online model selection and averaging of Gaussian mixtures
============================================================================

Mixtures with K = 1..7 components are kept up to date on a stream of the
paper's 2-d mixture data (true K = 5). After every chunk the selector knows the
log evidence of each candidate and hence the posterior probability of each K;
its ``score_samples`` is the model-averaged predictive density.
"""

import matplotlib.pyplot as plt
import numpy as np

from evidence_select import BayesianMixture, EvidenceModelSelector
from evidence_select.datasets import make_mixture

X = make_mixture(3000, random_state=0).X
selector = EvidenceModelSelector([(f"K={k}", BayesianMixture(k, n_replicates=2)) for k in range(1, 8)],
                                 random_state=0)
for start in range(0, len(X), 500):  # the stream arrives in chunks
    selector.partial_fit(X[start:start + 500])
    print(f"n={selector.n_samples_seen_:5d}  P(K) =", np.round(selector.model_probabilities_, 3))

for (name, _), z, s in zip(selector.estimators, selector.log_evidences_, selector.log_evidence_stds_):
    print(f"{name}: log Z = {z:.1f} +/- {s:.1f}")
print("most probable:", selector.estimators[selector.best_index_][0])

fig, (ax_evidence, ax_density) = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
ks = np.arange(1, 8)
ax_evidence.errorbar(ks, selector.log_evidences_ - selector.log_evidences_.max(), yerr=selector.log_evidence_stds_,
                     marker="o")
ax_evidence.set(xlabel="number of components K", ylabel="log evidence - max", title="evidence per candidate")
grid = np.stack(np.meshgrid(np.linspace(-8, 8, 120), np.linspace(-6, 8, 120)), axis=-1).reshape(-1, 2)
density = np.exp(selector.score_samples(grid)).reshape(120, 120)
ax_density.contourf(grid[:, 0].reshape(120, 120), grid[:, 1].reshape(120, 120), density, levels=20)
ax_density.scatter(X[:400, 0], X[:400, 1], s=2, color="white")
ax_density.set_title("model-averaged predictive density")
plt.show()
