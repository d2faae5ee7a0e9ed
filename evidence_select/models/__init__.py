"""Model math: priors, likelihoods and their analytic gradients, vectorised over particles.

No sampling algorithms and no scikit-learn here; see :class:`Model` for the protocol. Targets with known
evidence and conjugate test models live in :mod:`evidence_select.testing`.
"""

from ._linear import LinearEvidenceStats, LinearGaussianModel
from ._linear_hyper import LinearHyperModel, LinearHyperStats
from ._logistic import SoftmaxRegressionModel
from ._make_model import CustomModel, FiniteDifferenceWarning, make_model
from ._mixture import GaussianMixtureModel
from ._poisson import PoissonRegressionModel, poisson_regression_model
from ._protocol import Model, ModelCapabilities, check_model, design_step_scales, finite_difference_gradient

__all__ = [
    "CustomModel",
    "FiniteDifferenceWarning",
    "GaussianMixtureModel",
    "LinearEvidenceStats",
    "LinearGaussianModel",
    "LinearHyperModel",
    "LinearHyperStats",
    "Model",
    "ModelCapabilities",
    "PoissonRegressionModel",
    "SoftmaxRegressionModel",
    "check_model",
    "design_step_scales",
    "finite_difference_gradient",
    "make_model",
    "poisson_regression_model",
]
