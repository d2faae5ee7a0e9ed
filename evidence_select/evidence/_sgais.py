"""SGAIS: stochastic gradient annealed importance sampling, the one online engine.

Implements Algorithm 1 of Cameron, Eggers & Kroon, "Stochastic Gradient Annealed
Importance Sampling for Efficient Online Marginal Likelihood Estimation",
Entropy 21 (2019) 1109, with the improvements measured in this project:

- each chunk of data is annealed in along ``f(theta) ∝ p(chunk|theta)^lambda
  p(past|theta) p(theta)`` (paper Eq. 2), the increment of ``lambda`` chosen by
  a vectorised bisection on the conditional ESS (whole step when allowed);
- log-weights grow by ``delta * log p(chunk|theta)`` and the log evidence by the
  logsumexp of normalised weights times increments, so ``Z`` stays unbiased
  (thesis Ch. 4.2, Eq. 4.6-4.11); optional systematic resampling when the ESS of
  the accumulated weights falls below a threshold keeps it unbiased;
- particles move by SGHMC on the potential of Eq. (4), integrated by default
  with the BAOAB splitting (exact for Gaussian targets, so the SGHMC
  discretisation bias of the paper's Eq. 3 does not accumulate over the
  stream; ``integrator="sghmc"`` is Eq. 3 itself), where the
  past-data term is a reservoir mini-batch scaled by ``n / |B|`` and, by default,
  *control variates*: each particle carries a reference point with the exact
  gradient sum over all data seen at that point, and the mini-batch estimates
  only the difference. References follow their particles through resampling
  and are re-centred when ``n`` has grown ``recentre_factor``-fold (amortised
  O(1) per datum). Once the reservoir no longer holds every past row, a
  re-centring estimates the *change* of the sum from the reservoir (a uniform
  sample of the past), ``G_new = G_old + n/|R| sum_R [g(theta_new) - g(theta_old)]``,
  whose error shrinks with the distance moved, and new chunks keep being added
  exactly;
- the step size matches the current tempered target and, where the model
  offers :meth:`~evidence_select.models.Model.step_scales`, the feature scale
  (a diagonal mass matrix: the inverse per-datum Fisher diagonal, averaged as a
  curvature over every row seen with the chunk's own weighted by ``lambda``, so
  a chunk of outliers shrinks the step at once instead of diverging),
  ``eta = learning_rate / max(n + lambda |chunk|, 1)`` (``step_size_schedule=
  "tempered"``), never above ``learning_rate`` times the prior variance;
  ``"data"`` is the paper's ``eta = learning_rate / N`` made online,
  ``N = n + |chunk|`` (the paper fixed N to the final data-set size, under
  which the first chunks barely move at small lambda);
- with ``reheat_after_steps``, a chunk that needs that many annealing steps
  (a surprise: new clusters, a change point) triggers an excursion that tempers
  the past data down to the weight of one chunk and back, with the model's
  global Metropolis-Hastings moves (``propose_jump``, e.g. relocating a mixture
  component onto the chunk's rows, or redrawing the whole configuration from
  EM fits) at every step, so the particles can leave modes that the earlier
  data made local traps (see :func:`_reheat_past`); the rest of such a chunk
  moves with ``reheat_mcmc_factor`` times the SGHMC steps, since its
  particles travel far, like the first chunk's (``initial_mcmc_factor``), and
  with ``reheat_target_ess`` (if set) as its annealing target;
- with ``restart_on_surprise``, such a chunk instead ends with a restart
  while the reservoir still holds every row seen: each replicate group is run
  again from the prior over all those rows and the chunk, in its own random
  order, and pooled with its in-order run (the mean of the two ``Z_g``, the
  particles resampled from both; see :func:`_merge_independent_runs`). A
  shuffled run meets the new data mixed with the old from the start, so it
  does not depend on the particles having followed the shift; pooled, a run
  stuck in a poor mode costs at most ``log 2``, and the groups' independent
  orders make their spread measure the dependence on the order too. Each run
  of the pool is unbiased, but whether a chunk restarts depends on the run,
  so the pooled ``Z`` is unbiased only for fixed restart positions. The cost
  is that of streaming the rows seen once more (``O(min(n, reservoir_size))``);
- with ``restart_growth`` (and ``restart_on_surprise``), a restart also comes
  each time the rows seen grow by that factor, at fixed positions: particles
  that settled in a poorer mode anneal every later chunk easily, so no
  surprise reveals them, while the evidence falls behind row by row. Amortised
  ``O(1)`` per row;
- with ``surprise_threshold``, a chunk on whose mean per-row log-likelihood
  the particles disagree by more than that many nats (weighted standard
  deviation, decided before the first step from the state alone, so ``Z``
  stays unbiased) gets that treatment, global moves included, from its first
  step; the excursion still waits for ``reheat_after_steps``;
- ``n_replicates`` independent particle groups run inside one vectorised state
  on a common schedule; the combined ``Z`` is their mean (unbiased) and the
  spread of the group estimates gives ``log_evidence_std``.

The paper's settings are ``n_particles=10, n_replicates=1 (std unavailable),
learning_rate=0.1, friction=0.2, n_mcmc_steps=20, target_ess=0.5,
resample_threshold=0, control_variates=False, step_size_schedule="data",
integrator="sghmc"`` (:data:`PAPER_SETTINGS`, without the replicate count).
"""

import math
import time
import warnings
from typing import NamedTuple

import numpy as np

from ..kernels._reservoir import reservoir_data, reservoir_init, reservoir_insert
from ..kernels._resampling import systematic_resample
from ..kernels._schedule import next_tempering_increment
from ..kernels._sghmc import TRAJECTORIES
from ..utils import ess_from_log_weights, log_mean_exp, logsumexp, make_generator
from ._ais import _log_lik_sum

__all__ = ["SGAISConfig", "SGAISState", "ChunkRecord", "sgais_init", "sgais_update", "sgais_stream",
           "combine_replicates",
           "evidence_estimate",
           "particle_log_weights", "SamplerDegeneracyWarning", "PAPER_SETTINGS"]

_GRADIENT_BLOCK_ROWS = 8192


class SamplerDegeneracyWarning(RuntimeWarning):
    """The particle system degenerated (annealing stalled or weights collapsed).

    Emitted when a chunk needs more than ``max_annealing_steps`` annealing steps
    (the rest of the chunk is then taken at once), and by the estimators when a
    group's weights stay on one particle for many chunks. The run continues;
    the warning says the evidence may rest on few particles. Escalate it to an
    error where a silent degradation is not acceptable.

    Examples
    --------
    >>> import warnings
    >>> from evidence_select import SamplerDegeneracyWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", SamplerDegeneracyWarning)  # stop a long stream instead
    ...     issubclass(SamplerDegeneracyWarning, RuntimeWarning)
    True
    """


class SGAISConfig(NamedTuple):
    """Frozen SGAIS settings (see the module docstring for their meaning)."""

    n_particles: int = 20
    n_replicates: int = 2
    batch_size: int = 500
    learning_rate: float = 0.1
    friction: float = 0.2
    n_mcmc_steps: int = 5
    target_ess: float = 0.9
    resample_threshold: float = 0.5
    control_variates: bool = True
    step_size_schedule: str = "tempered"
    reservoir_size: int = 100_000
    recentre_factor: float = 2.0
    max_annealing_steps: int = 500
    integrator: str = "baoab"
    initial_mcmc_factor: int = 2
    reheat_after_steps: int = None
    reheat_mcmc_factor: int = 3
    reheat_target_ess: float = None
    surprise_threshold: float = None
    restart_on_surprise: bool = False
    restart_growth: float = None


#: The settings of the paper's Sec. 6.1 (for reproduction and comparison).
PAPER_SETTINGS = dict(n_particles=10, learning_rate=0.1, friction=0.2, n_mcmc_steps=20, target_ess=0.5,
                      resample_threshold=0.0, control_variates=False, step_size_schedule="data",
                      integrator="sghmc")


class SGAISState(NamedTuple):
    """Everything an online SGAIS run carries from chunk to chunk.

    ``particles`` has shape ``(n_replicates * n_particles, n_params)`` (groups
    stacked), ``log_weights`` ``(n_replicates, n_particles)`` normalised within
    each group, ``log_evidence`` ``(n_replicates,)`` per group. ``rng`` is the
    one mutable member: updates advance a copy and return it in the new state.
    """

    particles: np.ndarray
    log_weights: np.ndarray
    log_evidence: np.ndarray
    log_evidence_variance: np.ndarray  # (n_replicates,) accumulated Var(log Z_g) estimate from the weights
    reference: np.ndarray  # (n_total, n_params) or None
    reference_grad: np.ndarray  # sum over all data seen of grad log p(y|reference), or None
    n_reference: int  # data seen when the references were last re-centred
    reservoir: object
    rng: np.random.Generator
    n_samples_seen: int
    n_chunks: int
    n_datum_evaluations: int
    step_scales: np.ndarray = None  # inverse mean per-datum curvature over all rows seen (SGHMC step factors)


class ChunkRecord(NamedTuple):
    """One entry of ``evidence_history_`` (one per processed chunk).

    Attributes
    ----------
    n_samples_seen : int
        Rows seen up to and including this chunk.
    log_evidence : float
        Log evidence of those rows.
    log_evidence_std : float
        Its standard error (see ``log_evidence_std_``).
    n_annealing_steps : int
        Tempering steps the chunk needed; spikes mark surprising data (change points).
    ess : float
        Smallest ESS (in particles) over the replicate groups after the chunk.
    log_predictive_per_datum : float
        ``(log Z after - log Z before) / chunk size``: how well the past predicted the chunk.
    n_resampled : int
        Group resampling events during the chunk.
    seconds : float
        Wall time of the update.
    n_reheat_steps : int
        Steps of the excursion that tempered the past data down and back
        (``reheat_after_steps``); 0 when the chunk did not trigger one.
    n_jumps_accepted : int
        Accepted global Metropolis-Hastings moves (models with ``propose_jump``).
    n_replayed : int
        Rows that a restart re-annealed from the prior (``restart_on_surprise``);
        0 when the chunk did not restart.

    Examples
    --------
    >>> from evidence_select import BayesianLinearRegressor
    >>> from evidence_select.datasets import make_linear_regression
    >>> data = make_linear_regression(1000, random_state=0)
    >>> reg = BayesianLinearRegressor(random_state=0).fit(data.X, data.y)
    >>> [record.n_samples_seen for record in reg.evidence_history_]
    [500, 1000]
    >>> reg.evidence_history_[-1].log_evidence == reg.log_evidence_
    True
    """

    n_samples_seen: int
    log_evidence: float
    log_evidence_std: float
    n_annealing_steps: int
    ess: float  # min over groups of the accumulated-weight ESS (particles) at the end of the chunk
    log_predictive_per_datum: float  # (log Z after - log Z before) / |chunk|
    n_resampled: int  # group resampling events during the chunk
    seconds: float
    n_reheat_steps: int = 0
    n_jumps_accepted: int = 0
    n_replayed: int = 0


def sgais_init(rng, model, config, n_features, y_dtype=None):
    """Initial state: particles from the prior, uniform weights, empty reservoir."""
    n_total = config.n_particles * config.n_replicates
    particles = np.asarray(model.sample_prior(rng, n_total), dtype=float)
    log_weights = np.full((config.n_replicates, config.n_particles), -np.log(config.n_particles))
    return SGAISState(particles, log_weights, np.zeros(config.n_replicates), np.zeros(config.n_replicates),
                      None, None, 0,
                      reservoir_init(config.reservoir_size, n_features, y_dtype), rng, 0, 0, 0)


def combine_replicates(log_evidence, log_evidence_variance=None):
    """Combine per-group log evidences: ``(log mean Z_g, std of log Z)``.

    The mean of independent unbiased ``Z_g`` is unbiased. Its log has two
    standard-error estimates, and the larger is reported:

    - the spread of the groups, ``sd(log Z_g) / sqrt(G)`` (for small spreads the
      delta method's ``sd(Z_g / Z_mean) / sqrt(G)``; unlike the latter it keeps
      growing when groups disagree by many nats, e.g. in different modes, where
      the ratio form saturates at 1);
    - the accumulated per-step weight variance ``v_g`` of each group (see
      :func:`sgais_update`), combined as ``sqrt(log(1 + mean(expm1(v_g)) / G))``
      (blind to correlation between particles).

    Both under-read on their own in measurements (20 seeds at N=1e4); their
    maximum matched the observed spread best. Returns NaN for the std only when
    neither is available.
    """
    log_evidence = np.asarray(log_evidence, dtype=float)
    n_groups = len(log_evidence)
    combined = float(log_mean_exp(log_evidence))
    if not np.isfinite(combined):
        return combined, float("nan")
    candidates = []
    if n_groups >= 2:  # sample sd by hand: np.std costs more than the rest of this function (once per chunk)
        deviations = log_evidence - log_evidence.mean()
        candidates.append(math.sqrt(float(deviations @ deviations) / (n_groups - 1) / n_groups))
    if log_evidence_variance is not None:
        mean_relative_variance = float(np.expm1(log_evidence_variance).mean())
        candidates.append(math.sqrt(math.log1p(mean_relative_variance / n_groups)))
    return combined, float(max(candidates)) if candidates else float("nan")


def evidence_estimate(state):
    """``(log_evidence, log_evidence_std)`` of a state (see :func:`combine_replicates`)."""
    return combine_replicates(state.log_evidence, state.log_evidence_variance)


def particle_log_weights(state):
    """Normalised log-weights of all particles, shape ``(n_total,)``.

    Groups are weighted by their evidence estimates, the consistent way to pool
    independent SMC runs.
    """
    group = state.log_evidence - logsumexp(state.log_evidence)
    return (state.log_weights + group[:, None]).ravel()


def _check_finite_log_lik(log_lik, chunk_log_lik, tempering, n_seen):
    # A particle's row sum is NaN or +inf exactly when a row entry is (or the sum overflows): a cheap screen.
    if np.isnan(chunk_log_lik).any() or np.isposinf(chunk_log_lik).any():
        bad = int(np.sum(np.any(np.isnan(log_lik) | np.isposinf(log_lik), axis=1)))
        what = f"NaN or +inf for {bad} particle(s)" if bad else "overflowing (its sum over the chunk is +inf)"
        raise FloatingPointError(
            f"log-likelihood is {what} on the chunk after {n_seen} samples "
            f"(tempering={tempering:.3g}); check the data for extreme values or lower learning_rate")


def _grad_sum(model, theta, X, y):
    """Sum over rows of ``grad log p(y|x, theta)``, in blocks to bound memory."""
    total = np.zeros_like(theta)
    for start in range(0, len(X), _GRADIENT_BLOCK_ROWS):
        stop = start + _GRADIENT_BLOCK_ROWS
        total += model.grad_log_likelihood(theta, X[start:stop], None if y is None else y[start:stop], 1.0)
    return total


def _past_grad_sum(model, reservoir, n_past, theta, reference, reference_grad):
    """``sum over the n_past rows seen of grad log p(y|theta)``: exact while the reservoir holds them all.

    Otherwise the change from the references' exact sums is estimated from the
    uniform reservoir sample, ``G(theta) = G(ref) + n/|R| sum_R [g(theta) - g(ref)]``,
    whose error shrinks with the distance moved. Returns ``(sums, n_datum_evaluations)``.
    """
    res_X, res_y = reservoir_data(reservoir)
    if reservoir.n_stored == n_past:
        return _grad_sum(model, theta, res_X, res_y), len(theta) * n_past
    scale = n_past / reservoir.n_stored
    change = _grad_sum(model, theta, res_X, res_y) - _grad_sum(model, reference, res_X, res_y)
    return reference_grad + scale * change, 2 * len(theta) * len(res_X)


def _refresh_reference(state, model, config, theta, X, y):
    """References and their exact gradient sums after the chunk ``(X, y)`` is in.

    Returns ``(reference, reference_grad, n_reference, n_datum_evaluations)``.
    """
    if not config.control_variates:
        return None, None, 0, 0
    n_before, n_after = state.n_samples_seen, state.n_samples_seen + len(X)
    n_total = len(theta)
    if state.reference is not None and n_after < config.recentre_factor * state.n_reference:
        grad = state.reference_grad + model.grad_log_likelihood(state.reference, X, y, 1.0)
        return state.reference, grad, state.n_reference, n_total * len(X)
    past, evaluations = _past_grad_sum(model, state.reservoir, n_before, theta, state.reference,
                                       state.reference_grad)
    chunk_grad = model.grad_log_likelihood(theta, X, y, 1.0)
    evaluations += n_total * len(X)
    grad = past + chunk_grad
    if not np.all(np.isfinite(grad)):
        raise FloatingPointError(f"non-finite gradient at the control-variate references after {n_after} samples")
    return theta.copy(), grad, n_after, evaluations


def _past_log_likelihood(model, reservoir, n_past, theta):
    """``log p(past | theta)`` per particle: exact while the reservoir holds every past row.

    Afterwards it is the reservoir sum scaled by ``n_past / |R|``, the same
    uniform-sample approximation the mini-batch gradients make. A NaN stays NaN
    (callers read it as zero likelihood). Returns ``(log_lik (n_total,), n_datum_evaluations)``.
    """
    res_X, res_y = reservoir_data(reservoir)
    total = _log_lik_sum(model, theta, res_X, res_y, allow_nan=True)
    return total * (n_past / len(res_X)), len(theta) * len(res_X)


def _jump_step(rng, model, theta, X, y, tempering, past_power, reservoir, n_past, n_groups):
    """One Metropolis-Hastings step with the model's global proposal on the current target.

    Returns ``(theta, accepted, past_log_lik, n_datum_evaluations)``, ``past_log_lik``
    being :func:`_past_log_likelihood` at the returned particles (None when
    ``n_past`` is 0); see :func:`_jump_log_acceptance`.
    """
    res_X, _ = reservoir_data(reservoir)
    proposal, log_proposal_ratio = model.propose_jump(
        rng, theta, X, chunk_weight=tempering, past_X=res_X if n_past else None,
        past_weight=past_power * n_past / len(res_X) if n_past else 0.0, n_groups=n_groups)
    log_accept, past, evaluations = _jump_log_acceptance(model, theta, proposal, log_proposal_ratio, X, y, tempering,
                                                         past_power, reservoir, n_past)
    accepted = np.log(rng.random(len(theta))) < log_accept  # NaN compares False: rejected
    if past is not None:
        past = np.where(accepted, past[len(theta):], past[:len(theta)])
    return np.where(accepted[:, None], proposal, theta), accepted, past, evaluations


def _jump_log_acceptance(model, theta, proposal, log_proposal_ratio, X, y, tempering, past_power, reservoir, n_past):
    """Log Metropolis-Hastings ratio of ``theta -> proposal`` for the current tempered target.

    The target is ``p(theta) p(chunk|theta)^tempering p(past|theta)^past_power``,
    the past term as in :func:`_past_log_likelihood` (exact while the reservoir
    holds every past row, so the kernel is then exactly invariant). Returns
    ``(log_accept (n_total,), past_log_lik (2 n_total,) of theta then proposal or None,
    n_datum_evaluations)``.
    """
    both = np.vstack([theta, proposal])
    log_target = model.log_prior(both) + tempering * model.log_likelihood(both, X, y).sum(axis=1)
    evaluations = len(both) * len(X)
    past = None
    if n_past:
        past, past_evaluations = _past_log_likelihood(model, reservoir, n_past, both)
        log_target = log_target + past_power * past
        evaluations += past_evaluations
    n_total = len(theta)
    with np.errstate(invalid="ignore"):
        return log_target[n_total:] - log_target[:n_total] + log_proposal_ratio, past, evaluations


def _crossed_checkpoint(n_before, n_after, unit, growth):
    """Whether a checkpoint ``unit * growth**j`` (``j >= 0``) lies in ``(n_before, n_after]``."""
    if n_after < unit:
        return False
    j = math.floor(math.log(n_after / unit) / math.log(growth) + 1e-12)
    return unit * growth**j > n_before


def _remaining_at_once(remaining, what, cap, stacklevel):
    """The whole ``remaining`` tempering at once, with a :class:`SamplerDegeneracyWarning` (a step cap was hit)."""
    warnings.warn(f"{what} needed more than {cap} steps; taking the remaining step at once (the particle system "
                  "may be degenerate: consider more particles or a lower learning_rate)",
                  SamplerDegeneracyWarning, stacklevel=stacklevel)
    return remaining


def _reheat_past(reservoir, n_seen, n_chunk, theta, log_weights, log_evidence, log_evidence_variance, reference,
                 reference_grad, tempering, model, config, reweight, resample, move, counts):
    """Temper the past data down to the weight of one chunk and back, at the chunk's current tempering.

    When a chunk surprises the particles, the posterior may be shifting to a
    configuration that the past data separates from theirs by a barrier (a
    mixture component that must leave its cluster for a new one), which local
    SGHMC moves do not cross. Along ``p(theta) p(past|theta)^b p(chunk|theta)^t``
    with ``b`` going from 1 down to ``|chunk| / n`` and back to 1 the barriers
    fall and rise again, so the particles can redistribute over the modes in
    proportion to their mass. It is one more SMC path between the same two
    distributions (its increments multiply to 1 in expectation), so ``Z`` stays
    unbiased; its cost is ``O(|reservoir|)`` per step, paid only at surprises.
    """
    n_groups, n_particles = log_weights.shape
    lowest = n_chunk / n_seen
    power = 1.0
    past = None  # log p(past | theta) at the current particles, when the last move's jump computed it
    leg_steps = max(config.max_annealing_steps // 4, 1)
    for direction in (-1.0, 1.0):
        # Each leg has a quarter of max_annealing_steps (healthy excursions take tens of steps in all; a
        # degenerate particle system would otherwise pay 2 x max_annealing_steps reservoir passes per chunk).
        # Going down, the cap just turns the path early (any turning point gives a valid path); coming back,
        # the last allowed step takes the rest at once, with the engine's degeneracy warning, as the chunk's
        # own annealing does.
        for step in range(leg_steps):
            remaining = power - lowest if direction < 0 else 1.0 - power
            if remaining <= 0.0:
                break
            if past is None:
                past, evaluations = _past_log_likelihood(model, reservoir, n_seen, theta)
                counts["evaluations"] += evaluations
            with np.errstate(invalid="ignore"):
                signed = direction * past.reshape(n_groups, n_particles)
            if direction > 0 and step + 1 == leg_steps:
                delta = _remaining_at_once(remaining, f"re-tempering the past data after {n_seen} samples",
                                           leg_steps, stacklevel=5)
            else:
                delta = next_tempering_increment(log_weights, signed, remaining, config.target_ess)
            if delta >= remaining:
                power = lowest if direction < 0 else 1.0
            else:
                power = power + direction * delta
            with np.errstate(invalid="ignore"):
                increment = delta * signed
            log_weights, log_evidence, log_evidence_variance = reweight(
                log_weights, log_evidence, log_evidence_variance, increment, f"past tempered to {power:.3g}")
            log_weights, (theta, reference, reference_grad) = resample(log_weights, [theta, reference, reference_grad])
            theta, reference, reference_grad, past = move(theta, reference, reference_grad, tempering, power,
                                                          jump=True)
            counts["reheat_steps"] += 1
    return theta, log_weights, log_evidence, log_evidence_variance, reference, reference_grad


def _replay_from_prior(rng, reservoir, X, y, model, config):
    """Fresh runs from the prior over every past row and the chunk, one per replicate group, each in its own
    random order.

    The past rows are the reservoir's, so this is exact only while it holds all
    of them. Chunks have ``batch_size`` rows; the runs never restart themselves.
    Independent orders make the groups' spread also measure how much the
    evidence depends on the order the rows came in (groups fed one order agree
    with each other more than runs on different orders do). Returns
    ``(runs, n_datum_evaluations, n_reference)``: ``runs`` is ``(theta,
    log_weights, log_evidence, log_evidence_variance, reference,
    reference_grad)`` with the groups stacked as in :class:`SGAISState`, and
    ``n_reference`` the smallest of the runs'.
    """
    res_X, res_y = reservoir_data(reservoir)
    all_X = np.concatenate([res_X, X])
    all_y = None if y is None else np.concatenate([res_y, y])
    group_config = config._replace(restart_on_surprise=False, n_replicates=1)
    runs = []
    for _ in range(config.n_replicates):
        order = rng.permutation(len(all_X))
        runs.append(sgais_stream(make_generator(int(rng.integers(2**63))), model, group_config, all_X[order],
                                 None if all_y is None else all_y[order]))
    stacked = [np.concatenate([getattr(run, name) for run in runs]) if getattr(runs[0], name) is not None else None
               for name in ("particles", "log_weights", "log_evidence", "log_evidence_variance", "reference",
                            "reference_grad")]
    return tuple(stacked), sum(run.n_datum_evaluations for run in runs), min(run.n_reference for run in runs)


def _merge_independent_runs(rng, first, second):
    """Pool two independent particle systems over the same rows, group by group.

    ``first`` and ``second`` are ``(theta, log_weights, log_evidence,
    log_evidence_variance, reference, reference_grad)``. Group ``g``'s evidence
    becomes the mean of the two runs' ``Z_g`` (unbiased, as the mean over groups
    is), and its particles are drawn by systematic resampling from both runs'
    particles, each weighted by its run's ``Z_g`` times its own weight: the
    importance sampler of the two runs as one. A run stuck in a poor mode thus
    costs at most ``log 2`` nats, and the groups stay independent. Returns the
    merged tuple with uniform weights.
    """
    theta_a, log_weights_a, log_z_a, variance_a, *per_particle_a = first
    theta_b, log_weights_b, log_z_b, variance_b, *per_particle_b = second
    n_groups, n_particles = log_weights_a.shape
    n_total = n_groups * n_particles
    log_z_sum = np.logaddexp(log_z_a, log_z_b)
    pooled = np.concatenate([log_weights_a + (log_z_a - log_z_sum)[:, None],
                             log_weights_b + (log_z_b - log_z_sum)[:, None]], axis=1)
    ancestors = systematic_resample(rng, pooled, n_particles)  # (n_groups, n_particles) into the 2 runs' particles
    rows = np.arange(n_total).reshape(n_groups, n_particles)
    flat = np.take_along_axis(np.concatenate([rows, n_total + rows], axis=1), ancestors, axis=1).ravel()
    merged = [np.concatenate([a, b])[flat] if a is not None else None
              for a, b in zip([theta_a, *per_particle_a], [theta_b, *per_particle_b])]
    # Var((Z_a + Z_b) / 2) / mean^2 = (v_a Z_a^2 + v_b Z_b^2) / (Z_a + Z_b)^2, v the relative variances.
    relative_variance = (np.expm1(variance_a) * np.exp(2 * (log_z_a - log_z_sum))
                         + np.expm1(variance_b) * np.exp(2 * (log_z_b - log_z_sum)))
    log_weights = np.full((n_groups, n_particles), -math.log(n_particles))
    return merged[0], log_weights, log_z_sum - math.log(2), np.log1p(relative_variance), *merged[1:]


def _per_row_spread(log_weights, per_row_log_lik):
    """How much the particles disagree on a chunk: the weighted standard deviation across particles of its mean
    per-row log-likelihood (nats per row), the largest over the groups.

    Scale-free and computed from the state and the chunk alone, before any random draw, so a choice made on it
    keeps ``Z`` unbiased. While the particles track a stationary stream it shrinks as the posterior concentrates;
    rows the posterior did not foresee (new clusters) make some particles explain them far better than others.
    """
    weights = np.exp(log_weights)
    mean = np.sum(weights * per_row_log_lik, axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return float(np.max(np.sqrt(np.sum(weights * (per_row_log_lik - mean) ** 2, axis=1))))


def _checked_step_scales(model, X, n_params):
    """The model's step scales for the rows ``X`` (None if it offers none), validated."""
    scales = model.step_scales(X)
    if scales is None:
        return None
    scales = np.asarray(scales, dtype=float)
    if scales.shape != (n_params,) or not np.all(np.isfinite(scales) & (scales > 0)):
        raise ValueError(f"{type(model).__name__}.step_scales must return {n_params} positive finite values; "
                         f"got {scales!r}")
    return scales


def _pooled_step_scales(past_scales, n_past, chunk_scales, chunk_weight):
    """Step scales of past rows (weight ``n_past``) and chunk rows (weight ``chunk_weight``) pooled.

    Scales are inverse per-datum curvatures, so curvatures are averaged:
    ``(n + w) / (n / s_past + w / s_chunk)``.
    """
    if chunk_scales is None or past_scales is None or n_past == 0:
        return chunk_scales
    if chunk_weight == 0:
        return past_scales
    return (n_past + chunk_weight) / (n_past / past_scales + chunk_weight / chunk_scales)


def _resample_groups(rng, log_weights, threshold, arrays):
    """Resample the groups whose ESS fraction fell below ``threshold``.

    Returns ``(log_weights, arrays, n_groups_resampled)``; ``arrays`` are
    per-particle arrays (stacked groups) reindexed by the same ancestors.
    """
    n_groups, n_particles = log_weights.shape
    need = ess_from_log_weights(log_weights, axis=1) < threshold * n_particles
    if not need.any():
        return log_weights, arrays, 0
    ancestors = np.tile(np.arange(n_particles), (n_groups, 1))
    ancestors[need] = systematic_resample(rng, log_weights[need])
    flat = (ancestors + n_particles * np.arange(n_groups)[:, None]).ravel()
    log_weights = log_weights.copy()
    log_weights[need] = -np.log(n_particles)
    return log_weights, [None if a is None else a[flat] for a in arrays], int(need.sum())


def sgais_update(state, X, y, model, config):
    """Anneal one chunk into the state (paper Algorithm 1, lines 4-10).

    Parameters
    ----------
    state : SGAISState
    X : ndarray of shape (n_chunk, n_features)
    y : ndarray of shape (n_chunk,) or None
    model : Model
    config : SGAISConfig

    Returns
    -------
    new_state : SGAISState
    record : ChunkRecord
    reservoir_undo : tuple or None
        Pass to :func:`~evidence_select.kernels._reservoir.reservoir_undo` with
        ``new_state.reservoir`` to roll the in-place reservoir insertion back.

    Notes
    -----
    ``state`` is never modified except for the reservoir rows overwritten by
    the insertion at the very end (after everything that can fail).
    """
    tic = time.perf_counter()
    rng = make_generator(state.rng)  # a copy: the old state's generator is never advanced
    n_groups, n_particles = state.log_weights.shape
    n_total, n_chunk, n_seen = len(state.particles), len(X), state.n_samples_seen
    res_X, res_y = reservoir_data(state.reservoir)
    n_batch = min(config.batch_size, len(res_X))
    theta, log_weights, log_evidence = state.particles, state.log_weights, state.log_evidence
    log_evidence_variance = state.log_evidence_variance
    reference, reference_grad = state.reference, state.reference_grad
    use_cv = config.control_variates and reference is not None and n_batch > 0
    # The first chunk carries the particles from the prior to a posterior: the longest way,
    # through any multimodality, so it gets initial_mcmc_factor times the moves.
    n_mcmc_steps = config.n_mcmc_steps * (config.initial_mcmc_factor if n_seen == 0 else 1)
    chunk_scales = _checked_step_scales(model, X, state.particles.shape[1])
    past_scales = state.step_scales if n_seen else None
    # The data-scaled step must not outrun the prior's own curvature (features of scale 1e-6 give step
    # scales ~1e12, and the prior term alone then diverges).
    prior_variances = getattr(model, "prior_variances", None)
    max_step = None if prior_variances is None else config.learning_rate * np.asarray(prior_variances, dtype=float)

    # Chunk rows and mini-batch rows in one weighted block: a gradient is one model call.
    block_X = np.empty((n_chunk + n_batch, X.shape[1]))
    block_X[:n_chunk] = X
    block_y = None
    if y is not None:
        block_y = np.empty(n_chunk + n_batch, dtype=y.dtype)
        block_y[:n_chunk] = y
    block_weights = np.empty(n_chunk + n_batch)
    batch_scale = n_seen / n_batch if n_batch else 0.0
    block_weights[n_chunk:] = batch_scale
    batch_X, batch_y = block_X[n_chunk:], None if block_y is None else block_y[n_chunk:]

    counts = dict(evaluations=0, resampled=0, steps=0, reheat_steps=0, jumps=0)

    def reweight(log_weights, log_evidence, log_evidence_variance, log_increments, what):
        """Multiply the weights by ``exp(log_increments)``; the evidence grows by their weighted mean."""
        previous_weights = np.exp(log_weights)
        log_weights = log_weights + np.where(np.isnan(log_increments), -np.inf, log_increments)
        log_increment = logsumexp(log_weights, axis=1)  # weights were normalised: sum_i W_i w_i
        if not np.all(np.isfinite(log_increment)):
            raise FloatingPointError(f"all particles of a group have zero weight on the chunk after {n_seen} "
                                     f"samples ({what})")
        new_log_weights = log_weights - log_increment[:, None]
        # Var(sum_i W_i w_i) / c^2 ~ sum_i W_i^2 (w_i / c - 1)^2 = sum_i (W'_i - W_i)^2 for particles that
        # are (nearly) independent draws of the current target: the per-step relative variance.
        log_evidence_variance = log_evidence_variance + np.sum((np.exp(new_log_weights) - previous_weights) ** 2,
                                                               axis=1)
        return new_log_weights, log_evidence + log_increment, log_evidence_variance

    can_jump = hasattr(model, "propose_jump")

    def move(theta, reference, reference_grad, tempering, past_power, jump=False):
        """SGHMC on the potential of Eq. (4) for ``p(theta) p(past|theta)^past_power p(chunk|theta)^tempering``.

        With ``jump``, one Metropolis-Hastings step with the model's global
        proposal follows (models with ``propose_jump``). Returns
        ``(theta, reference, reference_grad, past_log_lik)``, the last from the
        jump's acceptance (None without one).
        """
        chunk_weight = (tempering if config.step_size_schedule == "tempered" else 1.0) * n_chunk
        step_size = config.learning_rate / max(past_power * n_seen + chunk_weight, 1.0)
        if chunk_scales is not None:
            step_size = step_size * _pooled_step_scales(past_scales, past_power * n_seen, chunk_scales, chunk_weight)
            if max_step is not None:
                step_size = np.minimum(step_size, max_step)
        block_weights[:n_chunk] = tempering
        block_weights[n_chunk:] = batch_weight = past_power * batch_scale
        # The control variate's exact past sum, scaled once per move rather than once per gradient.
        past_reference_grad = reference_grad if past_power == 1.0 or not use_cv else past_power * reference_grad
        # One mini-batch per gradient evaluation (both integrators evaluate n_mcmc_steps).
        batch_rows = rng.integers(0, len(res_X), size=(n_mcmc_steps, n_batch)) if n_batch else None

        def grad_log_target(current, step):
            if n_batch:
                np.take(res_X, batch_rows[step], axis=0, out=batch_X)
                if batch_y is not None:
                    np.take(res_y, batch_rows[step], out=batch_y)
            grad = model.grad_log_prior(current) + model.grad_log_likelihood(current, block_X, block_y, block_weights)
            if use_cv:
                grad += past_reference_grad - model.grad_log_likelihood(reference, batch_X, batch_y, batch_weight)
            return grad

        theta = TRAJECTORIES[config.integrator](rng, theta, grad_log_target, step_size=step_size,
                                                friction=config.friction, n_steps=n_mcmc_steps)
        counts["evaluations"] += n_mcmc_steps * n_total * (n_chunk + n_batch * (2 if use_cv else 1))
        if not np.all(np.isfinite(theta)):
            raise FloatingPointError(
                f"SGHMC diverged (non-finite particles) on the chunk after {n_seen} samples at tempering "
                f"{tempering:.3g}, step size {np.max(step_size):.3g}; lower learning_rate or standardise the features")
        past = None
        if jump and can_jump:
            theta, accepted, past, evaluations = _jump_step(rng, model, theta, X, y, tempering, past_power,
                                                            state.reservoir, n_seen, n_groups)
            counts["evaluations"] += evaluations
            counts["jumps"] += int(accepted.sum())
            if use_cv and accepted.any():  # re-centre the moved particles' references: keeps the CV variance low
                reference, reference_grad = reference.copy(), reference_grad.copy()
                past_grad, evaluations = _past_grad_sum(model, state.reservoir, n_seen, theta[accepted],
                                                        reference[accepted], reference_grad[accepted])
                reference[accepted], reference_grad[accepted] = theta[accepted], past_grad
                counts["evaluations"] += evaluations
        return theta, reference, reference_grad, past

    def resample(log_weights, arrays):
        log_weights, arrays, resampled = _resample_groups(rng, log_weights, config.resample_threshold, arrays)
        counts["resampled"] += resampled
        return log_weights, arrays

    tempering, reheated, excursed, restart = 0.0, False, False, False
    # A restart re-anneals every row seen so far from the prior: possible while the reservoir holds them all.
    can_restart = config.restart_on_surprise and state.reservoir.n_stored == n_seen
    target_ess = config.target_ess
    # A surprising chunk (see below) anneals with more moves per step, the model's global moves, and optionally
    # finer steps (reheat_target_ess), so the particles can follow the mass to modes the past made remote.
    reheat_mcmc_steps = config.n_mcmc_steps * config.reheat_mcmc_factor
    reheat_ess = config.target_ess if config.reheat_target_ess is None else config.reheat_target_ess
    log_z_before = float(log_mean_exp(log_evidence))
    while tempering < 1.0:
        log_lik = model.log_likelihood(theta, X, y)
        chunk_log_lik = log_lik.sum(axis=1).reshape(n_groups, n_particles)
        _check_finite_log_lik(log_lik, chunk_log_lik, tempering, n_seen)
        counts["evaluations"] += n_total * n_chunk
        if (counts["steps"] == 0 and config.surprise_threshold is not None and n_seen > n_chunk
                and _per_row_spread(log_weights, chunk_log_lik / n_chunk) > config.surprise_threshold):
            # Known to surprise before its first step: the step-count trigger below fires only after
            # reheat_after_steps steps, by which time the chunk may be partly annealed in by particles that missed
            # the new modes (14-19% of the way at 12 steps on the paper's shift stream), a loss never recovered.
            reheated, restart = True, can_restart
            n_mcmc_steps, target_ess = reheat_mcmc_steps, reheat_ess
        remaining = 1.0 - tempering
        if counts["steps"] + 1 >= config.max_annealing_steps:
            delta = _remaining_at_once(remaining, f"annealing the chunk after {n_seen} samples",
                                       config.max_annealing_steps, stacklevel=4)
        else:
            delta = next_tempering_increment(log_weights, chunk_log_lik, remaining, target_ess)
        tempering = 1.0 if delta >= remaining else tempering + delta
        with np.errstate(invalid="ignore"):
            increment = delta * chunk_log_lik
        log_weights, log_evidence, log_evidence_variance = reweight(
            log_weights, log_evidence, log_evidence_variance, increment, f"tempering={tempering:.3g}")
        log_weights, (theta, reference, reference_grad) = resample(log_weights, [theta, reference, reference_grad])
        theta, reference, reference_grad, _ = move(theta, reference, reference_grad, tempering, 1.0, jump=reheated)
        counts["steps"] += 1
        if (not excursed and not restart and config.reheat_after_steps is not None and n_seen > n_chunk
                and counts["steps"] >= config.reheat_after_steps):
            # A surprising chunk: the posterior may be moving to modes that local moves cannot reach. Like the
            # first chunk, the rest of it carries the particles a long way, so it gets more moves per step.
            reheated = excursed = True
            n_mcmc_steps, target_ess = reheat_mcmc_steps, reheat_ess
            if can_restart:  # the replay after the chunk takes the excursion's place
                restart = True
            else:
                theta, log_weights, log_evidence, log_evidence_variance, reference, reference_grad = _reheat_past(
                    state.reservoir, n_seen, n_chunk, theta, log_weights, log_evidence, log_evidence_variance,
                    reference, reference_grad, tempering, model, config, reweight, resample, move, counts)

    if (can_restart and config.restart_growth is not None and n_seen > n_chunk
            and _crossed_checkpoint(n_seen, n_seen + n_chunk, config.batch_size, config.restart_growth)):
        # Particles that settled in a poorer mode find every later chunk easy to anneal, so the triggers above
        # never fire while the evidence falls behind at a fixed rate per row (0.1 nats per row after the second
        # change point of the paper's full shift stream, thousands of nats in all). A restart whenever n has
        # grown by restart_growth re-estimates everything seen so far: amortised O(1) per row.
        restart = True
    reference, reference_grad, n_reference, ref_evals = _refresh_reference(
        state._replace(reference=reference, reference_grad=reference_grad), model, config, theta, X, y)
    counts["evaluations"] += ref_evals
    n_replayed = 0
    if restart:
        # The particles may have missed modes that the past data made remote; an independent run over all rows
        # in a random order meets the new data mixed with the old. Pooled with this one, the evidence keeps the
        # better of the two (up to log 2) and stays unbiased for fixed restart decisions.
        replay, replay_evaluations, replay_n_reference = _replay_from_prior(rng, state.reservoir, X, y, model, config)
        theta, log_weights, log_evidence, log_evidence_variance, reference, reference_grad = _merge_independent_runs(
            rng, (theta, log_weights, log_evidence, log_evidence_variance, reference, reference_grad), replay)
        n_reference = min(n_reference, replay_n_reference)
        counts["evaluations"] += replay_evaluations
        n_replayed = n_seen + n_chunk
    reservoir, undo = reservoir_insert(rng, state.reservoir, X, y)  # last: the only in-place write
    new_state = SGAISState(theta, log_weights, log_evidence, log_evidence_variance, reference, reference_grad,
                           n_reference, reservoir, rng, n_seen + n_chunk, state.n_chunks + 1,
                           state.n_datum_evaluations + counts["evaluations"],
                           _pooled_step_scales(past_scales, n_seen, chunk_scales, n_chunk))
    log_z, log_z_std = combine_replicates(log_evidence, log_evidence_variance)
    ess = float(np.min(ess_from_log_weights(log_weights, axis=1)))
    record = ChunkRecord(n_seen + n_chunk, log_z, log_z_std, counts["steps"], ess,
                         (log_z - log_z_before) / n_chunk, counts["resampled"], time.perf_counter() - tic,
                         counts["reheat_steps"], counts["jumps"], n_replayed)
    return new_state, record, undo


def sgais_stream(rng, model, config, X, y=None):
    """A fresh run over ``(X, y)`` in chunks of ``config.batch_size`` rows, from the prior; its final state."""
    state = sgais_init(rng, model, config, X.shape[1], None if y is None else np.asarray(y).dtype)
    for start in range(0, len(X), config.batch_size):
        stop = start + config.batch_size
        state, _, _ = sgais_update(state, X[start:stop], None if y is None else y[start:stop], model, config)
    return state
