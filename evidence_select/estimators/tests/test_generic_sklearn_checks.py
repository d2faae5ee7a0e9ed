"""scikit-learn's common checks on the generic shells (over make_model models) and BayesianPoissonRegressor."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from evidence_select import (BayesianPoissonRegressor, EvidenceClassifier, EvidenceDensityEstimator,
                             EvidenceRegressor)
from evidence_select.estimators.tests._custom_models import gaussian_density, gaussian_regression, softmax_classifier

# Small particle systems keep the ~50 checks per estimator fast; the checks test the API, not accuracy. The
# checks' data are unstandardised, so the default target_ess=0.9 anneals them in 30-40 steps of exact moves;
# 0.7 halves that and still fits check_regressors_train's data to R^2 ~0.8 over seeds (its bar is 0.5; at 0.6 a
# seed can fall below it).
_FAST = {"n_particles": 4, "n_replicates": 2, "n_mcmc_steps": 2, "target_ess": 0.7}

# scikit-learn's regression checks draw continuous targets (non-negative for positive_only estimators); a Poisson
# likelihood is a mass function of counts, so BayesianPoissonRegressor refuses them with a ValueError naming the rows.
_NOT_COUNTS = "scikit-learn's regression data are not counts (non-integer y); a Poisson likelihood refuses them"
_POISSON_EXPECTED_FAILURES = {name: _NOT_COUNTS for name in (
    "check_n_features_in_after_fitting", "check_regressors_train", "check_regressor_data_not_an_array",
    "check_regressors_no_decision_function", "check_fit_idempotent", "check_fit_check_is_fitted",
    "check_n_features_in")}


def _expected_failures(estimator):
    return _POISSON_EXPECTED_FAILURES if isinstance(estimator, BayesianPoissonRegressor) else {}


@pytest.mark.filterwarnings("ignore::evidence_select.estimators.FeatureScaleWarning")
@parametrize_with_checks([EvidenceRegressor(gaussian_regression(), **_FAST),
                          EvidenceClassifier(softmax_classifier(), **_FAST),
                          EvidenceDensityEstimator(gaussian_density(), **_FAST),
                          BayesianPoissonRegressor(**_FAST)], expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)
