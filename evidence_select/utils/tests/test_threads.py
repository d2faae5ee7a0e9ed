"""The one-thread BLAS limit is shared by the threads that hold it and lifted by the last to leave."""

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from evidence_select.utils._threads import single_threaded_blas


def _blas_threads():
    return sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})


def test_limit_holds_until_the_last_holder_leaves():
    # Two candidates streaming in threads (joblib's threading backend) enter and leave the limit at different
    # times; the one still inside must keep one BLAS thread, or its matrix products change their last bits.
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")
    with threadpool_limits(limits=2, user_api="blas"):
        first, second = single_threaded_blas(), single_threaded_blas()
        first.__enter__()
        second.__enter__()
        assert _blas_threads() == [1]
        first.__exit__(None, None, None)
        assert _blas_threads() == [1]
        second.__exit__(None, None, None)
        assert _blas_threads() == [2]
