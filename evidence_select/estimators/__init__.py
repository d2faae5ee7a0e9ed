"""Thin scikit-learn shells around the one SGAIS engine."""

from ._base import FeatureScaleWarning
from ._generic import EvidenceClassifier, EvidenceDensityEstimator, EvidenceRegressor
from ._linear import BayesianLinearRegressor
from ._logistic import BayesianLogisticClassifier
from ._mixture import BayesianMixture
from ._poisson import BayesianPoissonRegressor

__all__ = ["BayesianLinearRegressor", "BayesianLogisticClassifier", "BayesianMixture", "BayesianPoissonRegressor",
           "EvidenceClassifier",
           "EvidenceDensityEstimator", "EvidenceRegressor", "FeatureScaleWarning"]
