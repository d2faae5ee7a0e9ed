"""evidence_select: Bayesian model selection and averaging by online marginal likelihood.

The public names of the product design (DESIGN.md section 2) are re-exported here.
"""

from . import datasets, models
from .evidence import exact_log_evidence

__version__ = "0.1.0"

__all__ = ["__version__", "datasets", "exact_log_evidence", "models"]
