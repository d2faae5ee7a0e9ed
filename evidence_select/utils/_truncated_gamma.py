"""The gamma density truncated to an interval: its log normaliser and exact draws, robust in the far tails.

``int_lo^hi t^(a - 1) exp(-beta t) dt`` is the marginal likelihood of a Gaussian model's precision under a
log-uniform prior on ``[lo, hi]`` (the conjugate family of the linear model with a learned noise variance,
:mod:`evidence_select.models._linear_hyper`). In the bulk it is ``Gamma(a) beta^-a`` times a difference of
regularised incomplete gamma functions; that difference is taken in whichever tail keeps it precise, and where
even that underflows (a posterior pressed against an end of the interval) the tail's series or asymptotic
expansion gives its logarithm.
"""

import numpy as np
from scipy import special

from ._quadrature import log_trapezoid

__all__ = ["log_gamma_integral", "sample_truncated_gamma"]

#: Terms of the series of ``log P(a, x)`` (``x`` well below ``a``) and of the asymptotic expansion of
#: ``log Q(a, x)`` (``x`` well above ``a``): only where the regularised functions underflow, i.e. the
#: interval's end lies hundreds of nats into a tail, where a handful of terms reach double precision.
_TAIL_TERMS = 60
#: Below this a regularised incomplete gamma value has lost its precision (near the subnormal range).
_TINY = 1e-290


def _log_lower_regularized(a, x):
    """``log P(a, x)`` for arrays, by its series ``x^a e^-x / Gamma(a + 1) sum_k x^k / ((a+1)...(a+k))``
    where ``P`` underflows (``x`` far below ``a``), else ``log(gammainc)``."""
    value = special.gammainc(a, x)
    out = np.log(np.maximum(value, _TINY))
    small = value < _TINY
    if np.any(small):
        xs = x[small]
        term, total = np.ones_like(xs), np.ones_like(xs)
        for k in range(1, _TAIL_TERMS):
            term = term * xs / (a + k)
            total = total + term
        # The remaining terms fall at least geometrically, by x / (a + _TAIL_TERMS): their sum's bound.
        ratio = xs / (a + _TAIL_TERMS)
        total = total + term * ratio / (1.0 - ratio)
        with np.errstate(divide="ignore"):
            out[small] = a * np.log(xs) - xs - special.gammaln(a + 1.0) + np.log(total)
    return out


def _log_upper_regularized(a, x):
    """``log Q(a, x)`` for arrays, by its asymptotic expansion
    ``x^(a-1) e^-x / Gamma(a) (1 + (a-1)/x + (a-1)(a-2)/x^2 + ...)`` where ``Q`` underflows (``x`` far above
    ``a``), else ``log(gammaincc)``."""
    value = special.gammaincc(a, x)
    out = np.log(np.maximum(value, _TINY))
    small = value < _TINY
    if np.any(small):
        xs = x[small]
        term, total = np.ones_like(xs), np.ones_like(xs)
        for k in range(1, min(_TAIL_TERMS, 8)):  # asymptotic: the first terms only
            term = term * (a - k) / xs
            total = total + term
        out[small] = (a - 1.0) * np.log(xs) - xs - special.gammaln(a) + np.log(np.maximum(total, _TINY))
    return out


def _log_mass(a, x_lo, x_hi):
    """``log(P(a, x_hi) - P(a, x_lo))`` for arrays ``x_lo < x_hi``, the difference taken in the tail that keeps it
    precise: ``1 - P_lo - Q_hi`` in the bulk, ``Q_lo - Q_hi`` when the interval lies in the upper tail, ``P_hi -
    P_lo`` in the lower one; in log space where those underflow."""
    out = np.zeros_like(x_lo)
    # Where elementary bounds put P_lo + Q_hi below 1e-17 the interval holds all the mass to double precision
    # (the usual case: an interval of 40 orders of magnitude), and no incomplete gamma function need be called.
    need = (_log_lower_bound(a, x_lo) > _NEGLIGIBLE) | (_log_upper_bound(a, x_hi) > _NEGLIGIBLE)
    if np.any(need):
        out[need] = _log_mass_exact(a, x_lo[need], x_hi[need])
    return out


#: log(1e-17): a tail mass below this leaves ``log(1 - mass)`` at 0 in double precision.
_NEGLIGIBLE = np.log(1e-17)


def _log_lower_bound(a, x):
    """An upper bound on ``log P(a, x)``: ``x^a e^-x / Gamma(a + 1) / (1 - x / (a + 1))`` for ``x < a + 1``
    (the series' terms fall at least geometrically), else 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = a * np.log(x) - x - special.gammaln(a + 1.0) - np.log1p(-x / (a + 1.0))
    return np.where(x < a + 1.0, bound, 0.0)


def _log_upper_bound(a, x):
    """An upper bound on ``log Q(a, x)``: ``x^(a-1) e^-x / Gamma(a)``, times ``x / (x - (a - 1))`` for ``a > 1``,
    for ``x > max(a - 1, 0)``, else 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = (a - 1.0) * np.log(x) - x - special.gammaln(a)
        if a > 1.0:
            bound = bound - np.log1p(-(a - 1.0) / x)
    return np.where(x > max(a - 1.0, 0.0), bound, 0.0)


def _log_mass_exact(a, x_lo, x_hi):
    """:func:`_log_mass` by the incomplete gamma functions."""
    p_lo, q_hi = special.gammainc(a, x_lo), special.gammaincc(a, x_hi)
    out = np.empty_like(x_lo)
    bulk = (p_lo < 0.5) & (q_hi < 0.5)
    out[bulk] = np.log1p(-(p_lo[bulk] + q_hi[bulk]))
    upper = ~bulk & (p_lo >= 0.5)
    if np.any(upper):  # the interval in the upper tail (x_lo past the bulk)
        log_q_lo = _log_upper_regularized(a, x_lo[upper])
        log_q_hi = _log_upper_regularized(a, x_hi[upper])
        out[upper] = log_q_lo + _log1mexp(log_q_hi - log_q_lo)
    lower = ~bulk & ~upper
    if np.any(lower):  # the interval in the lower tail (x_hi before the bulk)
        log_p_hi = _log_lower_regularized(a, x_hi[lower])
        log_p_lo = _log_lower_regularized(a, x_lo[lower])
        out[lower] = log_p_hi + _log1mexp(log_p_lo - log_p_hi)
    return out


def _log1mexp(x):
    """``log(1 - exp(x))`` for ``x <= 0`` (``-inf`` at 0)."""
    x = np.minimum(x, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(x > -0.693, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_gamma_integral(a, beta, lo, hi):
    """``log int_lo^hi t^(a - 1) exp(-beta t) dt`` for ``0 < lo < hi``, vectorised over ``beta``.

    Parameters
    ----------
    a : float
        Shape; any real value (``a <= 0`` is integrated numerically on a fine grid in ``log t``, which only the
        posterior-predictive variance of a model fitted to one or two rows needs).
    beta : float or ndarray
        Rates, ``>= 0`` (``0``: the power law alone).
    lo, hi : float
        The interval.

    Returns
    -------
    log_integral : ndarray of the shape of ``beta``

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import special
    >>> from evidence_select.utils._truncated_gamma import log_gamma_integral
    >>> # The whole gamma integral, Gamma(a) beta^-a, when [lo, hi] holds all the mass:
    >>> float(log_gamma_integral(3.5, 2.0, 1e-20, 1e20) - (special.gammaln(3.5) - 3.5 * np.log(2.0)))
    0.0
    >>> # a = 0, beta = 0: the log-uniform prior's normaliser log(hi / lo).
    >>> bool(np.isclose(float(log_gamma_integral(0.0, 0.0, 1e-3, 1e3)), np.log(np.log(1e6))))
    True
    """
    beta = np.asarray(beta, dtype=float)
    flat = np.atleast_1d(beta).ravel()
    out = np.empty_like(flat)
    if a <= 0.0:
        for k, rate in enumerate(flat):
            out[k] = log_trapezoid(lambda v, rate=rate: a * v - rate * np.exp(v), np.log(lo), np.log(hi))
        return out.reshape(beta.shape)
    zero = flat == 0.0
    # beta = 0: (hi^a - lo^a) / a, in logs.
    out[zero] = a * np.log(hi) + _log1mexp(np.full(np.count_nonzero(zero), a * np.log(lo / hi))) - np.log(a)
    rate = flat[~zero]
    out[~zero] = special.gammaln(a) - a * np.log(rate) + _log_mass(a, rate * lo, rate * hi)
    return out.reshape(beta.shape)


def sample_truncated_gamma(rng, a, beta, lo, hi):
    """One draw of ``t`` with density proportional to ``t^(a - 1) exp(-beta t)`` on ``[lo, hi]`` per rate.

    By the inverse distribution function in whichever tail keeps its precision
    (``gammaincinv`` in the lower tail, ``gammainccinv`` in the upper); a power
    law in ``log t`` for ``beta = 0``, uniform in ``log t`` when also ``a = 0``.
    Where the interval lies so far in a tail that the distribution function
    underflows, the density is nearly exponential across it (its log-slope at
    the near end), and that exponential is drawn.

    Parameters
    ----------
    rng : numpy.random.Generator
    a : float
        Shape, ``>= 0``.
    beta : ndarray of shape (n,)
        Rates, ``>= 0`` (``a = 0`` needs ``beta = 0``: the density is then ``1 / t``).
    lo, hi : float
        The interval, ``0 < lo < hi``.

    Returns
    -------
    t : ndarray of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.utils._truncated_gamma import sample_truncated_gamma
    >>> t = sample_truncated_gamma(np.random.default_rng(0), 4.0, np.full(100_000, 2.0), 1e-20, 1e20)
    >>> round(float(t.mean()), 2)  # a / beta
    2.0
    """
    beta = np.asarray(beta, dtype=float)
    u = rng.random(beta.shape)
    t = np.empty_like(beta)
    zero = beta == 0.0
    if np.any(zero):
        log_lo, log_hi = np.log(lo), np.log(hi)
        if a == 0.0:
            t[zero] = np.exp(log_lo + u[zero] * (log_hi - log_lo))
        else:  # t^a uniform between lo^a and hi^a, in logs
            t[zero] = np.exp(log_hi + np.log(u[zero] + (1.0 - u[zero]) * np.exp(a * (log_lo - log_hi))) / a)
    rate, v = beta[~zero], u[~zero]
    t[~zero] = _inverse_cdf_draw(a, rate * lo, rate * hi, v) / rate
    return np.clip(t, lo, hi)


def _inverse_cdf_draw(a, x_lo, x_hi, u):
    """Quantile ``u`` of the standard gamma(``a``) truncated to ``[x_lo, x_hi]`` per element."""
    p_lo, p_hi = special.gammainc(a, x_lo), special.gammainc(a, x_hi)
    q_lo, q_hi = special.gammaincc(a, x_lo), special.gammaincc(a, x_hi)
    x = np.empty_like(x_lo)
    # The quantile in P where it stays below 1/2, else in Q (so that neither is a difference near 1).
    target_p = p_lo + u * (p_hi - p_lo)
    target_q = q_hi + (1.0 - u) * (q_lo - q_hi)
    use_p = target_p <= 0.5
    x[use_p] = special.gammaincinv(a, target_p[use_p])
    x[~use_p] = special.gammainccinv(a, target_q[~use_p])
    # Underflowed tails: the mass of the interval is below what P or Q can represent.
    lost = ((p_hi - p_lo) < _TINY) & ((q_lo - q_hi) < _TINY)
    if np.any(lost):
        x[lost] = _exponential_tail_draw(a, x_lo[lost], x_hi[lost], u[lost])
    return np.clip(x, x_lo, x_hi)


def _exponential_tail_draw(a, x_lo, x_hi, u):
    """Quantile ``u`` of the exponential with the log-slope ``(a - 1) / x - 1`` of ``x^(a-1) e^-x`` at the
    interval's end nearer the gamma's bulk, truncated to the interval (its density there, within a far tail)."""
    upper_tail = x_lo >= a  # the interval lies beyond the mode: mass at its lower end
    edge = np.where(upper_tail, x_lo, x_hi)
    slope = np.abs((a - 1.0) / edge - 1.0)
    width = x_hi - x_lo
    # Truncated exponential on [0, width] with rate `slope`, measured from the edge into the interval.
    offset = -np.log1p(u * np.expm1(-slope * width)) / np.maximum(slope, 1e-300)
    offset = np.where(slope * width < 1e-12, u * width, offset)
    return np.where(upper_tail, x_lo + offset, x_hi - offset)
