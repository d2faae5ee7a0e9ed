"""Analytic test targets: protocol, gradients, prior sampler and exact evidence."""

import numpy as np
import pytest

from evidence_select.models import check_model, finite_difference_gradient
from evidence_select.testing._targets import (BimodalTarget, BoxGaussianTarget, GaussianTarget,
                                             correlated_gaussian_target)
from evidence_select.utils._logspace import log_mean_exp

X_DUMMY = np.zeros((3, 1))

TARGETS = [
    GaussianTarget(np.array([0.3, -0.2, 0.1]), cov=0.2, prior_scale=1.5),
    correlated_gaussian_target(3, correlation=0.8, scale=0.5),
    BoxGaussianTarget(np.array([0.9, 0.1]), scale=0.3, half_width=1.0),
    BimodalTarget(2, separation=1.0, scale=0.5, weight=0.3),
]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: type(t).__name__)
def test_protocol_and_gradients(target):
    check_model(target, X_DUMMY)
    theta = target.sample_prior(np.random.default_rng(1), 4)
    numeric = finite_difference_gradient(lambda t: target.log_likelihood_sum(t, X_DUMMY), theta)
    np.testing.assert_allclose(target.grad_log_likelihood(theta, X_DUMMY, None, 1.0), numeric, rtol=1e-5, atol=1e-6)
    numeric = finite_difference_gradient(target.log_prior, theta)
    np.testing.assert_allclose(target.grad_log_prior(theta), numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: type(t).__name__)
def test_exact_evidence_matches_prior_monte_carlo(target):
    # Plain Monte Carlo over 4e5 prior draws: these targets are broad enough that
    # its relative error is ~1e-2, so a 0.03 nat tolerance is > 3 standard errors.
    theta = target.sample_prior(np.random.default_rng(0), 400_000)
    log_lik = target.log_likelihood_sum(theta, X_DUMMY)
    estimate = log_mean_exp(log_lik)
    w = np.exp(log_lik - log_lik.max())
    rel_se = np.std(w) / np.mean(w) / np.sqrt(len(w))
    assert abs(estimate - target.exact_log_evidence(X_DUMMY, None)) < max(4 * rel_se, 1e-3)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: type(t).__name__)
def test_prior_sampler_matches_log_prior(target):
    # Mean of the score grad log p over prior draws is zero (Stein identity).
    theta = target.sample_prior(np.random.default_rng(2), 200_000)
    score = target.grad_log_prior(theta)
    se = score.std(axis=0) / np.sqrt(len(theta))
    assert np.all(np.abs(score.mean(axis=0)) < 4 * se)


def test_split_over_rows_keeps_total():
    target = TARGETS[0]
    theta = target.sample_prior(np.random.default_rng(0), 5)
    one = target.log_likelihood_sum(theta, np.zeros((1, 1)))
    many = target.log_likelihood(theta, np.zeros((7, 1)))
    assert many.shape == (5, 7)
    np.testing.assert_allclose(many.sum(axis=1), one)


def test_box_transform_stays_in_box():
    target = BoxGaussianTarget(np.zeros(2), half_width=2.0)
    x = target.to_box(np.array([[-50.0, 50.0], [0.0, 1.0]]))
    assert np.all(np.abs(x) <= 2.0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="cov"):
        GaussianTarget(np.zeros(2), cov=np.ones((3, 3)))
    with pytest.raises(ValueError, match="correlation"):
        correlated_gaussian_target(3, correlation=1.0)
    with pytest.raises(ValueError, match="weight"):
        BimodalTarget(2, weight=1.5)
    with pytest.raises(ValueError, match="positive"):
        BoxGaussianTarget(np.zeros(2), scale=-1.0)
