"""Constrained-prior slice sampling: constraint kept, constrained prior left invariant."""

import numpy as np
import pytest

from evidence_select.kernels._constrained import ConstrainedPoints, LikelihoodConstraint
from evidence_select.kernels._slice import (SliceInfo, SliceSettings, adapt_slice_width, constrained_slice_sample,
                                            constrained_slice_step)

D, R2 = 4, 2.0


def log_prior(x):
    return -0.5 * np.sum(x**2, axis=1)


def log_lik(x):
    return -np.sum(x**2, axis=1)


def exact_constrained(rng, n):
    z = rng.standard_normal((40 * n, D))
    return z[np.sum(z**2, axis=1) < R2][:n]


@pytest.mark.parametrize("factor", [np.full(D, 0.5), np.linalg.cholesky(0.3 * (np.eye(D) + 0.5))],
                         ids=["diag", "dense"])
@pytest.mark.parametrize("width", [0.3, 3.0])
@pytest.mark.parametrize("axis_fraction", [0.0, 0.5])
def test_leaves_constrained_prior_invariant(factor, width, axis_fraction):
    rng = np.random.default_rng(0)
    x = exact_constrained(rng, 3000)
    reference = exact_constrained(rng, 20000)
    (new, new_prior, new_lik), info = constrained_slice_sample(
        rng, ConstrainedPoints(x, log_prior(x), log_lik(x)), LikelihoodConstraint(-R2, log_prior, log_lik),
        SliceSettings(factor, width=width, axis_fraction=axis_fraction), n_steps=5)
    assert np.all(new_lik > -R2)
    np.testing.assert_allclose(new_lik, log_lik(new))
    np.testing.assert_allclose(new_prior, log_prior(new))
    q, q_ref = np.sum(new**2, axis=1), np.sum(reference**2, axis=1)
    # The radius^2 has sd ~0.45 in the truncated region; 3000 draws give SE ~0.01 on its mean.
    assert abs(q.mean() - q_ref.mean()) < 0.04
    assert abs(q.std() - q_ref.std()) < 0.04
    assert np.all(np.abs(new.mean(axis=0)) < 0.06)
    assert info.n_likelihood_calls > 0 and info.n_stuck == 0


def test_moves_from_a_single_point():
    rng = np.random.default_rng(1)
    x = np.zeros((500, D))
    (new, *_), _ = constrained_slice_step(rng, ConstrainedPoints(x, log_prior(x), log_lik(x)),
                                          LikelihoodConstraint(-R2, log_prior, log_lik), SliceSettings(np.ones(D)))
    assert np.all(np.any(new != 0.0, axis=1))


def test_width_adaptation():
    assert adapt_slice_width(1.0, SliceInfo(0, 10, 0)) > 1.0
    assert adapt_slice_width(1.0, SliceInfo(0, 0, 10)) < 1.0
    assert adapt_slice_width(1.0, SliceInfo(0, 0, 0)) == 1.0


def test_axis_moves_take_the_conditional_scale():
    """Along an axis of a strongly correlated factor the bracket is the conditional, not the marginal, spread."""
    from evidence_select.kernels._slice import _slice_vectors

    correlation = 0.99
    factor = np.linalg.cholesky(np.array([[1.0, correlation], [correlation, 1.0]]))
    vectors = _slice_vectors(np.random.default_rng(0), 200, factor, 1.0, axis_fraction=1.0)
    lengths = np.abs(vectors).max(axis=1)
    np.testing.assert_allclose(lengths, np.sqrt(1.0 - correlation**2))
