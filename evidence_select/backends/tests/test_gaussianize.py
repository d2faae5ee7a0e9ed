"""Iterative Gaussianization is an exactly normalised density with an exact inverse.

Tolerances: the 2-d quadrature error of a 401 x 501 grid over a box holding all
but ~1e-6 of the mass is far below 1e-3; importance-sampling checks use 5 of
their own standard errors.
"""

import numpy as np
import pytest
from scipy import special, stats

from evidence_select.backends._gaussianize import (GaussianizationSettings, fit_gaussianization, fit_marginal_product,
                                                 gaussianization_forward, gaussianization_inverse,
                                                 gaussianization_log_density, gaussianization_sample,
                                                 gaussianization_sample_and_log_density, settled_settings)
from evidence_select.backends._gaussianize import _kernel_normal_scores, _quantile_residuals


def _banana(rng, n):
    a = rng.normal(size=n)
    return np.stack([a, 0.5 * a**2 + 0.3 * rng.normal(size=n)], axis=1)


def _twopeak(rng, n, d):
    return np.where(rng.uniform(size=(n, d)) < 0.5, -2.0, 2.0) + 0.5 * rng.standard_t(3, size=(n, d))


@pytest.fixture(scope="module")
def banana_flow():
    rng = np.random.default_rng(0)
    return fit_gaussianization(rng, _banana(rng, 3000))


@pytest.fixture(scope="module")
def banana_layers_only():
    """The same banana without the quadratic shift: marginal spline layers must bend it."""
    rng = np.random.default_rng(0)
    return fit_gaussianization(rng, _banana(rng, 3000), GaussianizationSettings(max_curved_pairs=0))


@pytest.mark.parametrize("which", ["banana_flow", "banana_layers_only"])
def test_integrates_to_one_by_quadrature(which, request):
    flow = request.getfixturevalue(which)
    if which == "banana_flow":
        assert flow.shift is not None  # the quadratic shift straightens the banana
    else:
        assert flow.shift is None and len(flow.layers) >= 2  # without it the curvature needs marginal layers
    g1, g2 = np.linspace(-8, 8, 401), np.linspace(-6, 14, 501)
    grid = np.stack(np.meshgrid(g1, g2, indexing="ij"), -1).reshape(-1, 2)
    mass = np.exp(gaussianization_log_density(flow, grid)).sum() * (g1[1] - g1[0]) * (g2[1] - g2[0])
    assert abs(mass - 1.0) < 1e-3


def test_fits_the_banana(banana_flow):
    rng = np.random.default_rng(1)
    x = _banana(rng, 4000)
    log_p = stats.norm.logpdf(x[:, 0]) + stats.norm.logpdf(x[:, 1] - 0.5 * x[:, 0] ** 2, scale=0.3)
    kl = np.mean(log_p - gaussianization_log_density(banana_flow, x))
    assert kl < 0.15  # a Gaussian fit to this banana is at KL ~ 0.5


def test_finds_the_curved_pairs_in_eight_dimensions():
    # Four independent bananas (a_k, b_k): the directions that matter lie in the pairs' planes. Layers whose
    # frames are random rotations of all 8 axes see nearly Gaussian projections (central limit theorem) and stay
    # at KL ~ 2.2 on these seeds; searching the frames reaches ~0.6 (four times the single banana's KL above).
    def pairs(rng, n):
        a = rng.normal(size=(n, 4))
        return np.concatenate([a, 0.5 * a**2 + 0.3 * rng.normal(size=(n, 4))], axis=1)

    rng = np.random.default_rng(0)
    flow = fit_gaussianization(rng, pairs(rng, 4000))
    x = pairs(np.random.default_rng(1), 4000)
    a, b = x[:, :4], x[:, 4:]
    log_p = np.sum(stats.norm.logpdf(a) + stats.norm.logpdf(b - 0.5 * a**2, scale=0.3), axis=1)
    assert np.mean(log_p - gaussianization_log_density(flow, x)) < 1.0


def test_gaussian_directions_get_no_spline():
    # One exponential coordinate among five Gaussian ones: every layer transforms that one direction only
    # (with noise_floor=0 the first layer would fit splines to all six, five of them to noise).
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3000, 6))
    x[:, 2] = rng.exponential(size=3000)
    flow = fit_gaussianization(rng, x)
    assert len(flow.layers) >= 1
    assert all(layer.directions.shape[1] == 1 for layer in flow.layers)
    assert fit_gaussianization(rng, rng.normal(size=(3000, 6))).layers == ()


def test_inverse_is_exact():
    rng = np.random.default_rng(2)
    flow = fit_gaussianization(rng, _twopeak(rng, 2000, 4))
    z = rng.normal(size=(500, 4)) * 3.0  # also far in the linear tails
    x = gaussianization_inverse(flow, z)
    np.testing.assert_allclose(gaussianization_forward(flow, x)[0], z, atol=1e-9)
    np.testing.assert_allclose(gaussianization_inverse(flow, gaussianization_forward(flow, x)[0]), x, atol=1e-9)


def test_log_det_matches_finite_differences():
    rng = np.random.default_rng(3)
    flow = fit_gaussianization(rng, _twopeak(rng, 2000, 3))
    x = gaussianization_sample(flow, rng, 5)
    _, log_det = gaussianization_forward(flow, x)
    h = 1e-6
    for i in range(len(x)):
        jac = np.stack([(gaussianization_forward(flow, x[i] + h * e)[0][0]
                         - gaussianization_forward(flow, x[i] - h * e)[0][0]) / (2 * h) for e in np.eye(3)], axis=1)
        assert abs(np.linalg.slogdet(jac)[1] - log_det[i]) < 1e-5


def test_samples_and_log_density_agree_in_3d():
    # E_q[h] from q's own samples must equal the same expectation by importance sampling from a broad
    # Gaussian g using q's log density; the IS estimate of the total mass must be 1.
    rng = np.random.default_rng(4)
    flow = fit_gaussianization(rng, _twopeak(rng, 3000, 3))
    n = 200_000
    g = stats.multivariate_normal(np.zeros(3), 9.0 * np.eye(3))
    xg = g.rvs(n, random_state=rng)
    w = np.exp(gaussianization_log_density(flow, xg) - g.logpdf(xg))
    assert abs(w.mean() - 1.0) < 5 * w.std() / np.sqrt(n)
    xq = gaussianization_sample(flow, rng, n)
    for h in (lambda x: x[:, 0] > 1.0, lambda x: x[:, 1] * x[:, 2] > 0.0, lambda x: np.abs(x[:, 2]) < 0.5):
        by_samples, by_density = h(xq).mean(), (w * h(xg)).mean()
        se = np.hypot(h(xq).std() / np.sqrt(n), (w * h(xg)).std() / np.sqrt(n))
        assert abs(by_samples - by_density) < 5 * se


def test_bad_settings():
    x = np.random.default_rng(0).normal(size=(100, 3))
    with pytest.raises(ValueError, match="n_directions"):
        fit_gaussianization(np.random.default_rng(0), x, GaussianizationSettings(n_directions=4))
    with pytest.raises(ValueError, match="at least"):
        fit_gaussianization(np.random.default_rng(0), x[:5])
    with pytest.raises(ValueError, match="noise_floor"):
        fit_gaussianization(np.random.default_rng(0), x, GaussianizationSettings(noise_floor=-1.0))
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="max_curved_pairs"):
            fit_gaussianization(np.random.default_rng(0), x, GaussianizationSettings(max_curved_pairs=bad))
    with pytest.raises(TypeError, match="GaussianizationSettings"):
        fit_gaussianization(np.random.default_rng(0), x, {"max_layers": 3})
    with pytest.raises(TypeError, match="compare_without_shift must be a bool"):
        fit_gaussianization(np.random.default_rng(0), x, GaussianizationSettings(compare_without_shift="no"))


def test_quantile_residuals_are_each_sample_minus_the_quantile_of_its_rank():
    # Against the definition, with ties (repeated MCMC states): the residual of the r-th smallest projection
    # is it minus the r-th quantile, bit for bit, whichever of equal values takes which rank.
    rng = np.random.default_rng(0)
    proj = rng.standard_normal((500, 7))
    proj[::5] = proj[1::5]
    quantiles = special.ndtri((np.arange(500) + 0.5) / 500)
    residual = _quantile_residuals(proj, quantiles)
    for k in range(7):
        order = np.argsort(proj[:, k])
        expected = np.empty(500)
        expected[order] = proj[order, k] - quantiles
        assert np.array_equal(residual[:, k], expected)


def test_settled_settings_keep_the_first_fits_choice_about_the_shift(banana_flow):
    settings = GaussianizationSettings()
    assert banana_flow.shift is not None
    assert settled_settings(settings, banana_flow) == settings._replace(compare_without_shift=False)
    gaussian = fit_gaussianization(np.random.default_rng(0), np.random.default_rng(1).normal(size=(2000, 4)))
    assert gaussian.shift is None
    assert settled_settings(settings, gaussian) == settings._replace(max_curved_pairs=0)


def test_without_the_comparison_a_found_shift_is_kept_and_no_layers_are_fitted_without_it(monkeypatch):
    # Skewed independent coordinates: a shift is found, and the held-out comparison drops it; with
    # compare_without_shift=False it stays, and the marginal layers are fitted once (after the shift).
    import evidence_select.backends._gaussianize as gaussianize

    x = np.random.default_rng(0).gamma(2.0, size=(3000, 4))
    compared = fit_gaussianization(np.random.default_rng(0), x)
    calls = []
    original = gaussianize._marginal_layers
    monkeypatch.setattr(gaussianize, "_marginal_layers", lambda *a: calls.append(a[1]) or original(*a))
    kept = fit_gaussianization(np.random.default_rng(0), x, GaussianizationSettings(compare_without_shift=False))
    assert compared.shift is None and kept.shift is not None and len(calls) == 1


def test_marginal_product_keeps_narrow_separated_peaks_narrow():
    # Two peaks of width 0.1, 6 apart, in each of two coordinates. Silverman's bandwidth, scaled by the
    # standard deviation (~3), would smear each peak over several widths: 2.4 nats per point below the exact
    # density. The cross-validated bandwidth keeps the fit within 0.15 nats of it.
    rng = np.random.default_rng(0)

    def draws(n):
        return np.where(rng.uniform(size=(n, 2)) < 0.3, 3.0, -3.0) + 0.1 * rng.standard_normal((n, 2))

    def exact_log_pdf(v):
        peaks = 0.3 * np.exp(-0.5 * ((v - 3) / 0.1) ** 2) + 0.7 * np.exp(-0.5 * ((v + 3) / 0.1) ** 2)
        return np.sum(np.log(peaks) - np.log(0.1) - 0.5 * np.log(2 * np.pi), axis=1)

    model = fit_marginal_product(draws(4000))
    test = draws(4000)
    assert np.mean(exact_log_pdf(test) - gaussianization_log_density(model, test)) < 0.15


def test_sample_and_log_density_agree_with_the_forward_pass(banana_flow):
    # The density from the inverse pass (no forward pass) is the forward density at the same draws, tails
    # included (draws beyond the end knots), and the draws are those gaussianization_sample makes.
    x, log_q = gaussianization_sample_and_log_density(banana_flow, np.random.default_rng(5), 20_000)
    assert np.array_equal(x, gaussianization_sample(banana_flow, np.random.default_rng(5), 20_000))
    assert np.max(np.abs(log_q - gaussianization_log_density(banana_flow, x))) < 1e-8


def test_marginal_product_names_a_constant_coordinate():
    x = np.random.default_rng(0).normal(size=(100, 3))
    x[:, 1] = 2.0
    with pytest.raises(ValueError, match=r"coordinates \[1\] of the samples do not vary"):
        fit_marginal_product(x)


@pytest.mark.parametrize("offset", [0.0, 6.0, 40.0])
def test_kernel_normal_scores_match_the_log_space_sum(offset):
    """The kernel CDF summed in linear space (with the tails summed again in log space) gives the normal scores of
    the log-space sum, also where the survival probability is far below double precision's epsilon."""
    rng = np.random.default_rng(3)
    centres = np.sort(rng.normal(size=300))
    log_w = np.log(rng.dirichlet(np.ones(300)))
    points = np.linspace(-4.0, 4.0, 41) + offset
    std = (points[:, None] - centres[None, :]) / 0.2
    log_cdf = special.logsumexp(special.log_ndtr(std) + log_w, axis=1)
    log_sf = special.logsumexp(special.log_ndtr(-std) + log_w, axis=1)
    expected = np.where(log_cdf < np.log(0.5), special.ndtri_exp(log_cdf), -special.ndtri_exp(log_sf))
    # Linear space resolves a survival probability s >= 1e-6 to a few eps, i.e. the score to ~4 eps / phi(y) < 2e-10.
    np.testing.assert_allclose(_kernel_normal_scores(std, log_w), expected, rtol=0, atol=1e-9)
