"""Annealed importance sampling on the full data (thesis Ch. 3.3, Algorithm 6).

Independent chains start from the prior and follow the geometric path
``f_lambda(theta) = p(theta) L(theta)^lambda`` from ``lambda = 0`` to ``1``. At
each temperature the log-weights grow by ``(lambda_t - lambda_{t-1}) log L`` at
the particles' current positions (Eq. 3.37), then every chain makes
Metropolis-corrected HMC transitions that leave ``f_lambda_t`` invariant: as
many as the previous temperature's moves needed to forget where they started,
between ``n_mcmc_steps`` and ``max_mcmc_steps`` (:func:`next_transitions`).
``Z`` is the mean of the final weights (Eq. 3.39 with ``h = 1``).

Resampling (SMC samplers, Del Moral, Doucet and Jasra 2006): the chains form
``n_repeats`` independent groups; when a group's ESS falls below
``resample_ess`` its particles are resampled and the log-mean of its weights is
banked, so each group's ``Z`` estimate stays unbiased. The reported error is
the spread of the groups' estimates.

Schedules:

- ``"adaptive"`` (Alg. 6): each group's next increment solves
  ``CESS(Delta) = target_ess`` (the mean over the *other* groups), by bisection
  on ``Delta`` in ``(0, 1 - lambda]``, taking the whole remaining step when it
  keeps the CESS above target. An increment chosen from the particles it
  reweights biases their ``Z``, and one shared by all groups biases them
  together, where their spread cannot see it. ``CESS = (sum_i W_i w_i)^2 /
  sum_i W_i w_i^2`` is the conditional ESS (Zhou, Johansen and Aston, 2016) of
  the incremental weights ``w_i = L_i^Delta`` under the normalised current
  weights ``W_i``, as a fraction of ``n_chains``; with equal ``W`` it is Eq. (3.42).
- ``"sigmoid"``: Grosse et al.'s fixed sigmoidal schedule
  ``lambda_t = (s(delta (2t/T - 1)) - s(-delta)) / (s(delta) - s(-delta))``
  with ``s`` the logistic function.

Adaptation (schedule, HMC step size and number of transitions, mass matrix from
the weighted population) happens only between temperatures, never inside a
kernel's step, and each group's mass matrix is estimated from the *other*
groups' particles: a mass matrix that depends on the particle it moves makes the
kernel non-invariant, and the distortion, summed over temperatures, biases
``log Z`` (high, and more so in many dimensions). The estimator is consistent,
with the usual O(1/n_chains) bias of adaptive SMC.

Settings are one validated :class:`AISConfig` (or its fields as keywords); every
result carries convergence checks (``EvidenceResult.diagnostics``).
"""

import logging
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..kernels._hmc import (adapt_step_size, held_out_preconditioners, hmc_init, hmc_step, jittered_leapfrog_count,
                            start_correlation)
from ..kernels._resampling import systematic_resample
from ..kernels._schedule import conditional_ess_fraction, next_tempering_increment
from ..kernels._tempered import TemperedTarget
from ..utils._likelihood import check_data, check_fraction, check_positive_int, log_lik_and_grad, log_lik_sum
from ..utils._logspace import ess_from_log_weights, log_mean_exp, normalize_log_weights
from ..utils._progress import progress_bar
from ..utils._settings import merge_settings
from ..utils._random import make_generator
from ..utils._threads import single_threaded_blas
from .._result import EvidenceResult, check, warn_not_converged
from ._ais_jumps import jump, mode_jumps

__all__ = ["AISConfig", "ais_log_evidence", "sigmoid_schedule", "next_tempering", "lognormal_mean_shortfall"]

logger = logging.getLogger(__name__)

# The shared helpers live in utils/_likelihood; these names stay importable from here.
_check_data, _check_positive_int = check_data, check_positive_int
_log_lik_sum, _log_lik_and_grad = log_lik_sum, log_lik_and_grad


# -- schedules -------------------------------------------------------------------------
def sigmoid_schedule(n_temperatures, delta=4.0):
    """Grosse et al.'s sigmoidal annealing schedule from 0 to 1.

    Parameters
    ----------
    n_temperatures : int
        Number of steps ``T`` (the result has ``T + 1`` values).
    delta : float, default=4.0
        Steepness; larger values put more temperatures near both ends.

    Returns
    -------
    tempering : ndarray of shape (n_temperatures + 1,)

    Examples
    --------
    >>> sigmoid_schedule(4)[[0, -1]]
    array([0., 1.])
    """
    n_temperatures = check_positive_int(n_temperatures, "n_temperatures")
    s = 1.0 / (1.0 + np.exp(-delta * (2.0 * np.arange(n_temperatures + 1) / n_temperatures - 1.0)))
    out = (s - s[0]) / (s[-1] - s[0])
    out[0], out[-1] = 0.0, 1.0
    return out


def next_tempering(tempering, log_weights, log_lik, target_ess, n_rounds=10):
    """Next annealing parameter by bisection on the conditional ESS (Alg. 6, line 5).

    Parameters
    ----------
    tempering : float
        Current ``lambda`` in ``[0, 1)``.
    log_weights : ndarray of shape (n_chains,)
        Current (unnormalised) log-weights.
    log_lik : ndarray of shape (n_chains,)
        Full-data log-likelihood at the current positions.
    target_ess : float
        Target CESS as a fraction of ``n_chains`` in ``(0, 1)``.
    n_rounds : int, default=10
        Rounds of the vectorised log-space bisection of
        :func:`~evidence_select.kernels._schedule.next_tempering_increment`
        (each shrinks the bracket 15-fold; 10 rounds resolve the increment to
        ~1e-10 relative).

    Returns
    -------
    float
        The new ``lambda``; exactly 1.0 when the whole step keeps CESS >= target.

    Examples
    --------
    >>> import numpy as np
    >>> next_tempering(0.0, np.zeros(3), np.zeros(3), 0.5)
    1.0
    """
    log_lik = np.asarray(log_lik, dtype=float)
    log_lik = np.where(np.isnan(log_lik), -np.inf, log_lik)  # a NaN likelihood is a zero-likelihood chain
    return _next_group_tempering(tempering, np.asarray(log_weights, dtype=float)[None], log_lik[None], target_ess,
                                 n_rounds)


# -- settings --------------------------------------------------------------------------
#: Leapfrog steps per trajectory at most, by default (:attr:`AISConfig.max_leapfrog`): about nine times the count
#: at the initial step, where the step has shrunk on a thin curved ridge.
MAX_LEAPFROG = 40
#: The same where mode jumps run: trajectories that only need to mix within one configuration of the clusters.
JUMPING_MAX_LEAPFROG = 7


@dataclass(frozen=True)
class AISConfig:
    """Settings of :func:`ais_log_evidence`, validated on construction.

    Parameters
    ----------
    n_chains : int, default=400
        Total particles, split into ``n_repeats`` independent groups of
        ``ceil(n_chains / n_repeats)`` (at least 2; the total is rounded up to a
        multiple of ``n_repeats``, and to an even number when ``n_repeats=1``),
        all moved together in vectorised HMC.
    schedule : {"adaptive", "sigmoid"}, default="adaptive"
        Adaptive CESS bisection (thesis Alg. 6) or Grosse et al.'s fixed sigmoid.
    target_ess : float, default=0.9
        Target conditional ESS per temperature (mean over groups), as a fraction
        of the group size.
    resample_ess : float, default=0.5
        A group is resampled (systematic) when its ESS falls below this fraction;
        0 turns resampling off (plain AIS).
    n_temperatures : int, default=500
        Number of steps of the sigmoid schedule (ignored when adaptive).
    sigmoid_delta : float, default=4.0
        Steepness of the sigmoid schedule.
    n_mcmc_steps : int, default=3
        Minimum HMC transitions per temperature. What lags behind the schedule
        is ``log L`` (the energy), which HMC mixes only through momentum
        refreshes, so the count of transitions matters more than their length.
    max_mcmc_steps : int or None, default=12
        Most HMC transitions per temperature. Each temperature makes as many as
        the previous one needed to bring the particles' correlation with where
        its moves started, in standardised coordinates or in log-likelihood, to
        ``max_correlation`` (twice as many as it made if they never did), within
        ``[n_mcmc_steps, max_mcmc_steps]``; the first makes ``max_mcmc_steps``.
        A posterior that the dense mass whitens (a regression on many rows)
        forgets the start within a few transitions; on a multimodal one the
        coordinates' correlation across particles never falls (each particle
        stays in its mode), and every temperature makes ``max_mcmc_steps``.
        None, or at most ``n_mcmc_steps``, means exactly ``n_mcmc_steps`` (0 and
        None: plain importance sampling along the path, no moves).
    max_correlation : float, default=0.1
        The correlation with the start that counts as forgotten.
    trajectory_length : float, default=2.0
        Mean integration time of an HMC trajectory in whitened units: each
        transition makes ``ceil(trajectory_length * U(0.5, 1.5) / step_size)``
        leapfrog steps of the adapted step (at most ``max_leapfrog``), about 4.5
        at the initial step. Where the adapted step is small, a thin curved ridge
        that the population's mass cannot whiten, the trajectories still travel
        along it rather than diffuse, and the population keeps up with the path
        (a fixed count of steps there leaves it behind, and ``log Z`` reads low
        by nats to tens of nats).
    max_leapfrog : int or None, default=None
        Most leapfrog steps per trajectory: bounds a transition's cost where the
        step size collapses. None means ``MAX_LEAPFROG`` (40), or
        ``JUMPING_MAX_LEAPFROG`` (7) where mode jumps run (``mode_jumps``):
        there the population spans several configurations of the clusters, its
        whitened units are far longer than one configuration's extent, and the
        jumps, not the trajectories, carry particles between configurations.
    step_size : float, default=0.5
        Initial leapfrog step in whitened units; adapted between temperatures.
    target_accept : float, default=0.75
        Target mean acceptance rate of the step-size adaptation.
    mass : {"dense", "diag", "identity"}, default="dense"
        Inverse mass from the weighted population's covariance (dense or its
        diagonal), re-estimated at every temperature for each group from the
        *other* groups' particles (see
        :func:`~evidence_select.kernels._hmc.held_out_preconditioners`), or the identity.
    n_repeats : int, default=8
        Independent groups (replicates). Their spread is the reported error;
        fewer than 4 groups fail the ``"error_from_groups"`` check.
    max_temperatures : int, default=20000
        Cap on adaptive temperatures (a RuntimeError beyond it).
    mode_jumps : int, default=1
        For a model with a mode search (the mixtures): independence jumps per
        particle and temperature, before the HMC moves, from a t at the
        tempered posterior's mode with its curvature there
        (:mod:`~evidence_select.backends._ais_jumps`), which carry particles
        between the clusters' configurations that HMC cannot leave. Each costs
        one likelihood evaluation per particle; 0 turns them off. Models
        without a mode search make none.
    """

    n_chains: int = 400
    schedule: str = "adaptive"
    target_ess: float = 0.9
    resample_ess: float = 0.5
    n_temperatures: int = 500
    sigmoid_delta: float = 4.0
    n_mcmc_steps: int = 3
    max_mcmc_steps: int = 12
    max_correlation: float = 0.1
    trajectory_length: float = 2.0
    max_leapfrog: int = None
    step_size: float = 0.5
    target_accept: float = 0.75
    mass: str = "dense"
    n_repeats: int = 8
    max_temperatures: int = 20_000
    mode_jumps: int = 1

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen dataclass)
        if self.schedule not in ("adaptive", "sigmoid"):
            raise ValueError(f"schedule must be 'adaptive' or 'sigmoid', got {self.schedule!r}")
        if self.mass not in ("dense", "diag", "identity"):
            raise ValueError(f"mass must be 'dense', 'diag' or 'identity', got {self.mass!r}")
        set_("target_ess", check_fraction(self.target_ess, "target_ess"))
        set_("resample_ess", check_fraction(self.resample_ess, "resample_ess", closed_low=True))
        set_("target_accept", check_fraction(self.target_accept, "target_accept"))
        set_("max_correlation", check_fraction(self.max_correlation, "max_correlation", low=-1.0))
        set_("step_size", check_fraction(self.step_size, "step_size", high=np.inf))
        set_("sigmoid_delta", check_fraction(self.sigmoid_delta, "sigmoid_delta", high=np.inf))
        n_repeats = check_positive_int(self.n_repeats, "n_repeats")
        n_chains = check_positive_int(self.n_chains, "n_chains", minimum=2)
        # Groups are equal-sized arrays (>= 2 each); one group is split in two halves for the held-out mass.
        per_group = max(2, -(-n_chains // n_repeats))
        set_("n_chains", n_repeats * (per_group + (per_group % 2 if n_repeats == 1 else 0)))
        set_("n_repeats", n_repeats)
        set_("n_mcmc_steps", check_positive_int(self.n_mcmc_steps, "n_mcmc_steps", minimum=0))
        set_("max_mcmc_steps", max(self.n_mcmc_steps, 0 if self.max_mcmc_steps is None
                                   else check_positive_int(self.max_mcmc_steps, "max_mcmc_steps", minimum=0)))
        set_("trajectory_length", check_fraction(self.trajectory_length, "trajectory_length", high=np.inf))
        if self.max_leapfrog is not None:
            set_("max_leapfrog", check_positive_int(self.max_leapfrog, "max_leapfrog"))
        set_("n_temperatures", check_positive_int(self.n_temperatures, "n_temperatures"))
        set_("max_temperatures", check_positive_int(self.max_temperatures, "max_temperatures"))
        set_("mode_jumps", check_positive_int(self.mode_jumps, "mode_jumps", minimum=0))

    def resolved(self, jumping):
        """A copy with ``max_leapfrog`` filled in where it is None, for a run that makes mode jumps (``jumping``)
        or not."""
        if self.max_leapfrog is not None:
            return self
        return replace(self, max_leapfrog=JUMPING_MAX_LEAPFROG if jumping else MAX_LEAPFROG)

    @property
    def n_group(self):
        """Particles per group."""
        return self.n_chains // self.n_repeats


# -- one temperature -------------------------------------------------------------------
def _group_cess(log_weights_norm, log_lik, delta):
    """Mean over groups of ``CESS / n_group`` of the increment ``delta``; the schedule's criterion.

    ``log_weights_norm`` and ``log_lik`` have shape ``(n_groups, n_group)``; the mean of
    per-group fractions is monotone in ``delta`` like each of them, so bisection applies.
    """
    return float(conditional_ess_fraction(log_weights_norm, log_lik, np.array([delta]), reduce=np.mean)[0])


def _next_group_tempering(tempering, log_weights, log_lik, target_ess, n_rounds=10):
    """:func:`next_tempering` for independent groups: the mean per-group CESS hits ``target_ess``."""
    remaining = 1.0 - tempering
    delta = next_tempering_increment(normalize_log_weights(log_weights, axis=1), log_lik, remaining, target_ess,
                                     n_rounds=n_rounds, reduce=np.mean)
    return 1.0 if delta >= remaining else tempering + delta


def _next_temperings(tempering, log_weights, log_lik, target_ess):
    """Each group's next ``lambda``, shape ``(n_groups,)`` (1 stays 1), from the *other* groups' particles.

    An increment chosen from the particles it then reweights biases their
    ``log Z`` (the adaptive-SMC bias), and a schedule fitted to all groups at
    once moves every group's estimate the same way, which their spread cannot
    show (on a 64-d product of two-peak densities all groups of a run can sit
    on the same side of the truth). Chosen from the other groups only, each
    group's increment is independent of its own particles, as its mass matrix
    is. One group has no others and uses its own.
    """
    n_groups = len(tempering)
    new = np.ones(n_groups)
    for g in np.flatnonzero(tempering < 1.0):
        others = np.arange(n_groups) != g if n_groups > 1 else np.ones(1, bool)
        new[g] = _next_group_tempering(tempering[g], log_weights[others], log_lik[others], target_ess)
    return new


def _corr1(a, b):
    """Across-particle correlation of two scalar summaries (0 if either is constant or not finite)."""
    ok = np.isfinite(a) & np.isfinite(b)
    return start_correlation(a[ok, None], b[ok, None]) if np.sum(ok) > 1 else 0.0


def _weighted_change(before, after, log_weights):
    """``(mean, z)``: the weighted mean change of ``log L`` from ``before`` to ``after``, and that mean in its
    standard errors (``(0, 0)`` with fewer than two finite changes, ``z = 0`` when they are all equal)."""
    diff = after - before
    ok = np.isfinite(diff) & np.isfinite(log_weights)
    if np.sum(ok) < 2:
        return 0.0, 0.0
    w = np.exp(log_weights[ok] - np.max(log_weights[ok]))
    w /= w.sum()
    mean = float(np.sum(w * diff[ok]))
    se = float(np.sqrt(np.sum(w**2 * (diff[ok] - mean) ** 2)))
    return mean, (mean / se if se > 0 else 0.0)


def _drift(before, after, log_weights):
    """Weighted mean change of ``log L`` over one temperature's moves, in its standard errors.

    At equilibrium the moves leave the weighted mean of ``log L`` unchanged up to
    noise; a population that lags behind its tempered target (moves that cannot
    reach part of it, such as a funnel's neck) climbs in ``log L`` at every
    temperature, and its ``Z`` is too low.
    """
    return _weighted_change(before, after, log_weights)[1]


def _take(state, index):
    return state._replace(position=state.position[index], log_density=state.log_density[index],
                          grad_log_density=state.grad_log_density[index],
                          aux=None if state.aux is None else state.aux[index])


def ais_move(rng, state, target, log_weights, n_folds, step_size, config, n_transitions):
    """The AIS transition at one temperature: HMC moves that leave ``target`` invariant.

    The kernel's settings are fixed before the first transition and depend on
    nothing the transitions produce: the inverse mass of fold ``g`` (``n_folds``
    equal contiguous blocks of particles, the AIS groups) comes from the other
    folds' weighted particles, never from the particle it moves, and the step
    size comes from the previous temperature. Each transition has a random
    number of leapfrog steps, for an integration time of ``trajectory_length``
    jittered by ``U(0.5, 1.5)`` at ``step_size``
    (:func:`~evidence_select.kernels._hmc.jittered_leapfrog_count`), and a
    per-particle step size, log-uniform between 0.1 and 1.2 times
    ``step_size``, all drawn independently of the state: a fixed length near a
    half or whole period of the whitened target maps ``x`` to about ``-x`` or
    ``x`` and leaves ``log L`` stuck, and the small steps let some trajectories
    into regions whose scale is far below the population's (a funnel's neck),
    where a single step size is rejected.

    Parameters
    ----------
    rng : numpy.random.Generator
    state : HMCState
        Positions with ``target``'s density at the current tempering.
    target : callable
        ``position -> (log_density, grad, aux)``, e.g. a :class:`TemperedTarget` or its
        :meth:`~TemperedTarget.kicked` form.
    log_weights : ndarray of shape (n_particles,)
        The particles' (normalised per group) log-weights, for the mass matrix.
    n_folds : int
        Number of equal contiguous blocks (at least 2 unless ``mass="identity"``).
    step_size : float
        Leapfrog step in whitened units.
    config : AISConfig
        With ``max_leapfrog`` set (:meth:`AISConfig.resolved`); None there leaves the trajectories uncapped.
    n_transitions : int
        HMC transitions to make, fixed before the first (see :func:`next_transitions`).

    Returns
    -------
    state : HMCState
    acceptance : ndarray of shape (n_transitions,)
        Mean acceptance probability of each transition.
    correlations : ndarray of shape (n_transitions,)
        After each transition, the particles' correlation with where they started
        (the larger of the standardised coordinates' and ``log L``'s).
    """
    n_chains, n_params = state.position.shape
    if config.mass == "identity":
        factor = np.ones(n_params)
    else:
        factor = held_out_preconditioners(state.position, log_weights, n_folds, dense=config.mass == "dense")
    rates, correlations = [], []
    start, start_log_lik = state.position, state.aux[:, 1] if state.aux is not None else None
    for _ in range(n_transitions):
        jitter = np.exp(rng.uniform(np.log(0.1), np.log(1.2), size=n_chains))  # see the docstring
        length = int(jittered_leapfrog_count(rng, step_size, config.trajectory_length, config.max_leapfrog))
        state, info = hmc_step(rng, state, target, step_size * jitter, length, factor)
        rates.append(float(np.mean(info.acceptance_rate)))
        correlations.append(max(start_correlation(start, state.position),
                                _corr1(start_log_lik, state.aux[:, 1]) if start_log_lik is not None else 0.0))
    return state, np.array(rates), np.array(correlations)


def next_transitions(n_transitions, correlations, config):
    """HMC transitions for the next temperature, from how the last ``n_transitions`` decorrelated.

    As many as the last temperature's moves needed to bring the particles'
    correlation with their start to ``max_correlation``, within
    ``[n_mcmc_steps, max_mcmc_steps]``; twice as many as it made if they never
    did. Chosen between temperatures, like the step size, so each
    temperature's kernel is fixed before its first transition: a count that
    stops when the moving particles look decorrelated would depend on where
    they went.

    Examples
    --------
    >>> config = AISConfig(n_mcmc_steps=3, max_mcmc_steps=12)
    >>> next_transitions(6, np.array([0.5, 0.3, 0.2, 0.08, 0.05, 0.02]), config)
    4
    >>> next_transitions(6, np.full(6, 0.5), config)
    12
    """
    below = np.flatnonzero(np.asarray(correlations) <= config.max_correlation)
    needed = below[0] + 1 if len(below) else 2 * n_transitions
    return int(np.clip(needed, config.n_mcmc_steps, config.max_mcmc_steps))


class _Trace:
    """Per-temperature records of one AIS run (schedule, acceptance, ESS, resampling)."""

    def __init__(self, n_groups):
        self.temperatures, self.acceptance, self.cess, self.n_steps = [np.zeros(n_groups)], [], [], []
        self.min_group_ess, self.n_resampled, self.drift = [], 0, []
        self.jump_acceptance = []


def _reweight_and_resample(rng, state, log_weights, log_z_banked, log_lik, delta, config, trace, done):
    """Weight increments ``delta_g log L`` (Eq. 3.37), then systematic resampling of the low-ESS groups that are
    not ``done`` (reached ``lambda = 1``). ``delta`` and ``done`` have one entry per group.

    A resampled group banks the log-mean of its weights, so ``exp(log Z_g)`` stays unbiased.
    """
    n_groups, n_group = log_weights.shape
    moving = delta > 0
    normalised = normalize_log_weights(log_weights, axis=1)
    trace.cess.append(float(np.mean([_group_cess(normalised[g:g + 1], log_lik[g:g + 1], delta[g])
                                     for g in np.flatnonzero(moving)])))
    with np.errstate(invalid="ignore"):
        increment = np.where(moving[:, None], delta[:, None] * log_lik, 0.0)
    log_weights = log_weights + np.where(np.isnan(increment), -np.inf, increment)
    ess = ess_from_log_weights(log_weights, axis=1)
    trace.min_group_ess.append(float(np.min(ess[moving])))
    low = np.flatnonzero((ess / n_group < config.resample_ess) & ~done) if config.resample_ess > 0 else []
    if len(low):
        log_z_banked[low] += log_mean_exp(log_weights[low], axis=1)
        ancestors = np.arange(n_groups * n_group).reshape(n_groups, n_group)
        ancestors[low] = systematic_resample(rng, log_weights[low]) + (low * n_group)[:, None]
        state = _take(state, ancestors.ravel())
        log_weights[low] = 0.0
        trace.n_resampled += len(low)
    return state, log_weights


def _jumps(rng, state, target, jumps, tempering, config, trace):
    """``config.mode_jumps`` jumps of every particle (:func:`~._ais_jumps.jump`); their mean acceptance goes to
    ``trace``."""
    rates = []
    for _ in range(config.mode_jumps):
        state, rate = jump(rng, state, target, jumps, tempering)
        rates.append(rate)
    trace.jump_acceptance.append(float(np.mean(rates)))
    return state


def _ais_run(rng, model, X, y, config, bar, jumps=None):
    """``n_repeats`` independent populations of ``n_group`` particles, annealed side by side, with ``jumps``
    (:func:`~._ais_jumps.mode_jumps`, or None for none) before each temperature's moves and ``config`` resolved
    for them (:meth:`AISConfig.resolved`, or an explicit ``max_leapfrog``).

    Each group is an SMC sampler (AIS with resampling): its log-weights are
    reset after systematic resampling within the group, and the log-mean of its
    weights before the reset is banked in ``log_z_banked``, so ``exp(log Z_g)``
    stays an unbiased estimate of ``Z`` per group. Each group follows its own
    adaptive schedule, chosen from the other groups' particles
    (:func:`_next_temperings`); a group that reached
    ``lambda = 1`` keeps moving there, with unchanged weights, until the last
    one arrives. Groups share the step size; each group's mass matrix comes
    from the other groups.
    """
    n_groups, n_group = config.n_repeats, config.n_group
    target = TemperedTarget(model, X, y, 0.0)
    state = hmc_init(np.asarray(model.sample_prior(rng, config.n_chains), dtype=float), target)
    log_weights = np.zeros((n_groups, n_group))
    log_z_banked = np.zeros(n_groups)
    fixed = sigmoid_schedule(config.n_temperatures, config.sigmoid_delta) if config.schedule == "sigmoid" else None
    tempering, step_size, trace = np.zeros(n_groups), config.step_size, _Trace(n_groups)
    n_transitions = config.max_mcmc_steps  # the first temperatures move furthest from the prior
    while np.any(tempering < 1.0):
        t = len(trace.temperatures)
        log_lik = state.aux[:, 1].reshape(n_groups, n_group)
        log_lik = np.where(np.isnan(log_lik), -np.inf, log_lik)  # a NaN likelihood is a zero-likelihood chain
        if fixed is not None:
            new_tempering = np.full(n_groups, float(fixed[t]))
        else:
            new_tempering = _next_temperings(tempering, log_weights, log_lik, config.target_ess)
            if t >= config.max_temperatures and np.any(new_tempering < 1.0):
                raise RuntimeError(f"AIS needed more than max_temperatures={config.max_temperatures} temperatures "
                                   f"(reached lambda={np.min(tempering):.3g}); lower target_ess or raise the cap")
        state, log_weights = _reweight_and_resample(rng, state, log_weights, log_z_banked, log_lik,
                                                    new_tempering - tempering, config, trace, new_tempering >= 1.0)
        tempering = new_tempering
        trace.temperatures.append(tempering)
        # Kernel for f_tempering (each group's own); its settings were fixed before this temperature's moves.
        target.tempering = np.repeat(tempering, n_group)
        log_density, grad, _ = target.combine(state.aux)
        state = state._replace(log_density=log_density, grad_log_density=grad)
        if jumps is not None:
            state = _jumps(rng, state, target, jumps, tempering, config, trace)
        pooled = normalize_log_weights(log_weights, axis=1).ravel()
        before = state.aux[:, 1]
        state, rates, correlations = ais_move(rng, state, target.kicked(), pooled, max(n_groups, 2), step_size,
                                              config, n_transitions)
        n_transitions = next_transitions(n_transitions, correlations, config)
        trace.drift.append(_drift(before, state.aux[:, 1], pooled))
        trace.n_steps.append(len(rates))
        trace.acceptance.append(float(np.mean(rates)) if len(rates) else float("nan"))
        if len(rates):
            step_size = adapt_step_size(step_size, rates, target=config.target_accept)
        if bar is not None:
            bar.update(float(np.min(tempering)) - bar.n)
    log_z_groups = log_z_banked + log_mean_exp(log_weights, axis=1)
    return state, log_weights, log_z_groups, target.n_evaluations, trace, step_size


# -- error and diagnostics -------------------------------------------------------------
MIN_GROUP_ESS = 5.0
MAX_GROUP_SPREAD = 1.0
MIN_ACCEPTANCE = 0.3
MAX_RESAMPLED_FRACTION = 0.5
MIN_GROUPS = 4
MAX_DRIFT_Z = 2.5


#: The ``"longer_moves"`` check (:func:`drift_under_longer_moves`): the final particles make this many times the
#: run's most transitions per temperature (``max_mcmc_steps``) more at ``lambda = 1``, and the weighted mean change
#: of their ``log L``, in its standard errors, must stay within ``MAX_PROBE_DRIFT_Z`` either way.
PROBE_LENGTH = 5
MAX_PROBE_DRIFT_Z = 3.0


def drift_under_longer_moves(rng, model, X, y, state, log_weights, step_size, config):
    """How far the final population's ``log L`` moves when its moves at ``lambda = 1`` go on longer.

    Copies of the final particles make ``PROBE_LENGTH * max_mcmc_steps`` more
    transitions of the run's own kernel (:func:`ais_move`: its last step size,
    each group's mass matrix from the other groups) at ``lambda = 1``. At
    equilibrium the weighted mean of ``log L`` stays where it was, up to noise.
    A population that lags behind its target because the moves reach part of it
    too slowly (a funnel's neck) keeps climbing, and its ``Z`` reads low while
    its groups agree and each temperature's own drift stays within noise.
    ``rng`` should be the probe's own: the run is left as it was.

    Parameters
    ----------
    rng : numpy.random.Generator
    model : Model
    X, y : the data, as the run had them
    state : HMCState
        The run's final particles, their densities evaluated at ``lambda = 1``.
    log_weights : ndarray of shape (n_repeats, n_group)
        Their final log-weights within each group.
    step_size : float
        The run's final step size.
    config : AISConfig
        The run's, resolved (:meth:`AISConfig.resolved`).

    Returns
    -------
    z : float
        The weighted mean change of ``log L`` in its standard errors, each group
        weighted equally.
    change : float
        The same change in nats.
    n_calls : int
        Likelihood evaluations the probe made.
    """
    length = PROBE_LENGTH * max(config.max_mcmc_steps, 1)
    target = TemperedTarget(model, X, y, 1.0)
    pooled = normalize_log_weights(log_weights, axis=1).ravel()
    before = state.aux[:, 1]
    moved, *_ = ais_move(rng, state, target.kicked(), pooled, max(config.n_repeats, 2), step_size, config, length)
    change, z = _weighted_change(before, moved.aux[:, 1], pooled)
    return z, change, target.n_evaluations


def _diagnostics(config, trace, log_z_groups, probe_z):
    """Convergence checks of one AIS run (see :func:`ais_log_evidence`, Notes); ``probe_z`` is
    :func:`drift_under_longer_moves`'s ``z``."""
    acceptance = np.asarray(trace.acceptance, dtype=float)
    mean_acceptance = float(np.nanmean(acceptance)) if np.any(np.isfinite(acceptance)) else float("nan")
    min_ess = float(np.min(trace.min_group_ess))
    spread = group_spread(log_z_groups)
    schedules = np.array(trace.temperatures)  # (temperature steps + 1, groups)
    resampled = trace.n_resampled / np.sum(np.diff(schedules, axis=0) > 0)  # per (group, increment)
    # Drift of log L during the moves, combined over the second half of the path (where a lagging
    # population loses the most evidence) as sum(z) / sqrt(n): about N(0, 1) at equilibrium.
    late = np.asarray(trace.drift)[np.min(schedules[1:], axis=1) > 0.5]  # every group past 0.5
    drift_z = float(np.sum(late) / np.sqrt(len(late))) if len(late) else 0.0
    return {
        "ess_per_temperature": check(min_ess, max(MIN_GROUP_ESS, 0.1 * config.n_group),
                                     min_ess >= max(MIN_GROUP_ESS, 0.1 * config.n_group)),
        "resampled_fraction": check(resampled, MAX_RESAMPLED_FRACTION, resampled <= MAX_RESAMPLED_FRACTION),
        "group_agreement": check(spread, MAX_GROUP_SPREAD, not spread > MAX_GROUP_SPREAD),
        "acceptance": check(mean_acceptance, MIN_ACCEPTANCE,
                            config.max_mcmc_steps == 0 or mean_acceptance >= MIN_ACCEPTANCE),
        "error_from_groups": check(config.n_repeats, MIN_GROUPS, config.n_repeats >= MIN_GROUPS),
        "stationarity": check(drift_z, MAX_DRIFT_Z, abs(drift_z) <= MAX_DRIFT_Z),
        "longer_moves": check(probe_z, MAX_PROBE_DRIFT_Z, abs(probe_z) <= MAX_PROBE_DRIFT_Z),
    }


def group_spread(log_z_groups):
    """The standard deviation of the groups' ``log Z`` (NaN with one group): what ``"group_agreement"`` checks
    and the reported error scales."""
    return float(np.std(log_z_groups, ddof=1)) if len(log_z_groups) > 1 else float("nan")


def lognormal_mean_shortfall(spread, n_groups, n_draws=4096):
    """How far ``log mean Z_g`` over ``n_groups`` groups is expected to read below ``log E[Z_g]`` when the groups'
    ``log Z_g`` are normal with standard deviation ``spread``.

    Each ``Z_g`` is unbiased, but where the groups' ``log Z_g`` spread over
    nats their mean is carried by the luckiest group, and the rarer, larger
    ``Z_g`` that the expectation holds are missing from a few groups. For
    log-normal ``Z_g`` the expectation is ``mu + spread**2 / 2``, and the
    shortfall is ``spread**2 / 2 - E[log mean exp(spread * eps_g)]`` with
    ``eps ~ N(0, 1)^n_groups``: about ``spread**2 / (2 n_groups)`` for a small
    spread, and growing as ``spread**2 / 2`` for a large one. The
    expectation is taken over a fixed set of ``n_draws`` draws, so the value is
    the same on every call.

    Examples
    --------
    >>> round(lognormal_mean_shortfall(0.0, 8), 6)
    0.0
    >>> abs(lognormal_mean_shortfall(0.5, 8) - 0.5**2 / 16) < 0.002
    True
    """
    eps = np.random.default_rng(0).standard_normal((n_draws, n_groups))
    return float(max(spread**2 / 2 - np.mean(log_mean_exp(spread * eps, axis=1)), 0.0))


def _error(config, log_z_groups, log_weights_final):
    """``(std, std_repeats, std_weights, shortfall)``: the groups' spread (t-corrected), or the weight-based
    bound; where the groups disagree by more than ``MAX_GROUP_SPREAD``, ``std`` also holds the shortfall of their
    mean (:func:`lognormal_mean_shortfall`), else ``shortfall`` is 0."""
    n_repeats = config.n_repeats
    # With R groups, (estimate - truth) / (s / sqrt(R)) is t-distributed with R - 1 degrees of freedom, whose
    # sd is sqrt((R - 1) / (R - 3)): reporting that scale keeps 3-sigma coverage honest with few replicates.
    t_scale = np.sqrt((n_repeats - 1) / (n_repeats - 3)) if n_repeats > 3 else 1.0
    spread = group_spread(log_z_groups)
    std_repeats = float(t_scale * spread / np.sqrt(n_repeats))
    # Weight-based error of the final stage only (a lower bound once resampling happened).
    ess = float(ess_from_log_weights(log_weights_final))
    std_weights = float(np.sqrt(max(1.0 / ess - 1.0 / config.n_chains, 0.0))) if ess > 0 else np.inf
    std = std_repeats if n_repeats > 1 else std_weights
    # The t-scale measures the groups' noise about their mean; a spread past the group_agreement check also means
    # that the mean misses the rare large Z the groups did not draw, on the side where the truth lies above.
    shortfall = lognormal_mean_shortfall(spread, n_repeats) if spread > MAX_GROUP_SPREAD else 0.0
    return float(np.hypot(std, shortfall)), std_repeats, std_weights, shortfall


def ais_log_evidence(model, X, y=None, *, config=None, random_state=None, verbose=0, **settings):
    """Annealed-importance-sampling estimate of ``log p(y | X)`` for any protocol model.

    Parameters
    ----------
    model : Model
        Any object implementing the model protocol, gradients included.
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), default=None
    config : AISConfig, default=None
        The settings as one object; None means the defaults.
    random_state : int, numpy.random.Generator or None, default=None
    verbose : int, default=0
        ``>= 1`` shows a progress bar (tqdm, if installed).
    **settings
        Fields of :class:`AISConfig` (e.g. ``n_chains=800``), overriding ``config``.

    Returns
    -------
    result : EvidenceResult
        ``log_evidence`` is ``log`` of the mean over groups of their ``Z``
        estimates (unbiased in ``Z``); ``log_evidence_std`` is the standard
        deviation of the groups' ``log Z`` over ``sqrt(n_repeats)``, times the
        t-correction ``sqrt((R - 1) / (R - 3))`` for ``R = n_repeats > 3`` (with one
        group, the weight-based ``sqrt(1/ESS - 1/n)``, which ignores resampling and
        is only a lower bound); where ``"group_agreement"`` fails it is combined in
        quadrature with ``"group_shortfall"``, how far the mean of that many
        groups' ``Z`` reads low for that spread (:func:`lognormal_mean_shortfall`).
        ``diagnostics`` and ``converged`` hold the checks
        below; ``info`` adds ``"std_repeats"``, ``"std_weights"``, ``"group_shortfall"``,
        ``"log_evidence_repeats"``, the schedule (``"temperatures"``, one row per
        temperature step and one column per group), acceptance rates, the smallest
        group ESS, the CESS and the ``log L`` drift (in standard errors) at each
        temperature, HMC steps per temperature, ``"longer_moves_change"`` (the
        ``"longer_moves"`` probe's mean change of ``log L``, in nats),
        resampling counts and ``"jump_acceptance"`` (the mean acceptance of the
        configuration jumps at each temperature; empty for a model without a
        mode search). ``samples``/``log_weights`` are the final particles and
        log-weights (``log mean exp`` of them is ``log_evidence``).

    Warns
    -----
    EvidenceConvergenceWarning
        When a check fails (``result.converged`` is then False).

    Notes
    -----
    Chains start from the prior and follow ``f_lambda = p(theta) L(theta)^lambda``;
    at each temperature the log-weights grow by ``(lambda_t - lambda_{t-1}) log L``
    (Eq. 3.37), low-ESS groups are resampled (their weights' mean banked, so each
    group's ``Z`` stays unbiased; Del Moral, Doucet and Jasra, "Sequential Monte
    Carlo samplers", 2006) and every chain makes HMC transitions that leave
    ``f_lambda`` invariant (:func:`ais_move`). All adaptation (schedule, step size,
    mass) happens between temperatures, and no chain's own position enters its
    kernel. For a model with a mode search (the mixtures) each temperature's
    moves start with ``mode_jumps`` independence jumps from a t at the tempered
    posterior's mode (:mod:`~evidence_select.backends._ais_jumps`),
    which also leave ``f_lambda`` invariant and carry particles between the
    clusters' configurations, where HMC cannot.

    The checks (``result.diagnostics``):

    - ``"ess_per_temperature"``: the smallest ESS of any group right after a
      weight increment, at least ``max(5, n_group / 10)`` particles (a group that
      collapses onto a few particles, from too few chains or too few
      temperatures, has a heavy-tailed ``Z``);
    - ``"resampled_fraction"``: groups resampled per temperature, at most 0.5 (a
      schedule too coarse for the chains to follow);
    - ``"group_agreement"``: the standard deviation of the groups' ``log Z``, at
      most 1 nat (beyond it the mean of ``Z`` is carried by one or two groups
      and misses the large ``Z`` that no group drew, so the estimate reads low;
      the reported error then also holds that expected shortfall);
    - ``"acceptance"``: the mean HMC acceptance rate over temperatures, at least 0.3;
    - ``"error_from_groups"``: ``n_repeats >= 4``, without which the error is a
      lower bound;
    - ``"stationarity"``: the weighted mean of ``log L`` should not move during a
      temperature's moves at equilibrium; its changes in standard errors,
      combined over the temperatures above ``lambda = 0.5`` (``sum z / sqrt(n)``),
      at most 2.5 in absolute value. A population that lags behind the path (moves
      that cannot reach part of the target) climbs at every temperature and reads
      ``Z`` low;
    - ``"longer_moves"``: the same drift after copies of the final particles make
      ``PROBE_LENGTH`` (5) times a temperature's most transitions
      (``max_mcmc_steps``) more at ``lambda = 1``
      (:func:`drift_under_longer_moves`), at most 3 standard errors either way. A
      lag too slow for any one temperature's moves to show (a funnel's neck that
      the moves enter rarely) still shows over a longer stretch; ``Z`` then reads
      low by up to nats while the groups agree. More ``n_mcmc_steps`` and a
      longer ``trajectory_length`` shrink the lag; for a funnel-shaped
      posterior use NS. The probe costs ``PROBE_LENGTH`` times one
      temperature's moves (counted in ``n_likelihood_calls``) and has its own
      random stream, so the estimate and its error are those of the run alone.

    Neal, "Annealed importance sampling" (2001); the thesis "Evidence
    Estimation Using Stochastic Likelihood Approximations", Sec. 3.3,
    Eq. (3.36)-(3.43) and Algorithm 6; Grosse, Ghahramani and Adams,
    "Sandwiching the marginal likelihood using bidirectional Monte Carlo" (2015)
    for the sigmoid schedule. ``n_likelihood_calls`` counts one per particle
    and leapfrog step (each evaluates the full-data log-likelihood and its
    gradient together) plus the initial evaluation. BLAS runs single-threaded,
    so a seed gives the same result whatever the process's thread settings
    (e.g. in a joblib worker).

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.testing._targets import GaussianTarget
    >>> target = GaussianTarget(np.zeros(2), cov=0.1)
    >>> res = ais_log_evidence(target, np.zeros((1, 1)), n_chains=160, random_state=0)
    >>> res.method, bool(abs(res.log_evidence - target.exact_log_evidence()) < 0.5), res.converged
    ('ais', True, True)
    """
    start_time = time.perf_counter()
    X, y = check_data(X, y)
    config = merge_settings(AISConfig, config, settings, "AIS")
    rng = make_generator(random_state)
    # The probe draws from its own generator (spawning leaves rng's state alone): the estimate and its error are
    # the same with it as without.
    probe_rng = rng.spawn(1)[0]
    bar = progress_bar(verbose, total=1.0, desc="AIS", leave=False)
    with single_threaded_blas():
        jumps = mode_jumps(rng.spawn(1)[0], model, X, y) if config.mode_jumps else None
        config = config.resolved(jumping=jumps is not None)
        state, log_weights_groups, log_z_groups, n_calls, trace, final_step = _ais_run(rng, model, X, y, config, bar,
                                                                                       jumps)
        probe_z, probe_change, probe_calls = drift_under_longer_moves(probe_rng, model, X, y, state,
                                                                      log_weights_groups, final_step, config)
    n_calls += probe_calls
    if bar is not None:
        bar.close()
    log_z = float(log_mean_exp(log_z_groups))
    # Final particles weighted across groups: each group's weights scaled to its own Z estimate.
    log_weights = (log_weights_groups - log_mean_exp(log_weights_groups, axis=1)[:, None]
                   + log_z_groups[:, None]).ravel()
    std, std_repeats, std_weights, shortfall = _error(config, log_z_groups, log_weights)
    diagnostics = _diagnostics(config, trace, log_z_groups, probe_z)
    converged = warn_not_converged("ais", diagnostics)
    logger.info("AIS: log Z = %.4f +/- %.4f with %d temperatures, %d group resamplings", log_z, std,
                len(trace.temperatures) - 1, trace.n_resampled)
    info = dict(std_weights=std_weights, std_repeats=std_repeats, group_shortfall=shortfall,
                log_evidence_repeats=log_z_groups,
                ess=float(ess_from_log_weights(log_weights)), n_temperatures=len(trace.temperatures) - 1,
                temperatures=np.array(trace.temperatures), acceptance=np.array(trace.acceptance),
                cess=np.array(trace.cess), min_group_ess=np.array(trace.min_group_ess), final_step_size=final_step,
                n_resampled=trace.n_resampled, n_steps=np.array(trace.n_steps),
                ess_groups=ess_from_log_weights(log_weights_groups, axis=1), drift=np.array(trace.drift),
                longer_moves_change=probe_change, jump_acceptance=np.array(trace.jump_acceptance))
    return EvidenceResult(log_z, std, "ais", float(n_calls), int(n_calls * len(X)), time.perf_counter() - start_time,
                          asdict(config), state.position, log_weights, info, diagnostics, converged)
