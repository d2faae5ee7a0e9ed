"""Targets with known evidence and conjugate test models, for calibrating evidence backends and models.

Each implements the :class:`~evidence_select.models.Model` protocol, so a backend (ours or a user's) is checked
against an exact ``log Z`` through the same code path real models use; :func:`calibration_cases` lists the suite.
"""

from ._calibration import (BananaTarget, BoxBananaTarget, BoxProductTarget, FunnelTarget, ProductTarget, RingChainTarget,
                           StudentTFactor, TwoPeakFactor, ill_conditioned_gaussian_target)
from ._calibration_cases import CALIBRATION_DIMS, CALIBRATION_FAMILIES, CalibrationCase, calibration_cases
from ._conjugate import BetaBinomialModel, PoissonGammaModel, TinyMixtureModel
from ._targets import BimodalTarget, BoxGaussianTarget, GaussianTarget, correlated_gaussian_target

__all__ = ["BananaTarget", "BetaBinomialModel", "BoxBananaTarget", "BimodalTarget", "BoxGaussianTarget", "BoxProductTarget",
           "CALIBRATION_DIMS", "CALIBRATION_FAMILIES", "CalibrationCase", "FunnelTarget", "GaussianTarget",
           "PoissonGammaModel", "ProductTarget", "RingChainTarget", "StudentTFactor", "TinyMixtureModel",
           "TwoPeakFactor", "calibration_cases", "correlated_gaussian_target", "ill_conditioned_gaussian_target"]
