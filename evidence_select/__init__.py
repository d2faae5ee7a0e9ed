"""evidence_select: Bayesian model selection and averaging by online marginal likelihood.

The public names are re-exported here: the online estimators, the
:class:`EvidenceModelSelector`, :func:`log_evidence` and its result type, change
points, checkpoints and the warnings; see the API reference (``doc/api.rst``).
"""

from . import datasets, exceptions, models
from .estimators import (BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture,
                         BayesianPoissonRegressor, EvidenceClassifier, EvidenceDensityEstimator, EvidenceRegressor)
from .evidence import EvidenceResult, exact_log_evidence, log_evidence
from .evidence import detect_change_points
from .exceptions import EvidenceConvergenceWarning, FeatureScaleWarning, StreamOrderWarning
from .sgais import PAPER_SETTINGS, ChunkRecord, SamplerDegeneracyWarning
from .selection import EvidenceModelSelector, partial_fit_pipeline
from .utils import load_checkpoint, save_checkpoint

__version__ = "0.1.0"

__all__ = [
    "PAPER_SETTINGS",
    "BayesianLinearRegressor",
    "BayesianLogisticClassifier",
    "BayesianMixture",
    "BayesianPoissonRegressor",
    "ChunkRecord",
    "EvidenceClassifier",
    "EvidenceConvergenceWarning",
    "EvidenceDensityEstimator",
    "EvidenceModelSelector",
    "EvidenceRegressor",
    "EvidenceResult",
    "FeatureScaleWarning",
    "SamplerDegeneracyWarning",
    "StreamOrderWarning",
    "__version__",
    "datasets",
    "detect_change_points",
    "exact_log_evidence",
    "exceptions",
    "load_checkpoint",
    "log_evidence",
    "models",
    "partial_fit_pipeline",
    "save_checkpoint",
]
