"""Prior transforms from the unit cube: each model's pair inverts itself and carries the uniform density to the prior.

``check_model`` verifies the pair at prior draws (inverse, and the Jacobian determinant of ``prior_cdf`` equal to
the prior density); here also the law of transformed uniform draws against the model's own prior draws (KS tests,
p above 1e-3 on seeded draws), for every model that declares the pair.
"""

import numpy as np
import pytest
from scipy import stats

from evidence_select.models import (GaussianMixtureModel, LinearGaussianModel, PoissonRegressionModel,
                                    SoftmaxRegressionModel, check_model, make_model)
from evidence_select.testing._conjugate import BetaBinomialModel, PoissonGammaModel, TinyMixtureModel
from evidence_select.testing._targets import BoxGaussianTarget, GaussianTarget


def _normal_log_lik(params, X, y):
    return stats.norm.logpdf(y, X @ params["w"], params["sigma"])


def _made(priors, **dims):
    return make_model(_normal_log_lik, priors, gradient="finite").resolve(**dims)


_RNG = np.random.default_rng(0)
_X = _RNG.normal(size=(8, 2))
_COUNTS = _RNG.poisson(2.0, size=(8, 3)).astype(float)

#: name -> (model, X, y) for check_model.
MODELS = {
    "linear": (LinearGaussianModel(2, prior_scale=2.0, intercept_scale=0.5), _X, _X.sum(axis=1)),
    "softmax": (SoftmaxRegressionModel(2, 3), _X, np.arange(8) % 3),
    "poisson": (PoissonRegressionModel(2), _X, np.arange(8) % 4),
    "poisson_gamma": (PoissonGammaModel(3, shape=2.5, rate=0.5), _COUNTS, None),
    "beta_binomial": (BetaBinomialModel(3, 10, a=2.0, b=5.0), _COUNTS, None),
    "tiny_mixture": (TinyMixtureModel(2, 2), _X, None),
    "gaussian_mixture": (GaussianMixtureModel(3, 2), _X, None),
    "gaussian_mixture_hyper": (GaussianMixtureModel(4, 1, weight_concentration=0.4, variance_shape=2.5,
                                                    variance_scale=0.3, mean_prior_loc=1.0, mean_variance_factor=2.0),
                               _X[:, :1], None),
    "box": (BoxGaussianTarget(np.zeros(2)), np.zeros((1, 1)), None),
    "gaussian": (GaussianTarget(np.zeros(2), prior_scale=2.0), np.zeros((1, 1)), None),
    "made": (_made({"w": (stats.norm(0.5, 2.0), "n_features"), "sigma": stats.halfnorm(0, 1.0),
                    "b": stats.beta(2.0, 3.0), "m": stats.multivariate_normal([1.0, 2.0], [[2.0, 0.5], [0.5, 1.0]])},
                   n_features=2), _X, _X.sum(axis=1)),
}


@pytest.mark.parametrize("name", MODELS)
def test_transformed_uniform_draws_follow_the_prior(name):
    model, X, y = MODELS[name]
    assert model.capabilities().prior_transform
    check_model(model, X, y)
    rng = np.random.default_rng(1)
    transformed = model.prior_transform(rng.uniform(size=(4000, model.n_params)))
    drawn = model.sample_prior(rng, 4000)
    for j in range(model.n_params):
        assert stats.ks_2samp(transformed[:, j], drawn[:, j]).pvalue > 1e-3


def test_a_dirichlet_prior_has_no_transform():
    model = make_model(lambda params, X, y: np.log(params["p"][0]) * np.ones(len(X)),
                       {"w": stats.norm(0, 1), "p": stats.dirichlet([1.0, 1.0, 1.0])}, gradient="finite")
    assert not model.capabilities().prior_transform
    with pytest.raises(TypeError, match="'p'"):
        model.prior_transform(np.full((1, model.n_params), 0.5))


class _WrongScale(GaussianTarget):
    """Its transform is that of a prior twice as wide as its ``log_prior``."""

    def prior_transform(self, u):
        return 2.0 * super().prior_transform(u)

    def prior_cdf(self, theta):
        return super().prior_cdf(np.asarray(theta) / 2.0)


def test_check_model_catches_a_transform_of_another_prior():
    with pytest.raises(ValueError, match="prior_cdf is not the prior's"):
        check_model(_WrongScale(np.zeros(2)), np.zeros((1, 2)))


def test_mixture_transform_keeps_the_tails():
    """Cube points within 1e-12 of the faces map to finite parameters and back to themselves: prior_cdf takes
    a stick piece's upper tail from its remainder and a variance's from the upper incomplete gamma, so neither end
    rounds to 0 or 1."""
    model = GaussianMixtureModel(3, 2)
    rng = np.random.default_rng(2)
    u = rng.uniform(size=(64, model.n_params))
    u[:16] = 1e-12
    u[16:32] = 1.0 - 1e-12
    theta = model.prior_transform(u)
    assert np.all(np.isfinite(theta))
    np.testing.assert_allclose(model.prior_cdf(theta), u, rtol=1e-6, atol=1e-14)
