"""LinearHyperModel: the protocol, the exact evidence against brute force, the exact draws and the predictive."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from evidence_select.datasets import make_linear_regression
from evidence_select.models import LinearGaussianModel, LinearHyperModel, LinearHyperStats, check_model
from evidence_select.models import _linear_hyper_math
from evidence_select.models._linear_hyper_math import NOISE_VARIANCE_BOUNDS
from evidence_select.testing._linear_quadrature import linear_hyper_evidence_by_quadrature

VARIANTS = [dict(), dict(prior_scale=1.3), dict(noise_variance=0.6), dict(noise_variance=0.6, prior_scale=1.3)]


def _rows(n, seed=0, offset=2.0, scale=1.0, p=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return X, scale * (X @ np.linspace(1.0, -0.5, p) + offset + 0.7 * rng.normal(size=n))


@pytest.mark.parametrize("settings", VARIANTS)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_protocol_and_gradients(settings, fit_intercept):
    X, y = _rows(12)
    model = LinearHyperModel(3, fit_intercept=fit_intercept, **settings)
    check_model(model, X, y)
    assert model.n_params == 3 + fit_intercept + ("noise_variance" not in settings) + ("prior_scale" not in settings)


def test_log_prior_is_the_product_of_its_documented_densities():
    model = LinearHyperModel(2, intercept_scale=5.0)
    theta = model.sample_prior(np.random.default_rng(0), 7)
    w, b, log_noise, log_g = theta[:, :2], theta[:, 2], theta[:, 3], theta[:, 4]
    sigma, g = np.exp(0.5 * log_noise), np.exp(log_g)
    lo, hi = NOISE_VARIANCE_BOUNDS
    expected = (stats.norm(0.0, (np.sqrt(g) * sigma)[:, None]).logpdf(w).sum(axis=1)
                + stats.norm(0.0, 5.0 * sigma).logpdf(b)
                + stats.uniform(np.log(lo), np.log(hi / lo)).logpdf(log_noise)
                + stats.invgamma(0.5, scale=0.5).logpdf(g) + log_g)  # the density of log g: times g
    np.testing.assert_allclose(model.log_prior(theta), expected, rtol=1e-12)
    assert model.log_prior(np.array([[0.0, 0.0, 0.0, np.log(hi) + 1.0, 0.0]]))[0] == -np.inf


def test_prior_draws_follow_the_prior():
    # g = 1 / chi2_1 has median 1 / 0.4549; log sigma2 is uniform on its support; w / (sigma sqrt(g)) ~ N(0, 1).
    model = LinearHyperModel(2)
    theta = model.sample_prior(np.random.default_rng(1), 40_000)
    g, log_noise = np.exp(theta[:, 4]), theta[:, 3]
    lo, hi = np.log(NOISE_VARIANCE_BOUNDS)
    assert stats.kstest(g, stats.invgamma(0.5, scale=0.5).cdf).pvalue > 1e-3
    assert stats.kstest(log_noise, stats.uniform(lo, hi - lo).cdf).pvalue > 1e-3
    standardised = theta[:, :2] / np.sqrt(g * np.exp(log_noise))[:, None]
    assert stats.kstest(standardised.ravel(), "norm").pvalue > 1e-3


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_fixed_scales_are_the_known_noise_model(fit_intercept):
    # Known noise and a fixed g: the paper's model with prior_scale^2 = g s2 and intercept_scale^2 = kappa^2 s2.
    X, y = _rows(40)
    model = LinearHyperModel(3, noise_variance=0.6, prior_scale=1.3, intercept_scale=2.0, fit_intercept=fit_intercept)
    known = LinearGaussianModel(3, noise_variance=0.6, prior_scale=1.3 * np.sqrt(0.6),
                                intercept_scale=2.0 * np.sqrt(0.6), fit_intercept=fit_intercept)
    assert model.exact_log_evidence(X, y) == pytest.approx(known.exact_log_evidence(X, y), rel=1e-12)
    theta = known.sample_prior(np.random.default_rng(0), 5)
    np.testing.assert_allclose(model.log_prior(theta), known.log_prior(theta), rtol=1e-12)
    np.testing.assert_allclose(model.log_likelihood(theta, X, y), known.log_likelihood(theta, X, y), rtol=1e-12)


def _brute_force_cases():
    diabetes = pytest.importorskip("sklearn.datasets").load_diabetes()
    X_d = (diabetes.data - diabetes.data.mean(axis=0)) / diabetes.data.std(axis=0)
    y_d = diabetes.target
    return {
        "simulated n=10": _rows(10, seed=1),
        "simulated n=60, y x 1000 + 5000": _rows(60, seed=2, offset=5.0, scale=1000.0),
        "no signal n=50": (np.random.default_rng(3).normal(size=(50, 3)), np.random.default_rng(4).normal(size=50)),
        "diabetes raw y": (X_d, y_d),
        "diabetes standardised y": (X_d, (y_d - y_d.mean()) / y_d.std()),
    }


@pytest.mark.slow
@pytest.mark.parametrize("case", ["simulated n=10", "simulated n=60, y x 1000 + 5000", "no signal n=50",
                                  "diabetes raw y", "diabetes standardised y"])
@pytest.mark.parametrize("settings", VARIANTS[:3])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_exact_evidence_equals_brute_force_quadrature(case, settings, fit_intercept):
    X, y = _brute_force_cases()[case]
    model = LinearHyperModel(X.shape[1], fit_intercept=fit_intercept, **settings)
    reference, reference_error = linear_hyper_evidence_by_quadrature(model, X, y)
    value, error = model.exact_log_evidence_and_error(X, y)
    # Both error bounds 100x inside the comparison's 1e-6 relative tolerance; relative to the value, since a log
    # evidence near -3e7 (known noise 0.6 on a target scaled by 1000) is summed in float64 to ~1e-8 nats at best.
    scale = max(1.0, abs(reference))
    assert reference_error < 1e-8 * scale and error < 1e-8 * scale
    assert value == pytest.approx(reference, rel=1e-6)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_exact_evidence_equals_brute_force_quadrature_fast_case(fit_intercept):
    X, y = _rows(30, seed=5)
    model = LinearHyperModel(3, fit_intercept=fit_intercept)
    reference, reference_error = linear_hyper_evidence_by_quadrature(model, X, y, n_nodes=201)
    assert reference_error < 1e-8
    assert model.exact_log_evidence(X, y) == pytest.approx(reference, rel=1e-6)


def test_quadrature_error_bound_holds_against_a_finer_grid(monkeypatch):
    X, y = _rows(25, seed=6)
    model = LinearHyperModel(3)
    value, bound = model.exact_log_evidence_and_error(X, y)
    monkeypatch.setattr(_linear_hyper_math, "_N_FINE", 8 * _linear_hyper_math._N_FINE)
    finer = model.exact_log_evidence(X, y)
    assert bound < 1e-9
    assert abs(value - finer) <= bound + 1e-12


@pytest.mark.parametrize("settings", [dict(), dict(prior_scale=0.5)])
def test_evidence_of_rescaled_y_differs_by_the_jacobian(settings):
    X, y = _rows(80, seed=7)
    model = LinearHyperModel(3, **settings)
    for factor in (1e-6, 1e4):
        assert model.exact_log_evidence(X, factor * y) == pytest.approx(
            model.exact_log_evidence(X, y) - len(y) * np.log(factor), abs=1e-8)
    # Shifting y moves it only through the intercept's prior: by at most (shift / (kappa sigma))^2 / 2.
    shifted = model.exact_log_evidence(X, y + 50.0)
    assert abs(shifted - model.exact_log_evidence(X, y)) < 0.5 * (50.0 / (model.intercept_scale * 0.7)) ** 2 * 2


def test_statistics_add_chunk_by_chunk():
    data = make_linear_regression(3000, random_state=1)
    model = LinearHyperModel(5)
    stats_ = LinearHyperStats.empty(model)
    for start in range(0, 3000, 701):
        stats_ = stats_.update(model, data.X[start:start + 701], data.y[start:start + 701])
    assert stats_.n_samples == 3000
    assert stats_.log_evidence(model) == pytest.approx(model.exact_log_evidence(data.X, data.y), rel=1e-12)
    assert stats_.log_evidence_error(model) < 1e-9


@pytest.mark.parametrize("settings", VARIANTS[:3])
@pytest.mark.parametrize("tempering, increment", [(1e-12, 1e-12), (0.002, 0.001), (0.3, 0.1), (1.0, 0.2)])
def test_exact_draws_reproduce_the_normaliser_ratios(settings, tempering, increment):
    # Draws from the tempered posterior at `tempering` estimate Z(tempering + increment) / Z(tempering) as the
    # mean of p(rows | theta)^increment: exact draws make it agree within its Monte Carlo error, biased draws
    # (a wrong noise, scale or weight conditional) do not.
    data = make_linear_regression(100, random_state=0)
    model = LinearHyperModel(5, **settings)
    moments = model.gradient_statistics(data.X, data.y)
    theta = model.sample_tempered_posterior_from_statistics(np.random.default_rng(2), 40_000, tempering * moments)
    log_w = increment * model.log_likelihood(theta, data.X, data.y).sum(axis=1)
    estimate = logsumexp(log_w) - np.log(len(log_w))
    weights = np.exp(log_w - log_w.max())
    standard_error = weights.std() / weights.mean() / np.sqrt(len(weights))
    exact = (model.log_evidence_from_statistics((tempering + increment) * moments)[0]
             - model.log_evidence_from_statistics(tempering * moments)[0])
    assert abs(estimate - exact) < 4 * standard_error + 1e-4


@pytest.mark.parametrize("n_rows, tempering, increment", [(3, 0.5, 0.1), (4, 0.0, 1.0), (5, 0.0, 0.001),
                                                         (5, 0.0, 1.0)])
def test_exact_draws_and_evidence_agree_while_the_rows_can_be_fitted_exactly(n_rows, tempering, increment):
    # Up to 6 rows 5 weights and an intercept fit the rows exactly: the residual S(g) falls to 0 as g grows, and
    # the draws and the normaliser must follow it (a residual lost to rounding made both jump by tens of nats).
    data = make_linear_regression(10, random_state=0)
    model = LinearHyperModel(5)
    moments = model.gradient_statistics(data.X[:n_rows], data.y[:n_rows])
    row = model.gradient_statistics(data.X[n_rows:n_rows + 1], data.y[n_rows:n_rows + 1])
    theta = model.sample_tempered_posterior_from_statistics(np.random.default_rng(4), 40_000,
                                                            moments + tempering * row)
    log_w = increment * model.log_likelihood(theta, data.X[n_rows:n_rows + 1], data.y[n_rows:n_rows + 1])[:, 0]
    estimate = logsumexp(log_w) - np.log(len(log_w))
    weights = np.exp(log_w - log_w.max())
    standard_error = weights.std() / weights.mean() / np.sqrt(len(weights))
    exact = (model.log_evidence_from_statistics(moments + (tempering + increment) * row)[0]
             - model.log_evidence_from_statistics(moments + tempering * row)[0])
    assert abs(estimate - exact) < 4 * standard_error + 1e-4


def test_exact_draws_from_rows_equal_draws_from_their_statistics():
    data = make_linear_regression(200, random_state=0)
    model = LinearHyperModel(5)
    weights = np.linspace(0.2, 1.0, 200)
    from_rows = model.sample_tempered_posterior(np.random.default_rng(3), 10, data.X, data.y, weights)
    moments = model.gradient_statistics(data.X * np.sqrt(weights)[:, None], data.y * np.sqrt(weights))
    moments[5, 5], moments[5, :5], moments[:5, 5] = weights.sum(), data.X.T @ weights, data.X.T @ weights
    moments[5, 6] = moments[6, 5] = data.y @ weights
    from_statistics = model.sample_tempered_posterior_from_statistics(np.random.default_rng(3), 10, moments)
    np.testing.assert_allclose(from_rows, from_statistics, rtol=1e-9)


@pytest.mark.parametrize("settings", [dict(), dict(noise_variance=0.8), dict(prior_scale=0.7)])
def test_predictive_matches_simulation_from_posterior_draws(settings):
    X, y = _rows(15, seed=8)
    model = LinearHyperModel(3, **settings)
    moments = model.gradient_statistics(X, y)
    X_new = np.array([[0.0, 0.0, 0.0], [1.5, -2.0, 0.5]])
    mean, std = model.predictive_from_statistics(moments, X_new)
    rng = np.random.default_rng(9)
    theta = model.sample_tempered_posterior_from_statistics(rng, 200_000, moments)
    _, log_noise, _ = model._split(theta)
    draws = model.predict_mean(theta, X_new) + np.exp(0.5 * log_noise)[:, None] * rng.standard_normal((len(theta), 2))
    # 200 000 draws of a (heavy-tailed, 11 degrees of freedom) predictive: the sample mean's error is std/450, the
    # sample std's about 1% of it; the grid's interpolation adds far less.
    np.testing.assert_allclose(mean, draws.mean(axis=0), atol=5 * std.max() / np.sqrt(len(theta)))
    np.testing.assert_allclose(std, draws.std(axis=0), rtol=0.03)


def test_predictive_with_fixed_scales_is_the_gaussian_posterior_predictive():
    X, y = _rows(20, seed=10)
    model = LinearHyperModel(3, noise_variance=0.5, prior_scale=2.0)
    known = LinearGaussianModel(3, noise_variance=0.5, prior_scale=2.0 * np.sqrt(0.5),
                                intercept_scale=model.intercept_scale * np.sqrt(0.5))
    from evidence_select.models import LinearEvidenceStats
    posterior_mean, covariance = LinearEvidenceStats.empty(known).update(known, X, y).posterior(known)
    X_new = np.random.default_rng(11).normal(size=(4, 3))
    design = np.hstack([X_new, np.ones((4, 1))])
    mean, std = model.predictive_from_statistics(model.gradient_statistics(X, y), X_new)
    np.testing.assert_allclose(mean, design @ posterior_mean, rtol=1e-9)
    np.testing.assert_allclose(std ** 2, 0.5 + np.einsum("ij,jk,ik->i", design, covariance, design), rtol=1e-9)


def test_draws_and_evidence_survive_an_exactly_fitted_target():
    # y exactly linear in X: the residual variance is the moments' rounding (far below var(y)) and g runs up its
    # range. Everything stays finite, and the noise variance drawn is as tiny as that residual.
    X = np.random.default_rng(12).normal(size=(50, 2))
    y = X @ [1.0, -1.0] + 0.5
    model = LinearHyperModel(2)
    value, error = model.exact_log_evidence_and_error(X, y)
    assert np.isfinite(value) and np.isfinite(error)
    theta = model.sample_tempered_posterior(np.random.default_rng(13), 50, X, y, 1.0)
    assert np.all(np.isfinite(theta))
    assert np.all(np.exp(theta[:, 3]) < 1e-6 * y.var())
    assert np.all(np.isfinite(model.predictive_from_statistics(model.gradient_statistics(X, y), X[:3])[1]))
