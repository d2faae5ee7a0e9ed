"""Shared pieces of the compiled (numba) model kernels: vectorisable exponentials and logarithm, and the
fast-math flags.

Imported by the kernel modules only (``_compiled_mixture``, ``_compiled_softmax``), which the models import on
their first kernel call: importing ``evidence_select`` imports no numba.

The exponentials and the logarithm are inlined into each kernel by numba (``inline="always"``), so that a
kernel's machine code follows from its own source alone: a separately compiled function is linked into its callers
as the process first compiled it, which would make a kernel's bits depend on which model a fresh cache compiled
first. numba invalidates a cached kernel when its own file changes, not when this module does: after editing it,
delete the ``*.nbi`` and ``*.nbc`` files in the models' ``__pycache__`` (or ``NUMBA_CACHE_DIR``) before comparing
results.
"""

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

__all__ = ["EXP_FLOOR", "FASTMATH", "exp_accurate", "exp_coarse", "exp_of_precision", "exp_single",
           "log_accurate", "quotient"]

#: Floor of log-ratios before their exponential, as the numpy code's (exp(-80) = 2e-35 of the largest term).
EXP_FLOOR = -80.0
#: Reassociation lets the sums over rows run in vector lanes. Nothing else: no finite-math flags (-inf and NaN keep
#: their meaning) and no contraction into fused multiply-adds, so that terms computed without any flag (the
#: mixture's prior gradient) and their sums with a kernel's are the same bits in every kernel.
FASTMATH = {"reassoc"}


@intrinsic
def _float_from_bits(typingctx, bits):
    """The float64 whose IEEE bits are the int64 ``bits`` (a bit cast, which vectorises)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return numba.float64(numba.int64), codegen


@intrinsic
def _bits_from_float(typingctx, x):
    """The int64 holding the IEEE bits of the float64 ``x`` (a bit cast, which vectorises)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return numba.int64(numba.float64), codegen


@intrinsic
def quotient(typingctx, numerator, denominator):
    """``numerator / denominator`` of two floats of one precision as IEEE division (a zero denominator gives inf or
    NaN): numba's ``/`` checks for zero to raise ZeroDivisionError, and that branch keeps a loop from vectorising."""
    if not (isinstance(numerator, types.Float) and numerator == denominator):
        return None

    def codegen(context, builder, signature, args):
        return builder.fdiv(args[0], args[1])
    return numerator(numerator, denominator), codegen


@intrinsic
def _single_from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the int32 ``bits`` (a bit cast, which vectorises)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return numba.float32(numba.int32), codegen


_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453

# exp(x) for x in [-80, 0] (or NaN, which it returns): x = k ln 2 + r with integer k in [-116, 0] and
# |r| <= ln 2 / 2; exp(r) by a Taylor polynomial, 2^k built from its exponent bits. Pure arithmetic (no table, no
# libm call), so loops over it vectorise: on 2e5 points in [-80, 0] degrees 12 and 7 took 0.37 and 0.23 ms, libm's
# scalar exp 1.4 ms (numpy's float64 exp 1.3 ms, its float32 exp 0.43 ms). The relative error is the remainder
# (ln 2 / 2)^(degree + 1) / (degree + 1)! plus a few ulp (measured: 2.9e-15 and 7.0e-9).
_TAYLOR_12 = tuple(1.0 / math.factorial(i) for i in range(12, -1, -1))  # highest power first, for Horner
_TAYLOR_7 = _TAYLOR_12[5:]


@numba.njit(cache=True, inline="always")
def _exp_taylor(x, coefficients):
    kf = np.floor(x * _LOG2E + 0.5)
    r = x - kf * _LN2
    p = 0.0
    for coefficient in coefficients:
        p = p * r + coefficient
    return p * _float_from_bits((np.int64(np.int32(kf)) + 1023) << 52)


@numba.njit(cache=True, inline="always")
def exp_accurate(x):
    """``exp(x)`` on ``[-80, 0]`` to 3e-15 relative (degree 12): the log-likelihood's, which feeds the evidence."""
    return _exp_taylor(x, _TAYLOR_12)


@numba.njit(cache=True, inline="always")
def exp_coarse(x):
    """``exp(x)`` on ``[-80, 0]`` to 7e-9 relative (degree 7): for sums that need no more (the mixture's EM
    moments)."""
    return _exp_taylor(x, _TAYLOR_7)


# Single precision: Cephes' expf. x = k ln 2 + r with ln 2 split in two (the first part's product with k is exact
# in float32, so r keeps its bits) and exp(r) = 1 + r + r^2 P(r), P of degree 5 fitted to float32 on
# |r| <= ln 2 / 2. All in float32 (every constant typed), so a loop over it runs eight lanes wide.
_LOG2E_SINGLE = np.float32(_LOG2E)
_HALF_SINGLE = np.float32(0.5)
_ONE_SINGLE = np.float32(1.0)
_LN2_HIGH_SINGLE = np.float32(0.693359375)
_LN2_LOW_SINGLE = np.float32(-2.12194440e-4)
_EXPF_POLYNOMIAL = tuple(np.float32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                                  4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1))


@numba.njit(cache=True, inline="always")
def exp_single(x):
    """``exp(x)`` of a float32 on ``[-80, 80]`` (or NaN, which it returns) to a float32 ulp or two: the softmax's
    and the mixture's stochastic gradients'."""
    kf = np.floor(x * _LOG2E_SINGLE + _HALF_SINGLE)
    r = (x - kf * _LN2_HIGH_SINGLE) - kf * _LN2_LOW_SINGLE
    p = _EXPF_POLYNOMIAL[0]
    for coefficient in _EXPF_POLYNOMIAL[1:]:
        p = p * r + coefficient
    return (p * r * r + r + _ONE_SINGLE) * _single_from_bits((np.int32(kf) + np.int32(127)) << np.int32(23))


def exp_of_precision(x):
    """``exp(x)`` on ``[-80, 80]`` in ``x``'s precision: :func:`exp_single` for float32, :func:`exp_accurate` for
    float64 (a compile-time choice, so one kernel source serves both precisions). Both hold on positive ``x`` up to
    80 as well (``2^k`` stays a normal number), which the softmax's unshifted logits use."""
    return np.exp(x)


@overload(exp_of_precision)
def _exp_of_precision(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: exp_single(x)
    return lambda x: exp_accurate(x)


# log(x) for a float64: x = 2^e m with m in [sqrt(1/2), sqrt(2)) from its exponent and mantissa bits; with
# f = m - 1 (exact) and s = f / (2 + f), log(m) = 2 atanh(s) = f - (f^2/2 - s (f^2/2 + R)), R = sum_k 2 s^2k /
# (2k + 1) for k = 1..10 (Taylor coefficients; |s| <= 0.172, so the next term is below 1e-18 of the result), and
# e ln 2 split in two (the first part's product with e is exact). The leading f is exact and the rest a small
# correction, so the result is within an ulp of the correctly rounded one. Pure arithmetic and selects, so loops
# over it vectorise, where libm's log is a scalar call per row that costs several vectorised exponentials.
_LOG_SERIES = tuple(2.0 / (2 * k + 1) for k in range(10, 0, -1))  # highest power first, for Horner
_LN2_HIGH = math.ldexp(math.floor(math.ldexp(_LN2, 32)), -32)  # ln 2's leading 32 bits: times an exponent, exact
_LN2_LOW = _LN2 - _LN2_HIGH
_SQRT2 = math.sqrt(2.0)
_MANTISSA = (1 << 52) - 1
_ONE_BITS = 1023 << 52
_SMALLEST_NORMAL = 2.0 ** -1022
_SUBNORMAL_SCALE = 2.0 ** 54
_TWO_52 = 2.0 ** 52
_TWO_52_BITS = 0x433 << 52  # the bits of 2^52


@numba.njit(cache=True, inline="always")
def _series(z, coefficients):
    """``sum_k c_k z^k`` for ``k >= 1``, coefficients highest power first (a tuple argument, which numba unrolls:
    iterated as a global, the loop stays a loop and the caller's loop does not vectorise)."""
    r = 0.0
    for coefficient in coefficients:
        r = (r + coefficient) * z
    return r


@numba.njit(cache=True, inline="always")
def log_accurate(x):
    """``log(x)`` of a float64 to about an ulp (the log-likelihoods' ``log sum exp``): ``-inf`` at 0, NaN below 0
    or at NaN, ``inf`` at ``inf``; subnormal ``x`` scaled into the normal range first."""
    subnormal = x < _SMALLEST_NORMAL
    bits = _bits_from_float(x * _SUBNORMAL_SCALE if subnormal else x)
    m = _float_from_bits((bits & _MANTISSA) | _ONE_BITS)
    high = m > _SQRT2
    m = 0.5 * m if high else m
    # The biased exponent as a float by its bits (2^52 + k, minus 2^52): no integer-to-float conversion, which
    # has no vector instruction below AVX-512.
    biased = _float_from_bits((bits >> 52) | _TWO_52_BITS) - _TWO_52
    e = biased - (1023.0 - (1.0 if high else 0.0) + (54.0 if subnormal else 0.0))
    f = m - 1.0
    s = quotient(f, 2.0 + f)
    z = s * s
    r = _series(z, _LOG_SERIES)
    half_square = 0.5 * f * f
    result = e * _LN2_HIGH + ((f - (half_square - s * (half_square + r))) + e * _LN2_LOW)
    # Selects, not branches, so that the loops vectorise: 0 gives -inf, inf itself, NaN and negatives NaN.
    result = result if x < np.inf else x
    result = -np.inf if x == 0.0 else result
    return result if x >= 0.0 else np.nan
