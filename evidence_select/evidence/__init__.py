"""Evidence estimators, all in log space."""

from ._api import METHODS, log_evidence
from ._changepoints import detect_change_points
from ..backends._exact import (LinearEvidenceStats, exact_log_evidence, exact_log_evidence_and_error,
                               has_exact_evidence)
from .._result import EvidenceResult

__all__ = ["METHODS", "EvidenceResult", "LinearEvidenceStats", "detect_change_points", "exact_log_evidence",
           "exact_log_evidence_and_error", "has_exact_evidence",
           "log_evidence"]
