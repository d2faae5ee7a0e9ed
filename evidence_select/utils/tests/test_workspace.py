"""Workspace: one buffer per name and thread, covering the largest request, never pickled or copied."""

import copy
import pickle
import threading

import numpy as np

from evidence_select.utils._workspace import _MAX_BUFFER_BYTES, Workspace, workspace_buffer


def test_a_name_reuses_its_buffer_for_any_shape_and_names_do_not_share():
    workspace = Workspace()
    first = workspace.get("a", (3, 4))
    assert first.shape == (3, 4) and first.flags.c_contiguous
    again = workspace.get("a", (2, 5))
    assert again.shape == (2, 5) and np.shares_memory(again, first)
    assert not np.shares_memory(workspace.get("b", (3, 4)), first)
    assert workspace_buffer(None, "a", (3, 4)) is None


def test_a_buffer_grows_to_the_largest_request_and_keeps_it():
    workspace = Workspace()
    small = workspace.get("a", (10,))
    large = workspace.get("a", (100,))
    assert not np.shares_memory(large, small)
    assert np.shares_memory(workspace.get("a", (10,)), large)
    assert len(workspace._local.buffers) == 1


def test_pickle_and_copies_start_empty():
    workspace = Workspace()
    buffer = workspace.get("a", (1000, 100))
    blob = pickle.dumps(workspace)
    assert len(blob) < 200  # not the 800 kB buffer
    for clone in (pickle.loads(blob), copy.deepcopy(workspace)):
        assert clone == workspace and hash(clone) == hash(workspace)
        assert not np.shares_memory(clone.get("a", (1000, 100)), buffer)


def test_each_thread_has_its_own_buffers():
    workspace = Workspace()
    mine = workspace.get("a", (5,))
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(workspace.get("a", (5,))))
    thread.start()
    thread.join()
    assert not np.shares_memory(theirs[0], mine)


def test_large_requests_are_fresh_arrays():
    workspace = Workspace()
    rows = _MAX_BUFFER_BYTES // 8 + 1
    assert not np.shares_memory(workspace.get("big", (rows,)), workspace.get("big", (rows,)))


def test_a_buffer_has_the_requested_dtype_and_a_new_dtype_replaces_it():
    workspace = Workspace()
    single = workspace.get("single", (4, 3), np.float32)
    assert single.dtype == np.float32 and single.shape == (4, 3)
    assert np.shares_memory(workspace.get("single", (2, 3), np.float32), single)
    double = workspace.get("single", (4, 3))
    assert double.dtype == np.float64 and not np.shares_memory(double, single)


def test_a_creeping_request_grows_the_buffer_geometrically():
    # A block over the rows seen so far grows by a chunk per call: each growth touches fresh pages, so a buffer
    # that grew only to the request would be reallocated on every call.
    workspace = Workspace()
    buffers = [workspace.get("a", (rows, 10)) for rows in range(100, 1700, 100)]
    distinct = {id(buffer.base) for buffer in buffers}
    assert len(distinct) <= 5  # 1000, 2000, 4000, 8000, 16000 entries for requests up to 16000
    assert workspace._local.buffers["a"].size < 2 * 1600 * 10


def test_growth_stops_at_the_cap_of_kept_buffers():
    workspace = Workspace()
    cap = _MAX_BUFFER_BYTES // 8
    workspace.get("a", (cap // 2 + 1,))
    workspace.get("a", (cap // 2 + 2,))
    assert workspace._local.buffers["a"].size == cap
