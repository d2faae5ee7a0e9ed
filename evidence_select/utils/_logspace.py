"""Log-space helpers: every weight in evidence_select is a log-weight.

These small functions are on the hot path of the SGAIS update (called several
times per annealing step on vectors of a few dozen particles), where the input
validation of ``scipy.special.logsumexp`` would cost more than the sum itself;
the plain numpy versions below skip it and handle ``-inf`` the same way.
"""

import contextlib
import math

import numpy as np

#: ``-log 2``, where :func:`log1mexp` switches between its two forms.
_MINUS_LOG_2 = -float(np.log(2.0))

__all__ = ["logsumexp", "log_mean_exp", "normalize_log_weights", "ess_from_log_weights", "log1mexp", "log_expm1"]


def logsumexp(log_values, axis=None, keepdims=False, overwrite_input=False):
    """Stable ``log(sum(exp(log_values)))`` along ``axis``.

    Entries of ``-inf`` contribute nothing; an all ``-inf`` slice returns ``-inf``
    (never NaN). ``+inf`` entries return ``+inf``.

    Parameters
    ----------
    log_values : array-like
        Values on the log scale.
    axis : int or None, default=None
        Axis to reduce; None reduces everything.
    keepdims : bool, default=False
        Keep the reduced axis with length one.
    overwrite_input : bool, default=False
        Compute the shifted exponentials in ``log_values`` itself when it is a
        writable float64 ndarray (its content is then lost): no temporary of
        its size, for callers that pass a scratch array.

    Returns
    -------
    out : float or ndarray
        A Python float when the result is a scalar.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.utils import logsumexp
    >>> round(logsumexp([0.0, np.log(3.0)]), 6)   # log(1 + 3)
    1.386294
    >>> round(logsumexp([-1e6, -1e6 + np.log(3.0)]) + 1e6, 6)   # no underflow at log Z ~ -1e6
    1.386294
    >>> logsumexp([[0.0, 0.0], [-np.inf, -np.inf]], axis=1).round(6).tolist()
    [0.693147, -inf]
    """
    if axis is None and not keepdims and not overwrite_input:
        # The whole-array sum of a few numbers (group evidences, per-group variances) runs several times per
        # chunk: the same arithmetic as below, with a scalar shift and fewer numpy calls.
        log_values = np.asarray(log_values, dtype=float)
        max_value = log_values.max()
        if math.isfinite(max_value):
            return float(np.log(np.exp(log_values - max_value).sum()) + max_value)
    writable = (overwrite_input and isinstance(log_values, np.ndarray) and log_values.dtype == float
                and log_values.flags.writeable)
    scratch = log_values if writable else None
    log_values = np.asarray(log_values, dtype=float)
    max_value = log_values.max(axis=axis, keepdims=True)
    # A slice that is all -inf (or contains +inf) has a non-finite max: it is shifted by 0 instead.
    finite = bool(np.isfinite(max_value).all())
    shift = max_value if finite else np.where(np.isfinite(max_value), max_value, 0.0)
    shifted = np.subtract(log_values, shift, out=scratch)
    total = np.exp(shifted, out=shifted).sum(axis=axis, keepdims=True)
    if finite:  # the hot path: no floating-point state switch
        out = np.log(total)
    else:
        with np.errstate(divide="ignore"):  # log(0) = -inf for all -inf slices
            out = np.log(total)
    out += shift
    if not keepdims:
        out = out.squeeze(axis=axis) if axis is not None else out.reshape(())
    return out if out.ndim else float(out)


def log_mean_exp(log_values, axis=None):
    """Stable ``log(mean(exp(log_values)))`` along ``axis``.

    Parameters
    ----------
    log_values : array-like
        Values on the log scale.
    axis : int or None, default=None
        Axis to average over; None averages everything.

    Returns
    -------
    out : float or ndarray

    Examples
    --------
    The log of the mean of two evidence estimates ``Z_1 = 1`` and ``Z_2 = 3``:

    >>> import numpy as np
    >>> from evidence_select.utils import log_mean_exp
    >>> round(float(log_mean_exp([0.0, np.log(3.0)])), 6)   # log(2)
    0.693147
    """
    log_values = np.asarray(log_values, dtype=float)
    n = log_values.size if axis is None else log_values.shape[axis]
    return logsumexp(log_values, axis=axis) - np.log(n)


def normalize_log_weights(log_weights, axis=-1):
    """Subtract the logsumexp so that ``exp`` of the result sums to one along ``axis``.

    Parameters
    ----------
    log_weights : array-like
        Unnormalised log-weights.
    axis : int, default=-1
        Axis over particles.

    Returns
    -------
    log_weights : ndarray
        Normalised log-weights, same shape.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.utils import normalize_log_weights
    >>> np.exp(normalize_log_weights([-1000.0, -1000.0 + np.log(3.0)])).round(6)
    array([0.25, 0.75])
    """
    log_weights = np.asarray(log_weights, dtype=float)
    return log_weights - logsumexp(log_weights, axis=axis, keepdims=True)


def ess_from_log_weights(log_weights, axis=-1):
    """Kish effective sample size ``(sum w)^2 / sum w^2`` from log-weights.

    Parameters
    ----------
    log_weights : ndarray
        Unnormalised log-weights; ``-inf`` marks a zero weight.
    axis : int, default=-1
        Axis over particles.

    Returns
    -------
    ess : float or ndarray
        In ``[1, n]`` whenever at least one weight is positive, 0 otherwise.

    Examples
    --------
    Equal weights give the number of particles; one dominant weight gives 1:

    >>> import numpy as np
    >>> from evidence_select.utils import ess_from_log_weights
    >>> float(ess_from_log_weights(np.zeros(4)))
    4.0
    >>> round(float(ess_from_log_weights([0.0, -50.0, -50.0, -50.0])), 6)
    1.0
    """
    log_weights = np.asarray(log_weights, dtype=float)
    max_value = log_weights.max(axis=axis, keepdims=True)
    if not np.isfinite(max_value).all():
        return np.exp(2.0 * logsumexp(log_weights, axis=axis) - logsumexp(2.0 * log_weights, axis=axis))
    weights = np.exp(log_weights - max_value)  # one exp: the largest weight is 1, so no overflow
    ess = weights.sum(axis=axis) ** 2 / (weights * weights).sum(axis=axis)
    return ess if ess.ndim else float(ess)


def log1mexp(x):
    """Stable ``log(1 - exp(x))`` for ``x <= 0`` (Maechler, 2012).

    Switches between ``log(-expm1(x))`` near 0 and ``log1p(-exp(x))`` below
    ``-log 2``, so both ends keep full precision (nested sampling needs the
    log of volume differences ``log(X_{i-1} - X_i)``).

    Parameters
    ----------
    x : array-like
        Values ``<= 0``; ``0`` gives ``-inf``.

    Returns
    -------
    out : ndarray

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.utils import log1mexp
    >>> round(float(log1mexp(np.log(0.5))), 6)     # log(1 - 0.5)
    -0.693147
    >>> round(float(log1mexp(-1e-20)), 4)   # log(1e-20); the naive log(1 - exp(x)) gives -inf
    -46.0517
    """
    x = np.asarray(x, dtype=float)
    # Away from 0 neither branch takes a log of 0 (exp(x) < 1 in float): the hot path skips the floating-point
    # state switch.
    away_from_zero = x.size and x.max() < -1e-10
    with contextlib.nullcontext() if away_from_zero else np.errstate(divide="ignore"):
        return np.where(x > _MINUS_LOG_2, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_expm1(x):
    """``log(exp(x) - 1)`` for ``x >= 0``, ``x + log1mexp(-x)``: no overflow where ``exp(x)`` would (``-inf`` at 0).

    A relative variance ``expm1(v)`` of a log-variance ``v`` past ~709 nats^2 (a widened, degraded run) is beyond
    float range; its log is not.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.utils._logspace import log_expm1
    >>> float(log_expm1(1000.0)), round(float(log_expm1(1.0)), 6)   # np.log(np.expm1(1000.0)) is inf
    (1000.0, 0.541325)
    """
    x = np.asarray(x, dtype=float)
    return x + log1mexp(-x)
