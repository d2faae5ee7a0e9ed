"""Model selection and averaging by evidence, feature-subset candidates, and streaming helpers."""

from ._selector import EvidenceModelSelector, SelectionRecord
from ._streaming import EvidencePipeline, partial_fit_pipeline

__all__ = ["EvidenceModelSelector", "EvidencePipeline", "SelectionRecord", "partial_fit_pipeline"]
