"""Scratch buffers reused across calls, so a model's hot loop allocates no large arrays.

A mixture's gradient needs a ``(K, n_particles, n_rows)`` block of component
densities at every SGHMC step. Fresh arrays of that size are above glibc's
mmap threshold, so each step pays an ``mmap``/``munmap`` pair and a page fault
per touched page, and how much depends on the allocator's settings: dask's
worker nanny sets ``MALLOC_TRIM_THRESHOLD_``, which pins that threshold at
its 128 KiB default and makes the same stream 1.5-2x slower in CPU time.
Writing into a few reused buffers makes the cost independent of the allocator.

The buffers belong to the object that computes with them (a model), per
thread (joblib's threading backend may run two candidates' updates, or one
model's replicates, at once), and are never pickled or copied: a copy, a
checkpoint or a worker's unpickled model starts with an empty workspace and
fills it on first use.
"""

import collections
import threading

import numpy as np

__all__ = ["Workspace", "workspace_buffer"]

# Buffers above this size are not kept: their allocation is negligible next to the
# arithmetic that fills them, and keeping them would hold memory after a one-off call
# (say, scoring a million rows).
_MAX_BUFFER_BYTES = 32 * 2**20
# Distinct (name, shape) entries kept per thread; a stream uses a handful (chunk, mini-batch,
# reservoir and EM row counts), the least recently used beyond this are dropped.
_MAX_ENTRIES = 16


class Workspace:
    """Per-thread buffers keyed by a name and a shape; pickles and copies as an empty workspace.

    Equal to every other workspace (it holds no parameters), so objects that
    compare their attributes (models' ``__eq__``) are unaffected by it.

    Examples
    --------
    >>> import pickle
    >>> workspace = Workspace()
    >>> first = workspace.get("density", (2, 3))
    >>> workspace.get("density", (2, 3)) is first
    True
    >>> workspace.get("density", (4, 3)) is first
    False
    >>> pickle.loads(pickle.dumps(workspace)) == workspace
    True
    """

    def __init__(self):
        self._local = threading.local()

    def get(self, name, shape):
        """An uninitialised float64 buffer of ``shape`` for ``name``, the same array as the last call's when cached.

        The content is whatever the previous user left; callers overwrite it
        completely (``out=`` arguments) before reading it. Buffers above
        32 MiB are fresh arrays every call.
        """
        try:
            buffers = self._local.buffers
        except AttributeError:  # first use in this thread
            buffers = self._local.buffers = collections.OrderedDict()
        key = (name, tuple(shape))
        buffer = buffers.get(key)
        if buffer is not None:
            buffers.move_to_end(key)
            return buffer
        buffer = np.empty(key[1])
        if buffer.nbytes <= _MAX_BUFFER_BYTES:
            buffers[key] = buffer
            if len(buffers) > _MAX_ENTRIES:
                buffers.popitem(last=False)
        return buffer

    def __reduce__(self):
        # Buffers are scratch: a pickled or copied workspace is a new, empty one.
        return (type(self), ())

    def __eq__(self, other):
        return isinstance(other, Workspace)

    def __hash__(self):
        return hash(Workspace)

    def __repr__(self):
        return "Workspace()"


def workspace_buffer(workspace, name, shape):
    """``workspace.get(name, shape)``, or None without a workspace (an ``out=None``: numpy allocates)."""
    return None if workspace is None else workspace.get(name, shape)
