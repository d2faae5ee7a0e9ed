"""The settings of Gaussianized bridge sampling (:class:`BridgeSettings`), validated."""

import numbers
from typing import NamedTuple

import numpy as np

from ._gaussianize import GaussianizationSettings


class BridgeSettings(NamedTuple):
    """Settings of :func:`~._bridge.bridge_log_evidence` (pass any of them as keywords).

    Attributes
    ----------
    n_chains : int, default=16
        HMC chains.
    init : {"tempered", "prior"}, default="tempered"
        Where the chains start: particles of a short tempered (SMC) run from
        the prior to the posterior, resampled by weight
        (:func:`~._bridge_init.tempered_starts`), or prior draws. Prior draws
        cost nothing but leave chains stuck where the posterior fills a tiny
        part of the prior (a thin ridge in a wide box), since the warm-up's
        shared step size shrinks to what the worst-placed chain needs.
    n_init_particles : int, default=128
        Particles of the tempered run (its likelihood evaluations count in
        ``n_likelihood_calls``).
    n_warmup : int, default=500
        Adaptation iterations per chain (discarded).
    n_draws : int, default=1000
        Kept iterations per chain; half of them fit the proposal, half enter the bridge.
    target_accept : float, default=0.8
        Mean acceptance probability the step-size adaptation aims at, in (0, 1).
        Where more than 1% of the kept transitions diverge, the chains adapt
        and run again at 0.95, then 0.99 (those above it), as Stan's users
        raise ``adapt_delta``; ``info["target_accept"]`` says which was kept.
    trajectory_length : float, default=2.0
        Mean HMC integration time in whitened units (jittered by +-50%).
    max_leapfrog : int, default=64
        Cap on leapfrog steps per HMC transition (with the defaults, at most
        ~1.5e6 gradient evaluations in all).
    step_jitter : float, default=0.5
        Each kept HMC transition takes the adapted step size times a
        log-uniform draw in ``[step_jitter, 1]``, and as many more leapfrog
        steps as keep its trajectory length (up to ``max_leapfrog``); in (0, 1],
        1 for no jitter. The step that dual averaging finds suits the bulk; the
        shorter steps enter regions curved more sharply than the bulk (the tips
        of a curved ridge, a funnel's neck), which chains at one step size visit
        too rarely, so that ``log Z`` would read low by more than its error. A
        mixture of invariant kernels drawn independently of the state, so the
        draws stay exact. At 0.5 the kept transitions take 1.44x the leapfrog
        steps on average, ``(1 / step_jitter - 1) / log(1 / step_jitter)``;
        where the adapted step already needs all ``max_leapfrog`` steps the
        step is jittered less, or not at all
        (:func:`~evidence_select.kernels._adaptive_hmc.step_jitter_floor`).
    dense_mass : bool or None, default=None
        Dense inverse mass matrix; None chooses dense when the warm-up has enough draws.
    gaussianization : GaussianizationSettings, default=GaussianizationSettings()
        Layers, directions, knots and smoothing of the proposal.
    error_fraction : float, default=0.1
        Target share of the proposal term in the error, Eq. (9) (``f_err``), in (0, 1).
    evaluation_fraction : float, default=0.1
        Largest share of all likelihood evaluations spent on one half's proposal draws (``f_eva``), in (0, 1);
        the two halves together spend up to about twice that.
    max_proposal : int, default=100000
        Cap on proposal draws per bridge.
    rhat_threshold : float, default=1.01
        Largest acceptable rank-normalised split R-hat (Vehtari et al., 2021).
    min_ess : float, default=400
        Smallest acceptable bulk effective sample size of any parameter.
    min_overlap : float, default=0.05
        Smallest acceptable overlap ``E_p[q / (p' + q)] + E_q[p' / (p' + q)]``
        (1 when the proposal is the posterior, 0 when disjoint). Below it the
        proposal fits the posterior loosely and the run is flagged.
    min_overlap_draws : float, default=25
        Smallest acceptable number of effective draws in the overlap of
        proposal and posterior (:func:`~._bridge_equation._overlap_draws`), on which the bridge
        and its error rest: Eq. (9)'s error is about one over its square root,
        and with fewer such draws that error cannot be trusted, so it is
        widened to span the importance-sampling bounds.
    min_draws_per_tau : float, default=50
        The autocorrelation time is trusted when each chain's half is at least this many times longer.
    label_permutations : bool, default=True
        Account for the ``K!`` label modes of models with ``n_components``.
    mode_rhat : float, default=1.1
        Chains whose pairwise split R-hat is at most this sample the same mode
        (:func:`~._bridge_modes.chain_mode_groups`); must be above 1.
    max_modes : int, default=8
        With 2 to ``max_modes`` groups of chains the bridge is summed over the
        groups' cells; with more it pools all draws (and R-hat fails).
    max_unseen_modes : float, default=0.1
        Largest acceptable Good-Turing estimate of the chance that one more
        chain would find a mode no chain found (chains alone in their mode over
        all chains), in [0, 1].
    mixing_rounds : int, default=3
        When the chains sit in more than ``max_modes`` modes, rounds of
        independence Metropolis from proposals fitted to their draws
        (:mod:`._bridge_mixing`), ``n_draws`` steps per chain each, whose last
        round replaces the draws; 0 keeps the HMC draws.
    proposal : {"auto", "gaussianization", "mixture"}, default="auto"
        The bridge's proposal: the iterative Gaussianization, or its mixture
        with the draws' marginal product, weighted by each one's importance
        efficiency (:func:`~._bridge_mixing.fit_mixture_proposal`). "auto"
        takes the mixture for draws that independence Metropolis connected
        (their modes may form a product no Gaussianization of a few clusters
        would propose) and the Gaussianization otherwise. For connected draws the
        mixture is the last mixing round's, fitted to the round before's draws.
    tol : float, default=1e-10
        Tolerance of the bridge equation's root search on ``log Z``.
    max_iter : int, default=1000
        Iterations of the bridge equation's root search before it counts as not converged.
    min_importance_ess : float, default=100
        Where the mixing rounds leave the chains unconnected, the last round's
        importance estimate is reported instead of the bridge's when its
        weights hold at least this many effective draws (Kish); with fewer the
        bridge's estimate stays, its error at least the importance estimate's
        lead over it (:func:`~._bridge._importance_instead`).
    """

    n_chains: int = 16
    init: str = "tempered"
    n_init_particles: int = 128
    n_warmup: int = 500
    n_draws: int = 1000
    target_accept: float = 0.8
    trajectory_length: float = 2.0
    max_leapfrog: int = 64
    step_jitter: float = 0.5
    dense_mass: bool = None
    gaussianization: GaussianizationSettings = GaussianizationSettings()
    error_fraction: float = 0.1
    evaluation_fraction: float = 0.1
    max_proposal: int = 100_000
    rhat_threshold: float = 1.01
    min_ess: float = 400.0
    min_overlap: float = 0.05
    min_overlap_draws: float = 25.0
    min_draws_per_tau: float = 50.0
    label_permutations: bool = True
    mode_rhat: float = 1.1
    max_modes: int = 8
    max_unseen_modes: float = 0.1
    mixing_rounds: int = 3
    proposal: str = "auto"
    tol: float = 1e-10
    max_iter: int = 1000
    min_importance_ess: float = 100.0


_INT_MIN = dict(n_chains=1, n_init_particles=8, n_warmup=0, n_draws=8, max_leapfrog=1, max_proposal=2, max_iter=1,
                max_modes=1, mixing_rounds=0)
_OPEN_UNIT = ("target_accept", "error_fraction", "evaluation_fraction")
_POSITIVE = ("trajectory_length", "step_jitter", "rhat_threshold", "tol", "min_draws_per_tau")
_NON_NEGATIVE = ("min_ess", "min_overlap", "min_overlap_draws", "max_unseen_modes", "min_importance_ess")


def _make_settings(settings, overrides):
    """Validated :class:`BridgeSettings` from an optional object and keyword overrides."""
    if settings is None:
        settings = BridgeSettings()
    elif not isinstance(settings, BridgeSettings):
        raise TypeError(f"settings must be a BridgeSettings, got {type(settings).__name__}")
    unknown = sorted(set(overrides) - set(BridgeSettings._fields))
    if unknown:
        raise TypeError(f"unknown bridge setting(s) {unknown}; valid: {list(BridgeSettings._fields)}")
    settings = settings._replace(**overrides)
    for name, minimum in _INT_MIN.items():
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
            raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    for name in _OPEN_UNIT + _POSITIVE + _NON_NEGATIVE + ("mode_rhat",):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        if name in _OPEN_UNIT and not 0.0 < value < 1.0:
            raise ValueError(f"{name} must be in (0, 1), got {value!r}")
        if name in _POSITIVE and not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")
        if name in _NON_NEGATIVE and value < 0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    if not settings.mode_rhat > 1.0:
        raise ValueError(f"mode_rhat must be above 1, got {settings.mode_rhat!r}")
    if settings.max_unseen_modes > 1.0:
        raise ValueError(f"max_unseen_modes must be in [0, 1], got {settings.max_unseen_modes!r}")
    if not 0.0 < settings.step_jitter <= 1.0:
        raise ValueError(f"step_jitter must be in (0, 1], got {settings.step_jitter!r}")
    if settings.init not in ("tempered", "prior"):
        raise ValueError(f"init must be 'tempered' or 'prior', got {settings.init!r}")
    if settings.proposal not in ("auto", "gaussianization", "mixture"):
        raise ValueError(f"proposal must be 'auto', 'gaussianization' or 'mixture', got {settings.proposal!r}")
    if settings.dense_mass not in (None, True, False):
        raise ValueError(f"dense_mass must be True, False or None, got {settings.dense_mass!r}")
    if not isinstance(settings.gaussianization, GaussianizationSettings):
        raise TypeError("gaussianization must be a GaussianizationSettings, got "
                        f"{type(settings.gaussianization).__name__}")
    return settings
