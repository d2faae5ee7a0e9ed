"""Warnings attributed to the user's line, however deep inside the package they are raised.

A warning is only useful where the user can act on it: Python prints the file
and line of the frame ``stacklevel`` names. The package's warnings come from
different depths on different paths (``fit``, ``partial_fit``, a selector, a
joblib job, ``log_evidence``), so a fixed ``stacklevel`` names one of our own
lines on most of them. :func:`warn` walks out of the package instead.
"""

import os
import sys
import warnings

__all__ = ["warn", "user_stacklevel"]

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
