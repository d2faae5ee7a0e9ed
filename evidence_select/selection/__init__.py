"""Model selection and averaging by evidence, and streaming helpers."""

from ._selector import EvidenceModelSelector, SelectionRecord
from ._streaming import partial_fit_pipeline

__all__ = ["EvidenceModelSelector", "SelectionRecord", "partial_fit_pipeline"]
