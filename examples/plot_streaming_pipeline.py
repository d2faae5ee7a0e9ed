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

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from evidence_select import BayesianLinearRegressor, EvidenceModelSelector, partial_fit_pipeline
from evidence_select.datasets import make_linear_regression

data = make_linear_regression(20_000, noise_variance=1.0, random_state=0)
X = data.X * [1.0, 10.0, 100.0, 0.1, 5.0] + 3.0  # raw features on very different scales
variances = [0.5, 0.8, 1.0, 1.25, 2.0]
selector = EvidenceModelSelector([(f"s2={v:g}", BayesianLinearRegressor(noise_variance=v)) for v in variances],
                                 random_state=0)
pipe = make_pipeline(StandardScaler(), selector).fit(X[:1000], data.y[:1000])
probabilities = [selector.model_probabilities_]
for start in range(1000, len(X), 1000):
    partial_fit_pipeline(pipe, X[start:start + 1000], data.y[start:start + 1000])
    probabilities.append(selector.model_probabilities_)

mean, std = pipe.predict(X[:5]), selector.predict(pipe[:-1].transform(X[:5]), return_std=True)[1]
print("model-averaged predictions:", np.round(mean, 2), "+/-", np.round(std, 2))
print("P(noise variance):", dict(zip(variances, np.round(selector.model_probabilities_, 3).tolist())))

plt.plot(np.arange(1, len(probabilities) + 1) * 1000, probabilities, label=[f"s2={v:g}" for v in variances])
plt.xlabel("samples seen")
plt.ylabel("model probability")
plt.legend()
plt.show()
