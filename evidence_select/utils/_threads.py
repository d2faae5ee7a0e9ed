"""Single-threaded BLAS for the particle updates.

The SGAIS update multiplies small matrices (a chunk of rows by a few hundred
particle-class columns) thousands of times. Multi-threaded OpenBLAS costs more
in thread wake-ups than it gains there, and on a busy or oversubscribed machine
(joblib workers, other jobs) it spins: measured 3-5x slower than one thread for
the softmax gradient. Streaming therefore runs under a one-thread BLAS limit.
"""

import functools

from threadpoolctl import ThreadpoolController

__all__ = ["single_threaded_blas"]


@functools.lru_cache(maxsize=1)
def _controller():
    # Scanning the loaded libraries costs ~1 ms, so it is done once per process;
    # entering a limit on the controller then costs microseconds.
    return ThreadpoolController()


def single_threaded_blas():
    """Context manager limiting BLAS to one thread (restored on exit).

    Returns
    -------
    limiter : threadpoolctl.ThreadpoolLimiter
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
    return _controller().limit(limits=1, user_api="blas")
