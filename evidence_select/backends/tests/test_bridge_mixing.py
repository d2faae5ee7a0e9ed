"""The proposals that connect chains in different modes (backends._bridge_mixing) and their use by the bridge."""

import warnings

import numpy as np
import pytest

from evidence_select.backends import _bridge
from evidence_select.backends._bridge import bridge_log_evidence
from evidence_select.backends._bridge_mixing import DefensiveProduct, fit_mixture_proposal
from evidence_select._result import check
from evidence_select.exceptions import EvidenceConvergenceWarning
from evidence_select.testing._calibration import ProductTarget, TwoPeakFactor
from evidence_select.testing._targets import GaussianTarget
from evidence_select.backends._gaussianize import GaussianizationSettings


class _StandardNormal:
    """``log N(theta; 0, I)``, normalised: importance weights ``p / q`` then average 1 under any proposal."""

    def value(self, theta):
        return -0.5 * np.sum(theta**2, axis=1) - 0.5 * theta.shape[1] * np.log(2 * np.pi)


def test_mixture_proposal_samples_the_density_it_reports():
    # E_q[p / q] = 1 for a normalised p: fails if sample() and log_density() describe different densities
    # (a wrong mixture weight, a broad part drawn but not counted).
    rng = np.random.default_rng(0)
    posterior = _StandardNormal()
    proposal = fit_mixture_proposal(rng, posterior, rng.standard_normal((3000, 3)), GaussianizationSettings())
    assert np.isclose(proposal.weights.sum(), 1.0) and np.all(proposal.weights >= 0.05)
    z = proposal.sample(rng, 40_000)
    w = np.exp(posterior.value(z) - proposal.log_density(z))
    assert abs(w.mean() - 1.0) < 4 * w.std() / np.sqrt(len(w))


def test_defensive_product_reaches_a_peak_no_draw_shows():
    # Coordinate 0: every draw in the peak at -1.5; coordinate 1: both peaks. The fitted marginal alone puts
    # no mass near +1.5 in coordinate 0; the broad part (share 1 / (2 d)) does.
    rng = np.random.default_rng(1)
    n = 4000
    draws = np.column_stack([-1.5 + 0.4 * rng.standard_normal(n),
                             np.where(rng.uniform(size=n) < 0.3, 1.5, -1.5) + 0.4 * rng.standard_normal(n)])
    proposal = DefensiveProduct.fit(draws, GaussianizationSettings())
    z = proposal.sample(rng, 200_000)
    assert np.mean(np.abs(z[:, 0] - 1.5) < 0.4) > 1e-3
    grid = np.column_stack([np.full(3, 1.5), [-1.5, 0.0, 1.5]])
    assert np.all(np.isfinite(proposal.log_density(grid)))


FAST_MANY_MODES = dict(n_chains=4, n_warmup=200, n_draws=500, max_modes=2)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 11])
def test_chains_in_more_modes_than_max_modes_are_connected(seed):
    # 256 modes, 4 chains each in its own. In these seeds every chain sits in the same peak of some coordinate
    # (seed 3: two of them), so a proposal without the broad part reads -0.72 and -0.34 nats with errors of
    # 0.015 (0.013 for the mixed run at these 500 draws), unflagged: the error must stay under a third of the smaller
    # miss for the check to see it. Without the mixing rounds the chains stay alone in their modes, which the mode
    # census flags.
    target = ProductTarget(TwoPeakFactor(), 8)
    exact = target.exact_log_evidence()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvidenceConvergenceWarning)
        res = bridge_log_evidence(target, random_state=seed, **FAST_MANY_MODES)
        unmixed = bridge_log_evidence(target, random_state=seed, mixing_rounds=0, **FAST_MANY_MODES)
    assert res.info["mixing_used"] and res.info["mode_groups"] == [4]
    assert res.settings["proposal"] == "mixture"
    assert 0 < res.log_evidence_std < 0.1
    assert abs(res.log_evidence - exact) < 3 * res.log_evidence_std
    assert not unmixed.diagnostics["mode_census"]["passed"]


def test_chains_that_independence_metropolis_cannot_connect_keep_their_hmc_draws(monkeypatch):
    # A proposal too poor to accept anything leaves every chain at its start: those draws are stuck, so the HMC
    # draws stay and the mode census flags the run.
    def never_moves(rng, posterior, draws, log_p, n_rounds, gaussianization):
        n_iter = draws.shape[1]
        return (np.repeat(draws[:, -1:], n_iter, axis=1), np.repeat(log_p[:, -1:], n_iter, axis=1),
                [0.0] * n_rounds, gaussianization)

    monkeypatch.setattr(_bridge, "connect_modes", never_moves)
    target = ProductTarget(TwoPeakFactor(), 8)
    with pytest.warns(EvidenceConvergenceWarning, match="mode_census"):
        res = bridge_log_evidence(target, random_state=0, **FAST_MANY_MODES)
    assert res.info["mixing_used"] is False and res.info["mode_groups"] == [1, 1, 1, 1]
    assert res.settings["proposal"] == "gaussianization" and res.diagnostics["stuck_chains"]["passed"]


@pytest.mark.parametrize("kwargs, match", [(dict(mixing_rounds=-1), "mixing_rounds must be an int >= 0, got -1"),
                                           (dict(proposal="flow"), "proposal must be 'auto'")])
def test_bad_mixing_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bridge_log_evidence(ProductTarget(TwoPeakFactor(), 2), **kwargs)


def test_hmc_chains_that_were_stuck_keep_the_run_flagged_after_mixing(monkeypatch):
    # Mixed draws that form one group replace the HMC draws, but a chain HMC left stuck says a region stopped
    # it: the stuck_chains check stays failed.
    rng = np.random.default_rng(0)
    mixed = rng.normal(size=(4, 200, 2))
    mixed_log_p = -0.5 * np.sum(mixed**2, axis=2)
    monkeypatch.setattr(_bridge, "connect_modes", lambda *args: (mixed, mixed_log_p, [0.5], args[-1]))
    hmc = _bridge._Chains(mixed[:3, :, ::-1], mixed_log_p[:3], check(1, 0, False), None, [[0], [1], [2]])
    info = {}
    settings = _bridge._make_settings(None, dict(max_modes=2))
    out, _ = _bridge._mixed_chains(rng, ProductTarget(TwoPeakFactor(), 2), None, hmc, "none", settings, info)
    assert info["mixing_used"] and len(out.groups) == 1 and np.array_equal(out.draws, mixed)
    assert out.stuck_check == check(1, 0, False)


def _recorded_fits(monkeypatch):
    """The settings of every Gaussianization a bridge run fits, in order (its halves' and its mixing rounds')."""
    from evidence_select.backends import _bridge_mixing, _gaussianize

    seen = []

    def recording(rng, samples, settings=GaussianizationSettings()):
        model = _gaussianize.fit_gaussianization(rng, samples, settings)
        seen.append((settings, model.shift is not None))
        return model

    monkeypatch.setattr(_bridge, "fit_gaussianization", recording)
    monkeypatch.setattr(_bridge_mixing, "fit_gaussianization", recording)
    return seen


@pytest.mark.parametrize("target, kwargs", [(ProductTarget(TwoPeakFactor(), 8), FAST_MANY_MODES),
                                            (GaussianTarget(np.full(4, 0.3), cov=0.01), dict(n_chains=4, n_draws=500))],
                         ids=["mixing rounds", "halves"])
def test_later_fits_of_a_run_fit_only_the_shift_path_its_first_fit_chose(monkeypatch, target, kwargs):
    # The first fit compares the marginal layers with and without the quadratic shift; every later fit of the
    # same run (the second half's, the mixing rounds after the first) is told the choice and fits that path.
    seen = _recorded_fits(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvidenceConvergenceWarning)  # the short runs' chains are not the point
        bridge_log_evidence(target, random_state=0, **kwargs)
    (first, first_kept), *later = seen
    assert first == GaussianizationSettings() and len(later) >= 1
    choice = dict(compare_without_shift=False) if first_kept else dict(max_curved_pairs=0)
    assert all(settings == first._replace(**choice) for settings, _ in later)
