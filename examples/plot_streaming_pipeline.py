"""
Streaming through a preprocessing pipeline
==========================================

scikit-learn pipelines have no ``partial_fit``. Fit the pipeline once on a
first chunk (this fits the scaler and starts the stream of the selector), then
send each later chunk through the *frozen* preprocessing into the selector's
``partial_fit`` with :func:`~evidence_select.partial_fit_pipeline`. The
scaler is deliberately not refitted: the online evidences must all refer to
the same features.
"""

# %%
# Raw features on very different scales
# -------------------------------------
# The paper's linear data (noise variance 1), with its five features rescaled
# by factors from 0.1 to 100 and shifted, as raw measurements often are. The
# candidates differ in the noise variance they assume.

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from evidence_select import BayesianLinearRegressor, EvidenceModelSelector, partial_fit_pipeline
from evidence_select.datasets import make_linear_regression

data = make_linear_regression(20_000, noise_variance=1.0, random_state=0)
X = data.X * [1.0, 10.0, 100.0, 0.1, 5.0] + 3.0  # raw features on very different scales
variances = [0.9, 0.95, 1.0, 1.05, 1.1]
selector = EvidenceModelSelector([(f"s2={v:g}", BayesianLinearRegressor(noise_variance=v, prior_scale=1.0))
                                  for v in variances], random_state=0)

# %%
# Fit once, then stream
# ---------------------
# ``fit`` on the first 1000 rows fits the scaler and starts every candidate;
# each later chunk goes through the fitted scaler into ``partial_fit``.

pipe = make_pipeline(StandardScaler(), selector).fit(X[:1000], data.y[:1000])
n_seen, probabilities = [selector.n_samples_seen_], [selector.model_probabilities_]
for start in range(1000, len(X), 1000):
    partial_fit_pipeline(pipe, X[start:start + 1000], data.y[start:start + 1000])
    n_seen.append(selector.n_samples_seen_)
    probabilities.append(selector.model_probabilities_)

mean, std = pipe.predict(X[:5]), selector.predict(pipe[:-1].transform(X[:5]), return_std=True)[1]
print("model-averaged predictions:", np.round(mean, 2), "+/-", np.round(std, 2))
print("true noise-free values:    ", np.round(data.X[:5] @ data.coef + data.intercept, 2))
print(selector.summary())

# %%
# What the figure shows
# ---------------------
# The posterior probability of each assumed noise variance as the stream
# grows. The candidates are only 5 % apart, so the data need thousands of rows
# to tell them apart; the probability gathers on the true variance, 1, as the
# evidence of the others falls behind roughly in proportion to the rows seen.

fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
ax.plot(n_seen, probabilities, marker=".", label=[f"s2={v:g}" for v in variances])
ax.set(xlabel="samples seen", ylabel="model probability", title="posterior over the noise variance")
ax.legend()
plt.show()
