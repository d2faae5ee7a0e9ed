"""Model math: priors, likelihoods and their analytic gradients, vectorised over particles.

No sampling algorithms and no scikit-learn here; see :class:`Model` for the protocol. Targets with known
evidence and conjugate test models live in :mod:`evidence_select.testing`.
"""

from ._linear import LinearEvidenceStats, LinearGaussianModel
from ._linear_hyper import LinearHyperModel, LinearHyperStats
from ._logistic import SoftmaxRegressionModel
from ._mixture import GaussianMixtureModel
from ._protocol import Model, check_model, design_step_scales, finite_difference_gradient

__all__ = [
    "GaussianMixtureModel",
    "LinearEvidenceStats",
    "LinearGaussianModel",
    "LinearHyperModel",
    "LinearHyperStats",
    "Model",
    "SoftmaxRegressionModel",
    "check_model",
    "design_step_scales",
    "finite_difference_gradient",
]
