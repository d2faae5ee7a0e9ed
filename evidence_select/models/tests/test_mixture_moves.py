"""The mixture's whole-configuration refit proposal: its parts, then the kernel's invariance."""

import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from evidence_select.models import GaussianMixtureModel
from evidence_select.models._mixture_moves import ConfigurationProposal, log_permanent


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_log_permanent_is_the_sum_over_all_permutations(K):
    rng = np.random.default_rng(K)
    A = 5.0 * rng.standard_normal((3, 4, K, K))
    A[0, 0, 0, :] = -np.inf  # a row that no permutation can use: the permanent is 0
    brute = logsumexp([sum(A[..., k, s[k]] for k in range(K)) for s in itertools.permutations(range(K))], axis=0)
    got = log_permanent(A)
    assert np.isneginf(got[0, 0])
    np.testing.assert_allclose(got.ravel()[1:], brute.ravel()[1:], rtol=1e-12)


def test_fit_em_finds_separated_clusters_and_honours_row_weights():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(-4.0, 0.5, (300, 2)), rng.normal(3.0, 1.0, (100, 2))])
    # Rows of the second cluster count three times: the fitted weights become 1/2 each.
    weights = np.where(np.arange(400) < 300, 1.0, 3.0)
    for row_weights, expected_weights in ((np.ones(400), [0.75, 0.25]), (weights, [0.5, 0.5])):
        fit_w, fit_m, fit_v = GaussianMixtureModel(2, 2).fit_em(np.random.default_rng(1), X, row_weights,
                                                                n_init=3)
        assert fit_w.shape == (3, 2) and fit_m.shape == fit_v.shape == (3, 2, 2)
        order = np.argsort(fit_m[:, :, 0], axis=1)  # label the left cluster first
        w = np.take_along_axis(fit_w, order, axis=1)
        m = np.take_along_axis(fit_m, order[..., None], axis=1)
        sd = np.sqrt(np.take_along_axis(fit_v, order[..., None], axis=1))
        np.testing.assert_allclose(w, np.tile(expected_weights, (3, 1)), atol=0.01)
        np.testing.assert_allclose(m[:, 0], -4.0, atol=0.1)
        np.testing.assert_allclose(m[:, 1], 3.0, atol=0.2)
        np.testing.assert_allclose(sd[:, 0], 0.5, atol=0.05)
        np.testing.assert_allclose(sd[:, 1], 1.0, atol=0.15)


def test_fit_em_stops_each_start_once_it_has_converged():
    """With a tolerance, a start whose iteration moves no parameter by more than it stops iterating: its fit is
    the fit of every iteration to within 1e-4 (EM converges linearly: at a rate r per iteration, a step of tol
    leaves tol r / (1 - r) to go, 1e-4 at r = 0.99), the starts that have not converged iterate on, and a
    tolerance of 0 iterates every start ``n_iter`` times. One component converges in one step."""
    X = np.vstack([np.random.default_rng(0).normal(c, 0.6, (200, 2)) for c in (-3.0, 0.0, 3.0)])
    model = GaussianMixtureModel(3, 2)
    full = model.fit_em(np.random.default_rng(1), X, np.ones(len(X)), n_init=6, n_iter=400)
    early = model.fit_em(np.random.default_rng(1), X, np.ones(len(X)), n_init=6, n_iter=400, tol=1e-6)
    for got, want in zip(early, full):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    capped = model.fit_em(np.random.default_rng(1), X, np.ones(len(X)), n_init=6, n_iter=3, tol=1e-6)
    for got, want in zip(capped, model.fit_em(np.random.default_rng(1), X, np.ones(len(X)), n_init=6, n_iter=3)):
        np.testing.assert_array_equal(got, want)  # none converged within 3 iterations
    calls = []
    one = GaussianMixtureModel(1, 2)
    original = one._compiled_moments
    one._compiled_moments = lambda *args: calls.append(1) or original(*args)
    one.fit_em(np.random.default_rng(1), X, np.ones(len(X)), n_init=4, n_iter=100, tol=1e-6)
    assert len(calls) <= 3


def test_configuration_density_is_the_label_symmetrised_dirichlet_gaussian_product():
    # Computed here with scipy: (1/K!) sum over labellings of Dirichlet(w) prod N(mu) N(log v), times the
    # Jacobian prod_k w_k of the additive log-ratio map, for each candidate.
    rng = np.random.default_rng(2)
    K, d, n_eff = 3, 2, 40.0
    cand_w = rng.dirichlet(np.ones(K), size=2)
    cand_m, cand_v = rng.normal(size=(2, K, d)), np.exp(rng.normal(size=(2, K, d)))
    proposal = ConfigurationProposal(cand_w, cand_m, cand_v, n_eff)
    w, m, log_v = proposal.sample(rng, np.array([0, 1, 1]))
    got = proposal.log_density(np.log(w), m, log_v)
    for p in range(3):
        for c in range(2):
            alpha = n_eff * cand_w[c] + 1.0
            counts = np.maximum(n_eff * cand_w[c], 1.0)[:, None]
            terms = []
            for perm in itertools.permutations(range(K)):
                perm = list(perm)
                terms.append(stats.dirichlet(alpha).logpdf(w[p, perm])
                             + stats.norm(cand_m[c], np.sqrt(cand_v[c] / counts)).logpdf(m[p, perm]).sum()
                             + stats.norm(np.log(cand_v[c]), np.sqrt(2.0 / counts)).logpdf(log_v[p, perm]).sum())
            expected = logsumexp(terms) - np.log(6) + np.log(w[p]).sum()
            assert got[p, c] == pytest.approx(expected, rel=1e-10)


def _prior_statistics(model, theta):
    log_w, means, log_v = model.unpack(theta)
    w = np.exp(log_w)
    return np.column_stack([w.max(axis=1), means.max(axis=(1, 2)), np.abs(means).mean(axis=(1, 2)),
                            log_v.mean(axis=(1, 2)), log_v.max(axis=(1, 2))])


@pytest.mark.slow
def test_refit_kernel_leaves_the_prior_invariant():
    # Metropolis-Hastings with the refit proposal and the prior as target, from prior draws: after 30 steps
    # (each particle accepts ~3 moves) the particles must still be prior draws. 5 statistics against 2e5 fresh
    # prior draws, |z| < 4 (groups of 4 particles share their candidates, so z is a little wider than normal).
    # With the log-ratio Jacobian prod_k w_k left out of the proposal density, the largest weight's z is ~20.
    model = GaussianMixtureModel(2, 1)
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(-2.0, 0.5, 15), rng.normal(2.0, 0.5, 15)])[:, None]
    n = 3000
    theta = model.sample_prior(rng, n)
    accepted = 0
    for _ in range(30):
        proposal, log_ratio = model.refit_proposal(rng, theta, X, np.full(len(X), 0.02), n_groups=n // 4)
        accept = np.log(rng.random(n)) < model.log_prior(proposal) - model.log_prior(theta) + log_ratio
        theta = np.where(accept[:, None], proposal, theta)
        accepted += accept.sum()
    assert accepted / n > 2.0  # the test has power only if particles moved
    reference = _prior_statistics(model, model.sample_prior(np.random.default_rng(7), 200_000))
    z = (_prior_statistics(model, theta).mean(axis=0) - reference.mean(axis=0)) / (reference.std(axis=0) / np.sqrt(n))
    assert np.all(np.abs(z) < 4.0), z


def test_refit_rejects_groups_that_do_not_divide_the_particles():
    model = GaussianMixtureModel(2, 1)
    theta = model.sample_prior(np.random.default_rng(0), 6)
    with pytest.raises(ValueError, match="n_groups=4 must divide the 6 particles"):
        model.propose_jump(np.random.default_rng(1), theta, np.zeros((3, 1)), n_groups=4)
