"""Galilean Monte Carlo under a likelihood constraint: straight moves that reflect off ``log L = log_lik_min``.

The nested-sampling move for models with gradients (Skilling, "Bayesian
computation in big spaces: nested sampling and Galilean Monte Carlo", 2012;
Feroz and Skilling, 2013). Each chain carries a velocity ``v`` in whitened
coordinates ``theta = L z`` (``L`` a fixed factor, e.g. the Cholesky factor of
the live points' covariance). One step proposes, from ``(x, v)``:

- ``x1 = x + eps L v``; if ``x1`` satisfies the constraint, ``(x1, v)``;
- otherwise ``v`` is reflected off the constraint surface at ``x1``,
  ``v' = v - 2 (v . n) n`` with ``n`` the unit normal ``L^T grad log L(x1)`` in
  whitened coordinates, and the proposal is ``(x1 + eps L v', v')`` if that
  point satisfies the constraint;
- otherwise the chain stays and reverses, ``(x, -v)``.

The proposal followed by a velocity flip is an involution that preserves volume
(a translation and an orthogonal reflection), and the velocity's Gaussian
density is unchanged, so accepting the new point with probability
``min(1, p(x_new) / p(x))`` under the prior ``p`` and reversing the velocity on
rejection leaves ``p(theta) 1[log L(theta) > log_lik_min] N(v; 0, I)`` invariant.
Velocities are redrawn at the start of every trajectory.

Why. Along a slow direction of the constrained prior (a thin curved ridge, the
long axes of a badly conditioned Gaussian), a random-direction slice move in
``d`` dimensions moves each coordinate by a fraction ``~1/sqrt(d)`` of its step
and in a random direction, so a replacement's memory of its start shrinks
diffusively and ever more slowly as ``d`` grows. A Galilean trajectory moves
every coordinate at once and keeps going the same way between reflections.

Every chain moves at once: one batched likelihood-and-gradient call for the
straight proposals, one likelihood call for the reflected ones (whose gradient
no step uses) where a likelihood-only function is given. Where a gradient
function is given too (a model whose gradient alone is cheap), the straight
proposals take the likelihood alone and the gradient only where they land
outside, the one place a step uses it; any gradient that is a fixed function of
the position keeps the reflection an involution.
"""

from typing import NamedTuple

import numpy as np

from ._constrained import ConstrainedPoints

__all__ = ["GalileanInfo", "GalileanSettings", "galilean_sample", "adapt_galilean_step"]


class GalileanInfo(NamedTuple):
    """Totals over chains and steps of :func:`galilean_sample`.

    n_likelihood_calls : int, likelihood-and-gradient evaluations of one
    parameter vector; n_straight, n_reflected : int, steps that moved straight
    on or after a reflection; n_reversed : int, steps that stayed and reversed.
    """

    n_likelihood_calls: int
    n_straight: int
    n_reflected: int
    n_reversed: int


def _evaluate(points, log_prior_fn, log_lik_fn, with_grad=True):
    """Log prior, log-likelihood and its gradient at ``points`` (likelihood only where the prior is finite).

    ``log_lik_fn`` returns ``(log_lik, grad)`` with ``with_grad``, else the log-likelihood alone (the gradient
    returned is then zeros).
    """
    log_prior = np.asarray(log_prior_fn(points), dtype=float)
    if np.any(np.isnan(log_prior)):
        raise ValueError("log_prior returned NaN during Galilean Monte Carlo")
    log_lik = np.full(len(points), -np.inf)
    grad = np.zeros_like(points)
    finite = np.isfinite(log_prior)
    if np.any(finite):
        with np.errstate(over="ignore", invalid="ignore"):
            if with_grad:
                values, grad[finite] = log_lik_fn(points[finite])
            else:
                values = log_lik_fn(points[finite])
        values = np.array(values, dtype=float)
        values[np.isnan(values)] = -np.inf  # an overflow far out is outside the constraint, not an error
        log_lik[finite] = values
    return log_prior, log_lik, grad, int(finite.sum())


def _reflect(velocity, grad, factor):
    """Velocities reflected off the surface whose normal is ``L^T grad`` (unchanged where that normal is 0)."""
    normal = grad @ factor
    norm = np.linalg.norm(normal, axis=1, keepdims=True)
    ok = np.isfinite(norm[:, 0]) & (norm[:, 0] > 0)
    normal = np.where(ok[:, None], normal / np.where(ok[:, None], norm, 1.0), 0.0)
    return velocity - 2.0 * np.sum(velocity * normal, axis=1, keepdims=True) * normal, ok


class GalileanSettings(NamedTuple):
    """How :func:`galilean_sample` moves.

    direction_factor : ndarray of shape (n_params, n_params)
        Lower-triangular factor ``L`` of the whitening.
    step_size : float, default=0.5
        Step ``eps`` in whitened units.
    n_steps : int, default=20
        Steps per chain.
    trajectory_length : int, default=10
        Steps between fresh velocities.
    """

    direction_factor: np.ndarray
    step_size: float = 0.5
    n_steps: int = 20
    trajectory_length: int = 10


class _Problem(NamedTuple):
    """What a step needs besides the chains' state: the constraint, the densities and the whitened step."""

    log_lik_min: float
    log_prior_fn: object
    log_lik_and_grad_fn: object
    log_lik_only_fn: object  # the log-likelihood alone, for the reflected proposals
    factor: np.ndarray
    step_size: float
    gradient_fn: object = None  # the gradient alone: the straight proposals then take the likelihood alone


def _step(rng, state, problem):
    """One Galilean step of every chain from ``state = (position, log_prior, log_lik, velocity)``.

    Returns the new state and the counts ``(calls, straight, reflected, reversed)``.
    """
    position, log_prior, log_lik, velocity = state
    log_lik_min, log_prior_fn, log_lik_and_grad_fn, log_lik_only_fn, factor, step_size, gradient_fn = problem
    first = position + step_size * (velocity @ factor.T)
    if gradient_fn is None:
        prior1, lik1, grad1, calls = _evaluate(first, log_prior_fn, log_lik_and_grad_fn)
    else:
        prior1, lik1, grad1, calls = _evaluate(first, log_prior_fn, log_lik_only_fn, with_grad=False)
    inside1 = lik1 > log_lik_min
    needed = ~inside1 & np.isfinite(prior1) if gradient_fn is not None else None
    if needed is not None and np.any(needed):  # the reflections' normals; the same points' call, counted once
        with np.errstate(over="ignore", invalid="ignore"):
            grad1[needed] = gradient_fn(first[needed])
    new_position, new_velocity = first, velocity.copy()
    new_prior, new_lik, proposed = prior1, lik1, inside1.copy()
    outside = np.flatnonzero(~inside1)
    reflected = np.zeros(len(position), dtype=bool)
    if len(outside):
        bounced, ok = _reflect(velocity[outside], grad1[outside], factor)
        outside, bounced = outside[ok], bounced[ok]
        second = first[outside] + step_size * (bounced @ factor.T)
        # The reflected point's gradient is never used: the likelihood alone.
        prior2, lik2, _, calls2 = _evaluate(second, log_prior_fn, log_lik_only_fn, with_grad=False)
        calls += calls2
        inside2 = lik2 > log_lik_min
        hit = outside[inside2]
        new_position[hit], new_velocity[hit] = second[inside2], bounced[inside2]
        new_prior[hit], new_lik[hit] = prior2[inside2], lik2[inside2]
        proposed[hit] = reflected[hit] = True
    # Metropolis-Hastings on the prior ratio (the constraint is an indicator, the velocity density is unchanged).
    with np.errstate(invalid="ignore"):
        log_ratio = new_prior - log_prior
    accept = proposed & (np.log(rng.uniform(size=len(position))) < log_ratio)
    out_position = np.where(accept[:, None], new_position, position)
    out_velocity = np.where(accept[:, None], new_velocity, -velocity)
    out_prior = np.where(accept, new_prior, log_prior)
    out_lik = np.where(accept, new_lik, log_lik)
    n_reflected = int(np.sum(accept & reflected))
    counts = (calls, int(accept.sum()) - n_reflected, n_reflected, int(np.sum(~accept)))
    return (out_position, out_prior, out_lik, out_velocity), counts


def galilean_sample(rng, points, constraint, settings, log_lik_only=None, gradient=None):
    """Galilean Monte Carlo moves of every chain under ``log L > constraint.log_lik_min`` (see the module docstring).

    Parameters
    ----------
    rng : numpy.random.Generator
    points : ConstrainedPoints
        As for :func:`~._slice.constrained_slice_step`.
    constraint : LikelihoodConstraint
        With a float ``log_lik_min`` and a ``log_lik_fn`` that returns the
        log-likelihood and its gradient.
    settings : GalileanSettings
    log_lik_only : callable or None, default=None
        The log-likelihood alone, ``(n, n_params) -> (n,)``, the same values as
        ``constraint.log_lik_fn``'s first output: the reflected proposals take
        it, since no step uses their gradient. None: they take
        ``constraint.log_lik_fn`` and drop the gradient.
    gradient : callable or None, default=None
        The log-likelihood's gradient alone, ``(n, n_params) -> (n, n_params)``,
        a fixed function of the position (e.g. a single-precision one): the
        straight proposals then take ``log_lik_only`` and this gradient only
        where they land outside the constraint. Only with ``log_lik_only``.

    Returns
    -------
    points : ConstrainedPoints
        The new points with their log prior and log-likelihood.
    info : GalileanInfo

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.kernels._constrained import ConstrainedPoints, LikelihoodConstraint
    >>> lp = lambda x: -0.5 * np.sum(x**2, axis=1)
    >>> llg = lambda x: (-np.sum(x**2, axis=1), -2.0 * x)
    >>> x = np.zeros((3, 2)); rng = np.random.default_rng(0)
    >>> new, info = galilean_sample(rng, ConstrainedPoints(x, lp(x), llg(x)[0]), LikelihoodConstraint(-1.0, lp, llg),
    ...                             GalileanSettings(np.eye(2)))
    >>> bool(np.all(new.log_lik > -1.0)) and info.n_likelihood_calls > 0
    True
    """
    if log_lik_only is None:
        if gradient is not None:
            raise ValueError("galilean_sample takes a gradient function only with a log_lik_only function")

        def log_lik_only(points):
            return constraint.log_lik_fn(points)[0]
    problem = _Problem(constraint.log_lik_min, constraint.log_prior_fn, constraint.log_lik_fn, log_lik_only,
                       np.asarray(settings.direction_factor, dtype=float), float(settings.step_size), gradient)
    position = np.array(points.position, dtype=float)
    state = (position, np.array(points.log_prior, dtype=float), np.array(points.log_lik, dtype=float), None)
    totals = np.zeros(4, dtype=np.int64)
    for step in range(int(settings.n_steps)):
        if step % int(settings.trajectory_length) == 0:
            state = state[:3] + (rng.standard_normal(position.shape),)
        state, counts = _step(rng, state, problem)
        totals += np.array(counts)
    return ConstrainedPoints(*state[:3]), GalileanInfo(*(int(t) for t in totals))


def adapt_galilean_step(step_size, info, target_reversed=0.25, gain=0.5, bounds=(1e-4, 1e2)):
    """Rescale the step towards a fraction ``target_reversed`` of reversed steps (call between NS iterations).

    A step that reverses often overshoots the constrained region; one that never
    reverses is shorter than it could be.

    Examples
    --------
    >>> adapt_galilean_step(1.0, GalileanInfo(0, 10, 0, 90)) < 1.0
    True
    """
    total = info.n_straight + info.n_reflected + info.n_reversed
    if total == 0:
        return float(step_size)
    reversed_fraction = info.n_reversed / total
    return float(np.clip(step_size * np.exp(gain * (target_reversed - reversed_fraction)), *bounds))
