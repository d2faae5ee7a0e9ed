"""The single place that imports scikit-learn's private validation machinery.

If scikit-learn moves these, this is the only file to fix.
"""

from sklearn.base import _fit_context  # noqa: F401  (private, re-exported on purpose)
from sklearn.utils._param_validation import Interval, StrOptions  # noqa: F401
from sklearn.utils.validation import check_is_fitted, validate_data  # noqa: F401

__all__ = ["Interval", "StrOptions", "_fit_context", "check_is_fitted", "validate_data"]
