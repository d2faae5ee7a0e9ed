"""Workspace: buffers reused per (name, shape) and per thread, never pickled or copied."""

import copy
import pickle
import threading

import numpy as np

from evidence_select.utils._workspace import _MAX_BUFFER_BYTES, _MAX_ENTRIES, Workspace, workspace_buffer


def test_same_name_and_shape_reuse_one_buffer_and_others_do_not():
    workspace = Workspace()
    buffer = workspace.get("a", (3, 4))
    assert workspace.get("a", (3, 4)) is buffer
    assert workspace.get("a", (4, 3)) is not buffer
    assert workspace.get("b", (3, 4)) is not buffer
    assert workspace_buffer(None, "a", (3, 4)) is None


def test_pickle_and_copies_start_empty():
    workspace = Workspace()
    workspace.get("a", (1000, 100))
    blob = pickle.dumps(workspace)
    assert len(blob) < 200  # not the 800 kB buffer
    for clone in (pickle.loads(blob), copy.deepcopy(workspace), copy.copy(workspace)):
        assert clone == workspace and hash(clone) == hash(workspace)
        assert clone.get("a", (1000, 100)) is not workspace.get("a", (1000, 100))


def test_each_thread_has_its_own_buffers():
    workspace = Workspace()
    mine = workspace.get("a", (5,))
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(workspace.get("a", (5,))))
    thread.start()
    thread.join()
    assert theirs[0] is not mine


def test_large_buffers_are_not_kept_and_entries_are_bounded():
    workspace = Workspace()
    rows = _MAX_BUFFER_BYTES // 8 + 1
    assert workspace.get("big", (rows,)) is not workspace.get("big", (rows,))
    first = workspace.get("a", (0,))
    for n in range(1, _MAX_ENTRIES + 1):  # the oldest entry is dropped
        workspace.get("a", (n,))
    assert workspace.get("a", (0,)) is not first
    np.testing.assert_equal(len(workspace._local.buffers), _MAX_ENTRIES)
