"""Model math: gradients, prior samplers and likelihoods against independent references."""

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import logsumexp as scipy_logsumexp

from evidence_select.sgais._moves import fixed_points_gradient, joint_gradient
from evidence_select.models import (
    GaussianMixtureModel,
    LinearGaussianModel,
    SoftmaxRegressionModel,
    check_model,
    finite_difference_gradient,
)

RNG = np.random.default_rng(12345)
X5 = RNG.normal(size=(30, 5))


def _models_and_data():
    y_lin = X5 @ np.arange(1.0, 6.0) + RNG.normal(size=30)
    y_cls = RNG.integers(0, 4, size=30)
    return [
        ("linear", LinearGaussianModel(5, noise_variance=0.7, prior_scale=2.0, intercept_scale=0.5), X5, y_lin),
        ("linear-nointercept", LinearGaussianModel(5, fit_intercept=False), X5, y_lin),
        ("softmax4", SoftmaxRegressionModel(5, 4, prior_scale=1.5), X5, y_cls),
        ("softmax2", SoftmaxRegressionModel(5, 2), X5, y_cls % 2),
        ("mixture", GaussianMixtureModel(3, 5, weight_concentration=0.7, variance_shape=2.0,
                                         variance_scale=0.5, mean_prior_loc=0.3), X5, None),
        ("mixture1", GaussianMixtureModel(1, 5), X5, None),
    ]


CASES = _models_and_data()
IDS = [c[0] for c in CASES]


def _extreme_theta(name, model, rng):
    """Valid but extreme parameters: large logits / tiny or huge variances."""
    theta = model.sample_prior(rng, 3)
    if name.startswith("softmax"):
        theta = theta * 30.0  # logits of order 1e2-1e3
    if name.startswith("mixture"):
        K, d = model.n_components, model.n_features
        theta[:, K - 1 + K * d:] = rng.uniform(-8.0, 5.0, size=(3, K * d))  # variances e^-8..e^5
        theta[:, : K - 1] = rng.uniform(-15, 15, size=(3, K - 1))
        # Keep the data within a few hundred sd of some component so log-densities stay O(1e4).
        theta[:, K - 1: K - 1 + K * d] = rng.normal(size=(3, K * d))
    return theta


@pytest.mark.parametrize("name, model, X, y", CASES, ids=IDS)
@pytest.mark.parametrize("extreme", [False, True])
def test_gradients_match_central_differences(name, model, X, y, extreme):
    rng = np.random.default_rng(7)
    theta = _extreme_theta(name, model, rng) if extreme else model.sample_prior(rng, 4)
    weights = rng.uniform(0.1, 2.0, size=(len(theta), len(X)))

    def weighted_lik(t):
        return np.sum(weights * model.log_likelihood(t, X, y), axis=1)

    for fn, analytic in [(model.log_prior, model.grad_log_prior(theta)),
                         (weighted_lik, model.grad_log_likelihood(theta, X, y, weights))]:
        numeric = finite_difference_gradient(fn, theta, step=1e-6)
        # Relative to each particle's gradient scale: finite differences of a function of
        # size |f| carry round-off ~ eps |f| / h, so entry-wise relative checks on tiny
        # components would test the round-off, not the gradient.
        scale = np.maximum(np.max(np.abs(analytic), axis=1, keepdims=True), 1.0)
        assert np.max(np.abs(analytic - numeric) / scale) < 1e-6


@pytest.mark.parametrize("name, model, X, y", CASES, ids=IDS)
def test_check_model_accepts_builtin_models(name, model, X, y):
    check_model(model, X, y)


def test_check_model_rejects_wrong_gradient():
    class Broken(LinearGaussianModel):
        def grad_log_prior(self, theta):
            return 1.01 * super().grad_log_prior(theta)

    with pytest.raises(ValueError, match="grad_log_prior"):
        check_model(Broken(5), X5, X5.sum(axis=1))


def test_linear_prior_sampler_matches_density():
    model = LinearGaussianModel(3, prior_scale=2.0, intercept_scale=0.5)
    theta = model.sample_prior(np.random.default_rng(0), 20000)
    for j, scale in enumerate([2.0, 2.0, 2.0, 0.5]):
        assert stats.kstest(theta[:, j], stats.norm(scale=scale).cdf).pvalue > 1e-3
    expected = stats.norm(scale=[2.0, 2.0, 2.0, 0.5]).logpdf(theta[:5]).sum(axis=1)
    np.testing.assert_allclose(model.log_prior(theta[:5]), expected, rtol=1e-12)


def test_softmax_prior_density():
    model = SoftmaxRegressionModel(2, 3, prior_scale=0.3, intercept_scale=3.0)
    theta = model.sample_prior(np.random.default_rng(1), 5)
    scales = np.r_[np.full(6, 0.3), np.full(3, 3.0)]
    np.testing.assert_allclose(model.log_prior(theta), stats.norm(scale=scales).logpdf(theta).sum(axis=1), rtol=1e-12)


def test_mixture_prior_sampler_matches_scipy():
    model = GaussianMixtureModel(3, 2, weight_concentration=2.0, variance_shape=3.0, variance_scale=2.0,
                                 mean_prior_loc=1.0, mean_variance_factor=4.0)
    theta = model.sample_prior(np.random.default_rng(2), 20000)
    log_weights, means, log_variances = model.unpack(theta)
    variances = np.exp(log_variances)
    assert stats.kstest(variances[:, 0, 0], stats.invgamma(3.0, scale=2.0).cdf).pvalue > 1e-3
    assert stats.kstest(np.exp(log_weights[:, 0]), stats.beta(2.0, 4.0).cdf).pvalue > 1e-3
    standardised = (means - 1.0) / np.sqrt(4.0 * variances)
    assert stats.kstest(standardised[:, 1, 1], stats.norm.cdf).pvalue > 1e-3


def test_mixture_log_prior_is_change_of_variables_of_scipy_densities():
    model = GaussianMixtureModel(3, 2, weight_concentration=1.5, variance_shape=2.0, variance_scale=0.7,
                                 mean_prior_loc=-0.5, mean_variance_factor=3.0)
    theta = model.sample_prior(np.random.default_rng(3), 6)
    log_weights, means, log_variances = model.unpack(theta)
    weights, variances = np.exp(log_weights), np.exp(log_variances)
    for i in range(len(theta)):
        natural = stats.dirichlet([1.5] * 3).logpdf(weights[i])
        natural += stats.invgamma(2.0, scale=0.7).logpdf(variances[i]).sum()
        natural += stats.norm(-0.5, np.sqrt(3.0 * variances[i])).logpdf(means[i]).sum()
        # Jacobians: ALR -> simplex is prod_k beta_k; log variance -> variance is sigma2.
        jacobian = np.sum(log_weights[i]) + np.sum(log_variances[i])
        assert model.log_prior(theta[i: i + 1])[0] == pytest.approx(natural + jacobian, rel=1e-10)


@pytest.mark.parametrize("coordinate", [0, 2, 7])
def test_mixture_density_integrates_to_one_along_slices(coordinate):
    """Integrating exp(log_prior) over one unconstrained coordinate equals the same
    marginal computed from scipy's densities in natural coordinates, so the
    change-of-variables density (with its log-Jacobian) is normalised."""
    model = GaussianMixtureModel(2, 2)  # params: eta, mu(4), s(4)
    base = model.sample_prior(np.random.default_rng(4), 1)[0]
    grid = np.linspace(-40, 40, 200001)
    theta = np.repeat(base[None], len(grid), axis=0)
    theta[:, coordinate] = grid
    density = np.exp(model.log_prior(theta))
    integral = integrate.trapezoid(density, grid)
    # The slice integral equals the joint density with this coordinate integrated out.
    # For eta (coordinate 0) the Dirichlet(1,1) marginal over beta is uniform -> known closed form;
    # generally compare with the same integral done in natural coordinates by scipy.
    if coordinate == 0:
        # Beta weights integrate out: remaining density is means and variances only.
        _, means, log_var = model.unpack(base[None])
        expected = np.exp(np.sum(stats.invgamma(1.0, scale=1.0).logpdf(np.exp(log_var)) + log_var)
                          + np.sum(stats.norm(0, np.sqrt(4 * np.exp(log_var))).logpdf(means)))
    elif coordinate == 2:  # a mean: integrates its normal factor to 1
        _, means, log_var = model.unpack(base[None])
        expected = np.exp(model.log_prior(base[None])[0]
                          - stats.norm(0, np.sqrt(4 * np.exp(log_var[0, 0, 1]))).logpdf(means[0, 0, 1]))
    else:  # a log variance (component 0, feature 1 is index 1+4+1 = 6; 7 is component 1 feature 0)
        k, j = 1, 0
        _, means, log_var = model.unpack(base[None])
        rest = model.log_prior(base[None])[0] - (
            stats.invgamma(1.0, scale=1.0).logpdf(np.exp(log_var[0, k, j])) + log_var[0, k, j]
            + stats.norm(0, np.sqrt(4 * np.exp(log_var[0, k, j]))).logpdf(means[0, k, j]))
        sigma2 = np.exp(grid)
        marginal = integrate.trapezoid(stats.invgamma(1.0, scale=1.0).pdf(sigma2) * sigma2
                                       * stats.norm(0, np.sqrt(4 * sigma2)).pdf(means[0, k, j]), grid)
        expected = np.exp(rest) * marginal
    assert integral == pytest.approx(expected, rel=1e-6)


def test_mixture_log_likelihood_matches_scipy():
    model = GaussianMixtureModel(3, 2)
    rng = np.random.default_rng(5)
    theta = model.sample_prior(rng, 4)
    X = rng.normal(scale=3.0, size=(11, 2))
    log_weights, means, log_variances = model.unpack(theta)
    expected = np.empty((4, 11))
    for i in range(4):
        comp = np.stack([log_weights[i, k] + stats.multivariate_normal(means[i, k], np.diag(np.exp(log_variances[i, k]))
                                                                       ).logpdf(X) for k in range(3)])
        expected[i] = scipy_logsumexp(comp, axis=0)
    np.testing.assert_allclose(model.log_likelihood(theta, X), expected, rtol=1e-10)


def test_softmax_probabilities_sum_to_one_for_huge_logits():
    model = SoftmaxRegressionModel(2, 3)
    theta = np.array([[1e4, -1e4, -1e4, 1e4, 0.0, 0.0, 0.0, 0.0, 0.0],
                      [-1e4, 1e4, 1e4, 1e4, 3e3, -3e3, 1.0, 2.0, 3.0]])
    X = np.array([[1.0, 0.5], [-1.0, 2.0], [0.0, 0.0]])
    log_proba = model.log_proba(theta, X)
    assert np.all(np.isfinite(log_proba))
    np.testing.assert_allclose(np.exp(log_proba).sum(axis=2), 1.0, rtol=1e-12)
    log_lik = model.log_likelihood(theta, X, np.array([0, 1, 2]))
    assert np.all(np.isfinite(log_lik)) and np.all(log_lik <= 0)


def test_softmax_log_likelihood_matches_direct():
    model = SoftmaxRegressionModel(5, 4)
    rng = np.random.default_rng(6)
    theta = model.sample_prior(rng, 3)
    y = rng.integers(0, 4, size=len(X5))
    W = theta[:, :20].reshape(3, 4, 5)
    b = theta[:, 20:]
    for i in range(3):
        logits = X5 @ W[i].T + b[i]
        expected = logits[np.arange(len(y)), y] - scipy_logsumexp(logits, axis=1)
        np.testing.assert_allclose(model.log_likelihood(theta, X5, y)[i], expected, rtol=1e-12)


def test_models_are_hyperparameters_only_and_picklable():
    import pickle

    for _, model, _, _ in CASES:
        clone = pickle.loads(pickle.dumps(model))
        assert clone == model and hash(clone) == hash(model)
        assert all(not isinstance(v, np.ndarray) for v in vars(model).values())


@pytest.mark.parametrize("name, model, X, y", CASES, ids=IDS)
@pytest.mark.parametrize("extreme", [False, True])
@pytest.mark.parametrize("weights_shape", ["scalar", "rows", "particles x rows"])
def test_log_likelihood_and_grad_equals_the_two_members(name, model, X, y, extreme, weights_shape):
    """The fused call (what exact HMC moves and the reference backends use) is the weighted sum and its gradient.

    Its gradient takes double-precision probabilities (softmax) or responsibilities (mixture) where
    ``grad_log_likelihood`` takes single-precision ones; the linear model's is the same call.
    """
    rng = np.random.default_rng(9)
    theta = _extreme_theta(name, model, rng) if extreme else model.sample_prior(rng, 4)
    weights = {"scalar": 0.7, "rows": rng.uniform(0.1, 2.0, size=len(X)),
               "particles x rows": rng.uniform(0.1, 2.0, size=(len(theta), len(X)))}[weights_shape]
    total, grad = model.log_likelihood_and_grad(theta, X, y, weights)
    expected_total = np.sum(np.broadcast_to(weights, (len(theta), len(X))) * model.log_likelihood(theta, X, y), axis=1)
    expected_grad = model.grad_log_likelihood(theta, X, y, weights)
    np.testing.assert_allclose(total, expected_total, rtol=1e-12)
    scale = np.maximum(np.max(np.abs(expected_grad), axis=1, keepdims=True), 1.0)
    assert np.max(np.abs(grad - expected_grad) / scale) < 1e-6  # single-precision exponentials apart


@pytest.mark.parametrize("name, model, X, y", CASES, ids=IDS)
@pytest.mark.parametrize("extreme", [False, True])
def test_fused_gradients_are_the_members_to_the_bit(name, model, X, y, extreme):
    """SGHMC's gradient comes from ``grad_log_joint`` and its control variates' from ``grad_log_likelihood_at``;
    the mixture's share the parameter transform (and, for fixed points, the density coefficients) and must not
    change a run's bits, so they are compared exactly, the fixed points on two row sets in turn."""
    rng = np.random.default_rng(3)
    theta = _extreme_theta(name, model, rng) if extreme else model.sample_prior(rng, 4)
    weights = rng.uniform(0.1, 2.0, size=len(X))
    expected = model.grad_log_prior(theta) + model.grad_log_likelihood(theta, X, y, weights)
    np.testing.assert_array_equal(model.grad_log_joint(theta, X, y, weights), expected)
    at_theta = model.grad_log_likelihood_at(theta)
    for rows in (slice(None), slice(3, 17)):
        y_rows = None if y is None else y[rows]
        np.testing.assert_array_equal(at_theta(X[rows], y_rows, 0.5),
                                      model.grad_log_likelihood(theta, X[rows], y_rows, 0.5))


def test_a_subclass_overriding_one_gradient_term_is_not_bypassed_by_the_inherited_fused_call():
    """Mixture subclasses with their own prior or likelihood gradient: SGHMC and its control variates must use
    them, not the parent's fused calls."""
    class FlatWeights(GaussianMixtureModel):
        def grad_log_prior(self, theta):
            grad = super().grad_log_prior(theta)
            grad[:, : self.n_components - 1] = 0.0
            return grad

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    model = FlatWeights(3, 2)
    theta = model.sample_prior(rng, 4)
    expected = model.grad_log_prior(theta) + model.grad_log_likelihood(theta, X, None, 1.0)
    np.testing.assert_array_equal(joint_gradient(model)(theta, X, None, 1.0), expected)
    assert joint_gradient(GaussianMixtureModel(3, 2)).__func__ is GaussianMixtureModel.grad_log_joint

    class DoubledLikelihood(GaussianMixtureModel):
        def grad_log_likelihood(self, theta, X, y, weights):
            return 2.0 * super().grad_log_likelihood(theta, X, y, weights)

    doubled = DoubledLikelihood(3, 2)
    np.testing.assert_array_equal(fixed_points_gradient(doubled, theta)(X, None, 1.0),
                                  doubled.grad_log_likelihood(theta, X, None, 1.0))


def test_check_model_rejects_fused_gradients_that_disagree():
    class BrokenJoint(GaussianMixtureModel):
        def grad_log_joint(self, theta, X, y, weights):
            return super().grad_log_joint(theta, X, y, weights) * 1.001

    class BrokenFixedPoints(GaussianMixtureModel):
        def grad_log_likelihood_at(self, theta):
            return super().grad_log_likelihood_at(theta[::-1])

    for broken, name in ((BrokenJoint, "grad_log_joint"), (BrokenFixedPoints, "grad_log_likelihood_at")):
        with pytest.raises(ValueError, match=name):
            check_model(broken(2, 2), RNG.normal(size=(30, 2)))


@pytest.mark.parametrize("offset", [0.0, 1e4, 1e6])
def test_linear_totals_are_exact_where_their_moment_expansion_would_cancel(offset):
    """The linear model's fused total and its summed log-likelihood expand the residual sum of squares in
    moments (the summed log-likelihood where there are more particles than the moments have columns, as here);
    for a target far from zero that expansion cancels (0.8 nats off at an offset of 1e6), so they sum the
    residuals directly there."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3))
    y = X @ [1.0, 2.0, 3.0] + rng.normal(size=1000) + offset
    theta = np.array([[1.0, 2.0, 3.0, offset]]) + 0.01 * rng.normal(size=(8, 4))
    weights = np.full(1000, 0.7)
    model = LinearGaussianModel(3)
    rows = model.log_likelihood(theta, X, y)
    total, _ = model.log_likelihood_and_grad(theta, X, y, weights)
    assert np.max(np.abs(total - rows @ weights)) < 1e-8
    assert np.max(np.abs(model.log_likelihood_sum(theta, X, y) - rows.sum(axis=1))) < 1e-8


@pytest.mark.parametrize("population_only", [False, True])
def test_check_model_rejects_a_summed_log_likelihood_that_disagrees(population_only):
    # SGAIS weighs its particles by log_likelihood_sum; a model may sum another way for many particles only.
    class Broken(LinearGaussianModel):
        def log_likelihood_sum(self, theta, X, y=None):
            total = super().log_likelihood_sum(theta, X, y)
            return total + 1e-3 if len(theta) > self.n_params + 1 or not population_only else total

    X = RNG.normal(size=(30, 3))
    with pytest.raises(ValueError, match="log_likelihood_sum disagrees"):
        check_model(Broken(3), X, X.sum(axis=1))


def test_check_model_rejects_a_fused_call_that_disagrees():
    class Broken(SoftmaxRegressionModel):
        def log_likelihood_and_grad(self, theta, X, y, weights):
            total, grad = super().log_likelihood_and_grad(theta, X, y, weights)
            return total + 1e-3, grad

    with pytest.raises(ValueError, match="log_likelihood_and_grad's total"):
        check_model(Broken(5, 4), X5, RNG.integers(0, 4, size=30))


@pytest.mark.parametrize("name, model, X, y", CASES, ids=IDS)
@pytest.mark.parametrize("shared", [2.5, "vector"])
def test_shared_weights_equal_per_particle_weights(name, model, X, y, shared):
    """Models may take a faster path for weights shared by all particles; it must agree.

    The softmax gradient is single precision (see ``_compiled_softmax.softmax_gradient``): its two paths
    round differently, each within float32's epsilon times the weighted rows' absolute total.
    """
    rng = np.random.default_rng(8)
    theta = model.sample_prior(rng, 5)
    weights = rng.uniform(0.1, 2.0, size=len(X)) if shared == "vector" else shared
    tiled = np.broadcast_to(weights, (5, len(X)))
    atol = 1e-10
    if name.startswith("softmax"):
        atol = 8 * np.finfo(np.float32).eps * np.sum(np.broadcast_to(weights, (len(X),)) * (np.abs(X).sum(axis=1) + 1))
    np.testing.assert_allclose(model.grad_log_likelihood(theta, X, y, weights),
                               model.grad_log_likelihood(theta, X, y, np.array(tiled)), rtol=1e-10, atol=atol)


def test_mixture_relocation_moves_one_mean_and_returns_the_kernel_density_ratio():
    # The Hastings ratio of the relocation move: log q(theta | proposal) - log q(proposal | theta), where
    # q draws the moved mean from (1/n) sum_j N(x_j, diag sigma2_k); computed here with scipy, row by row.
    model = GaussianMixtureModel(n_components=3, n_features=2)
    rng = np.random.default_rng(4)
    theta = model.sample_prior(rng, 6)
    X = rng.normal(size=(7, 2)) * 2.0
    proposal, log_ratio = model.relocation_proposal(np.random.default_rng(5), theta, X)
    _, means, log_var = model.unpack(theta)
    _, new_means, new_log_var = model.unpack(proposal)
    np.testing.assert_array_equal(new_log_var, log_var)
    np.testing.assert_array_equal(proposal[:, :2], theta[:, :2])  # the weights are not moved
    for i in range(len(theta)):
        moved = np.flatnonzero(np.any(new_means[i] != means[i], axis=1))
        assert len(moved) == 1
        k = moved[0]
        cov = np.diag(np.exp(log_var[i, k]))

        def log_q(mean):
            return scipy_logsumexp([stats.multivariate_normal(x, cov).logpdf(mean) for x in X]) - np.log(len(X))

        assert log_ratio[i] == pytest.approx(log_q(means[i, k]) - log_q(new_means[i, k]), rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("mixing, intercept", [
    (np.eye(3), True),  # nearly uncorrelated: Gershgorin bounds lambda_max below 2, no eigenvalues needed
    (np.eye(3), False),
    (np.array([[1.0, 0.95, 0.9], [0.0, 0.3, 0.1], [0.0, 0.0, 0.2]]), True),  # lambda_max near 3: scales shrink
    (np.zeros((3, 3)), True),  # constant-zero columns
])
@pytest.mark.parametrize("n_rows", [400, 20_000])  # one block of the design's product, and three
def test_design_step_scales_match_their_definition(mixing, intercept, n_rows):
    """``1 / (curvature E[a_j^2] max(1, lambda_max / 2))`` with lambda_max of the design's correlation matrix."""
    from evidence_select.models import design_step_scales

    X = np.random.default_rng(0).normal(size=(n_rows, 3)) @ mixing
    design = np.hstack([X, np.ones((n_rows, 1))]) if intercept else X
    second = design.T @ design / len(X)
    diagonal = np.where(np.diag(second) > 0, np.diag(second), 1.0)
    lambda_max = np.linalg.eigvalsh(second / np.sqrt(np.outer(diagonal, diagonal)))[-1]
    expected = 1.0 / (0.25 * diagonal * max(1.0, lambda_max / 2.0))
    np.testing.assert_allclose(design_step_scales(X, intercept, 0.25), expected, rtol=1e-12)


@pytest.mark.parametrize("intercept", [True, False])
def test_softmax_curvature_ratio_matches_the_fisher_diagonal(intercept):
    """``sum_i w_i mean_m p_k (1 - p_k) a_ij^2 / (sum_i w_i a_ij^2 / 4)``, laid out as theta, per parameter."""
    rng = np.random.default_rng(1)
    model = SoftmaxRegressionModel(n_features=3, n_classes=3, fit_intercept=intercept)
    theta, X, weights = 2.0 * rng.normal(size=(5, model.n_params)), rng.normal(size=(40, 3)), rng.uniform(size=40)
    design = np.hstack([X, np.ones((40, 1))]) if intercept else X
    coefficients = model._coefficients(theta)  # (K, M, d [+ 1])
    logits = np.einsum("kmj,ij->imk", coefficients, design)
    proba = np.exp(logits - scipy_logsumexp(logits, axis=2, keepdims=True))  # (n, M, K)
    spread = np.mean(proba * (1 - proba), axis=1)  # (n, K)
    expected = (spread.T @ (weights[:, None] * design**2)) / (0.25 * weights @ design**2)  # (K, d [+ 1])
    layout = expected[:, :3].ravel()
    if intercept:
        layout = np.concatenate([layout, expected[:, 3]])
    np.testing.assert_allclose(model.curvature_ratio(theta, X, weights), layout, rtol=1e-5)


def test_softmax_curvature_ratio_is_one_for_undecided_classes_and_small_for_separated_ones():
    model = SoftmaxRegressionModel(n_features=2, n_classes=2)
    X = np.random.default_rng(2).normal(size=(500, 2))
    np.testing.assert_allclose(model.curvature_ratio(np.zeros((4, model.n_params)), X), 1.0, rtol=1e-6)
    separating = np.zeros((4, model.n_params))
    separating[:, 0], separating[:, 2] = -20.0, 20.0  # w_1 - w_0 = 40 along the first feature
    ratio = model.curvature_ratio(separating, X)
    assert np.all(ratio[[0, 2]] < 0.01) and np.all(ratio > 0)


def test_linear_draws_from_non_finite_statistics_name_the_problem():
    """The posterior factor calls LAPACK directly; non-finite statistics still raise scipy's ValueError rather than
    giving NaN draws or a NaN evidence."""
    model = LinearGaussianModel(2)
    for bad in (np.nan, np.inf):
        statistics = np.eye(4)
        statistics[0, 0] = bad
        with pytest.raises(ValueError, match="infs or NaNs"):
            model.sample_tempered_posterior_from_statistics(np.random.default_rng(0), 3, statistics)
        statistics = np.eye(4)
        statistics[1, -1] = bad  # the cross moments
        with pytest.raises(ValueError, match="infs or NaNs"):
            model.sample_tempered_posterior_from_statistics(np.random.default_rng(0), 3, statistics)
    assert LinearGaussianModel(0, fit_intercept=False).sample_tempered_posterior_from_statistics(
        np.random.default_rng(0), 3, np.zeros((1, 1))).shape == (3, 0)
