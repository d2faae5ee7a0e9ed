"""The SGAIS tempering step as pure functions: choose the increment, reweight, resample, move.

One step moves every replicate group from ``pi_a ∝ p(theta) L(theta)^a`` to
``pi_b`` with ``b = a + delta``, for some log-likelihood ``log L`` (the chunk's
while it is annealed in, the past data's during an excursion): the weights are
multiplied by ``L^delta``, the group's evidence by the weighted mean of those
factors (Algorithm 1 of the SGAIS paper, lines 6-8), the groups whose ESS fell
too low are resampled, and the particles move by kernels that leave ``pi_b``
invariant (:mod:`._moves`). Every function returns new arrays; the
per-step counters are an immutable :class:`StepCounts`.
"""

import numpy as np

from ..kernels._resampling import systematic_resample
from ..kernels._schedule import next_tempering_increment
from ..utils import ess_from_log_weights, logsumexp
from ..utils._warnings import warn
from ._moves import move
from ._state import Particles, SamplerDegeneracyWarning, StepCounts

__all__ = ["reweight", "segment_log_variance", "resample", "count_lineages", "choose_increment", "tempering_step"]


def reweight(particles, log_increments, where):
    """Multiply the weights by ``exp(log_increments)``; each group's evidence grows by their weighted mean.

    ``log_increments`` has shape ``(n_groups, n_particles)`` (NaN reads as zero
    likelihood). The weights were normalised, so ``log sum_i W_i w_i`` is the
    log evidence increment. ``log_evidence_variance`` grows by the change of
    :func:`segment_log_variance`, so it always holds the closed resampling
    segments plus the open one. Raises FloatingPointError naming ``where`` when
    a group's weights all vanish.
    """
    log_weights = particles.log_weights + np.where(np.isnan(log_increments), -np.inf, log_increments)
    log_increment = logsumexp(log_weights, axis=1)
    if not np.all(np.isfinite(log_increment)):
        raise FloatingPointError(f"all particles of a group have zero weight {where}")
    new_log_weights = log_weights - log_increment[:, None]
    variance = (particles.log_evidence_variance + segment_log_variance(new_log_weights)
                - segment_log_variance(particles.log_weights))
    return particles._replace(log_weights=new_log_weights, log_evidence=particles.log_evidence + log_increment,
                              log_evidence_variance=variance)


def segment_log_variance(log_weights):
    """``log(1 + relative variance)`` of each group's evidence increment since its weights were last uniform.

    Between resamplings the product of a segment's step increments telescopes to
    ``sum_i w_i / n``, ``w_i`` the product of particle ``i``'s increments along its
    own path (the weights start uniform: at the prior, after a resampling or a
    merge). That is an importance sampler over whole paths, whose relative
    variance for independent starts is ``sum_i (W_i - 1/n)^2 = sum_i W_i^2 - 1/n``
    with ``W`` the current normalised weights. Unlike a sum of per-step
    variances it keeps the correlation between one particle's successive
    increments (moves that do not mix fully carry a heavy weight from step to
    step), which that sum leaves out. Shape ``(n_groups,)``.
    """
    n_particles = log_weights.shape[1]
    sum_squares = np.exp(logsumexp(2 * log_weights, axis=1))
    return np.log1p(np.maximum(sum_squares - 1.0 / n_particles, 0.0))


def resample(rng, particles, threshold):
    """Resample (systematic) the groups whose ESS fraction fell below ``threshold``.

    Each particle is drawn in expectation ``n W_i`` times and the weights reset
    to uniform, so weighted averages, and the evidence, stay unbiased. The
    references and origins travel with their particles. Returns ``(particles, n_groups_resampled)``.
    """
    log_weights = particles.log_weights
    n_groups, n_particles = log_weights.shape
    need = ess_from_log_weights(log_weights, axis=1) < threshold * n_particles
    if not need.any():
        return particles, 0
    ancestors = np.tile(np.arange(n_particles), (n_groups, 1))
    ancestors[need] = systematic_resample(rng, log_weights[need])
    flat = (ancestors + n_particles * np.arange(n_groups)[:, None]).ravel()
    log_weights = log_weights.copy()
    log_weights[need] = -np.log(n_particles)
    theta, reference, reference_grad, origins = (
        None if a is None else a[flat]
        for a in (particles.theta, particles.reference, particles.reference_grad, particles.origins))
    return particles._replace(theta=theta, log_weights=log_weights, reference=reference,
                              reference_grad=reference_grad, origins=origins), int(need.sum())


def count_lineages(particles):
    """The largest number, over groups, of distinct ``origins`` among a group's particles (0 if untracked).

    Resampling copies some particles and drops others, so after a chunk each
    group's particles descend from a subset of its particles at the chunk's
    start; the size of that subset is the number of independent paths the
    group's evidence increment averages over.
    """
    if particles.origins is None:
        return 0
    origins = np.sort(particles.origins.reshape(particles.log_weights.shape), axis=1)
    return int(np.max(1 + np.sum(origins[:, 1:] != origins[:, :-1], axis=1)))


def choose_increment(log_weights, log_lik, remaining, target_ess, cap_message=None):
    """The next increment in ``(0, remaining]``: the largest keeping the conditional ESS at ``target_ess``.

    With ``cap_message`` (a step cap was reached; the message says which) the
    whole ``remaining`` is taken at once, with a :class:`SamplerDegeneracyWarning`.
    The choice depends on the particles, which makes the schedule adaptive (see
    the unbiasedness notes of :mod:`._engine`).
    """
    if cap_message is not None:
        warn(f"{cap_message}; taking the remaining step at once (the particle system may be degenerate: "
             "consider more particles or a lower learning_rate)", SamplerDegeneracyWarning)
        return remaining
    return next_tempering_increment(log_weights, log_lik, remaining, target_ess)


def tempering_step(rng, context, particles, log_lik, delta, target, where):
    """Reweight by ``delta * log_lik``, resample if the ESS asks, then move on ``target``.

    ``log_lik`` ``(n_groups, n_particles)`` is the log-likelihood being tempered
    (NaN or ``-inf``: zero likelihood); ``target`` the :class:`MoveTarget` that the
    moves leave invariant (the distribution the reweighting arrived at); ``where``
    names the step in error messages.
    Returns ``(particles, counts, past_log_lik)``, the last as from :func:`move`.
    """
    with np.errstate(invalid="ignore"):
        increment = delta * log_lik
    particles = reweight(particles, increment, where)
    particles, n_resampled = resample(rng, particles, context.config.resample_threshold)
    particles, counts, past_log_lik = move(rng, context, particles, target)
    return particles, counts.plus(StepCounts(n_resampled=n_resampled)), past_log_lik
