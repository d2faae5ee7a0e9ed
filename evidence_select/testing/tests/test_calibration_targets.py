"""Every exact evidence of the calibration suite, checked by a second, independent method.

The exact values come from 1-d quadrature (to a power), a transfer matrix,
closed forms or enumeration of assignments. The checks use only the model's own
protocol methods (``sample_prior``, ``log_prior``, ``log_likelihood_sum``) so they
also catch a model whose code disagrees with its formula:

- plain prior Monte Carlo, ``Z = E_prior[L]``, in low dimension, within 4 of its
  own standard errors (and that error is required to be small);
- grid quadrature of ``prior x likelihood`` over the unconstrained parameters in
  one to three dimensions, to quadrature accuracy.
"""

import numpy as np
import pytest
from scipy import integrate

from evidence_select import log_evidence
from evidence_select.evidence._api import no_data
from evidence_select.models import check_model
from evidence_select.testing import (CALIBRATION_FAMILIES, BananaTarget, BoxBananaTarget, BetaBinomialModel, BoxProductTarget, FunnelTarget, PoissonGammaModel, ProductTarget, RingChainTarget, StudentTFactor, TinyMixtureModel, TwoPeakFactor, calibration_cases, ill_conditioned_gaussian_target)
from evidence_select.utils import logsumexp


def prior_monte_carlo(model, X=None, y=None, n_draws=1_000_000, seed=0, chunk=100_000):
    """``log E_prior[L]`` and its delta-method standard error."""
    X = no_data() if X is None else X
    rng = np.random.default_rng(seed)
    log_lik = np.concatenate([model.log_likelihood_sum(model.sample_prior(rng, chunk), X, y)
                              for _ in range(n_draws // chunk)])
    log_z = logsumexp(log_lik) - np.log(len(log_lik))
    ratio = np.exp(log_lik - log_z)
    return log_z, float(np.std(ratio) / np.sqrt(len(ratio)))


def grid_log_evidence(model, reach, n_nodes, X=None, y=None):
    """Trapezoid rule over the unconstrained cube ``[-reach, reach]^d`` of ``exp(log prior + log L)``."""
    X = no_data() if X is None else X
    axis = np.linspace(-reach, reach, n_nodes)
    mesh = np.stack(np.meshgrid(*[axis] * model.n_params, indexing="ij"), axis=-1).reshape(-1, model.n_params)
    log_density = model.log_prior(mesh) + model.log_likelihood_sum(mesh, X, y)
    values = np.exp(log_density - log_density.max()).reshape([n_nodes] * model.n_params)
    for _ in range(model.n_params):
        values = integrate.trapezoid(values, axis, axis=0)
    return float(log_density.max() + np.log(values))


def assert_monte_carlo_agrees(model, X=None, y=None, max_std=0.05, **kwargs):
    estimate, std = prior_monte_carlo(model, X, y, **kwargs)
    assert std < max_std, f"Monte Carlo check too noisy to mean anything: std {std:.3f}"
    exact = model.exact_log_evidence(X, y)
    assert abs(estimate - exact) <= 4 * std, f"exact {exact:.4f}, Monte Carlo {estimate:.4f} +/- {std:.4f}"


FACTORS = [StudentTFactor(df=1.5, loc=0.5, scale=0.3), TwoPeakFactor(), TwoPeakFactor(df=2.0)]


# -- products and the box prior ------------------------------------------------------------
@pytest.mark.parametrize("factor", FACTORS, ids=repr)
@pytest.mark.parametrize("box", [False, True], ids=["gaussian_prior", "box_prior"])
def test_product_1d_integral_matches_unconstrained_grid(factor, box):
    # The exact value integrates in the natural coordinate; the grid uses the model's own
    # unconstrained density (for the box: the sigmoid map's log-Jacobian included).
    model = BoxProductTarget(factor, 1) if box else ProductTarget(factor, 1)
    grid = grid_log_evidence(model, reach=40.0 if box else 60.0, n_nodes=400_001)
    assert abs(grid - model.exact_log_evidence()) < 1e-6


@pytest.mark.parametrize("factor", FACTORS, ids=repr)
@pytest.mark.parametrize("box", [False, True], ids=["gaussian_prior", "box_prior"])
def test_product_matches_prior_monte_carlo(factor, box):
    model = BoxProductTarget(factor, 2) if box else ProductTarget(factor, 2)
    assert_monte_carlo_agrees(model)


def test_two_peak_gaussian_product_closed_form():
    # Gaussian peaks convolve with the Gaussian prior in closed form.
    from scipy import stats

    model = ProductTarget(TwoPeakFactor(), 64)
    z1 = sum(w * stats.norm(0, np.hypot(0.4, 3.0)).pdf(c) for w, c in zip([0.3, 0.7], [1.5, -1.5]))
    assert abs(model.exact_log_evidence() - 64 * np.log(z1)) < 1e-8


# -- funnel ------------------------------------------------------------------------------------
def test_funnel_matches_two_dimensional_grid():
    # The exact value integrates x analytically; here both coordinates are integrated
    # numerically on the model's own density, with x on a grid scaled to the neck width
    # min(prior_scale, exp(v / 2)) at each v (change of variables x = width(v) t).
    model = FunnelTarget(2)
    v = np.linspace(-20.0, 20.0, 2001)
    t = np.linspace(-12.0, 12.0, 801)
    width = np.minimum(model.prior_scale, np.exp(v / 2))
    theta = np.stack(np.broadcast_arrays(v[:, None], width[:, None] * t[None, :]), axis=-1).reshape(-1, 2)
    log_density = (model.log_prior(theta) + model.log_likelihood_sum(theta)).reshape(len(v), len(t))
    peak = log_density.max()
    inner = integrate.trapezoid(np.exp(log_density - peak), t, axis=1) * width
    grid = peak + np.log(integrate.trapezoid(inner, v))
    assert abs(grid - model.exact_log_evidence()) < 1e-6


@pytest.mark.parametrize("dim", [3, 4])
def test_funnel_matches_prior_monte_carlo(dim):
    assert_monte_carlo_agrees(FunnelTarget(dim))


# -- banana ------------------------------------------------------------------------------------
@pytest.mark.parametrize("rotation_seed", [None, 3])
def test_banana_matches_two_dimensional_grid(rotation_seed):
    model = BananaTarget(2, rotation_seed=rotation_seed)
    grid = grid_log_evidence(model, reach=15.0, n_nodes=1201)
    assert abs(grid - model.exact_log_evidence()) < 1e-4


def test_rotated_banana_matches_prior_monte_carlo():
    assert_monte_carlo_agrees(BananaTarget(4, rotation_seed=1), n_draws=4_000_000, max_std=0.1)


def test_box_banana_matches_two_dimensional_grid():
    # The ridge is ~0.01 wide in the unconstrained coordinates near the origin: a 0.003 grid spacing resolves it.
    model = BoxBananaTarget(2)
    grid = grid_log_evidence(model, reach=3.0, n_nodes=2001)
    assert abs(grid - model.exact_log_evidence()) < 1e-3


def test_box_banana_box_holds_the_mass_in_64_dimensions():
    model = BoxBananaTarget(64)
    x = model.sample_density(np.random.default_rng(0), 100_000)
    # The density's own draws stay far inside the box (a coordinate beyond half_width needs a^2 ~ 20 or more).
    assert np.max(np.abs(x)) < 0.75 * model.half_width
    log_f = model._density._log_lik_and_grad(x)[0]
    theta = 2.0 * np.arctanh(x / model.half_width)
    assert np.allclose(model.log_likelihood_sum(theta, no_data()), log_f)


# -- ring chain --------------------------------------------------------------------------------
def test_ring_transfer_matrix_matches_three_dimensional_grid():
    model = RingChainTarget(3)
    assert abs(grid_log_evidence(model, reach=2.8, n_nodes=121) - model.exact_log_evidence()) < 1e-3


@pytest.mark.parametrize("dim", [4, 6])
def test_ring_matches_importance_sampling_over_the_sites(dim):
    # Proposal: independent sites from prior x well (inverse CDF on a fine grid), so the
    # weights carry the coupling alone; the target density is the model's own.
    model = RingChainTarget(dim)
    x = np.linspace(-4.0, 4.0, 200_001)
    log_site = -0.5 * (x / model.prior_scale) ** 2 - model.well * (x**2 - 1.0) ** 2
    cdf = integrate.cumulative_trapezoid(np.exp(log_site), x, initial=0.0)
    log_norm = np.log(cdf[-1])
    rng = np.random.default_rng(0)
    theta = np.interp(rng.uniform(size=(400_000, dim)) * cdf[-1], cdf, x)
    log_q = np.sum(-0.5 * (theta / model.prior_scale) ** 2 - model.well * (theta**2 - 1.0) ** 2, axis=1) - dim * log_norm
    log_w = model.log_prior(theta) + model.log_likelihood_sum(theta) - log_q
    estimate = logsumexp(log_w) - np.log(len(log_w))
    ratio = np.exp(log_w - estimate)
    std = np.std(ratio) / np.sqrt(len(ratio))
    assert std < 0.05
    assert abs(estimate - model.exact_log_evidence()) <= 4 * std


def test_ring_transfer_matrix_is_converged_in_the_nodes():
    coarse, fine = RingChainTarget(64), RingChainTarget(64, n_nodes=801)
    assert abs(coarse.exact_log_evidence() - fine.exact_log_evidence()) < 1e-8


# -- Gaussians ---------------------------------------------------------------------------------
@pytest.mark.parametrize("condition_number", [1e2, 1e4])
def test_ill_conditioned_gaussian_matches_prior_monte_carlo(condition_number):
    model = ill_conditioned_gaussian_target(2, condition_number)
    assert np.isclose(np.linalg.cond(model.cov), condition_number)
    assert_monte_carlo_agrees(model)


# -- conjugate models with data ------------------------------------------------------------------
def _per_group_grid(model_1d, X, reach):
    return sum(grid_log_evidence(model_1d, reach, 200_001, X=X[:, [k]]) for k in range(X.shape[1]))


def test_poisson_gamma_closed_form_matches_quadrature_per_group():
    case = calibration_cases(8, families=["poisson_gamma"], dims=(8,))[0]
    assert abs(_per_group_grid(PoissonGammaModel(1), case.X, reach=30.0) - case.exact) < 1e-6


def test_beta_binomial_closed_form_matches_quadrature_per_group():
    case = calibration_cases(8, families=["beta_binomial"], dims=(8,))[0]
    assert abs(_per_group_grid(BetaBinomialModel(1, 10), case.X, reach=40.0) - case.exact) < 1e-6


@pytest.mark.parametrize("family", ["poisson_gamma", "beta_binomial", "linear", "tiny_mixture"])
def test_models_with_data_match_prior_monte_carlo(family):
    case = calibration_cases(2, families=[family], dims=(2,))[0]
    assert_monte_carlo_agrees(case.model, case.X, case.y)


def test_tiny_mixture_enumeration_matches_grid():
    case = calibration_cases(2, families=["tiny_mixture"], dims=(2,))[0]
    assert isinstance(case.model, TinyMixtureModel)
    assert abs(grid_log_evidence(case.model, 12.0, 601, X=case.X) - case.exact) < 1e-5


def test_tiny_mixture_enumeration_matches_monte_carlo_in_four_dimensions():
    case = calibration_cases(4, families=["tiny_mixture"], dims=(4,))[0]
    assert_monte_carlo_agrees(case.model, case.X)


# -- the registry and the protocol ----------------------------------------------------------------
def test_registry_names_dimensions_and_finite_exact_values():
    cases = calibration_cases()
    assert len({c.name for c in cases}) == len(cases) == len(CALIBRATION_FAMILIES) * 5
    assert {c.family for c in cases if c.dim == 64} == set(CALIBRATION_FAMILIES)
    assert all(np.isfinite(c.exact) and c.model.n_params == c.dim for c in cases)
    assert calibration_cases(8, families=["funnel"])[-1].name == "funnel_d8"
    with pytest.raises(ValueError, match="unknown calibration families"):
        calibration_cases(families=["nope"])


@pytest.mark.parametrize("case", calibration_cases(16), ids=lambda c: c.name)
def test_every_case_honours_the_protocol(case):
    check_model(case.model, no_data() if case.X is None else case.X[:5], None if case.y is None else case.y[:5])


def test_no_data_models_work_without_X_through_log_evidence():
    model = FunnelTarget(3)
    assert log_evidence(model, method="exact").log_evidence == model.exact_log_evidence()
    with pytest.raises(ValueError, match="y was given without X"):
        log_evidence(model, None, np.zeros(1), method="exact")
    with pytest.raises(ValueError, match='"sgais" streams data and needs X'):
        log_evidence(model, method="sgais")
    from evidence_select import BayesianLinearRegressor

    with pytest.raises(ValueError, match="X is required"):
        log_evidence(BayesianLinearRegressor(), method="exact")


def test_rotation_and_box_validation():
    with pytest.raises(ValueError, match="even"):
        BananaTarget(3)
    with pytest.raises(ValueError, match="half_width"):
        BoxProductTarget(TwoPeakFactor(), 2, half_width=0.0)
    with pytest.raises(ValueError, match="condition_number"):
        ill_conditioned_gaussian_target(4, 0.5)
