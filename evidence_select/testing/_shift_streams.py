"""Streams whose distribution shifts at a given row, for the long-stream tests and benchmark."""

import numpy as np

__all__ = ["linear_shift", "logistic_shift", "mixture_shift"]


def linear_shift(n_rows, shift_at, seed):
    """3 features; the coefficients change from (1, -0.5, 0.3) to (-0.5, 1, 0.8) at row ``shift_at``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 3))
    coef = np.where((np.arange(n_rows) < shift_at)[:, None], [1.0, -0.5, 0.3], [-0.5, 1.0, 0.8])
    return X, np.sum(X * coef, axis=1) + 0.3 + rng.normal(size=n_rows)


def logistic_shift(n_rows, shift_at, seed):
    """2 features; the class boundary turns by 90 degrees at row ``shift_at``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 2))
    coef = np.where((np.arange(n_rows) < shift_at)[:, None], [2.0, 0.0], [0.0, 2.0])
    return X, (rng.random(n_rows) < 1 / (1 + np.exp(-np.sum(X * coef, axis=1)))).astype(int)


def mixture_shift(n_rows, shift_at, seed):
    """1-d rows from N(0, 1); from row ``shift_at`` on, half of them from a new cluster N(6, 0.5^2)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 1))
    new = (np.arange(n_rows) >= shift_at) & (rng.random(n_rows) < 0.5)
    X[new] = 6.0 + 0.5 * rng.normal(size=(int(new.sum()), 1))
    return X
