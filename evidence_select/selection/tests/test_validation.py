"""Candidates are validated before anything runs, with messages that say what a candidate needs."""

import numpy as np
import pytest
from sklearn.linear_model import SGDClassifier, SGDRegressor

from evidence_select import (BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture,
                             EvidenceModelSelector)
from evidence_select.datasets import make_linear_regression

FAST = {"n_particles": 5, "n_replicates": 2, "n_mcmc_steps": 2, "batch_size": 100}


@pytest.fixture(scope="module")
def data():
    return make_linear_regression(100, n_features=2, random_state=0)


@pytest.mark.parametrize("learner", [SGDRegressor(), SGDClassifier()])
def test_candidates_without_an_evidence_fail_up_front(data, learner):
    selector = EvidenceModelSelector([("bayes", BayesianLinearRegressor(**FAST)), ("sgd", learner)])
    y = data.y if isinstance(learner, SGDRegressor) else (data.y > 0).astype(int)
    error = TypeError if isinstance(learner, SGDRegressor) else ValueError
    with pytest.raises(error) as info:
        selector.fit(data.X, y)
    if error is TypeError:  # a regressor among regressors: refused for the missing evidence
        message = str(info.value)
        assert "'sgd' (SGDRegressor) cannot give an evidence" in message
        assert "log_evidence_ or log_evidence_std_" in message and "partial_fit" in message
        assert "BayesianLinearRegressor" in message  # says what would work
    assert not hasattr(selector, "estimators_")  # nothing ran


def test_evidence_check_runs_before_any_candidate(data, monkeypatch):
    calls = []
    monkeypatch.setattr(BayesianLinearRegressor, "partial_fit",
                        lambda self, *a, **k: calls.append(1) or self, raising=True)
    with pytest.raises(TypeError, match="cannot give an evidence"):
        EvidenceModelSelector([("bayes", BayesianLinearRegressor()), ("sgd", SGDRegressor())]).partial_fit(
            data.X, data.y)
    assert calls == []


def test_mixed_kinds_name_each_group(data):
    selector = EvidenceModelSelector([("reg", BayesianLinearRegressor(**FAST)),
                                      ("clf", BayesianLogisticClassifier(**FAST)),
                                      ("mix", BayesianMixture(2, **FAST))])
    with pytest.raises(ValueError, match="must all be regressors") as info:
        selector.fit(data.X, data.y)
    message = str(info.value)
    assert "regressor: ['reg']" in message and "classifier: ['clf']" in message
    assert "density_estimator: ['mix']" in message


def test_duplicate_names_are_named(data):
    selector = EvidenceModelSelector([("a", BayesianLinearRegressor(**FAST)), ("b", BayesianLinearRegressor(**FAST)),
                                      ("a", BayesianLinearRegressor(noise_variance=2.0, **FAST))])
    with pytest.raises(ValueError, match=r"\['a'\] appear more than once"):
        selector.fit(data.X, data.y)


def test_a_class_instead_of_an_instance(data):
    with pytest.raises(TypeError, match=r"is the class BayesianLinearRegressor, not an instance"):
        EvidenceModelSelector([("a", BayesianLinearRegressor)]).fit(data.X, data.y)


def test_a_failed_validation_keeps_the_fitted_state(data):
    selector = EvidenceModelSelector([("a", BayesianLinearRegressor(**FAST))], random_state=0).fit(data.X, data.y)
    before = selector.log_evidences_.copy()
    selector.set_params(estimators=[("a", BayesianLinearRegressor(**FAST)), ("sgd", SGDRegressor())])
    with pytest.raises(TypeError, match="cannot give an evidence"):
        selector.fit(data.X, data.y)
    np.testing.assert_array_equal(selector.log_evidences_, before)
