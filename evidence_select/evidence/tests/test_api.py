import numpy as np
import pytest

from evidence_select import BayesianLinearRegressor, BayesianMixture, EvidenceResult, log_evidence
from evidence_select.datasets import make_linear_regression, make_mixture
from evidence_select.models import LinearGaussianModel, LinearHyperModel


def test_sgais_method_equals_estimator_log_evidence():
    data = make_linear_regression(1200, random_state=0)
    est = BayesianLinearRegressor(random_state=5)
    result = log_evidence(est, data.X, data.y, method="sgais")
    fitted = BayesianLinearRegressor(random_state=5).fit(data.X, data.y)
    assert isinstance(result, EvidenceResult)
    assert result.log_evidence == fitted.log_evidence_ and result.log_evidence_std == fitted.log_evidence_std_
    assert not hasattr(est, "sgais_state_")  # the given estimator is not modified
    assert result.n_datum_evaluations > 0 and result.seconds > 0


def test_exact_and_sgais_agree_on_model_and_estimator():
    data = make_linear_regression(1500, random_state=1)
    via_estimator = log_evidence(BayesianLinearRegressor(noise_variance=1.0, prior_scale=1.0), data.X, data.y,
                                 method="exact")
    via_model = log_evidence(LinearGaussianModel(5), data.X, data.y, method="exact")
    assert via_estimator.log_evidence == pytest.approx(via_model.log_evidence, rel=1e-12)
    learned = log_evidence(BayesianLinearRegressor(), data.X, data.y, method="exact")  # the default's own model
    assert learned.log_evidence == pytest.approx(LinearHyperModel(5).exact_log_evidence(data.X, data.y), rel=1e-12)
    assert 0.0 <= learned.log_evidence_std < 1e-9  # the bound on its quadrature error
    online = log_evidence(LinearGaussianModel(5), data.X, data.y, method="sgais", random_state=0)
    assert type(online) is type(via_model)
    assert 0 < online.log_evidence_std < 1.0  # the linear model's accuracy target at N = 1e3 to 1e4: 1 nat
    assert abs(online.log_evidence - via_model.log_evidence) < 5 * online.log_evidence_std


def test_clear_errors():
    X = make_mixture(50).X
    with pytest.raises(ValueError, match="method='exact' is not available"):
        log_evidence(BayesianMixture(2), X, method="exact")
    with pytest.raises(ValueError, match="method must be one of"):
        log_evidence(BayesianMixture(2), X, method="laplace")
    with pytest.raises(TypeError, match="estimator or a Model"):
        log_evidence(object(), X, method="sgais")
    assert np.isfinite(log_evidence(BayesianMixture(2), X, method="sgais", random_state=0).log_evidence)
