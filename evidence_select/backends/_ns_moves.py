"""The replacement moves of nested sampling: the independent-proposal stage, then Galilean and slice moves in
two halves whose memory of the start sets their length for the next iteration."""

from typing import NamedTuple

import numpy as np

from ..kernels._constrained import ConstrainedPoints, LikelihoodConstraint
from ..kernels._galilean import GalileanInfo, GalileanSettings, adapt_galilean_step, galilean_sample
from ..kernels._slice import SliceInfo, SliceSettings, adapt_slice_width, constrained_slice_sample
from ..utils._likelihood import approximate_total, grad_lik_sum, log_lik_and_grad, log_lik_sum
from ._ns_checks import replacement_memory
from ._ns_proposals import _ellipsoid_stage


class _MoveScales(NamedTuple):
    """The replacement kernel's scales, adapted between iterations of a run."""

    width: float  # slice bracket, in units of the whitening factor's scale
    step_size: float  # Galilean step, in whitened units
    length: float = 1.0  # factor on the configured moves per replacement
    first_half: float = float("nan")  # running mean of the memory the first half of the moves removes, 1 - m(L/2)
    second_half: float = float("nan")  # running mean of the memory the second half removes, m(L/2) - m(L)
    # Running fraction of the ellipsoid's visited candidates inside the constraint; from 0, so that the first
    # ellipsoid moves try one candidate per chain and measure it before hundreds are drawn.
    efficiency: float = 0.0
    # Running likelihood calls per replacement of the Markov chain moves; nan until they have run.
    markov_calls: float = float("nan")
    # Running share of the replacements' starts that lie outside the bounding ellipsoids; nan until measured.
    outside_share: float = float("nan")


#: Bounds on ``q``, the running ratio of the memory the second half of the moves removes to what the first half
#: removes: the moves lengthen above ``DECAY_HIGH`` (up to ``max_move_length``) and shorten below ``DECAY_LOW``
#: (down to ``MIN_MOVE_LENGTH``), by ``LENGTH_STEP``. Running means weigh a new value by ``MEMORY_SMOOTHING`` (a
#: mean over ~10 iterations: one iteration's memory is noise of order 1 / sqrt(n_replace n_params)).
DECAY_LOW = 0.05
DECAY_HIGH = 0.15
MIN_MOVE_LENGTH = 0.125
MEMORY_SMOOTHING = 0.1
LENGTH_STEP = 1.25


def _running_mean(running, value):
    """``running`` updated by one iteration's ``value`` (weight ``MEMORY_SMOOTHING``); ``value`` itself while
    ``running`` is nan (nothing measured yet)."""
    if not np.isfinite(running):
        return float(value)
    return float((1.0 - MEMORY_SMOOTHING) * running + MEMORY_SMOOTHING * value)


def adapt_move_length(scales, memory_half, memory_full, max_length):
    """``scales`` with ``length`` adapted to how the replacements' memory of their start decayed along the moves.

    ``memory_half`` and ``memory_full`` are :func:`~._ns_checks.replacement_memory` after half
    and all of the moves. If memory decays as ``c + (1 - c) exp(-k / tau)``
    over ``k`` steps, ``c`` what no length removes (a replacement held in its
    start's mode of a multimodal posterior), the ratio of what the second half
    removes to what the first half removes, ``q = (m(L/2) - m(L)) / (1 - m(L/2))``,
    is ``exp(-L / (2 tau))`` whatever ``c`` is: moves long for the
    posterior's shape give a small ``q``, short ones (a curved ridge, thin
    directions) a ``q`` near 1. The running ``q`` (a ratio of running means)
    within ``[DECAY_LOW, DECAY_HIGH]`` leaves of the decaying memory at most
    ``DECAY_HIGH^2`` (0.02) of ``1 - c``; above it ``length`` grows by
    ``LENGTH_STEP`` up to ``max_length``, below it shrinks down to
    ``MIN_MOVE_LENGTH``. A ``nan`` memory (no spread to measure) changes nothing.

    Examples
    --------
    >>> s = _MoveScales(1.0, 0.5)
    >>> for _ in range(30):  # the second half removes as much as the first: too short
    ...     s = adapt_move_length(s, 0.5, 0.25, max_length=4.0)
    >>> s.length
    4.0
    >>> for _ in range(60):  # a plateau at 0.5 (modes): the second half removes nothing
    ...     s = adapt_move_length(s, 0.5, 0.5, max_length=4.0)
    >>> s.length
    0.125
    """
    if not (np.isfinite(memory_half) and np.isfinite(memory_full)):
        return scales
    first = _running_mean(scales.first_half, 1.0 - memory_half)
    second = _running_mean(scales.second_half, memory_half - memory_full)
    ratio = second / max(first, 1e-12)
    length = scales.length
    if ratio > DECAY_HIGH:
        length = min(length * LENGTH_STEP, max_length)
    elif ratio < DECAY_LOW:
        length = max(length / LENGTH_STEP, MIN_MOVE_LENGTH)
    return scales._replace(length=length, first_half=first, second_half=second)


#: Factor on the configured Markov chain moves of the chains outside the ellipsoids. Outside one ellipsoid a chain
#: sits in the tails beyond it and only needs to leave its start (a quarter); split ellipsoids also leave gaps
#: along a ridge and between modes, where the moves, kept outside them, are the only way such a chain's
#: replacement forgets where it started (a replacement left near its start makes ``log Z`` read high): there the
#: chain takes the whole moves.
OUTSIDE_LENGTH = 0.25
SPLIT_OUTSIDE_LENGTH = 1.0


def _replace_points(rng, model, likelihood, config, start, log_lik_min, frame, scales):
    """Move copies of the ``start`` points ``(position, log_prior, log_lik)`` under ``log L > log_lik_min``.

    Returns the new points, the slice, Galilean and ellipsoid totals and the scales adapted from them.
    While an independent move replaces the Markov chain moves, the chains that lie outside the ellipsoid
    after it take the Markov chain moves instead, kept outside it: the ellipsoid move leaves a chain that
    starts outside where it is, and the prior's candidates may land anywhere. Each of the two kernels leaves
    the constrained prior restricted to its side invariant, so together they leave the whole of it
    invariant, and no replacement is a copy of its start for want of a move. (A chain inside the ellipsoid
    moved by kept-outside moves could only leave it, never enter it again: the replacements would lean to
    the outside, where the likelihood is lower, and ``log Z`` would read low.)
    """
    points, ellipsoid, scales, enough = _ellipsoid_stage(rng, model, likelihood.log_lik, config,
                                                         ConstrainedPoints(*start), log_lik_min, frame, scales)
    if frame.ellipsoid is not None:
        starts_outside = np.mean(~frame.ellipsoid.contains(start[0]))
        scales = scales._replace(outside_share=_running_mean(scales.outside_share, starts_outside))
    if not enough:
        points, sliced, galilean, scales = _markov_halves(rng, model, likelihood, config, points, log_lik_min,
                                                          frame, scales)
        return tuple(points), sliced, galilean, ellipsoid, scales
    sliced, galilean = SliceInfo(0, 0, 0, 0), GalileanInfo(0, 0, 0, 0)
    outside = np.flatnonzero(~frame.ellipsoid.contains(points.position))
    if len(outside):
        outside_length = OUTSIDE_LENGTH if len(frame.ellipsoid.ellipsoids) == 1 else SPLIT_OUTSIDE_LENGTH
        kept_out = likelihood.outside_of(frame.ellipsoid)
        moved, sliced, galilean = _markov_moves(rng, model, kept_out, config,
                                                ConstrainedPoints(*(a[outside] for a in points)), log_lik_min,
                                                frame.factor, scales, _move_counts(config, outside_length))
        points = ConstrainedPoints(*(np.array(a, dtype=float) for a in points))
        for whole, part in zip(points, moved):
            whole[outside] = part
    return tuple(points), sliced, galilean, ellipsoid, scales


def _markov_halves(rng, model, likelihood, config, points, log_lik_min, frame, scales):
    """The Markov chain moves in two halves, ``length`` adapted to the memory each half removed
    (:func:`adapt_move_length`)."""
    start = points.position
    n_galilean, n_slice = _move_counts(config, scales.length)
    memories, totals = [], np.zeros((2, 4), dtype=np.int64)
    # Both halves move with the same scales: adapted within an iteration from the chains' own moves, the second
    # half's kernel would depend on where the chains are, and would not leave the constrained prior invariant.
    for counts in ((n_galilean // 2, n_slice // 2), (n_galilean - n_galilean // 2, n_slice - n_slice // 2)):
        points, sliced, galilean = _markov_moves(rng, model, likelihood, config, points, log_lik_min, frame.factor,
                                                 scales, counts)
        memories.append(replacement_memory(start, points.position, frame.centre, frame.factor))
        totals += np.array([sliced, galilean])
    sliced, galilean = SliceInfo(*totals[0]), GalileanInfo(*totals[1])
    calls_per_replacement = _move_calls(sliced, galilean) / len(start)
    scales = scales._replace(width=adapt_slice_width(scales.width, sliced),
                             markov_calls=_running_mean(scales.markov_calls, calls_per_replacement))
    if n_galilean:
        scales = scales._replace(step_size=adapt_galilean_step(scales.step_size, galilean))
    return points, sliced, galilean, adapt_move_length(scales, *memories, config.max_move_length)


def _move_counts(config, length):
    """Galilean steps and slice moves per replacement for moves ``length`` times the configured ones (at least
    one of each kind asked for)."""
    n_slice = config.n_slice_steps * length
    if config.moves != "galilean":
        return 0, _n_steps(n_slice)
    return _n_steps(config.n_galilean_steps * length), _n_steps(config.axis_fraction * n_slice)


def _n_steps(steps):
    """``steps`` rounded, at least 1 unless 0."""
    return max(1, int(round(steps))) if steps > 0 else 0


class _Likelihood(NamedTuple):
    """The full-data functions of a run's moves (each ``(n, n_params) -> ...``).

    ``log_lik``: the log-likelihood; ``log_lik_and_grad``: it and its gradient (the Galilean straight proposals');
    ``reflected_log_lik``: the log-likelihood with a NaN allowed, outside the constraint (a Galilean reflection
    far out may overflow); ``gradient``: the gradient alone, for a model whose gradient alone is cheap
    (``fast_gradient``: the straight proposals then take the likelihood alone and this gradient only where they
    land outside), else None.
    """

    log_lik: object
    log_lik_and_grad: object
    reflected_log_lik: object
    gradient: object = None

    @classmethod
    def of(cls, model, X, y):
        """The functions of ``model`` on the rows ``(X, y)``.

        Where the gradient alone is cheap (``fast_gradient``), every log-likelihood value of the run comes from
        the likelihood alone, and the model's approximate sum gives them all where it declares one
        (:meth:`~evidence_select.models.Model.approximate_log_likelihood_sum`, the mixture's single-precision
        rows): one fixed function of the point throughout, each total within about ``1e-7 sqrt(n)`` of the rows'
        log-densities of the exact one, far below the run's error.
        """
        fast = bool(getattr(model, "fast_gradient", False))
        total = approximate_total(model) if fast else None

        def log_lik(theta):
            return log_lik_sum(model, theta, X, y, total=total)

        def log_lik_and_grad_fn(theta):
            return log_lik_and_grad(model, theta, X, y)

        def reflected_log_lik(theta):
            return log_lik_sum(model, theta, X, y, allow_nan=True, total=total)

        def gradient(theta):
            return grad_lik_sum(model, theta, X, y)

        return cls(log_lik, log_lik_and_grad_fn, reflected_log_lik, gradient if fast else None)

    def outside_of(self, ellipsoid):
        """The same functions with ``-inf`` (and a zero gradient) inside ``ellipsoid``, for the moves kept outside
        it: each evaluated only outside. The gradient stays the likelihood's there (the Galilean move reflects off
        the combined constraint along any normal: its reflection stays an involution)."""
        return _Likelihood(*(None if fn is None else _outside_of(ellipsoid, fn, kind)
                             for fn, kind in zip(self, ("values", "pair", "values", "gradient"))))


def _outside_of(ellipsoid, fn, kind):
    """``fn`` evaluated only outside ``ellipsoid``: inside, ``-inf`` for a log-likelihood (``kind`` ``"values"``),
    a zero gradient (``"gradient"``), or both (``"pair"``, a log-likelihood and its gradient)."""
    def wrapped(theta):
        outside = ~ellipsoid.contains(theta)
        out = fn(theta[outside]) if np.any(outside) else None
        values, grad = np.full(len(theta), -np.inf), np.zeros_like(theta)
        if out is not None and kind == "pair":
            values[outside], grad[outside] = out
        elif out is not None:
            (values if kind == "values" else grad)[outside] = out
        return {"values": values, "gradient": grad}.get(kind, (values, grad))
    return wrapped


def _markov_moves(rng, model, likelihood, config, points, log_lik_min, factor, scales, counts):
    """``counts = (n_galilean, n_slice)`` Galilean steps then slice moves of ``config``
    (:class:`~._ns_config.NSConfig`) with ``scales``; returns the points and the moves'
    infos."""
    (n_galilean, n_slice), galilean = counts, GalileanInfo(0, 0, 0, 0)
    axis_fraction = 1.0 if config.moves == "galilean" else config.axis_fraction
    if n_galilean:
        dense = factor if factor.ndim == 2 else np.diag(factor)
        points, galilean = galilean_sample(
            rng, points, LikelihoodConstraint(log_lik_min, model.log_prior, likelihood.log_lik_and_grad),
            GalileanSettings(dense, scales.step_size, n_galilean, config.trajectory_length),
            log_lik_only=likelihood.reflected_log_lik, gradient=likelihood.gradient)
    points, sliced = constrained_slice_sample(
        rng, points, LikelihoodConstraint(log_lik_min, model.log_prior, likelihood.log_lik),
        SliceSettings(factor, width=scales.width, max_step_out=config.max_step_out, axis_fraction=axis_fraction),
        n_steps=n_slice)
    return points, sliced, galilean


def _move_calls(*infos):
    """Likelihood calls of the moves' infos."""
    return sum(info.n_likelihood_calls for info in infos)
