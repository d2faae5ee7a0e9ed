import numpy as np
import pytest
from scipy import stats

from evidence_select.datasets import make_linear_regression, make_mixture
from evidence_select.evidence import LinearEvidenceStats, exact_log_evidence, has_exact_evidence
from evidence_select.models import GaussianMixtureModel, LinearGaussianModel


@pytest.mark.parametrize("n_samples", [1, 7, 50, 200])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_exact_linear_evidence_equals_dense_multivariate_normal(n_samples, fit_intercept):
    data = make_linear_regression(n_samples, random_state=n_samples)
    model = LinearGaussianModel(5, noise_variance=0.6, prior_scale=1.3, intercept_scale=0.8,
                                fit_intercept=fit_intercept)
    design = np.hstack([data.X, np.ones((n_samples, 1))]) if fit_intercept else data.X
    cov = model.noise_variance * np.eye(n_samples) + design @ np.diag(model.prior_variances) @ design.T
    dense = stats.multivariate_normal(np.zeros(n_samples), cov).logpdf(data.y)
    assert exact_log_evidence(model, data.X, data.y) == pytest.approx(dense, rel=1e-9)


def test_chunked_update_equals_one_shot():
    data = make_linear_regression(5000, random_state=3)
    model = LinearGaussianModel(5)
    stats_ = LinearEvidenceStats.empty(model)
    for start in range(0, 5000, 733):
        stats_ = stats_.update(model, data.X[start:start + 733], data.y[start:start + 733])
    assert stats_.n_samples == 5000
    assert stats_.log_evidence(model) == pytest.approx(model.exact_log_evidence(data.X, data.y), rel=1e-12)


def test_exact_evidence_is_stable_at_one_million_rows():
    data = make_linear_regression(1_000_000, random_state=0)
    model = LinearGaussianModel(5)
    one_shot = model.exact_log_evidence(data.X, data.y)
    chunked = LinearEvidenceStats.empty(model)
    for start in range(0, 1_000_000, 100_000):
        chunked = chunked.update(model, data.X[start:start + 100_000], data.y[start:start + 100_000])
    assert np.isfinite(one_shot)
    # Per-datum value near -(log(2 pi) + 1) / 2 for unit noise.
    assert one_shot / 1e6 == pytest.approx(-0.5 * (np.log(2 * np.pi) + 1), abs=5e-3)
    assert chunked.log_evidence(model) == pytest.approx(one_shot, abs=1e-6)


def test_exact_evidence_refuses_models_without_one():
    with pytest.raises(ValueError, match="method='exact' is not available for GaussianMixtureModel"):
        exact_log_evidence(GaussianMixtureModel(2, 2), make_mixture(10).X)


def test_exact_posterior_matches_dense():
    data = make_linear_regression(40, random_state=1)
    model = LinearGaussianModel(5)
    mean, cov = LinearEvidenceStats.empty(model).update(model, data.X, data.y).posterior(model)
    design = np.hstack([data.X, np.ones((40, 1))])
    dense_cov = np.linalg.inv(np.eye(6) + design.T @ design)
    np.testing.assert_allclose(cov, dense_cov, rtol=1e-10)
    np.testing.assert_allclose(mean, dense_cov @ design.T @ data.y, rtol=1e-10)


def _quadrature_log_evidence(model, X):
    """``log p(X)`` of a one-feature, one-component mixture by a dense grid over ``(mu, log sigma2)``.

    ``mu`` runs over +/- 12 prior standard deviations at each ``log sigma2`` (the prior's width grows with the
    variance), so the grid holds all the mass of the heavy upper tail of ``log sigma2``.
    """
    z, log_var = np.meshgrid(np.linspace(-12.0, 12.0, 1201), np.linspace(-12.0, 40.0, 2601), indexing="ij")
    prior_sd = np.sqrt(model.mean_variance_factor * np.exp(log_var))
    theta = np.column_stack([(model.mean_prior_loc + prior_sd * z).ravel(), log_var.ravel()])
    log_joint = model.log_prior(theta) + model.log_likelihood(theta, X).sum(axis=1) + np.log(prior_sd.ravel())
    cell = (z[1, 0] - z[0, 0]) * (log_var[0, 1] - log_var[0, 0])
    top = log_joint.max()
    return float(top + np.log(np.sum(np.exp(log_joint - top)) * cell))


@pytest.mark.parametrize("settings", [{}, dict(variance_shape=2.5, variance_scale=0.4, mean_prior_loc=1.0,
                                               mean_variance_factor=0.5)])
@pytest.mark.parametrize("n_samples", [0, 1, 6])
def test_one_component_mixture_evidence_equals_quadrature(settings, n_samples):
    """The normal-inverse-gamma formula against a grid integral of the model's own prior times likelihood."""
    X = np.random.default_rng(n_samples).normal(0.7, 1.3, size=(n_samples, 1))
    model = GaussianMixtureModel(1, 1, **settings)
    assert exact_log_evidence(model, X) == pytest.approx(_quadrature_log_evidence(model, X), abs=1e-5)


def test_one_component_mixture_evidence_is_a_product_over_features():
    X = np.random.default_rng(0).normal(size=(30, 3)) * [0.5, 1.0, 2.0]
    joint = exact_log_evidence(GaussianMixtureModel(1, 3), X)
    per_feature = sum(exact_log_evidence(GaussianMixtureModel(1, 1), X[:, [j]]) for j in range(3))
    assert joint == pytest.approx(per_feature, rel=1e-12)


def test_only_one_component_mixtures_have_an_exact_evidence():
    assert has_exact_evidence(GaussianMixtureModel(1, 2))
    assert not has_exact_evidence(GaussianMixtureModel(2, 2))
    with pytest.raises(ValueError, match="no analytic evidence with these settings"):
        exact_log_evidence(GaussianMixtureModel(3, 2), make_mixture(10).X)
