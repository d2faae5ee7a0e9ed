"""The compiled kernels' first processes on empty caches, shared by the cache tests (see ``_fresh_process``)."""

import pytest

# Before the import below: the helper's asserts report their operands as a test's do.
pytest.register_assert_rewrite("evidence_select.models.tests._fresh_process")

from ._fresh_process import FirstProcesses  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "first_processes(*names): the test's first_processes fixture holds these "
                                       "processes on empty caches (_fresh_process.FirstProcesses.CODES)")


@pytest.fixture(scope="session")
def _first_processes(request, tmp_path_factory):
    needed = [name for item in request.session.items
              for mark in item.iter_markers("first_processes") for name in mark.args]
    return FirstProcesses(tmp_path_factory, dict.fromkeys(needed))


@pytest.fixture
def first_processes(request, _first_processes):
    """The :class:`~._fresh_process.FirstProcess` of each name in the test's ``first_processes`` mark, each run
    once per session."""
    return _first_processes.get(request.node.get_closest_marker("first_processes").args)
