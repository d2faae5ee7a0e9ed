"""Elementwise maps from the real line onto a distribution's support, with their log-Jacobians.

Samplers move in ``R^d``; a prior on a positive scale or a probability lives on part of it. Each transform maps an
unconstrained ``u`` to ``x = forward(u)`` on the support, and gives ``log |dx/du|`` and the derivatives the gradients
need: ``dx/du`` (to pull a gradient in ``x`` back to ``u``) and ``d log|dx/du| / du``. All are elementwise: a block of
a parameter array uses one transform for every element, chosen from the support of its prior
(:func:`transform_for_support`). The simplex map of a Dirichlet prior is not elementwise and lives with that prior
(:mod:`._priors`).
"""

from typing import NamedTuple

import numpy as np
from scipy.special import expit, log_expit, logit

__all__ = ["Transform", "transform_for_support", "IDENTITY"]

_TINY = np.finfo(float).tiny


class Transform(NamedTuple):
    """An elementwise bijection from ``R`` onto an interval ``(lower, upper)`` (either end may be infinite).

    ``kind`` is ``"real"``, ``"lower"`` (``x = lower + exp(u)``), ``"upper"`` (``x = upper - exp(u)``) or
    ``"interval"`` (``x = lower + (upper - lower) expit(u)``). ``lower`` and ``upper`` are floats or arrays
    broadcasting to the block's elements.
    """

    kind: str
    lower: object = -np.inf
    upper: object = np.inf

    def forward(self, u):
        """``x`` on the support from unconstrained ``u`` (same shape)."""
        if self.kind == "real":
            return u
        if self.kind == "lower":
            return self.lower + np.exp(u)
        if self.kind == "upper":
            return self.upper - np.exp(u)
        return self.lower + (self.upper - self.lower) * expit(u)

    def inverse(self, x):
        """Unconstrained ``u`` from ``x``; points on a boundary (a prior draw that underflowed) map just inside."""
        if self.kind == "real":
            return np.asarray(x, dtype=float)
        if self.kind == "lower":
            return np.log(np.maximum(x - self.lower, _TINY))
        if self.kind == "upper":
            return np.log(np.maximum(self.upper - x, _TINY))
        fraction = (x - self.lower) / (self.upper - self.lower)
        return logit(np.clip(fraction, _TINY, 1.0 - np.finfo(float).epsneg))

    def log_det(self, u):
        """``log |dx/du|`` elementwise."""
        if self.kind == "real":
            return np.zeros_like(u)
        if self.kind in ("lower", "upper"):
            return u
        return np.log(self.upper - self.lower) + log_expit(u) + log_expit(-u)

    def derivative(self, u):
        """``dx/du`` elementwise."""
        if self.kind == "real":
            return np.ones_like(u)
        if self.kind == "lower":
            return np.exp(u)
        if self.kind == "upper":
            return -np.exp(u)
        s = expit(u)
        return (self.upper - self.lower) * s * (1.0 - s)

    def grad_log_det(self, u):
        """``d log|dx/du| / du`` elementwise."""
        if self.kind == "real":
            return np.zeros_like(u)
        if self.kind in ("lower", "upper"):
            return np.ones_like(u)
        return 1.0 - 2.0 * expit(u)


#: The map of a prior on the whole real line.
IDENTITY = Transform("real")


def transform_for_support(lower, upper):
    """The :class:`Transform` onto ``(lower, upper)``, by which ends are finite.

    Parameters
    ----------
    lower, upper : float or ndarray
        The support's ends, elementwise (``-inf``/``inf`` for an open end). Every element must have the same
        pattern of finite ends.

    Returns
    -------
    transform : Transform

    Raises
    ------
    ValueError
        When the elements' supports differ in which ends are finite, or an interval is empty.

    Examples
    --------
    >>> from evidence_select.models._transforms import transform_for_support
    >>> transform_for_support(0.0, float("inf")).kind
    'lower'
    >>> round(float(transform_for_support(0.0, 1.0).forward(0.0)), 3)
    0.5
    """
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    finite_lower, finite_upper = np.isfinite(lower), np.isfinite(upper)
    if finite_lower.any() != finite_lower.all() or finite_upper.any() != finite_upper.all():
        raise ValueError("the elements of one prior must share the shape of their support (all bounded below, "
                         "or none; all bounded above, or none)")
    has_lower, has_upper = bool(finite_lower.all()), bool(finite_upper.all())
    scalar = (lambda a: float(a)) if lower.ndim == 0 and upper.ndim == 0 else (lambda a: a)
    if has_lower and has_upper:
        if not np.all(upper > lower):
            raise ValueError(f"a prior's support is empty: lower {lower} >= upper {upper}")
        return Transform("interval", scalar(lower), scalar(upper))
    if has_lower:
        return Transform("lower", scalar(lower))
    if has_upper:
        return Transform("upper", upper=scalar(upper))
    return IDENTITY
