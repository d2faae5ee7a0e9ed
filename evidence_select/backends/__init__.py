"""Reference evidence backends: annealed importance sampling, nested sampling, Gaussianized bridge sampling and
exact evidences. Each recomputes on all the data; :func:`evidence_select.log_evidence` is their one entry point."""

from ._ais import AISConfig, ais_log_evidence
from ._bridge import BridgeSettings, bridge_log_evidence
from ._exact import LinearEvidenceStats, exact_log_evidence, exact_log_evidence_and_error, has_exact_evidence
from ._ns import NSConfig, nested_sampling_log_evidence

__all__ = ["AISConfig", "BridgeSettings", "LinearEvidenceStats", "NSConfig", "ais_log_evidence",
           "bridge_log_evidence", "exact_log_evidence", "exact_log_evidence_and_error",
           "has_exact_evidence", "nested_sampling_log_evidence"]
