"""Every backend test runs under one BLAS thread, as the backends themselves do.

AIS, NS and the bridge run under :func:`~evidence_select.utils._threads.single_threaded_blas`; the tests that
call their pieces directly (the Gaussianization, the quadratic shift, the mixing proposals) get the same limit, so
they check the arithmetic the backends run, without multithreaded BLAS spinning over small matrices on a busy
machine.
"""

import pytest

from evidence_select.utils._threads import single_threaded_blas


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with single_threaded_blas():
        yield
