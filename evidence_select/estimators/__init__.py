"""Thin scikit-learn shells around the one SGAIS engine."""

from ._base import FeatureScaleWarning
from ._linear import BayesianLinearRegressor
from ._logistic import BayesianLogisticClassifier
from ._mixture import BayesianMixture

__all__ = ["BayesianLinearRegressor", "BayesianLogisticClassifier", "BayesianMixture", "FeatureScaleWarning"]
