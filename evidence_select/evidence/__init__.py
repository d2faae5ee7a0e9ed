"""Evidence estimators, all in log space."""

from ._exact import LinearEvidenceStats, exact_log_evidence, has_exact_evidence

__all__ = ["LinearEvidenceStats", "exact_log_evidence", "has_exact_evidence"]
