"""Model math: priors, likelihoods and their analytic gradients, vectorised over particles.

No sampling algorithms and no scikit-learn here; see :class:`Model` for the protocol.
"""

from ._calibration import (BananaTarget, BoxProductTarget, FunnelTarget, ProductTarget, RingChainTarget,
                           StudentTFactor, TwoPeakFactor, ill_conditioned_gaussian_target)
from ._calibration_cases import CALIBRATION_DIMS, CALIBRATION_FAMILIES, CalibrationCase, calibration_cases
from ._conjugate import BetaBinomialModel, PoissonGammaModel, TinyMixtureModel
from ._linear import LinearEvidenceStats, LinearGaussianModel
from ._logistic import SoftmaxRegressionModel
from ._mixture import GaussianMixtureModel
from ._protocol import Model, check_model, design_step_scales, finite_difference_gradient

__all__ = [
    "BananaTarget",
    "BetaBinomialModel",
    "BoxProductTarget",
    "CALIBRATION_DIMS",
    "CALIBRATION_FAMILIES",
    "CalibrationCase",
    "FunnelTarget",
    "GaussianMixtureModel",
    "LinearEvidenceStats",
    "LinearGaussianModel",
    "Model",
    "PoissonGammaModel",
    "ProductTarget",
    "RingChainTarget",
    "SoftmaxRegressionModel",
    "StudentTFactor",
    "TinyMixtureModel",
    "TwoPeakFactor",
    "calibration_cases",
    "check_model",
    "design_step_scales",
    "finite_difference_gradient",
    "ill_conditioned_gaussian_target",
]
