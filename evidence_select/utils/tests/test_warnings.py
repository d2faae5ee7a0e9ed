"""The package's warnings name the user's line, on every path that reaches them."""

import warnings

import numpy as np
import pytest

from evidence_select import BayesianLinearRegressor, EvidenceModelSelector
from evidence_select.estimators import FeatureScaleWarning
from evidence_select.utils import _warnings


def _scale_warnings(call):
    """The FeatureScaleWarnings that ``call()`` raises (its rows have a feature of scale 1e4)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [w for w in caught if issubclass(w.category, FeatureScaleWarning)]


@pytest.mark.parametrize("path", ["fit", "partial_fit", "selector"])
def test_a_warning_from_deep_inside_names_the_calling_line(path):
    """``fit``, ``partial_fit`` and a selector reach the same check at different depths: each warning points
    at this file, not at a line of the package."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2)) * [1.0, 1e4]
    y = rng.normal(size=200)
    estimator = BayesianLinearRegressor(random_state=0, n_particles=4)
    calls = {"fit": lambda: estimator.fit(X, y), "partial_fit": lambda: estimator.partial_fit(X, y),
             "selector": lambda: EvidenceModelSelector([("a", estimator)], random_state=0).fit(X, y)}
    caught = _scale_warnings(calls[path])
    assert caught, "the badly scaled feature went unnoticed"
    assert {w.filename for w in caught} == {__file__}


def test_user_stacklevel_counts_the_package_frames(monkeypatch):
    """Seen from a frame the package owns, the level steps past it; from user code it is the caller itself.
    (Treating no file as the package's gives level 1 everywhere: the count is not a constant.)"""
    assert _warnings.user_stacklevel() == 1  # called from this test module: user code
    monkeypatch.setattr(_warnings, "_inside_package", lambda filename: filename == __file__)
    assert _warnings.user_stacklevel() > 1


def test_test_modules_count_as_user_code():
    assert not _warnings._inside_package(__file__)
    assert _warnings._inside_package(_warnings.__file__)


def test_threads_recording_warnings_keep_their_own_and_the_process_state():
    # Thread "a" records, waits, then warns; thread "b" starts recording meanwhile. catch_warnings alone would
    # hand b's list to a's warning and leave a stale recorder installed for the whole process afterwards.
    import threading
    import time

    shown_before, filters_before = warnings.showwarning, list(warnings.filters)
    caught = {}

    def record(name, pause):
        with _warnings.recorded_warnings() as mine:
            time.sleep(pause)
            warnings.warn(f"from {name}", UserWarning)
            time.sleep(0.2)
        caught[name] = [str(w.message) for w in mine]

    threads = [threading.Thread(target=record, args=("a", 0.2)), threading.Thread(target=record, args=("b", 0.0))]
    threads[0].start()
    time.sleep(0.05)
    threads[1].start()
    for thread in threads:
        thread.join()
    assert caught == {"a": ["from a"], "b": ["from b"]}
    assert warnings.showwarning is shown_before and warnings.filters == filters_before
