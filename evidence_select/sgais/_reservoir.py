"""Bounded reservoir of past data (Vitter's Algorithm R), for SGHMC mini-batches.

After ``n_seen`` rows the reservoir holds a uniform random subset of
``min(n_seen, capacity)`` of them, whatever the order of arrival, so memory is
bounded on an endless stream. The buffer grows by doubling until ``capacity``.

Insertion writes into the buffer in place (copying a 1e5-row buffer per chunk
would dominate the update); :func:`reservoir_insert` therefore returns an undo
record, and :func:`reservoir_undo` restores the overwritten rows exactly, so a
caller can roll back a failed multi-chunk update.
"""

from typing import NamedTuple

import numpy as np

__all__ = ["ReservoirState", "reservoir_init", "reservoir_insert", "reservoir_undo", "reservoir_data"]


class ReservoirState(NamedTuple):
    """Rows kept so far: ``X[:n_stored]`` (and ``y[:n_stored]``), from ``n_seen`` rows seen."""

    X: np.ndarray  # (buffer_rows, n_features)
    y: np.ndarray  # (buffer_rows,) or None for density models
    n_stored: int
    n_seen: int
    capacity: int


def reservoir_init(capacity, n_features, y_dtype=None):
    """An empty reservoir; ``y_dtype=None`` means there are no targets."""
    rows = min(capacity, 1024)
    y = None if y_dtype is None else np.empty(rows, dtype=y_dtype)
    return ReservoirState(np.empty((rows, n_features)), y, 0, 0, int(capacity))


def reservoir_data(state):
    """Views ``(X, y)`` of the stored rows."""
    return state.X[: state.n_stored], None if state.y is None else state.y[: state.n_stored]


def reservoir_insert(rng, state, X, y=None):
    """Offer the rows of ``(X, y)`` in order; return ``(new_state, undo)``.

    Row ``t`` (0-based over the whole stream) is kept when ``t < capacity``,
    otherwise it replaces slot ``j ~ U{0..t}`` when ``j < capacity`` (Algorithm R),
    drawn for all rows at once.
    """
    n_new = len(X)
    capacity = state.capacity
    buffer_X, buffer_y = state.X, state.y
    n_fill = max(0, min(capacity - state.n_seen, n_new))
    if state.n_stored + n_fill > len(buffer_X):  # grow by doubling: a new array, the old state keeps its own
        rows = min(capacity, max(2 * len(buffer_X), state.n_stored + n_fill))
        buffer_X = np.concatenate([buffer_X[: state.n_stored], np.empty((rows - state.n_stored, X.shape[1]))])
        if buffer_y is not None:
            buffer_y = np.concatenate([buffer_y[: state.n_stored], np.empty(rows - state.n_stored, buffer_y.dtype)])
    buffer_X[state.n_stored: state.n_stored + n_fill] = X[:n_fill]
    if buffer_y is not None:
        buffer_y[state.n_stored: state.n_stored + n_fill] = y[:n_fill]
    undo = None
    if n_fill < n_new:
        positions = state.n_seen + np.arange(n_fill, n_new)
        slots = rng.integers(0, positions + 1)
        keep = slots < capacity
        rows, slots = np.arange(n_fill, n_new)[keep], slots[keep]
        # Sequential semantics: when two rows hit one slot, the later row wins.
        last = len(slots) - 1 - np.unique(slots[::-1], return_index=True)[1]
        rows, slots = rows[last], slots[last]
        undo = (slots, buffer_X[slots].copy(), None if buffer_y is None else buffer_y[slots].copy())
        buffer_X[slots] = X[rows]
        if buffer_y is not None:
            buffer_y[slots] = y[rows]
    new_state = ReservoirState(buffer_X, buffer_y, state.n_stored + n_fill, state.n_seen + n_new, capacity)
    return new_state, undo


def reservoir_undo(state, undo):
    """Restore the rows that an insertion into ``state``'s buffer overwrote (in place)."""
    if undo is None:
        return
    slots, old_X, old_y = undo
    state.X[slots] = old_X
    if old_y is not None:
        state.y[slots] = old_y
