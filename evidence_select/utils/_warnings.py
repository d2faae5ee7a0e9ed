"""Warnings attributed to the user's line, however deep inside the package they are raised.

A warning is only useful where the user can act on it: Python prints the file
and line of the frame ``stacklevel`` names. The package's warnings come from
different depths on different paths (``fit``, ``partial_fit``, a selector, a
joblib job, ``log_evidence``), so a fixed ``stacklevel`` names one of our own
lines on most of them. :func:`warn` walks out of the package instead.

A job in another process (a joblib or dask worker) has no user's line and no
user's filters: :func:`recorded_warnings` keeps its warnings, for the calling
process to raise again.
"""

import os
import sys
import threading
import warnings
from contextlib import contextmanager

__all__ = ["recorded_warnings", "warn", "user_stacklevel"]

# warnings.catch_warnings swaps process-wide state (the filters and the function that shows a warning), so two
# threads inside it at once would record each other's warnings and leave the wrong state behind.
_RECORDING = threading.RLock()  # reentrant: a recorded block may record inside (nesting is safe in one thread)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_TESTS = os.sep + "tests" + os.sep


def _inside_package(filename):
    """Whether ``filename`` is one of the package's modules (its test modules count as user code)."""
    return filename.startswith(_PACKAGE_DIR) and _TESTS not in filename[len(_PACKAGE_DIR) - 1:]


def user_stacklevel(depth=1):
    """The ``stacklevel`` that names the first frame outside the package, seen from ``depth`` frames up.

    ``depth=1`` is the caller of this function. With no frame outside the
    package (a worker process's top level), the outermost frame.
    """
    frame, level = sys._getframe(depth), 1
    while frame.f_back is not None and _inside_package(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def warn(message, category):
    """:func:`warnings.warn` at the user's line: the first caller outside the package.

    Examples
    --------
    >>> import warnings
    >>> from evidence_select.utils._warnings import warn
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn("check this", UserWarning)
    >>> caught[0].filename.startswith("<doctest")  # the line that called, not this module's
    True
    """
    warnings.warn(message, category, stacklevel=user_stacklevel(2) + 1)


@contextmanager
def recorded_warnings():
    """Record every warning raised inside the block, whatever the filters, into the yielded list.

    Threads take turns (joblib's threading backend, a dask worker with several
    threads): :func:`warnings.catch_warnings` is not thread-safe.

    Examples
    --------
    >>> import warnings
    >>> with recorded_warnings() as caught:
    ...     warnings.warn("kept", UserWarning)
    >>> [str(w.message) for w in caught]
    ['kept']
    """
    with _RECORDING, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
