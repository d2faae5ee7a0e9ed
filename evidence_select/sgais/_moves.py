"""SGAIS move kernels: SGHMC, exact HMC or exact draws on the tempered target, then a model's global moves.

The target of a move is ``p(theta) p(chunk|theta)^tempering p(past|theta)^past_power``
(:class:`MoveTarget`). The kernels of one move run in sequence
(:func:`move_kernels`); each takes ``(rng, context, particles, target)`` and
returns ``(particles, counts, past_log_lik)``:

- :func:`exact_hmc_kernel`: on the first rows of a stream (every row seen
  stored, at most ``exact_move_rows`` of them), Metropolis-corrected HMC on the
  exact target, each half of a group moving with the other half's mass
  (:func:`~evidence_select.kernels._particle_hmc.particle_hmc_move`). There the
  particles travel farthest, from the prior to a posterior that may be orders of
  magnitude narrower in some directions and as wide as the prior in others (a
  nearly separable classifier, a stream sorted by class), and SGHMC's step,
  bounded by the stiffest direction's curvature, cannot follow; the exact
  target costs no more than a few mini-batch gradients there;
- :func:`exact_draw_kernel`: in its place, for a model that can sample its
  tempered posterior exactly (``sample_tempered_posterior``: the conjugate
  linear-Gaussian model), independent draws from the target; where the draws
  need only the rows' summed statistics, the state keeps the past rows' sum
  (:func:`past_statistics_of`) and they run at any ``n``, stored rows or not;
- :func:`sghmc_kernel`: otherwise SGHMC (paper Eq. 3-4) or BAOAB on the
  potential whose past-data gradient is a reservoir mini-batch scaled by
  ``n / |B|``, with the control variates of :mod:`._reference`, at a cost
  that does not grow with the rows seen (a model with ``gradient_statistics``
  has its chunk's and each mini-batch's statistics summed once per move, not
  its rows read at every step);
- :func:`jump_kernel`: one Metropolis-Hastings step with the model's
  ``propose_jump`` (mixtures: relocate a component, or redraw the whole
  configuration), whose acceptance needs ``log p(past|theta)``.

:class:`ChunkContext` holds what every move of one chunk shares, built once by
:func:`chunk_context`.
"""

import functools
import math
from typing import NamedTuple

import numpy as np

from ..kernels._hmc import KickedTarget
from ..kernels._particle_hmc import particle_hmc_move_until_decorrelated
from ._reservoir import reservoir_data
from ..kernels._sghmc import TRAJECTORIES
from ..models._protocol import Model
from ..utils._likelihood import log_lik_sum as _log_lik_sum
from ._lag import lag_measurable
from ._reference import past_grad_sum
from ._state import StepCounts

__all__ = ["ChunkContext", "MoveTarget", "GradientBlock", "StepScaling", "chunk_context", "move", "move_kernels",
           "sghmc_kernel", "exact_hmc_kernel", "exact_draw_kernel", "past_statistics_of", "jump_kernel",
           "joint_gradient", "fixed_points_gradient", "past_log_likelihood", "jump_log_acceptance", "SGHMCDivergence",
           "exact_recovery"]


class GradientBlock:
    """Scratch rows of one chunk's gradients: the chunk's rows, then room for a mini-batch, so a gradient is one
    model call.

    ``X`` ``(n_chunk + n_batch, n_features)`` and ``y`` the same rows' targets
    (or None): working memory owned by one chunk's moves, not part of any
    state, whose mini-batch rows are refilled before each gradient (copying the
    chunk's rows for every gradient would cost as much as the gradient); both
    None for a model whose gradient comes from its rows' statistics.
    ``batch_scale`` is ``n_seen / n_batch``, the mini-batch's unbiased scaling.
    """

    __slots__ = ("X", "y", "n_chunk", "n_batch", "batch_scale")

    def __init__(self, X, y, n_chunk, n_batch, batch_scale):
        self.X, self.y = X, y
        self.n_chunk, self.n_batch, self.batch_scale = n_chunk, n_batch, batch_scale

    def weights(self, chunk_weight, batch_weight):
        """Per-row weights of the block ``(n_chunk + n_batch,)``: ``chunk_weight`` then ``batch_weight``."""
        weights = np.empty(self.n_chunk + self.n_batch)
        weights[:self.n_chunk] = chunk_weight
        weights[self.n_chunk:] = batch_weight
        return weights


class StepScaling(NamedTuple):
    """What SGHMC's step is scaled by on one chunk (see :func:`step_size`); each ``(n_params,)`` or None."""

    chunk: np.ndarray  # the chunk's step scales (inverse per-datum curvature)
    past: np.ndarray  # the past rows' pooled step scales
    max_step: np.ndarray  # learning_rate times the prior variances: the cap of the data-scaled step
    gain: np.ndarray  # step_gain where the curvature at the particles lies below the scales' bound


class ChunkContext(NamedTuple):
    """What every move while annealing one chunk shares (see :func:`chunk_context`)."""

    model: object
    config: object  # SGAISConfig
    capabilities: object  # ModelCapabilities: the model's declared kernels and shortcuts
    X: np.ndarray  # the chunk
    y: np.ndarray  # its targets, or None
    n_seen: int  # rows seen before the chunk
    n_groups: int
    reservoir: object  # ReservoirState of the past rows
    block: GradientBlock  # scratch rows of the chunk's gradients
    use_cv: bool  # control variates active (references exist and there is a past)
    scales: StepScaling
    exact_moves: bool  # particles move by exact draws or exact HMC (else SGHMC)
    chunk_statistics: np.ndarray = None  # the chunk's gradient_statistics, for models that offer them
    past_statistics: np.ndarray = None  # every past row's summed gradient_statistics (see past_statistics_of)
    move_factor: int = 1  # SGHMC moves per annealing step, times n_mcmc_steps (see sghmc_move_factor)


class MoveTarget(NamedTuple):
    """The tempered target ``p(theta) p(chunk|theta)^tempering p(past|theta)^past_power`` and the move length."""

    tempering: float
    past_power: float
    n_mcmc_steps: int
    jump: bool  # whether the model's global moves follow SGHMC


def chunk_context(state, X, y, model, config):
    """The :class:`ChunkContext` of annealing ``(X, y)`` into ``state``."""
    capabilities = model.capabilities()
    n_batch = min(config.batch_size, state.reservoir.n_stored)
    chunk_statistics = model.gradient_statistics(X, y) if capabilities.gradient_statistics else None
    past_statistics = past_statistics_of(state, capabilities, chunk_statistics)
    block = _gradient_block(X, y, n_batch, state.n_samples_seen, rows=chunk_statistics is None)
    exact_moves = uses_exact_moves(config, state, len(X), past_statistics is not None)
    scales, moves = _step_scaling(state, X, model, config, n_batch, exact_moves, past_statistics is not None)
    return ChunkContext(model=model, config=config, capabilities=capabilities, X=X, y=y,
                        n_seen=state.n_samples_seen, n_groups=state.log_weights.shape[0], reservoir=state.reservoir,
                        block=block, use_cv=config.control_variates and state.reference is not None and n_batch > 0,
                        scales=scales, exact_moves=exact_moves, chunk_statistics=chunk_statistics,
                        past_statistics=past_statistics, move_factor=moves)


def _step_scaling(state, X, model, config, n_batch, exact_moves, from_statistics):
    """``(StepScaling, move_factor)`` of SGHMC on the chunk ``X`` after ``state``'s rows."""
    # SGHMC's step scales, unless no chunk of the stream will move by SGHMC (exact draws at any n).
    sghmc_never = from_statistics and config.exact_move_rows is None
    chunk_scales = None if sghmc_never else _checked_step_scales(model, X, state.particles.shape[1])
    past_scales = state.step_scales if state.n_samples_seen else None
    # The data-scaled step must not outrun the prior's own curvature (features of scale 1e-6 give step
    # scales ~1e12, and the prior term alone then diverges).
    prior_variances = model.prior_variances
    max_step = None if prior_variances is None else config.learning_rate * np.asarray(prior_variances, dtype=float)
    # The curvature at the particles only shapes SGHMC: a chunk of exact moves does not measure it.
    steps = config.tuning.steps
    floor = relative_step_floor(config, n_batch, state.n_samples_seen, len(X))
    ratio = (None if chunk_scales is None or exact_moves
             else curvature_ratio_at(model, state.particles, X, state.reservoir, n_batch))
    gain, moves = ((None, 1) if ratio is None
                   else (step_gain(ratio, floor), sghmc_move_factor(ratio, floor, steps)))
    return StepScaling(chunk=chunk_scales, past=past_scales, max_step=max_step, gain=gain), moves


def past_statistics_of(state, capabilities, chunk_statistics):
    """The summed ``gradient_statistics`` of every row seen before the chunk, where the model draws exactly from
    them (``capabilities.statistics_draws``), else None; zeros before the first chunk."""
    if chunk_statistics is None or not capabilities.statistics_draws:
        return None
    if state.n_samples_seen == 0:
        return np.zeros_like(chunk_statistics)
    return state.past_statistics


def _gradient_block(X, y, n_batch, n_seen, rows):
    """The chunk's :class:`GradientBlock`; its row buffers only where the gradient reads rows (``rows``)."""
    n_chunk = len(X)
    batch_scale = n_seen / n_batch if n_batch else 0.0
    if not rows:  # the gradient comes from the rows' statistics
        return GradientBlock(None, None, n_chunk, n_batch, batch_scale)
    block_X = np.empty((n_chunk + n_batch, X.shape[1]))
    block_X[:n_chunk] = X
    block_y = None
    if y is not None:
        block_y = np.empty(n_chunk + n_batch, dtype=y.dtype)
        block_y[:n_chunk] = y
    return GradientBlock(block_X, block_y, n_chunk, n_batch, batch_scale)


def uses_exact_moves(config, state, n_chunk, from_statistics=False):
    """Whether a chunk's particles move exactly (:func:`exact_draw_kernel` or :func:`exact_hmc_kernel`).

    Within ``config.exact_move_rows`` rows (None: any number), or within ``CheckSettings.lag_rows`` in a run
    whose SGHMC particles fell behind the posterior (``state.sghmc_fell_behind``), when every row seen is stored
    or the exact draws come from the past rows' summed statistics (``from_statistics``), which cost the same at
    any ``n``.
    """
    n_seen = state.n_samples_seen
    within = config.exact_move_rows is None or n_seen + n_chunk <= config.exact_move_rows
    within = within or (state.sghmc_fell_behind > 0 and lag_measurable(state.reservoir, n_seen + n_chunk, config))
    return within and (from_statistics or state.reservoir.n_stored == n_seen)


def move_kernels(context, target):
    """The kernels of one move on ``target``: exact draws, exact HMC or SGHMC, then the model's global moves.

    Exact moves (``context.exact_moves``) are the model's exact draws where it declares them
    (``capabilities.exact_draws``, or draws from the past rows' statistics), else exact HMC; the global moves
    run when asked and declared (``capabilities.global_jumps``).
    """
    if not context.exact_moves:
        local = sghmc_kernel
    elif context.past_statistics is not None or context.capabilities.exact_draws:
        local = exact_draw_kernel
    else:
        local = exact_hmc_kernel
    if target.jump and context.capabilities.global_jumps:
        return (local, jump_kernel)
    return (local,)


def joint_gradient(model, capabilities=None):
    """``(theta, X, y, weights) -> grad log prior + grad log likelihood`` of ``model``.

    The model's fused ``grad_log_joint`` where it declares it
    (``capabilities.fused_joint_gradient``; ``capabilities`` defaults to the
    model's declaration), else the protocol's sum of the two terms.
    """
    capabilities = model.capabilities() if capabilities is None else capabilities
    if capabilities.fused_joint_gradient:
        return model.grad_log_joint
    return functools.partial(Model.grad_log_joint, model)  # the protocol's default: the two terms' sum


def fixed_points_gradient(model, theta, capabilities=None):
    """``(X, y, weights) -> grad_log_likelihood(theta, X, y, weights)`` for points ``theta`` fixed over a move.

    The model's ``grad_log_likelihood_at`` (their own work done once) where it
    declares it (``capabilities.fused_fixed_points``), else
    ``grad_log_likelihood`` with ``theta`` bound.
    """
    capabilities = model.capabilities() if capabilities is None else capabilities
    if capabilities.fused_fixed_points:
        return model.grad_log_likelihood_at(theta)
    return Model.grad_log_likelihood_at(model, theta)  # the protocol's default: theta bound


def move(rng, context, particles, target):
    """Apply :func:`move_kernels` in turn; returns ``(particles, counts, past_log_lik)``.

    ``past_log_lik`` ``(n_total,)`` is ``log p(past|theta)`` at the returned
    particles when the last kernel computed it (the global move's acceptance),
    else None.
    """
    counts, past_log_lik = StepCounts(), None
    for kernel in move_kernels(context, target):
        particles, kernel_counts, past_log_lik = kernel(rng, context, particles, target)
        counts = counts.plus(kernel_counts)
    return particles, counts, past_log_lik


def step_size(context, target):
    """SGHMC step size for ``target``: ``learning_rate`` over the data weight, times the model's step scales.

    ``eta = learning_rate / max(past_power n + w_chunk, 1)``, ``w_chunk`` the
    chunk's weight (``tempering |chunk|`` for the ``"tempered"`` schedule,
    ``|chunk|`` for ``"data"``), times the pooled inverse per-datum curvature,
    lengthened where the curvature at the particles is below the scales' bound
    (:func:`step_gain`), and capped at ``learning_rate`` times the prior
    variances. Scalar or ``(n_params,)``.
    """
    config, n_past, scales = context.config, context.n_seen, context.scales
    chunk_weight = (target.tempering if config.step_size_schedule == "tempered" else 1.0) * context.block.n_chunk
    size = config.learning_rate / max(target.past_power * n_past + chunk_weight, 1.0)
    if scales.chunk is not None:
        size = size * pooled_step_scales(scales.past, target.past_power * n_past, scales.chunk, chunk_weight)
        if scales.gain is not None:
            size = size * scales.gain
        if scales.max_step is not None:
            size = np.minimum(size, scales.max_step)
    return size


class _GradientEstimate(NamedTuple):
    """The pieces of one move's gradient estimator from the rows (see :func:`_grad_log_target`)."""

    joint_gradient: object  # joint_gradient(model)
    block: GradientBlock
    weights: np.ndarray  # (n_chunk + n_batch,) the block's row weights: tempering, then past_power n / |B|
    reservoir_rows: tuple  # (res_X, res_y)
    batch_rows: np.ndarray  # (n_steps, n_batch) reservoir indices, one mini-batch per gradient, or None
    reference_gradient: object  # fixed_points_gradient(model, reference), or None (no control variates)
    past_reference_grad: np.ndarray  # past_power times their exact past gradient sums
    batch_weight: float  # past_power * n / |B|


def _grad_log_target(estimate, current, step):
    """Unbiased estimate of ``grad log target`` at ``current`` for integrator step ``step``.

    Prior + chunk rows weighted by ``tempering`` + mini-batch rows weighted by
    ``past_power n / |B|`` in one model call; with control variates, plus the
    references' exact past sum minus the same mini-batch's estimate of it.
    """
    block = estimate.block
    n_chunk = block.n_chunk
    batch_X, batch_y = block.X[n_chunk:], None if block.y is None else block.y[n_chunk:]
    if block.n_batch:
        res_X, res_y = estimate.reservoir_rows
        np.take(res_X, estimate.batch_rows[step], axis=0, out=batch_X)
        if batch_y is not None:
            np.take(res_y, estimate.batch_rows[step], out=batch_y)
    grad = estimate.joint_gradient(current, block.X, block.y, estimate.weights)
    if estimate.reference_gradient is not None:
        grad += estimate.past_reference_grad - estimate.reference_gradient(batch_X, batch_y, estimate.batch_weight)
    return grad


class _StatisticsEstimate(NamedTuple):
    """The same estimator from a model's additive gradient statistics (see :func:`_grad_log_target_from_statistics`)."""

    model: object
    target_statistics: np.ndarray  # (n_steps, ...): tempering * chunk's + past_power n / |B| * each mini-batch's
    batch_statistics: np.ndarray  # (n_steps, ...): past_power n / |B| times each mini-batch's; None without CVs
    reference: np.ndarray
    past_reference_grad: np.ndarray


def _grad_log_target_from_statistics(estimate, current, step):
    """:func:`_grad_log_target`'s estimate, each weighted row sum read from the statistics of its rows."""
    model = estimate.model
    grad = model.grad_log_prior(current) + model.grad_from_statistics(current, estimate.target_statistics[step])
    if estimate.reference is not None:
        grad += estimate.past_reference_grad - model.grad_from_statistics(estimate.reference,
                                                                          estimate.batch_statistics[step])
    return grad


def _gradient_function(context, reference, past_reference_grad, batch_rows, target):
    """``grad(theta, step)`` of one move: from the rows, or from their statistics where the model offers them.

    Both are the same estimator (the same rows and weights), so they differ by rounding only.
    """
    build = _rows_gradient if context.chunk_statistics is None else _statistics_gradient
    return build(context, reference, past_reference_grad, batch_rows, target)


def _rows_gradient(context, reference, past_reference_grad, batch_rows, target):
    """:func:`_grad_log_target` on the chunk and mini-batch rows, weighted in the context's block."""
    block, model, capabilities = context.block, context.model, context.capabilities
    batch_weight = target.past_power * block.batch_scale
    reference_gradient = None if reference is None else fixed_points_gradient(model, reference, capabilities)
    return functools.partial(_grad_log_target, _GradientEstimate(
        joint_gradient=joint_gradient(model, capabilities), block=block,
        weights=block.weights(target.tempering, batch_weight), reservoir_rows=reservoir_data(context.reservoir),
        batch_rows=batch_rows, reference_gradient=reference_gradient, past_reference_grad=past_reference_grad,
        batch_weight=batch_weight))


def _statistics_gradient(context, reference, past_reference_grad, batch_rows, target):
    """:func:`_grad_log_target_from_statistics`: the chunk's statistics (summed once per chunk) and every step's
    mini-batch statistics, summed in one batched call per move."""
    model, chunk_statistics = context.model, context.chunk_statistics
    target_statistics = np.broadcast_to(target.tempering * chunk_statistics,
                                        (target.n_mcmc_steps,) + chunk_statistics.shape)
    batch_statistics = None
    if batch_rows is not None:
        res_X, res_y = reservoir_data(context.reservoir)
        batch_X = np.take(res_X, batch_rows, axis=0)  # np.take: several times faster than fancy indexing here
        batch_statistics = model.gradient_statistics(batch_X, None if res_y is None else res_y[batch_rows])
        batch_statistics *= target.past_power * context.block.batch_scale
        target_statistics = target_statistics + batch_statistics
    return functools.partial(_grad_log_target_from_statistics, _StatisticsEstimate(
        model=model, target_statistics=target_statistics, batch_statistics=batch_statistics, reference=reference,
        past_reference_grad=past_reference_grad))


class SGHMCDivergence(FloatingPointError):
    """SGHMC left a particle non-finite: its step outran the target's curvature (see :func:`exact_recovery`).

    ``what`` says where it happened (the chunk, the tempering, the step size); the message adds the cure.
    """

    def __init__(self, what):
        super().__init__(f"{what}; lower learning_rate or standardise the features")
        self.what = what

    def __reduce__(self):  # from a worker process: rebuilt from ``what``, not from the full message
        return type(self), (self.what,)


def exact_recovery(config, state, n_chunk):
    """The config that anneals a chunk of ``n_chunk`` rows into ``state`` again with exact moves after SGHMC
    diverged on it, or None where exact moves cannot run (the reservoir no longer holds every row seen).

    Exact moves are Metropolis-corrected: a step that outruns the curvature is rejected and the step size adapts,
    so they follow what SGHMC, sized for unit-scale rows, cannot (an extreme row's sharp likelihood).
    """
    recovered = config._replace(exact_move_rows=state.n_samples_seen + n_chunk)
    return recovered if uses_exact_moves(recovered, state, n_chunk) else None


def sghmc_kernel(rng, context, particles, target):
    """``target.n_mcmc_steps`` SGHMC (or BAOAB) steps on ``target``; the references are left as they are."""
    block, config = context.block, context.config
    n_steps, n_chunk, n_batch = target.n_mcmc_steps, block.n_chunk, block.n_batch
    reference_grad = particles.reference_grad
    # The control variate's exact past sum, scaled once per move rather than once per gradient.
    past_reference_grad = (reference_grad if target.past_power == 1.0 or not context.use_cv
                           else target.past_power * reference_grad)
    batch_rows = rng.integers(0, context.reservoir.n_stored, size=(n_steps, n_batch)) if n_batch else None
    grad_fn = _gradient_function(context, particles.reference if context.use_cv else None, past_reference_grad,
                                 batch_rows, target)
    size = step_size(context, target)
    theta = TRAJECTORIES[config.integrator](rng, particles.theta, grad_fn,
                                            step_size=size, friction=config.friction, n_steps=n_steps)
    n_evaluations = n_steps * len(theta) * (n_chunk + n_batch * (2 if context.use_cv else 1))
    if not np.all(np.isfinite(theta)):
        raise SGHMCDivergence(
            f"SGHMC diverged (non-finite particles) on the chunk after {context.n_seen} samples at tempering "
            f"{target.tempering:.3g}, step size {np.max(size):.3g}")
    return particles._replace(theta=theta), StepCounts(n_evaluations=n_evaluations), None


def exact_hmc_kernel(rng, context, particles, target):
    """Metropolis-corrected HMC on the exact ``target``, each half of a group with the other half's mass.

    Runs while the reservoir holds every past row (:func:`uses_exact_moves`), so
    the target is evaluated exactly and every transition leaves it invariant. A
    group repeats the move while its particles still correlate with where the
    move began (``ExactMoveSettings.max_repeats``); a group whose repeats ran out with its
    particles still correlated is counted in ``n_correlated_moves`` (kept in
    the chunk's record).
    The groups' adapted leapfrog steps (``particles.exact_step``, from
    ``ExactMoveSettings.initial_step`` at the chunk's start) are carried to the
    chunk's next move. The references are left as they are.
    """
    model, settings = context.model, context.config.tuning.exact_moves
    data_X, data_y, weights = _exact_rows(context, target)
    step = particles.exact_step
    if step is None:
        step = np.full(context.n_groups, settings.initial_step)
    n_transitions = max(1, settings.move_factor * target.n_mcmc_steps // settings.leapfrog)
    theta, info = particle_hmc_move_until_decorrelated(
        rng, particles.theta, _exact_target(model, data_X, data_y, weights), n_groups=context.n_groups,
        step_size=step, log_weights=particles.log_weights, max_repeats=settings.max_repeats,
        max_correlation=settings.max_correlation, n_transitions=n_transitions,
        trajectory_length=settings.trajectory_length, max_leapfrog=settings.max_leapfrog)
    correlated = int(np.count_nonzero(info.start_correlation > settings.max_correlation))
    counts = StepCounts(n_evaluations=info.n_evaluations * len(theta) * len(data_X), n_correlated_moves=correlated)
    return particles._replace(theta=theta, exact_step=info.step_size), counts, None


def exact_draw_kernel(rng, context, particles, target):
    """Independent exact draws from ``target`` (a conjugate model's tempered posterior).

    Runs where :func:`exact_hmc_kernel` would (:func:`uses_exact_moves`), for
    models that can sample their tempered posterior exactly (the linear-Gaussian
    model). The draw is the kernel ``K(theta, .) = target``: invariant, and
    mixed in one step. From the chunk's and the past rows' summed statistics
    where the model offers ``sample_tempered_posterior_from_statistics`` (no
    pass over rows, so at any ``n``), else by ``sample_tempered_posterior`` over
    the chunk and the stored past rows. The references are left as they are;
    every particle becomes its own origin (:func:`~._steps.count_lineages`).
    """
    if context.past_statistics is not None:
        statistics = target.tempering * context.chunk_statistics + target.past_power * context.past_statistics
        theta = context.model.sample_tempered_posterior_from_statistics(rng, len(particles.theta), statistics)
        n_evaluations = 0  # no pass over rows: the chunk's statistics were summed once, the past's kept
    else:
        data_X, data_y, weights = _exact_rows(context, target)
        theta = context.model.sample_tempered_posterior(rng, len(particles.theta), data_X, data_y, weights)
        n_evaluations = len(data_X)
    theta = np.asarray(theta, dtype=float)
    if theta.shape != particles.theta.shape:
        raise ValueError(f"{type(context.model).__name__}'s exact draws (sample_tempered_posterior"
                         f"{'_from_statistics' if context.past_statistics is not None else ''}) returned shape "
                         f"{theta.shape}, expected {particles.theta.shape}")
    # Each draw is independent of the particle it replaces, so it starts a path of its own: the lineages that
    # resampling merged before this move no longer bound the independent paths the evidence averages over.
    origins = None if particles.origins is None else np.arange(len(theta))
    return particles._replace(theta=theta, origins=origins), StepCounts(n_evaluations=n_evaluations), None


def _exact_rows(context, target):
    """The chunk's rows then every past row, with their powers in ``target``: ``(X, y or None, weights)``."""
    past_X, past_y = reservoir_data(context.reservoir)
    n_chunk = len(context.X)
    data_X = np.concatenate([context.X, past_X])
    data_y = None if context.y is None else np.concatenate([context.y, past_y])
    weights = np.full(len(data_X), target.past_power)
    weights[:n_chunk] = target.tempering
    return data_X, data_y, weights


def _exact_target(model, X, y, weights):
    """The exact tempered target of :func:`exact_hmc_kernel` on the rows ``(X, y)`` with per-row ``weights``.

    ``theta -> (log_density, grad, None)`` from the model's fused call; for a
    model with a ``fast_gradient`` a :class:`~..kernels._hmc.KickedTarget`,
    whose trajectories kick with that gradient and read the log-likelihood only
    at their ends.
    """
    # A leapfrog trajectory can leave the region where the model's terms are finite (a mixture's variance
    # overflowing); the non-finite energy then rejects it, so numpy's warnings carry no news here.
    quiet = functools.partial(np.errstate, invalid="ignore", over="ignore", divide="ignore")

    def log_density(theta):
        with quiet():
            log_lik, grad_lik = model.log_likelihood_and_grad(theta, X, y, weights)
            return model.log_prior(theta) + log_lik, model.grad_log_prior(theta) + grad_lik, None

    if not model.fast_gradient:
        return log_density

    gradient = joint_gradient(model)

    def kick_gradient(theta):
        with quiet():
            return gradient(theta, X, y, weights)

    def density(theta):
        with quiet():
            return model.log_prior(theta) + model.log_likelihood(theta, X, y) @ weights, None

    return KickedTarget(log_density, kick_gradient, density)


def jump_kernel(rng, context, particles, target):
    """One Metropolis-Hastings step with the model's global proposal on ``target``.

    With control variates, the accepted particles' references move with them
    (their past gradient sums from :func:`past_grad_sum`), which keeps the
    control variates' variance low. Returns the past log-likelihood at the
    returned particles (None without past rows).
    """
    model, n_past, theta = context.model, context.n_seen, particles.theta
    res_X, _ = reservoir_data(context.reservoir)
    # Far outside the unit scale a proposal can overflow (a variance's exp, a kernel density's scale); its
    # NaN or infinite log acceptance then rejects it below, so numpy's overflow warnings carry no news here.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        proposal, log_proposal_ratio = model.propose_jump(
            rng, theta, context.X, chunk_weight=target.tempering, past_X=res_X if n_past else None,
            past_weight=target.past_power * n_past / len(res_X) if n_past else 0.0, n_groups=context.n_groups)
        log_accept, past, n_evaluations = jump_log_acceptance(context, theta, proposal, log_proposal_ratio, target)
    accepted = np.log(rng.random(len(theta))) < log_accept  # NaN compares False: rejected
    if past is not None:
        past = np.where(accepted, past[len(theta):], past[:len(theta)])
    theta = np.where(accepted[:, None], proposal, theta)
    reference, reference_grad = particles.reference, particles.reference_grad
    if context.use_cv and accepted.any():
        reference, reference_grad = reference.copy(), reference_grad.copy()
        past_grad, evaluations = past_grad_sum(model, context.reservoir, n_past, theta[accepted],
                                               reference[accepted], reference_grad[accepted])
        reference[accepted], reference_grad[accepted] = theta[accepted], past_grad
        n_evaluations += evaluations
    counts = StepCounts(n_evaluations=n_evaluations, n_jumps=int(accepted.sum()))
    return particles._replace(theta=theta, reference=reference, reference_grad=reference_grad), counts, past


def past_log_likelihood(model, reservoir, n_past, theta):
    """``log p(past | theta)`` per particle, exact: the reservoir must hold every past row.

    It enters importance weights and Metropolis-Hastings acceptances as an
    exponent, where a subsample's scaled sum would not be an unbiased estimate
    of the likelihood; callers run only while the past is complete (see
    :func:`~._policy.surprise_policy`). A NaN stays NaN (callers read it as
    zero likelihood). Returns ``(log_lik (n_total,), n_datum_evaluations)``.
    """
    if reservoir.n_stored != n_past:
        raise RuntimeError(f"the exact past log-likelihood needs every past row; the reservoir holds "
                           f"{reservoir.n_stored} of {n_past}")
    res_X, res_y = reservoir_data(reservoir)
    total = _log_lik_sum(model, theta, res_X, res_y, allow_nan=True)
    return total, len(theta) * len(res_X)


def jump_log_acceptance(context, theta, proposal, log_proposal_ratio, target):
    """Log Metropolis-Hastings ratio of ``theta -> proposal`` for ``target``.

    The past term is :func:`past_log_likelihood` (exact, so the kernel is
    exactly invariant for the tempered target). Returns
    ``(log_accept (n_total,), past_log_lik (2 n_total,) of theta then proposal or None,
    n_datum_evaluations)``.
    """
    model, X, y, n_past = context.model, context.X, context.y, context.n_seen
    both = np.vstack([theta, proposal])
    log_target = model.log_prior(both) + target.tempering * model.log_likelihood(both, X, y).sum(axis=1)
    evaluations = len(both) * len(X)
    past = None
    if n_past:
        past, past_evaluations = past_log_likelihood(model, context.reservoir, n_past, both)
        log_target = log_target + target.past_power * past
        evaluations += past_evaluations
    n_total = len(theta)
    with np.errstate(invalid="ignore"):
        return log_target[n_total:] - log_target[:n_total] + log_proposal_ratio, past, evaluations


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


def relative_step_floor(config, n_batch, n_past, n_chunk):
    """The floor of SGHMC's step, in units of ``learning_rate`` over the curvature at the particles, below which
    :func:`step_gain` lengthens it: ``StepSettings.typical_curvature_ratio``, or less where mini-batch noise
    allows less.

    A step ``eta`` with gradient noise of variance ``V`` adds ``eta V`` to the momentum's variance per step,
    against the ``1 - (1 - friction)^2`` that the friction's refresh injects. For rows of the model's own law,
    the mini-batch estimate of the ``n_past`` past rows' gradient from ``|B|`` of them has ``V ~ n_past^2 / |B|``
    per-row Fisher informations, and a step at ``floor`` times ``learning_rate`` over the curvature of all
    ``n = n_past + n_chunk`` rows is ``eta = learning_rate floor / n`` per-row Fisher informations: the floor
    keeps ``eta V`` within ``StepSettings.gradient_noise_share`` of the refresh. Without past rows there is no
    mini-batch.
    """
    steps = config.tuning.steps
    if not (n_batch and n_past):
        return steps.typical_curvature_ratio
    refresh = 1.0 - (1.0 - config.friction) ** 2
    allowed = steps.gradient_noise_share * refresh * n_batch * (n_past + n_chunk) / (config.learning_rate * n_past**2)
    return min(steps.typical_curvature_ratio, allowed)


def curvature_ratio_at(model, theta, X, reservoir, n_sample):
    """``model.curvature_ratio`` at the particles ``theta`` over the chunk ``X`` and an evenly strided sample of
    at most ``n_sample`` stored past rows, each weighted by the rows it stands for, validated; None for a model
    without :meth:`~evidence_select.models.Model.curvature_ratio` (its step scales are exact).
    """
    rows, weights = np.asarray(X, dtype=float), np.ones(len(X))
    past, _ = reservoir_data(reservoir)
    if len(past) and n_sample:
        sample = past[:: max(1, len(past) // n_sample)][:n_sample]
        rows = np.concatenate([rows, sample])
        weights = np.concatenate([weights, np.full(len(sample), reservoir.n_seen / len(sample))])
    ratio = model.curvature_ratio(theta, rows, weights)
    if ratio is None:
        return None
    ratio = np.asarray(ratio, dtype=float)
    if ratio.shape != (theta.shape[1],) or not np.all((ratio > 0) & (ratio <= 1)):
        raise ValueError(f"{type(model).__name__}.curvature_ratio must return {theta.shape[1]} values in (0, 1]; "
                         f"got {ratio!r}")
    return ratio


def step_gain(ratio, floor):
    """The factor by which SGHMC's step grows where the curvature ``ratio`` at the particles lies far below the
    step scales' bound (:func:`curvature_ratio_at`): ``max(floor / ratio, 1)`` per parameter.

    In units of that curvature the step is ``learning_rate * ratio * gain``, never below ``floor *
    learning_rate`` (:func:`relative_step_floor`). A posterior that separates the classes is thousands of
    times flatter than the softmax's bound and keeps moving as rows arrive; with the bound's step the
    particles fall behind it, chunk after chunk, while every importance weight looks healthy.
    """
    return np.maximum(floor / ratio, 1.0)


def sghmc_move_factor(ratio, floor, steps):
    """SGHMC moves per annealing step, in units of ``n_mcmc_steps``, where the mini-batch noise kept the step
    shorter than the curvature asked: the square root of the shortfall, rounded down, up to
    ``steps.max_move_factor`` (``steps`` a :class:`~._settings.StepSettings`).

    ``shortfall`` is the largest over the parameters of the step growth the curvature asks for
    (:func:`step_gain` at ``steps.typical_curvature_ratio``) over the growth granted at ``floor``. The particles must
    then travel farther than the granted step carries them in the usual moves; more moves at that step let
    them follow without adding noise per move. The square root is the diffusive travel of moves, and the
    rounding down keeps runs whose shortfall is small (a softmax whose classes overlap) at their moves.
    """
    shortfall = float(np.max(step_gain(ratio, steps.typical_curvature_ratio) / step_gain(ratio, floor)))
    return int(min(steps.max_move_factor, max(1, math.floor(math.sqrt(shortfall)))))


def pooled_step_scales(past_scales, n_past, chunk_scales, chunk_weight):
    """Step scales of past rows (weight ``n_past``) and chunk rows (weight ``chunk_weight``) pooled.

    Scales are inverse per-datum curvatures, so curvatures are averaged:
    ``(n + w) / (n / s_past + w / s_chunk)``.
    """
    if chunk_scales is None or past_scales is None or n_past == 0:
        return chunk_scales
    if chunk_weight == 0:
        return past_scales
    return (n_past + chunk_weight) / (n_past / past_scales + chunk_weight / chunk_scales)
