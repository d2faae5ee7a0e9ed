"""The mixture's compiled (numba) kernels against plain numpy implementations of the same math.

The references below are written from the model's definition (``models/_mixture.py``'s docstring), not from the
kernels: component log-densities ``log beta_k + sum_i log N(x_i; mu_ki, sigma2_ki)`` with ``beta = softmax(eta, 0)``
and ``sigma2 = exp(s)``, a log-sum-exp over components, responsibilities from the log-ratios to the largest
(floored at -80, as the kernels do), and the gradient's closed forms. Shapes include one row, one particle, one
component, more rows than one of the kernels' blocks, and non-contiguous inputs.
"""

import os

import numpy as np
import pytest
from scipy.special import logsumexp

from evidence_select.models import GaussianMixtureModel

from ._fresh_process import assert_a_second_process_loads_the_cache, run_python

LOG_2PI = np.log(2.0 * np.pi)
PRIOR = dict(weight_concentration=1.3, variance_shape=1.5, variance_scale=0.7, mean_prior_loc=0.2,
             mean_variance_factor=3.0)
# (n_particles, n_rows, n_components, n_features): edge shapes, the paper's K = 5, d = 2 over several blocks of
# rows (a block holds 8192 // (K + 2 d) rows in the double-precision kernels, three here, and 16384 // (2 d + K + 1)
# in the single-precision gradient, two here), and a wider one.
SHAPES = [(1, 1, 1, 1), (1, 9, 3, 2), (4, 1, 2, 3), (3, 40, 1, 2), (6, 2000, 5, 2), (5, 30, 7, 4)]
SHAPE_IDS = ["M{}-n{}-K{}-d{}".format(*shape) for shape in SHAPES]


# -- numpy references -------------------------------------------------------------------------------------------
def reference_params(theta, K, d):
    """``(log_weights (M, K), means (M, K, d), log_variances (M, K, d))``."""
    M = len(theta)
    eta = np.concatenate([theta[:, : K - 1], np.zeros((M, 1))], axis=1)
    log_weights = eta - logsumexp(eta, axis=1, keepdims=True)
    means = theta[:, K - 1: K - 1 + K * d].reshape(M, K, d)
    log_variances = theta[:, K - 1 + K * d:].reshape(M, K, d)
    return log_weights, means, log_variances


def reference_log_densities(theta, X, K):
    """``log beta_k + log N(x_j; mu_k, diag sigma2_k)``, shape ``(M, n, K)``."""
    log_weights, means, log_variances = reference_params(theta, K, X.shape[1])
    diff = X[None, :, None, :] - means[:, None, :, :]
    log_normal = -0.5 * (LOG_2PI + log_variances[:, None] + diff**2 * np.exp(-log_variances[:, None]))
    return log_weights[:, None, :] + log_normal.sum(axis=3)


def reference_log_likelihood(theta, X, K):
    return logsumexp(reference_log_densities(theta, X, K), axis=2)


def reference_moments(theta, X, weights, K):
    """``sum_j w_mj r_mjk``, ``sum_j w_mj r_mjk x_j``, ``sum_j w_mj r_mjk x_j^2``: ``(M, K)``, ``(M, K, d)``, ``(M, K, d)``."""
    M = len(theta)
    log_dens = reference_log_densities(theta, X, K)
    log_ratio = np.maximum(log_dens - log_dens.max(axis=2, keepdims=True), -80.0)
    resp = np.exp(log_ratio)
    resp /= resp.sum(axis=2, keepdims=True)
    resp *= np.broadcast_to(weights, (M, len(X)))[:, :, None]  # (M, n, K)
    return resp.sum(axis=1), np.einsum("mjk,ji->mki", resp, X), np.einsum("mjk,ji->mki", resp, X**2)


def reference_likelihood_gradient(theta, X, weights, K):
    """The gradient of ``sum_j w_mj log p(x_j | theta_m)``, ``weights`` broadcast to ``(M, n)``."""
    M, d = len(theta), X.shape[1]
    log_weights, means, log_variances = reference_params(theta, K, d)
    mass, first, second = reference_moments(theta, X, weights, K)
    precision = np.exp(-log_variances)
    grad_eta = mass[:, :-1] - np.exp(log_weights[:, :-1]) * mass.sum(axis=1, keepdims=True)
    grad_means = precision * (first - means * mass[:, :, None])
    grad_log_var = -0.5 * mass[:, :, None] + 0.5 * precision * (second - 2 * means * first
                                                                 + means**2 * mass[:, :, None])
    return np.hstack([grad_eta, grad_means.reshape(M, -1), grad_log_var.reshape(M, -1)])


def reference_single_likelihood_gradient(theta, X, weights, K):
    """:func:`reference_likelihood_gradient` with the rows' terms rounded to single precision as the compiled
    gradient rounds them: log-densities in the centred form ``const_k - sum_i tau_ki (x_i - mu_ki)^2 / 2`` (the
    distances rounded from double precision) and responsibilities in float32; the centred moments ``sum r (x -
    mu)``, ``sum r (x - mu)^2`` of those rounded values summed in double, then the closed forms. Its distance from
    the double-precision reference is what the rows' rounding costs."""
    M, d = len(theta), X.shape[1]
    log_weights, means, log_variances = reference_params(theta, K, d)
    single = np.float32
    centred = (X[None, :, None, :] - means[:, None, :, :]).astype(single)  # (M, n, K, d), rounded once
    half_precision = (0.5 * np.exp(-log_variances)).astype(single)
    const = (log_weights - 0.5 * (log_variances.sum(axis=2) + d * LOG_2PI)).astype(single)
    log_dens = const[:, None, :] - (half_precision[:, None] * centred * centred).sum(axis=3)
    resp = np.exp(np.maximum(log_dens - log_dens.max(axis=2, keepdims=True), single(-80.0)))
    resp *= (np.broadcast_to(weights, (M, len(X))).astype(single) / resp.sum(axis=2))[:, :, None]
    resp, centred = resp.astype(float), centred.astype(float)  # the rounded values, summed in double
    mass = resp.sum(axis=1)
    first = np.einsum("mjk,mjki->mki", resp, centred)
    second = np.einsum("mjk,mjki->mki", resp, centred * centred)
    precision = np.exp(-log_variances)
    grad_eta = mass[:, :-1] - np.exp(log_weights[:, :-1]) * mass.sum(axis=1, keepdims=True)
    grad_log_var = -0.5 * mass[:, :, None] + 0.5 * precision * second
    return np.hstack([grad_eta, (precision * first).reshape(M, -1), grad_log_var.reshape(M, -1)])


def reference_prior_gradient(theta, K, d, weight_concentration, variance_shape, variance_scale, mean_prior_loc,
                             mean_variance_factor):
    M = len(theta)
    log_weights, means, log_variances = reference_params(theta, K, d)
    alpha, a, b, c = weight_concentration, variance_shape, variance_scale, mean_variance_factor
    precision = np.exp(-log_variances)
    centred = means - mean_prior_loc
    grad_eta = alpha - K * alpha * np.exp(log_weights[:, :-1])
    grad_means = -centred * precision / c
    grad_log_var = -a + b * precision - 0.5 + 0.5 * centred**2 * precision / c
    return np.hstack([grad_eta, grad_means.reshape(M, -1), grad_log_var.reshape(M, -1)])


def reference_log_prior(theta, K, d, weight_concentration, variance_shape, variance_scale, mean_prior_loc,
                        mean_variance_factor):
    """The Dirichlet density of the weights times the log-ratio map's Jacobian ``prod_k beta_k``, the inverse gamma
    density of each variance times its Jacobian ``sigma2``, and the normal density of each mean given its variance."""
    from scipy.special import gammaln

    log_weights, means, log_variances = reference_params(theta, K, d)
    alpha, a, b, c = weight_concentration, variance_shape, variance_scale, mean_variance_factor
    log_p_weights = gammaln(K * alpha) - K * gammaln(alpha) + alpha * log_weights.sum(axis=1)
    log_p_var = a * np.log(b) - gammaln(a) - a * log_variances - b * np.exp(-log_variances)
    log_p_mean = -0.5 * (np.log(c) + LOG_2PI + log_variances
                         + (means - mean_prior_loc) ** 2 * np.exp(-log_variances) / c)
    return log_p_weights + np.sum(log_p_var + log_p_mean, axis=(1, 2))


def _case(shape, seed=0):
    M, n, K, d = shape
    rng = np.random.default_rng(seed)
    model = GaussianMixtureModel(K, d, **PRIOR)
    theta = model.sample_prior(rng, M)
    # Data around the particles' components and far from them, so that responsibilities are both mixed and
    # nearly one-hot (log-ratios below the -80 floor included).
    X = rng.normal(scale=3.0, size=(n, d))
    X[::3] *= 10.0
    return model, theta, X, rng


def _gradient_error(grad, expected):
    """Largest deviation relative to each particle's largest gradient entry (at least 1)."""
    scale = np.maximum(np.max(np.abs(expected), axis=1, keepdims=True), 1.0)
    return np.max(np.abs(grad - expected) / scale)


# EM's moments' exponentials are 7e-9 relative (_exp_coarse): moments to ~1e-8 of the particle's largest term. The
# log-likelihood's are 3e-15 (_exp): its rows are rounding-level apart, and so is the gradient that
# log_likelihood_and_grad computes from the same exponentials.
GRADIENT_TOLERANCE = 1e-7
EXACT_GRADIENT_TOLERANCE = 1e-11
#: SGHMC's gradient has its rows' terms in single precision: it is within this many times the error of the same
#: rounded terms summed in double (reference_single_likelihood_gradient; the kernel's float32 sums within blocks
#: add the rest), or a few float32 ulps where that is smaller, and never more than SINGLE_ERROR_CAP (the cases
#: here reach 2.5e-6: rows ten times the prior's spread, with log-densities of thousands of nats), so that a
#: reference gone wrong cannot loosen the test.
SINGLE_ERROR_FACTOR = 4.0
SINGLE_ERROR_FLOOR = 8 * float(np.finfo(np.float32).eps)
SINGLE_ERROR_CAP = 2e-5


def assert_single_gradient_close(grad, theta, X, weights, K, expected):
    """``grad``, a single-precision gradient of the likelihood (or of the joint, with ``expected`` including the
    prior's), is as close to the double-precision ``expected`` as :data:`SINGLE_ERROR_FACTOR` allows."""
    single_error = _gradient_error(reference_single_likelihood_gradient(theta, X, weights, K),
                                   reference_likelihood_gradient(theta, X, weights, K))
    tolerance = min(max(SINGLE_ERROR_FACTOR * single_error, SINGLE_ERROR_FLOOR), SINGLE_ERROR_CAP)
    assert _gradient_error(grad, expected) < tolerance


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_log_likelihood_matches_the_numpy_reference(shape):
    model, theta, X, _ = _case(shape)
    expected = reference_log_likelihood(theta, X, shape[2])
    np.testing.assert_allclose(model.log_likelihood(theta, X), expected, rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(model.log_likelihood_sum(theta, X), expected.sum(axis=1), rtol=1e-13, atol=1e-11)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("weights_shape", ["scalar", "rows", "particles x rows"])
def test_likelihood_gradient_matches_the_numpy_reference(shape, weights_shape):
    model, theta, X, rng = _case(shape, seed=1)
    M, n = shape[:2]
    weights = {"scalar": 0.7, "rows": rng.uniform(0.1, 2.0, size=n),
               "particles x rows": rng.uniform(0.1, 2.0, size=(M, n))}[weights_shape]
    expected = reference_likelihood_gradient(theta, X, weights, shape[2])
    assert_single_gradient_close(model.grad_log_likelihood(theta, X, None, weights), theta, X, weights, shape[2],
                                 expected)
    total, grad = model.log_likelihood_and_grad(theta, X, None, weights)
    assert _gradient_error(grad, expected) < EXACT_GRADIENT_TOLERANCE
    expected_total = np.sum(np.broadcast_to(weights, (M, n)) * reference_log_likelihood(theta, X, shape[2]), axis=1)
    np.testing.assert_allclose(total, expected_total, rtol=1e-13, atol=1e-11)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("weights_shape", ["rows", "particles x rows"])
def test_moments_match_the_numpy_reference(shape, weights_shape):
    """EM's statistics (``fit_em``'s E-step and M-step sums), each to ~1e-8 of its particle's largest entry (the
    coarse exponentials' 7e-9 relative)."""
    model, theta, X, rng = _case(shape, seed=4)
    M, n = shape[:2]
    weights = rng.uniform(0.1, 2.0, size=n if weights_shape == "rows" else (M, n))
    for moment, expected in zip(model._compiled_moments(theta, X, weights),
                                reference_moments(theta, X, weights, shape[2])):
        assert moment.shape == expected.shape
        assert _gradient_error(moment.reshape(M, -1), expected.reshape(M, -1)) < GRADIENT_TOLERANCE


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_one_pass_log_likelihood_is_the_same_bits_as_the_log_likelihood_kernel(shape):
    """The fused kernel's rows are mixture_log_likelihood's bits (so an HMC move and the annealing weights see one
    target), whatever the row weights."""
    from evidence_select.models import _compiled_mixture as kernels

    model, theta, X, rng = _case(shape, seed=4)
    M, n = shape[:2]
    expected = kernels.mixture_log_likelihood(theta, X, shape[2], np.empty((M, n)))
    for row_weights in (np.full((1, n), 0.3), rng.uniform(0.1, 2.0, size=(M, n))):
        log_lik, grad = np.empty((M, n)), np.empty(theta.shape)
        kernels.mixture_log_likelihood_and_gradient(theta, X, row_weights, shape[2], log_lik, grad)
        np.testing.assert_array_equal(log_lik, expected)
    np.testing.assert_array_equal(model.log_likelihood_and_grad(theta, X, None, 0.3)[0],
                                  model.log_likelihood_sum(theta, X) * 0.3)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_prior_and_joint_gradients_match_the_numpy_reference(shape):
    model, theta, X, rng = _case(shape, seed=2)
    K, d = shape[2:]
    expected_prior = reference_prior_gradient(theta, K, d, **PRIOR)
    np.testing.assert_allclose(model.grad_log_prior(theta), expected_prior, rtol=1e-13, atol=1e-13)
    weights = rng.uniform(0.1, 2.0, size=len(X))
    expected = expected_prior + reference_likelihood_gradient(theta, X, weights, K)
    assert_single_gradient_close(model.grad_log_joint(theta, X, None, weights), theta, X, weights, K, expected)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_log_prior_matches_the_numpy_reference(shape):
    from evidence_select.models import _compiled_mixture as kernels

    model, theta, _, rng = _case(shape, seed=4)
    theta = np.vstack([theta, rng.normal(scale=5.0, size=theta.shape)])  # and far into the prior's tails
    K, d = shape[2:]
    expected = reference_log_prior(theta, K, d, **PRIOR)
    np.testing.assert_allclose(model.log_prior(theta), expected, rtol=1e-13, atol=1e-12)
    # Straight into the kernel, from a Fortran-ordered strided view.
    view = np.asfortranarray(np.repeat(theta, 2, axis=0))[::2]
    assert not view.flags.c_contiguous
    out = kernels.mixture_log_prior(view, K, d, model._prior_constants(), model._prior_normalisers(),
                                    np.empty(len(view)))
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-12)


def single_sum_tolerance(theta, X, K):
    """A bound on :func:`mixture_log_likelihood_sum_single`'s error per particle: ``8 eps32`` times the rows'
    ``|log p(x_j) - c_max| + 1 + log K``, where ``c_max`` is the particle's largest component constant
    ``log beta_k - (sum_i log sigma2_ki + d log 2 pi) / 2``. A row's top log-density minus ``c_max`` is a sum
    of two non-positive terms (its constant's distance to ``c_max``, minus the quadratic form), each rounded a
    few times to single precision; its total over the components adds at most ``log K``. Every rounding is
    counted with the same sign, so the bound holds however many rows there are."""
    log_weights, _, log_variances = reference_params(theta, K, X.shape[1])
    constants = log_weights - 0.5 * (log_variances.sum(axis=2) + X.shape[1] * LOG_2PI)
    shift = constants.max(axis=1, keepdims=True)
    scale = np.abs(reference_log_likelihood(theta, X, K) - shift) + 1.0 + np.log(K)
    return 8 * float(np.finfo(np.float32).eps) * scale.sum(axis=1)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_single_precision_log_likelihood_sum_matches_the_numpy_reference(shape):
    """Each particle's total within :func:`single_sum_tolerance` of the double-precision numpy sum (rows at ten
    times the prior's spread included), through the kernel and the model."""
    from evidence_select.models import _compiled_mixture as kernels

    model, theta, X, _ = _case(shape, seed=6)
    K = shape[2]
    expected = reference_log_likelihood(theta, X, K).sum(axis=1)
    tolerance = single_sum_tolerance(theta, X, K)
    total = kernels.mixture_log_likelihood_sum_single(theta, X, K, np.empty(len(theta)))
    assert np.all(np.abs(total - expected) <= tolerance)
    np.testing.assert_array_equal(model.approximate_log_likelihood_sum(theta, X), total)


@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_single_precision_sum_near_a_mode_is_far_within_the_checks_error(scale):
    """What the importance draws need: at draws around a posterior mode (every component's rows close to it),
    20000 rows of data centred far from the origin, standardised or not, each total is within 0.005 nats of the
    double-precision one (a tenth of the 0.05 nats to which the draws value the evidence), and the errors do not
    share a sign. Unstandardised, the components' constants are near -13 (a float32 ulp of 1e-6, which rounded
    as they are would put the totals about 0.01 off): the kernel rounds their differences instead."""
    model = GaussianMixtureModel(3, 2, **PRIOR)
    rng = np.random.default_rng(7)
    centres = scale * np.array([[40.0, -25.0], [45.0, -20.0], [38.0, -18.0]])
    X = centres[rng.integers(0, 3, size=20000)] + scale * rng.normal(scale=[1.0, 0.5], size=(20000, 2))
    mode = np.concatenate([[0.1, -0.2], centres.ravel(), np.log(np.tile(scale**2 * np.array([1.0, 0.25]), 3))])
    draws = mode + 0.01 * rng.standard_normal((40, len(mode)))
    error = model.approximate_log_likelihood_sum(draws, X) - model.log_likelihood_sum(draws, X)
    assert np.max(np.abs(error)) < 0.005
    assert 0 < np.count_nonzero(error > 0) < len(error)


def test_log_prior_keeps_nan_and_zero_density():
    model, theta, _, _ = _case((4, 1, 3, 2))
    theta[1, 4] = np.nan
    theta[2, -1] = -800.0  # a variance of exp(-800): the inverse gamma's density underflows to zero
    log_prior = model.log_prior(theta)
    assert np.isnan(log_prior[1]) and log_prior[2] == -np.inf
    assert np.all(np.isfinite(log_prior[[0, 3]]))


def test_single_precision_gradient_keeps_narrow_components_far_from_the_origin():
    """Rows around narrow components at +-300 (a posterior's, on unstandardised data): the gradient's distances are
    taken in double precision before rounding, so it is as close as near the origin. Rounding the rows to single
    precision first moves each distance by up to 1.5e-5 (half a float32 ulp at 300), a sixth of a component's
    standard deviation, and the gradient by about a quarter of its largest entry."""
    model = GaussianMixtureModel(2, 1, **PRIOR)
    rng = np.random.default_rng(5)
    X = np.concatenate([rng.normal(300.0, 1e-4, size=(60, 1)), rng.normal(-300.0, 1e-4, size=(40, 1))])
    theta = np.array([[np.log(1.5), 300.0 + 2e-5 * s, -300.0 - 3e-5 * s, np.log(1.2e-8), np.log(0.8e-8)]
                      for s in (-1.0, 0.0, 1.0)])
    weights = rng.uniform(0.1, 2.0, size=len(X))
    expected = reference_likelihood_gradient(theta, X, weights, 2)
    assert_single_gradient_close(model.grad_log_likelihood(theta, X, None, weights), theta, X, weights, 2, expected)
    assert _gradient_error(model.grad_log_likelihood(theta, X, None, weights), expected) < 1e-5


def test_single_precision_gradient_stays_finite_past_float32s_range():
    """A component whose precision exceeds float32's range (log variance -90 and -95), with rows on its mean and
    rows whose every log-density is below float32's range: the gradient is finite, as the double kernels' is."""
    model = GaussianMixtureModel(2, 1, **PRIOR)
    theta = np.array([[0.0, 1.0, -1.0, -90.0, 0.0], [0.0, 1.0, -1.0, -95.0, -100.0]])
    X = np.array([[1.0], [1.0], [5.0], [-1.0], [3e3]])
    assert np.all(np.isfinite(model.log_likelihood_and_grad(theta, X, None, 1.0)[1]))
    assert np.all(np.isfinite(model.grad_log_likelihood(theta, X, None, 1.0)))
    assert np.all(np.isfinite(model.grad_log_joint(theta, X, None, 0.5)))


def test_kernels_take_non_contiguous_inputs():
    """Strided views (every other particle, a column slice, a transposed copy) and Fortran order, straight into
    the kernels as well as through the model."""
    from evidence_select.models import _compiled_mixture as kernels

    model, theta, X, rng = _case((8, 300, 4, 3), seed=3)
    theta_view = np.asfortranarray(theta)[::2]
    X_wide = np.hstack([X, rng.normal(size=(300, 3))])
    X_view = X_wide[::-1, :3][::-1]  # negative strides twice: X again, not contiguous
    weights = rng.uniform(0.1, 2.0, size=(4, 300)).T.copy().T  # Fortran-ordered (M, n)
    assert not (theta_view.flags.c_contiguous or X_view.flags.c_contiguous or weights.flags.c_contiguous)
    expected_grad = reference_likelihood_gradient(theta[::2], X, weights, 4)
    expected_log_lik = reference_log_likelihood(theta[::2], X, 4)
    assert_single_gradient_close(model.grad_log_likelihood(theta_view, X_view, None, weights), theta[::2], X, weights,
                                 4, expected_grad)
    np.testing.assert_allclose(model.log_likelihood(theta_view, X_view), expected_log_lik, rtol=1e-13, atol=1e-12)
    out = np.empty((4, model.n_params))
    kernels.mixture_gradient(theta_view, X_view, weights, 4, model._prior_constants(), False, out)
    assert_single_gradient_close(out, theta[::2], X, weights, 4, expected_grad)
    for moment, expected in zip(kernels.mixture_moments(theta_view, X_view, weights, 4),
                                reference_moments(theta[::2], X, weights, 4)):
        assert _gradient_error(moment.reshape(4, -1), expected.reshape(4, -1)) < GRADIENT_TOLERANCE
    per_row = np.empty((4, 300))
    kernels.mixture_log_likelihood(theta_view, X_view, 4, per_row)
    np.testing.assert_allclose(per_row, expected_log_lik, rtol=1e-13, atol=1e-12)
    total = kernels.mixture_log_likelihood_sum_single(theta_view, X_view, 4, np.empty(4))
    assert np.all(np.abs(total - expected_log_lik.sum(axis=1)) <= single_sum_tolerance(theta[::2], X, 4))


def test_no_rows_give_zero_likelihood_terms():
    model, theta, _, _ = _case((3, 5, 3, 2))
    X = np.empty((0, 2))
    np.testing.assert_array_equal(model.log_likelihood_sum(theta, X), np.zeros(3))
    np.testing.assert_array_equal(model.approximate_log_likelihood_sum(theta, X), np.zeros(3))
    assert model.log_likelihood(theta, X).shape == (3, 0)
    np.testing.assert_array_equal(model.grad_log_likelihood(theta, X, None, 1.0), np.zeros(theta.shape))


def test_compiled_exponentials_match_numpy_and_keep_nan():
    from evidence_select.models._compiled_exp import exp_accurate as _exp, exp_coarse as _exp_coarse

    points = np.concatenate([np.linspace(-80.0, 0.0, 4001), -np.logspace(-12, np.log10(80.0), 500), [0.0, -80.0]])
    expected = np.exp(points)
    accurate = np.array([_exp(x) for x in points])
    coarse = np.array([_exp_coarse(x) for x in points])
    assert np.max(np.abs(accurate / expected - 1.0)) < 1e-14
    assert np.max(np.abs(coarse / expected - 1.0)) < 1e-8
    assert np.isnan(_exp(np.nan)) and np.isnan(_exp_coarse(np.nan))


def test_non_finite_parameters_reach_the_results():
    """NaN is never turned into a number (the engine's divergence checks rely on it)."""
    model, theta, X, _ = _case((3, 20, 3, 2))
    theta[1, 3] = np.nan
    for result in (model.log_likelihood(theta, X), model.log_likelihood_sum(theta, X),
                   model.approximate_log_likelihood_sum(theta, X),
                   model.grad_log_joint(theta, X, None, 1.0), *model.log_likelihood_and_grad(theta, X, None, 1.0)):
        assert np.any(np.isnan(result[1]))
        assert np.all(np.isfinite(result[[0, 2]]))


def test_kernels_are_the_same_bits_wherever_their_arrays_lie():
    # The compiler vectorises a loop that reads one array and writes another only where a run-time check finds the
    # two apart in memory, and its vector exponential differs from the scalar one in the last bits: were a kernel's
    # result to depend on where the heap placed its input and scratch arrays, the same call would give other bits
    # in another process (and a mode search from the same start another mode). A quasi-Newton search moves
    # through many placements; at each point, every kernel (the log-likelihood and its gradient, the rows'
    # log-likelihoods, the single-precision gradient and sum) on the search's own array and on a copy must agree.
    from scipy.optimize import minimize
    from sklearn.datasets import load_iris

    X = load_iris().data[:100]
    model = GaussianMixtureModel(3, X.shape[1])
    start = model.mode_starts(np.random.default_rng(0), X, 2)[1]
    differing = []

    def negative_log_joint(theta):
        log_lik, grad = model.log_likelihood_and_grad(theta[None], X, None, 1.0)
        copy_log_lik, copy_grad = model.log_likelihood_and_grad(theta[None].copy(), X, None, 1.0)
        others = (model.grad_log_joint(point, X, None, 1.0) for point in (theta[None], theta[None].copy()))
        rows = (model.log_likelihood(point, X) for point in (theta[None], theta[None].copy()))
        sums = (model.approximate_log_likelihood_sum(point, X) for point in (theta[None], theta[None].copy()))
        same = all(np.array_equal(*pair) for pair in ((grad, copy_grad), tuple(others), tuple(rows), tuple(sums)))
        if log_lik[0] != copy_log_lik[0] or not same:
            differing.append(theta.copy())
        return -(model.log_prior(theta[None])[0] + log_lik[0]), -(model.grad_log_prior(theta[None])[0] + grad[0])

    for _ in range(3):
        minimize(negative_log_joint, start, jac=True, method="BFGS", options={"gtol": 1e-8})
    assert not differing


def test_importing_the_package_imports_no_numba_and_compiles_nothing():
    """numba and the kernels' module load on a kernel's first call, not on import (nor on building estimators)."""
    out = run_python("""
        import sys
        import evidence_select
        from evidence_select import BayesianMixture, EvidenceModelSelector
        from evidence_select.models import GaussianMixtureModel
        BayesianMixture(3).get_params(); GaussianMixtureModel(3, 2).sample_prior(__import__('numpy').random.default_rng(0), 2)
        print(sorted(name for name in sys.modules if name.split('.')[0] in ('numba', 'llvmlite')
                     or '._compiled_' in name))
    """, dict(os.environ))
    assert out.strip() == "[]"


@pytest.mark.slow
@pytest.mark.first_processes("mixture")
def test_a_second_process_loads_the_kernels_from_the_cache(first_processes):
    """With an empty cache directory the first process compiles (cache misses) and writes index and code files;
    a second process loads every kernel from them (hits, no miss) and gets the same bits.

    The first process (``_fresh_process.MIXTURE_PROCESS``, shared with the softmax's cache-order test) also
    compiles the softmax log-likelihood; the counts are of the mixture's kernels."""
    assert_a_second_process_loads_the_cache(*first_processes, n_kernels=5)
