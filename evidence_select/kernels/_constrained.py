"""Chains under a likelihood constraint, the state that nested sampling's moves share.

Nested sampling replaces a live point by moving a copy of another under the
constrained prior ``p(theta) 1[log L(theta) > log_lik_min]``. Its moves
(:mod:`._slice`, :mod:`._galilean`) take the chains as
:class:`ConstrainedPoints` and the target as a :class:`LikelihoodConstraint`.
"""

from typing import NamedTuple

import numpy as np

__all__ = ["ConstrainedPoints", "LikelihoodConstraint"]


class ConstrainedPoints(NamedTuple):
    """The chains' points ``(n_chains, n_params)`` with their log prior and full-data log-likelihood
    ``(n_chains,)``."""

    position: np.ndarray
    log_prior: np.ndarray
    log_lik: np.ndarray


class LikelihoodConstraint(NamedTuple):
    """The constrained prior ``p(theta) 1[log L(theta) > log_lik_min]``.

    ``log_prior_fn`` maps ``(n, n_params)`` points to ``(n,)`` log prior
    densities. ``log_lik_fn`` maps them to ``(n,)`` log-likelihoods for the
    slice move, and to ``(log_lik (n,), gradient (n, n_params))`` for the
    Galilean move, which reflects off the constraint along the gradient.
    ``log_lik_min`` is a float, or one bound per chain where the move allows it.
    """

    log_lik_min: object
    log_prior_fn: object
    log_lik_fn: object
