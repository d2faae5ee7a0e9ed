"""Scratch buffers reused across calls, so a model's hot loop allocates no large arrays.

A mixture's gradient needs a ``(K, n_particles, n_rows)`` block of component
densities at every SGHMC step. Fresh arrays of that size are above glibc's
mmap threshold, so each step pays an ``mmap``/``munmap`` pair and a page fault
per touched page, and how much depends on the allocator's settings: dask's
worker nanny sets ``MALLOC_TRIM_THRESHOLD_``, which pins that threshold at
its 128 KiB default, so the same stream costs markedly more CPU time there.
Writing into a few reused buffers makes the cost independent of the allocator.

The buffers belong to the object that computes with them (a model), per
thread (joblib's threading backend may run two candidates' updates, or one
model's replicates, at once), and are never pickled or copied: a copy, a
checkpoint or a worker's unpickled model starts with an empty workspace and
fills it on first use.
"""

import threading

import numpy as np

__all__ = ["Workspace", "workspace_buffer"]

# Requests above this size get fresh arrays: keeping them would hold memory after a one-off
# call (say, scoring a million rows), and the hot loop's blocks are far smaller.
_MAX_BUFFER_BYTES = 32 * 2**20


class Workspace:
    """Per-thread scratch buffers by name; pickles and copies as an empty workspace.

    Each name owns one flat buffer per thread that covers the largest request
    so far (grown at least twofold, up to the 32 MiB kept); a request returns a
    view of its first ``prod(shape)`` entries, so alternating shapes (a chunk's
    rows, then a mini-batch's) reuse one allocation. Equal to every other workspace (it holds no parameters), so
    objects that compare their attributes (models' ``__eq__``) are unaffected.

    Examples
    --------
    >>> import numpy as np, pickle
    >>> workspace = Workspace()
    >>> first = workspace.get("density", (4, 3))
    >>> np.shares_memory(workspace.get("density", (2, 3)), first)
    True
    >>> np.shares_memory(workspace.get("total", (4, 3)), first)
    False
    >>> pickle.loads(pickle.dumps(workspace)) == workspace
    True
    """

    def __init__(self):
        self._local = threading.local()

    def get(self, name, shape, dtype=np.float64):
        """An uninitialised C-contiguous array of ``shape`` and ``dtype``, in ``name``'s buffer.

        The content is whatever the previous user left, and the next request
        for ``name`` in this thread overwrites it: callers fill it completely
        (``out=`` arguments) before reading, and finish with it before asking
        for ``name`` again. Requests above 32 MiB are fresh arrays.
        """
        dtype = np.dtype(dtype)
        size = 1
        for n in shape:
            size *= n
        if dtype.itemsize * size > _MAX_BUFFER_BYTES:
            return np.empty(shape, dtype)
        try:
            buffers = self._local.buffers
        except AttributeError:  # first use in this thread
            buffers = self._local.buffers = {}
        buffer = buffers.get(name)
        if buffer is None or buffer.size < size or buffer.dtype != dtype:
            # Grown at least twofold: requests that creep up (a density block over the rows seen so far) would
            # otherwise touch a fresh allocation's pages on every call.
            grown = size if buffer is None or buffer.dtype != dtype else max(size, 2 * buffer.size)
            grown = min(grown, _MAX_BUFFER_BYTES // dtype.itemsize)  # size itself is within the cap (above)
            buffer = buffers[name] = np.empty(grown, dtype)
        return buffer[:size].reshape(shape)

    def __reduce__(self):
        # Buffers are scratch: a pickled or copied workspace is a new, empty one.
        return (type(self), ())

    def __eq__(self, other):
        return isinstance(other, Workspace)

    def __hash__(self):
        return hash(Workspace)

    def __repr__(self):
        return "Workspace()"


def workspace_buffer(workspace, name, shape, dtype=np.float64):
    """``workspace.get(name, shape, dtype)``, or None without a workspace (an ``out=None``: numpy allocates)."""
    return None if workspace is None else workspace.get(name, shape, dtype)
