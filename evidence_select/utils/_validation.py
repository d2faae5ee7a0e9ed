"""The single place that imports scikit-learn's private validation machinery.

If scikit-learn moves these, this is the only file to fix.
"""

import numpy as np
from sklearn.base import _fit_context  # noqa: F401  (private, re-exported on purpose)
from sklearn.utils._param_validation import Interval, StrOptions  # noqa: F401
from sklearn.utils.validation import check_is_fitted  # noqa: F401
from sklearn.utils.validation import validate_data as _sklearn_validate_data

__all__ = ["Interval", "StrOptions", "_fit_context", "check_is_fitted", "validate_data"]

_NO_VALIDATION = "no_validation"


def _plain_float_matrix(estimator, X):
    """Whether ``X`` is a finite float64 ndarray of the fitted width, with no feature names anywhere."""
    return (type(X) is np.ndarray and X.dtype == np.float64 and X.ndim == 2 and X.shape[0] > 0
            and X.shape[1] == getattr(estimator, "n_features_in_", -1)
            and not hasattr(estimator, "feature_names_in_") and np.isfinite(X.sum()))


def _plain_target(y, n_rows, y_numeric):
    """Whether ``y`` is a 1-d ndarray of ``n_rows`` numbers (finite when ``y_numeric``) or booleans."""
    if type(y) is not np.ndarray or y.ndim != 1 or len(y) != n_rows or y.dtype.kind not in "biuf":
        return False
    return not y_numeric or y.dtype.kind != "f" or bool(np.isfinite(y.sum()))


def validate_data(estimator, /, X=_NO_VALIDATION, y=_NO_VALIDATION, reset=True, **check_params):
    """scikit-learn's ``validate_data``, returning plain inputs of a fitted estimator as they are.

    A ``partial_fit`` or ``predict`` call on a few hundred rows spent more time in
    scikit-learn's generic checks than in the update. Those checks return a
    float64 ndarray unchanged after finding it finite, 2-d, non-empty and of
    the fitted width, so for exactly those inputs (and a 1-d numeric ``y`` of
    the same length) this returns them directly; anything else (lists,
    DataFrames, other dtypes, non-finite values, a first call) goes through
    scikit-learn with its error messages.
    """
    fast = (not reset and set(check_params) <= {"dtype", "y_numeric"} and check_params.get("dtype") is np.float64
            and _plain_float_matrix(estimator, X))
    if fast and isinstance(y, str) and y == _NO_VALIDATION:
        return X
    if fast and _plain_target(y, len(X), check_params.get("y_numeric", False)):
        return X, y
    return _sklearn_validate_data(estimator, X, y, reset=reset, **check_params)
