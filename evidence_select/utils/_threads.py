"""Single-threaded BLAS for the particle updates.

The SGAIS update multiplies small matrices (a chunk of rows by a few hundred
particle-class columns) thousands of times. Multi-threaded OpenBLAS costs more
in thread wake-ups than it gains there, and on a busy or oversubscribed machine
(joblib workers, other jobs) its threads spin waiting for cores. Streaming
therefore runs under a one-thread BLAS limit, which also keeps every sum in one
order, whatever the process it runs in.
"""

import contextlib
import functools
import threading

from threadpoolctl import ThreadpoolController

__all__ = ["single_threaded_blas"]


@functools.lru_cache(maxsize=1)
def _controller():
    # Scanning the loaded libraries is the slow part, so it is done once per process.
    return ThreadpoolController()


@functools.lru_cache(maxsize=1)
def _blas_libraries():
    return tuple(lib for lib in _controller().lib_controllers if lib.user_api == "blas")


# The limit is process-wide, so threads that stream side by side (joblib's threading backend) share one: the first
# to enter sets it, the last to leave restores it. Without the count, a thread that left first would restore the
# threads under one still inside, whose matrix products would then sum in another order (other last bits).
_lock = threading.Lock()
_holders = 0
_restore = []


@contextlib.contextmanager
def single_threaded_blas():
    """Context manager limiting BLAS to one thread (restored when the last holder exits).

    Entered once per ``partial_fit`` call, so it talks to the BLAS libraries
    directly (rather than through threadpoolctl's generic limiter) and leaves
    those already at one thread alone. It may
    be entered from several threads at once, and nested: BLAS stays at one
    thread until every holder has left.

    Returns
    -------
    limiter : context manager
        Use it in a ``with`` statement.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.utils._threads import single_threaded_blas
    >>> with single_threaded_blas():
    ...     product = np.ones((50, 50)) @ np.ones((50, 50))
    >>> float(product[0, 0])
    50.0
    """
    global _holders, _restore
    with _lock:
        if _holders == 0:
            _restore = [(lib, threads) for lib, threads in ((lib, lib.get_num_threads()) for lib in _blas_libraries())
                        if threads != 1]
            for lib, _ in _restore:
                lib.set_num_threads(1)
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                for lib, threads in _restore:
                    lib.set_num_threads(threads)
                _restore = []
