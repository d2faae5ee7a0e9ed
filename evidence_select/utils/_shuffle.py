"""A uniformly random row order for a stream of chunks, in bounded memory.

Rows that fit in ``max_bytes`` are gathered and permuted in memory. Larger
streams are shuffled in two passes (Rao 1961; the "scatter-shuffle"): each row
goes to one of ``B`` temporary files chosen uniformly at random, then each file
is read back, permuted in memory and emitted in turn. Given the file sizes,
every arrangement within a file is equally likely and the assignment is
exchangeable, so the output is a uniformly random permutation; ``B`` is chosen
so that a file holds about half of ``max_bytes``. Disk use is the data once.
"""

import os
import shutil
import tempfile

import numpy as np

__all__ = ["rechunk", "shuffled_chunks"]


def rechunk(blocks, chunk_rows):
    """Regroup a stream of row blocks into chunks of exactly ``chunk_rows`` rows (the last may be shorter)."""
    pending, n_pending = [], 0
    for block in blocks:
        pending.append(block)
        n_pending += len(block)
        while n_pending >= chunk_rows:
            joined = np.concatenate(pending)
            yield joined[:chunk_rows]
            pending, n_pending = [joined[chunk_rows:]], n_pending - chunk_rows
    if n_pending:
        yield np.concatenate(pending)


def shuffled_chunks(blocks, n_rows, n_columns, chunk_rows, rng, *, max_bytes, tmp_dir=None):
    """Yield the rows of ``blocks`` in a uniformly random order, in chunks of ``chunk_rows``.

    Parameters
    ----------
    blocks : iterable of ndarray of shape (n_block_rows, n_columns)
        The rows in file order (float64).
    n_rows : int
        Total rows in ``blocks`` (known from a first pass over the file).
    n_columns : int
    chunk_rows : int
    rng : numpy.random.Generator
    max_bytes : int
        Memory for the rows held at once: the whole stream when it fits,
        otherwise about half of it per temporary file.
    tmp_dir : str, default=None
        Where the temporary files go (default: the system's temporary
        directory); removed at the end, also on error.

    Yields
    ------
    chunk : ndarray of shape (chunk_rows, n_columns)

    Examples
    --------
    >>> import numpy as np
    >>> rows = np.arange(10.0)[:, None]
    >>> blocks = [rows[:4], rows[4:]]
    >>> out = np.concatenate(list(shuffled_chunks(blocks, 10, 1, 3, np.random.default_rng(0), max_bytes=40)))
    >>> sorted(out[:, 0].tolist()) == rows[:, 0].tolist(), out[:, 0].tolist() != rows[:, 0].tolist()
    (True, True)
    """
    row_bytes = 8 * n_columns
    if n_rows * row_bytes <= max_bytes:
        rows = np.concatenate(list(blocks)) if n_rows else np.empty((0, n_columns))
        yield from rechunk([rows[rng.permutation(len(rows))]], chunk_rows)
        return
    n_files = int(np.ceil(2 * n_rows * row_bytes / max_bytes))
    directory = tempfile.mkdtemp(prefix="evidence_select_shuffle_", dir=tmp_dir)
    try:
        paths = [os.path.join(directory, f"part{i}.bin") for i in range(n_files)]
        handles = [open(path, "wb") for path in paths]
        try:
            for block in blocks:
                target = rng.integers(0, n_files, size=len(block))
                for i in np.unique(target):
                    np.ascontiguousarray(block[target == i], dtype=np.float64).tofile(handles[i])
        finally:
            for handle in handles:
                handle.close()
        yield from rechunk(_permuted_files(paths, n_columns, rng), chunk_rows)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _permuted_files(paths, n_columns, rng):
    for path in paths:
        rows = np.fromfile(path, dtype=np.float64).reshape(-1, n_columns)
        os.remove(path)  # free the disk as we go
        yield rows[rng.permutation(len(rows))]
