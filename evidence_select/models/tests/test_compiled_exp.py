"""The compiled kernels' shared logarithm and IEEE quotient (``models/_compiled_exp.py``) against numpy."""

import math

import numba
import numpy as np
import pytest

from evidence_select.models._compiled_exp import log_accurate, quotient


@numba.njit
def _logs(x, out):
    for j in range(x.shape[0]):
        out[j] = log_accurate(x[j])
    return out


@numba.njit
def _quotients(a, b, out):
    for j in range(a.shape[0]):
        out[j] = quotient(a[j], b[j])
    return out


def _log_test_points():
    rng = np.random.default_rng(0)
    return np.concatenate([
        rng.uniform(1.0, 3.0, 20_000),  # log-sum-exp totals with the largest term 1
        np.exp(rng.uniform(-700.0, 700.0, 20_000)),  # the whole normal range
        1.0 + rng.uniform(-1e-6, 1e-6, 2000),  # near the root, where the result is relatively hardest
        2.0 ** np.arange(-1074.0, 1024.0),  # every exponent, subnormals included
        rng.uniform(0.0, 2.2e-308, 1000),  # subnormals
        np.sqrt(2.0) * (1.0 + np.arange(-50, 51) * np.finfo(float).eps),  # the mantissa's range split
        np.sqrt(0.5) * (1.0 + np.arange(-50, 51) * np.finfo(float).eps),
        [np.finfo(float).max, np.finfo(float).tiny, 5e-324]])


def _correctly_rounded_log(points):
    """``log`` of ``points`` rounded once to double precision, and how far that may be from the correctly rounded
    value in ulps: from extended precision where the platform has it (numpy's own float64 log may be 2 ulps off,
    numpy 1.25's vectorised one on this project's CI machine is), else the C library's, within about half an ulp."""
    if np.finfo(np.longdouble).eps < np.finfo(np.float64).eps:
        return np.log(points.astype(np.longdouble)).astype(np.float64), 0.0
    return np.array([math.log(v) if v > 0 else np.log(v) for v in points]), 0.5


def test_log_is_within_an_ulp_over_the_whole_range():
    points = _log_test_points()
    expected, reference_error = _correctly_rounded_log(points)
    got = _logs(points, np.empty_like(points))
    # In units of the last place of the correctly rounded result (log 1 = 0 has no ulp: exact there).
    ulps = np.abs(got - expected) / np.spacing(np.abs(expected))
    assert np.all(got[expected == 0.0] == 0.0)
    assert np.max(ulps[expected != 0.0]) <= 1.0 + reference_error
    assert np.mean(got == expected) > 0.8  # mostly the correctly rounded value itself


def test_log_keeps_the_special_values():
    points = np.array([0.0, -0.0, -1.0, -np.inf, np.nan, np.inf])
    got = _logs(points, np.empty_like(points))
    np.testing.assert_array_equal(got, [-np.inf, -np.inf, np.nan, np.nan, np.nan, np.inf])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_quotient_is_ieee_division_in_the_operands_precision(dtype):
    a = np.array([1.0, -1.0, 0.0, 3.0, np.nan, np.inf], dtype=dtype)
    b = np.array([0.0, 0.0, 0.0, 7.0, 1.0, 2.0], dtype=dtype)
    got = _quotients(a, b, np.empty_like(a))
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(got, a / b)
    assert got.dtype == dtype
