"""Simulators for the SGAIS paper's data sets (seeded, any size, prefix-stable)."""

from ._simulators import (
    MIXTURE_MEANS,
    MIXTURE_STDS,
    MIXTURE_WEIGHTS,
    SHIFT_CHANGE_POINTS,
    SHIFT_MEANS,
    SHIFT_N_CLUSTERS,
    SHIFT_STDS,
    make_linear_regression,
    make_mixture,
    make_shift_stream,
    make_softmax_classification,
)

__all__ = [
    "MIXTURE_MEANS",
    "MIXTURE_STDS",
    "MIXTURE_WEIGHTS",
    "SHIFT_CHANGE_POINTS",
    "SHIFT_MEANS",
    "SHIFT_N_CLUSTERS",
    "SHIFT_STDS",
    "make_linear_regression",
    "make_mixture",
    "make_shift_stream",
    "make_softmax_classification",
]
