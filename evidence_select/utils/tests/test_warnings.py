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
