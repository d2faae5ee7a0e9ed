"""Galilean Monte Carlo under a likelihood constraint: constraint kept, constrained prior left invariant."""

import numpy as np
import pytest

from evidence_select.kernels._constrained import ConstrainedPoints, LikelihoodConstraint
from evidence_select.kernels._galilean import GalileanInfo, GalileanSettings, adapt_galilean_step, galilean_sample
from evidence_select.kernels.tests.test_slice import D, R2, exact_constrained, log_lik, log_prior


def log_lik_and_grad(x):
    return log_lik(x), -2.0 * x


@pytest.mark.parametrize("factor", [np.diag(np.full(D, 0.5)), np.linalg.cholesky(0.3 * (np.eye(D) + 0.5))],
                         ids=["diag", "dense"])
@pytest.mark.parametrize("step_size", [0.2, 1.5])
def test_leaves_constrained_prior_invariant(factor, step_size):
    rng = np.random.default_rng(0)
    x = exact_constrained(rng, 3000)
    reference = exact_constrained(rng, 20000)
    (new, new_prior, new_lik), info = galilean_sample(rng, ConstrainedPoints(x, log_prior(x), log_lik(x)),
                                                      LikelihoodConstraint(-R2, log_prior, log_lik_and_grad),
                                                      GalileanSettings(factor, step_size=step_size, n_steps=20))
    assert np.all(new_lik > -R2)
    np.testing.assert_allclose(new_lik, log_lik(new))
    np.testing.assert_allclose(new_prior, log_prior(new))
    q, q_ref = np.sum(new**2, axis=1), np.sum(reference**2, axis=1)
    # As for the slice kernel: the radius^2 has sd ~0.45 in the truncated region, SE ~0.01 on its mean.
    assert abs(q.mean() - q_ref.mean()) < 0.04
    assert abs(q.std() - q_ref.std()) < 0.04
    assert np.all(np.abs(new.mean(axis=0)) < 0.06)
    assert info.n_reflected > 0 and info.n_straight > 0  # both kinds of move were exercised


def test_moves_far_from_a_single_point():
    rng = np.random.default_rng(1)
    x = np.zeros((500, D))
    (new, *_), _ = galilean_sample(rng, ConstrainedPoints(x, log_prior(x), log_lik(x)),
                                   LikelihoodConstraint(-R2, log_prior, log_lik_and_grad),
                                   GalileanSettings(np.eye(D), step_size=0.5, n_steps=100))
    assert np.all(np.any(new != 0.0, axis=1))
    # After 100 steps the chains have forgotten their common start: spread like the constrained prior.
    assert abs(np.sum(new**2, axis=1).mean() - np.sum(exact_constrained(rng, 20000)**2, axis=1).mean()) < 0.1


def test_step_adaptation():
    assert adapt_galilean_step(1.0, GalileanInfo(0, 10, 0, 90)) < 1.0
    assert adapt_galilean_step(1.0, GalileanInfo(0, 90, 10, 0)) > 1.0
    assert adapt_galilean_step(1.0, GalileanInfo(0, 0, 0, 0)) == 1.0


def _counted(calls, key, fn):
    """``fn`` that adds the points it is called on to ``calls[key]``."""
    def counted(x):
        calls[key] += len(x)
        return fn(x)
    return counted


def _split_against_fused(**split_functions):
    """``(x, info)``: Galilean moves of 500 constrained draws with the likelihood split as ``split_functions`` say
    (``constraint_fn`` for the constraint, the rest passed on), checked to be the fused call's moves, bits and
    counts on the same seed."""
    x = exact_constrained(np.random.default_rng(2), 500)
    points = ConstrainedPoints(x, log_prior(x), log_lik(x))
    settings = GalileanSettings(np.eye(D), step_size=1.0, n_steps=10)
    fused, fused_info = galilean_sample(np.random.default_rng(3), points,
                                        LikelihoodConstraint(-R2, log_prior, log_lik_and_grad), settings)
    constraint_fn = split_functions.pop("constraint_fn")
    split, split_info = galilean_sample(np.random.default_rng(3), points,
                                        LikelihoodConstraint(-R2, log_prior, constraint_fn), settings,
                                        **split_functions)
    for a, b in zip(fused, split):
        np.testing.assert_array_equal(a, b)
    assert fused_info == split_info
    return x, split_info


def test_reflected_proposals_take_the_likelihood_alone():
    """Given a likelihood-only function, the reflected proposals call it instead of the gradient's (whose gradient
    no step uses) and the moves are the same bits; a straight proposal still takes the gradient."""
    calls = {"with_grad": 0, "alone": 0}
    x, info = _split_against_fused(constraint_fn=_counted(calls, "with_grad", log_lik_and_grad),
                                   log_lik_only=_counted(calls, "alone", log_lik))
    assert calls["with_grad"] == 10 * len(x)  # every straight proposal, nothing more
    assert calls["alone"] == info.n_likelihood_calls - calls["with_grad"] > 0


def test_with_a_gradient_function_only_the_proposals_outside_take_a_gradient():
    """With a gradient function the straight proposals take the likelihood alone and the gradient only where they
    land outside (the reflections' normals): the same moves, bits and counts as the fused call's."""
    calls = {"with_grad": 0, "alone": 0, "gradient": 0}

    def outside_only(x):
        assert np.all(log_lik(x) <= -R2)  # only points outside the constraint
        return -2.0 * x

    x, info = _split_against_fused(constraint_fn=_counted(calls, "with_grad", log_lik_and_grad),
                                   log_lik_only=_counted(calls, "alone", log_lik),
                                   gradient=_counted(calls, "gradient", outside_only))
    assert calls["with_grad"] == 0 and 0 < calls["gradient"] < 10 * len(x)
    assert calls["alone"] == info.n_likelihood_calls  # one call per point evaluated, its gradient with it
    points = ConstrainedPoints(x, log_prior(x), log_lik(x))
    with pytest.raises(ValueError, match="only with a log_lik_only"):
        galilean_sample(np.random.default_rng(3), points, LikelihoodConstraint(-R2, log_prior, log_lik_and_grad),
                        GalileanSettings(np.eye(D)), gradient=outside_only)
