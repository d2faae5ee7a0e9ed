"""Model selection and averaging by evidence, feature-subset candidates, and streaming helpers."""

from ._features import feature_subset_candidates
from ._search import feature_subset_search
from ._selector import EvidenceModelSelector, SelectionRecord
from ._streaming import EvidencePipeline, partial_fit_pipeline

__all__ = ["EvidenceModelSelector", "EvidencePipeline", "SelectionRecord", "feature_subset_candidates",
           "feature_subset_search", "partial_fit_pipeline"]
