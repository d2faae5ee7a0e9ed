"""Shared pieces of the compiled (numba) model kernels: a vectorisable exponential and the fast-math flags.

Imported by the kernel modules only (``_compiled_mixture``), which the models import on their first kernel call:
importing ``evidence_select`` imports no numba.
"""

import math

import numba
import numpy as np
from llvmlite import ir
from numba.extending import intrinsic

__all__ = ["EXP_FLOOR", "FASTMATH", "exp_accurate", "exp_coarse"]

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


_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453

# exp(x) for x in [-80, 0] (or NaN, which it returns): x = k ln 2 + r with integer k in [-116, 0] and
# |r| <= ln 2 / 2; exp(r) by a Taylor polynomial, 2^k built from its exponent bits. Pure arithmetic (no table, no
# libm call), so loops over it vectorise: on 2e5 points in [-80, 0] degrees 12 and 7 took 0.37 and 0.23 ms, libm's
# scalar exp 1.4 ms (numpy's float64 exp 1.3 ms, its float32 exp 0.43 ms). The relative error is the remainder
# (ln 2 / 2)^(degree + 1) / (degree + 1)! plus a few ulp (measured: 2.9e-15 and 7.0e-9).
_TAYLOR_12 = tuple(1.0 / math.factorial(i) for i in range(12, -1, -1))  # highest power first, for Horner
_TAYLOR_7 = _TAYLOR_12[5:]


@numba.njit(cache=True)
def _exp_taylor(x, coefficients):
    kf = np.floor(x * _LOG2E + 0.5)
    r = x - kf * _LN2
    p = 0.0
    for coefficient in coefficients:
        p = p * r + coefficient
    return p * _float_from_bits((np.int64(np.int32(kf)) + 1023) << 52)


@numba.njit(cache=True)
def exp_accurate(x):
    """``exp(x)`` on ``[-80, 0]`` to 3e-15 relative (degree 12): the log-likelihood's, which feeds the evidence."""
    return _exp_taylor(x, _TAYLOR_12)


@numba.njit(cache=True)
def exp_coarse(x):
    """``exp(x)`` on ``[-80, 0]`` to 7e-9 relative (degree 7): the gradient's, a noisy mini-batch estimate anyway
    (the numpy gradient used single-precision exponentials, 1e-7)."""
    return _exp_taylor(x, _TAYLOR_7)
