"""make_model: priors and transforms, gradients from every source, bad input, and evidences against the
hand-written models of the calibration suite."""

import pickle
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from evidence_select import log_evidence
from evidence_select.models import CustomModel, FiniteDifferenceWarning, check_model, make_model
from evidence_select.models import _make_model
from evidence_select.models._priors import prior_block
from evidence_select.models._protocol import finite_difference_gradient
from evidence_select.testing import calibration_cases

from ._made_calibration import MADE_FAMILIES, made_model

# -- priors: the density of u is the prior's at x = T(u) times |dx/du| --------------------------------------------
UNIVARIATE = [stats.norm(0.5, 2.0), stats.halfnorm(0, 2.0), stats.cauchy(1.0, 0.5), stats.halfcauchy(0, 1.5),
              stats.t(3.0, 0.0, 2.0), stats.laplace(0.0, 1.0), stats.logistic(1.0, 2.0), stats.expon(0, 2.0),
              stats.gamma(2.5, scale=0.5), stats.invgamma(3.0, scale=2.0), stats.lognorm(0.7, scale=2.0),
              stats.beta(2.0, 5.0), stats.beta(0.5, 0.5, loc=-1.0, scale=3.0), stats.uniform(-2.0, 5.0),
              stats.truncnorm(-1.0, 2.0, loc=1.0, scale=0.5), stats.weibull_min(1.7, scale=2.0),
              stats.chi2(4.0),  # no closed form here: scipy's logpdf and central differences
              stats.norm([0.0, 1.0, 2.0], [1.0, 2.0, 3.0])]


def _ids(dists):
    return [f"{d.dist.name}{np.shape(d.mean())}" for d in dists]


@pytest.mark.parametrize("dist", UNIVARIATE, ids=_ids(UNIVARIATE))
def test_univariate_prior_density_and_gradient(dist):
    shape = np.shape(dist.mean()) or (2,)
    block = prior_block("p", dist, shape)
    u = block.sample(np.random.default_rng(0), 6)
    x = block.constrain(u).reshape(6, -1)
    # The density of u: scipy's log density at x plus the log-Jacobian, by numerical differentiation of T
    # (a five-point stencil: accurate to ~1e-11 where the map is nearly flat, near a bounded support's ends).
    def at(shift):
        return block.constrain(u + shift).reshape(6, -1)

    h = 1e-3
    jacobian = (at(-2 * h) - 8 * at(-h) + 8 * at(h) - at(2 * h)) / (12 * h)
    expected = np.sum(dist.logpdf(x.reshape(6, *shape)).reshape(6, -1) + np.log(np.abs(jacobian)), axis=1)
    np.testing.assert_allclose(block.log_prior(u), expected, rtol=1e-7, atol=1e-7)
    numeric = finite_difference_gradient(block.log_prior, u)
    np.testing.assert_allclose(block.grad_log_prior(u), numeric, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(block.unconstrain(block.constrain(u).copy()), u, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dist", UNIVARIATE[:-1], ids=_ids(UNIVARIATE[:-1]))
def test_univariate_prior_draws_follow_the_distribution(dist):
    block = prior_block("p", dist, (1,))
    x = block.constrain(block.sample(np.random.default_rng(1), 2000)).ravel()
    assert stats.kstest(x, dist.cdf).pvalue > 1e-3
    lower, upper = dist.support()
    assert np.all((x >= lower) & (x <= upper))


def test_dirichlet_prior_is_the_simplex_density_with_its_jacobian():
    alpha = np.array([2.0, 0.7, 3.0])
    block = prior_block("w", stats.dirichlet(alpha), (2, 3))  # two independent simplices
    assert block.size == 4
    u = block.sample(np.random.default_rng(0), 5)
    x = block.constrain(u)
    np.testing.assert_allclose(x.sum(axis=2), 1.0)
    # log p(u) = log Dir(x) + log |det dx_{1:K-1}/du| with the Jacobian determinant prod_k x_k.
    expected = np.array([sum(stats.dirichlet(alpha).logpdf(x[i, c]) + np.log(x[i, c]).sum() for c in range(2))
                         for i in range(5)])
    np.testing.assert_allclose(block.log_prior(u), expected, rtol=1e-10)
    np.testing.assert_allclose(block.grad_log_prior(u), finite_difference_gradient(block.log_prior, u), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(block.unconstrain(x), u, atol=1e-10)
    means = block.constrain(block.sample(np.random.default_rng(1), 4000)).mean(axis=0)
    np.testing.assert_allclose(means, np.tile(alpha / alpha.sum(), (2, 1)), atol=0.02)


def test_dirichlet_pullback_is_the_chain_rule():
    block = prior_block("w", stats.dirichlet([1.0, 2.0, 3.0]), (3,))
    u = block.sample(np.random.default_rng(0), 4)
    g = np.array([0.3, -1.0, 2.0])

    def f(t):  # a linear function of x: its gradient in x is g
        return block.constrain(t) @ g

    np.testing.assert_allclose(block.pullback(u, np.tile(g, (4, 1))), finite_difference_gradient(f, u), rtol=1e-6,
                               atol=1e-8)


def test_multivariate_normal_prior():
    mean, cov = np.array([1.0, -1.0]), np.array([[2.0, 0.6], [0.6, 1.0]])
    block = prior_block("z", stats.multivariate_normal(mean, cov), (2,))
    u = block.sample(np.random.default_rng(0), 5)
    np.testing.assert_allclose(block.log_prior(u), stats.multivariate_normal(mean, cov).logpdf(u), rtol=1e-10)
    np.testing.assert_allclose(block.grad_log_prior(u), finite_difference_gradient(block.log_prior, u), rtol=1e-6)


# -- the model: layout, shapes, pickling ------------------------------------------------------------------------
def _gaussian_log_lik(params, X, y):
    return stats.norm.logpdf(y, X @ params["w"] + params["b"], params["sigma"])


def _gaussian_grad(params, X, y, weights):
    sigma = params["sigma"]
    z = (y - X @ params["w"] - params["b"]) / sigma
    return {"w": (weights * z / sigma) @ X, "b": np.sum(weights * z / sigma),
            "sigma": np.sum(weights * (z**2 - 1.0) / sigma)}


def _gaussian(gradient=_gaussian_grad):
    return make_model(_gaussian_log_lik, {"w": (stats.norm(0, 1), "n_features"), "b": stats.norm(0, 1),
                                          "sigma": stats.halfnorm(0, 2)}, gradient=gradient)


def _regression_rows(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, X @ [1.0, -0.5] + 0.2 + 0.5 * rng.normal(size=n)


def test_a_template_resolves_to_the_data_and_checks():
    template = _gaussian()
    with pytest.raises(ValueError, match="n_features is known only from the data"):
        template.n_params
    model = template.resolve(n_features=2)
    assert model.n_params == 4 and model.parameter_shapes == {"w": (2,), "b": (), "sigma": ()}
    assert template.resolve(n_features=2) is not template  # a copy: fitting never changes the estimator's model
    X, y = _regression_rows()
    check_model(model, X, y)
    theta = model.sample_prior(np.random.default_rng(0), 3)
    np.testing.assert_allclose(model.pack(model.unpack(theta)), theta)
    assert np.all(model.unpack(theta)["sigma"] > 0)


def test_per_particle_and_vectorized_functions_agree():
    X, y = _regression_rows()

    def vectorized_log_lik(params, X, y):
        mean = params["w"] @ X.T + params["b"][:, None]
        return stats.norm.logpdf(y, mean, params["sigma"][:, None])

    per_particle = _gaussian().resolve(n_features=2)
    vectorized = make_model(vectorized_log_lik, per_particle.priors, gradient="finite", vectorized=True).resolve(
        n_features=2)
    theta = per_particle.sample_prior(np.random.default_rng(0), 4)
    np.testing.assert_allclose(vectorized.log_likelihood(theta, X, y), per_particle.log_likelihood(theta, X, y))
    np.testing.assert_allclose(vectorized.grad_log_likelihood(theta, X, y, 0.7),
                               per_particle.grad_log_likelihood(theta, X, y, 0.7), rtol=1e-6)


def test_model_pickles_and_compares_by_value():
    model = _gaussian().resolve(n_features=2)
    copy = pickle.loads(pickle.dumps(model))
    assert copy == model and hash(copy) == hash(model)
    assert copy != _gaussian().resolve(n_features=3)
    X, y = _regression_rows()
    theta = model.sample_prior(np.random.default_rng(0), 3)
    np.testing.assert_array_equal(copy.log_likelihood(theta, X, y), model.log_likelihood(theta, X, y))
    assert "halfnorm" in repr(model)


# -- bad input: clear errors, at make_model or where the data first meet the function ----------------------------
@pytest.mark.parametrize("prior, error, message", [
    (1.0, TypeError, "prior 'a' must be a frozen continuous scipy.stats"),
    ("normal", TypeError, "must be a frozen continuous"),
    (stats.norm, TypeError, "is the distribution family scipy.stats.norm, not a distribution"),
    (stats.poisson(3.0), TypeError, "discrete"),
    (stats.wishart(3, np.eye(2)), TypeError, "must be a frozen continuous"),
    ((stats.norm(0, 1), 0), ValueError, "positive int"),
    ((stats.norm(0, 1), "n_rows"), ValueError, "one of"),
    ((stats.norm(0, 1), 2, 3), TypeError, r"\(distribution, shape\)"),
    ((stats.norm([0.0, 1.0], 1.0), 3), ValueError, r"parameters have shape \(2,\)"),
    ((stats.dirichlet([1.0, 1.0]), 3), ValueError, "Dirichlet over 2 components"),
])
def test_bad_priors_are_refused_at_make_model(prior, error, message):
    with pytest.raises(error, match=message):
        make_model(_gaussian_log_lik, {"a": prior}, gradient="finite")


def test_other_bad_arguments():
    priors = {"mu": stats.norm(0, 1)}
    with pytest.raises(TypeError, match="log_likelihood must be a function"):
        make_model("loglike", priors)
    with pytest.raises(TypeError, match="non-empty dict"):
        make_model(_gaussian_log_lik, [stats.norm(0, 1)])
    with pytest.raises(ValueError, match="gradient must be a function or one of"):
        make_model(_gaussian_log_lik, priors, gradient="numeric")
    with pytest.raises(TypeError, match="mean must be a function"):
        make_model(_gaussian_log_lik, priors, mean=3.0, gradient="finite")
    with pytest.raises(TypeError, match="identifiers"):
        make_model(_gaussian_log_lik, {"a b": stats.norm(0, 1)}, gradient="finite")


def test_wrong_output_shapes_are_named():
    X, y = _regression_rows(10)
    total = make_model(lambda params, X, y: np.sum(y - params["mu"]), {"mu": stats.norm(0, 1)}, gradient="finite")
    theta = total.sample_prior(np.random.default_rng(0), 2)
    with pytest.raises(ValueError, match=r"returned shape \(\) for 10 rows; it must return one value per row"):
        total.log_likelihood(theta, X, y)
    bad_grad = make_model(lambda params, X, y: -0.5 * (y - params["mu"]) ** 2, {"mu": stats.norm(0, 1)},
                          gradient=lambda params, X, y, weights: {"m": 0.0})
    with pytest.raises(ValueError, match=r"must return a dict with one entry per parameter, \['mu'\]"):
        bad_grad.grad_log_likelihood(theta, X, y, 1.0)


def test_finite_differences_warn_when_jax_is_missing(monkeypatch):
    monkeypatch.setattr(_make_model, "jax_installed", lambda: False)
    with pytest.warns(FiniteDifferenceWarning, match=r"JAX is not installed: each gradient costs 2 x 1 = 2"):
        model = make_model(lambda params, X, y: -0.5 * (y - params["mu"]) ** 2, {"mu": stats.norm(0, 1)})
    with pytest.raises(ImportError, match="gradient='jax' needs JAX"):
        make_model(lambda params, X, y: y, {"mu": stats.norm(0, 1)}, gradient="jax")
    X, y = _regression_rows(10)
    check_model(model, X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_model(lambda params, X, y: y, {"mu": stats.norm(0, 1)}, gradient="finite")  # asked for: no warning


# -- JAX ---------------------------------------------------------------------------------------------------------
def _jax_log_lik(params, X, y):
    import jax.numpy as jnp

    sigma = params["sigma"]
    return -0.5 * ((y - X @ params["w"] - params["b"]) / sigma) ** 2 - jnp.log(sigma) - 0.5 * jnp.log(2 * jnp.pi)


def test_jax_gradients_equal_the_analytic_ones():
    pytest.importorskip("jax")
    X, y = _regression_rows(37)  # 37 rows: padded to 40 inside, cut from every result
    analytic = _gaussian().resolve(n_features=2)
    by_jax = make_model(_jax_log_lik, analytic.priors, gradient="jax").resolve(n_features=2)
    theta = analytic.sample_prior(np.random.default_rng(0), 5)
    weights = np.random.default_rng(1).uniform(0.5, 1.5, size=(5, 37))
    np.testing.assert_allclose(by_jax.log_likelihood(theta, X, y), analytic.log_likelihood(theta, X, y), rtol=1e-12)
    np.testing.assert_allclose(by_jax.grad_log_likelihood(theta, X, y, weights),
                               analytic.grad_log_likelihood(theta, X, y, weights), rtol=1e-10)
    total, grad = by_jax.log_likelihood_and_grad(theta, X, y, weights)
    np.testing.assert_allclose(total, np.sum(weights * analytic.log_likelihood(theta, X, y), axis=1), rtol=1e-12)
    check_model(by_jax, X, y)


def test_auto_uses_jax_and_falls_back_with_a_named_warning():
    pytest.importorskip("jax")
    X, y = _regression_rows(12)
    auto = make_model(_jax_log_lik, _gaussian().priors).resolve(n_features=2)
    theta = auto.sample_prior(np.random.default_rng(0), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto.grad_log_likelihood(theta, X, y, 1.0)
    assert auto._method == "jax"
    numpy_only = _gaussian(gradient="auto").resolve(n_features=2)  # scipy.stats.norm.logpdf does not run under JAX
    with pytest.warns(FiniteDifferenceWarning, match=r"does not run under JAX \(TracerArrayConversionError"):
        grad = numpy_only.grad_log_likelihood(theta, X, y, 1.0)
    np.testing.assert_allclose(grad, auto.grad_log_likelihood(theta, X, y, 1.0), rtol=1e-5)
    restored = pickle.loads(pickle.dumps(auto))  # decided again where it is unpickled
    assert restored._method is None and np.allclose(restored.log_likelihood(theta, X, y),
                                                    auto.log_likelihood(theta, X, y))


# -- the calibration suite: the same numbers as the hand-written models ---------------------------------------------
CASES = calibration_cases(8, families=MADE_FAMILIES, dims=(2, 8))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_made_twins_equal_the_hand_written_models(case):
    made = made_model(case)
    theta = case.model.sample_prior(np.random.default_rng(0), 4)
    weights = np.random.default_rng(1).uniform(0.5, 1.5, size=(4, len(case.X)))
    pairs = [(made.log_prior(theta), case.model.log_prior(theta)),
             (made.grad_log_prior(theta), case.model.grad_log_prior(theta)),
             (made.log_likelihood(theta, case.X, case.y), case.model.log_likelihood(theta, case.X, case.y)),
             (made.grad_log_likelihood(theta, case.X, case.y, weights),
              case.model.grad_log_likelihood(theta, case.X, case.y, weights))]
    for got, expected in pairs:
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    check_model(made, case.X, case.y)


def _sgais(model, case, seed):
    result = log_evidence(model, case.X, case.y, method="sgais", random_state=seed)
    return result.log_evidence, result.log_evidence_std


@pytest.mark.parametrize("family", ["poisson_gamma", "beta_binomial"])
def test_made_evidence_matches_exact_and_hand_written(family):
    # The transforms matter here (log rates, logit probabilities): without the log-Jacobian the prior would be
    # another one and the evidence would move by nats. Tolerance: 3 combined standard errors plus 0.3 nats (the
    # engine's small-population bias on 20 and 5 rows; its own calibration tests use the same floor).
    case = calibration_cases(2, families=[family], dims=(2,))[0]
    made = made_model(case)
    for seed in range(3):
        hand_z, hand_std = _sgais(case.model, case, seed)
        made_z, made_std = _sgais(made, case, seed)
        assert abs(made_z - case.exact) < 3 * made_std + 0.3, (seed, made_z, made_std, case.exact)
        assert abs(made_z - hand_z) < 3 * np.hypot(made_std, hand_std) + 0.3, (seed, made_z, hand_z)


@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(c, marks=[pytest.mark.extended] if c.family == "tiny_mixture" else [])
                                  for c in CASES if c.dim == 8], ids=lambda c: c.name)
def test_made_evidence_over_seeds_at_eight_parameters(case):
    made = made_model(case)
    z_made, z_hand = [], []
    for seed in range(4):
        made_z, made_std = _sgais(made, case, seed)
        hand_z, hand_std = _sgais(case.model, case, seed)
        z_made.append((made_z - case.exact) / made_std)
        z_hand.append((hand_z - case.exact) / hand_std)
        assert abs(made_z - case.exact) < max(3 * made_std, 0.5), (seed, made_z, made_std, case.exact)
    # Over the seeds the twin is as close to the truth as the hand-written model (their z-scores agree on average).
    assert abs(np.mean(z_made) - np.mean(z_hand)) < 2.0


def test_no_data_model_by_make_model():
    """A likelihood of the parameters alone (the no-data rule: one row with no features)."""
    def banana(params, X):  # all particles at once: (n_particles, 1) for the one no-data row
        a, b = params["a"][:, None], params["b"][:, None]
        return -0.5 * a**2 - 0.5 * ((b - a**2 + 1.0) / 0.5) ** 2 - np.log(2 * np.pi * 0.5)

    def grad(params, X, weights):
        a, b = params["a"], params["b"]
        pull = (b - a**2 + 1.0) / 0.25
        return {"a": weights[:, 0] * (2 * a * pull - a), "b": -weights[:, 0] * pull}

    model = make_model(banana, {"a": stats.norm(0, 3), "b": stats.norm(0, 3)}, density=True, gradient=grad,
                       vectorized=True)
    check_model(model, np.empty((1, 0)))
    result = log_evidence(model, method="ns", n_live=150, random_state=0)
    grid = np.linspace(-12, 12, 1201)
    a, b = np.meshgrid(grid, grid, indexing="ij")
    log_joint = (stats.norm.logpdf(a) + stats.norm.logpdf(b, a**2 - 1.0, 0.5) + stats.norm.logpdf(a, 0, 3)
                 + stats.norm.logpdf(b, 0, 3))
    exact = logsumexp(log_joint) + 2 * np.log(grid[1] - grid[0])
    assert abs(result.log_evidence - exact) < 4 * result.log_evidence_std + 0.1
    assert isinstance(model, CustomModel)


def test_parameter_blocks_are_contiguous_copies():
    """The transforms and priors see each parameter block as a contiguous array, never a column view of ``theta``:
    numpy 1.x's SIMD ``exp`` of a column view can differ in the last bit from that of the same values stored
    contiguously, varying with memory outside the view, which made a fit's bits differ between processes."""
    model = make_model(lambda params, X, y: np.zeros((len(params["b"]), len(X))),
                       {"w": (stats.norm(0, 1), 3), "b": stats.norm(0, 1), "sigma": stats.halfnorm(0, 2)},
                       vectorized=True)
    theta = np.random.default_rng(0).normal(size=(5, model.n_params))
    blocks = model._split(theta)
    assert [block.shape for block in blocks] == [(5, 3), (5, 1), (5, 1)]
    assert all(block.flags.c_contiguous and not np.shares_memory(block, theta) for block in blocks)
    np.testing.assert_array_equal(np.hstack(blocks), theta)
