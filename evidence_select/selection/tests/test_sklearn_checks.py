"""scikit-learn's common checks on the selector, for each kind of candidate."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from evidence_select import (BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture,
                             EvidenceModelSelector)

# Small particle systems (one replicate group) keep the ~50 checks per instance fast; the checks test the API, not
# accuracy.
_FAST = {"n_particles": 4, "n_replicates": 1, "n_mcmc_steps": 2}


def _instances():
    return [
        EvidenceModelSelector([("unit", BayesianLinearRegressor(**_FAST)),
                               ("wide", BayesianLinearRegressor(noise_variance=4.0, **_FAST))], random_state=0),
        EvidenceModelSelector([("narrow", BayesianLogisticClassifier(**_FAST)),
                               ("wide", BayesianLogisticClassifier(prior_scale=3.0, **_FAST))], random_state=0),
        EvidenceModelSelector([("k1", BayesianMixture(1, **_FAST)), ("k2", BayesianMixture(2, **_FAST))],
                              random_state=0),
    ]


# scikit-learn's check data are not standardised: the candidates' FeatureScaleWarning is expected there.
@pytest.mark.filterwarnings("ignore::evidence_select.estimators.FeatureScaleWarning")
@parametrize_with_checks(_instances())
def test_sklearn_compatible(estimator, check):
    check(estimator)
