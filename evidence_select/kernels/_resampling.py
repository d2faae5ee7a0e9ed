"""Unbiased resampling of log-weighted particles, one independent group per row."""

import numpy as np

from ..utils import normalize_log_weights

__all__ = ["systematic_resample"]


def systematic_resample(rng, log_weights, n_draws=None):
    """Systematic resampling within each group.

    Parameters
    ----------
    rng : numpy.random.Generator
    log_weights : ndarray of shape (n_groups, n_particles)
        Unnormalised log-weights; ``-inf`` entries are never selected.
    n_draws : int, optional
        Ancestors to draw per group (default ``n_particles``).

    Returns
    -------
    ancestors : ndarray of shape (n_groups, n_draws)
        Indices into each group's particles. Each particle is chosen in
        expectation ``n_draws * W_i`` times, so weighted averages stay
        unbiased after the weights are reset to uniform.
    """
    log_weights = np.atleast_2d(log_weights)
    n_groups, n_particles = log_weights.shape
    n_draws = n_particles if n_draws is None else int(n_draws)
    cdf = np.cumsum(np.exp(normalize_log_weights(log_weights, axis=1)), axis=1)
    cdf[:, -1] = 1.0  # guard against round-off below 1
    points = (rng.random((n_groups, 1)) + np.arange(n_draws)) / n_draws
    # Row-wise searchsorted (side='right'): count the cdf values <= each point.
    ancestors = (cdf[:, None, :] <= points[:, :, None]).sum(axis=2)
    return np.minimum(ancestors, n_particles - 1)
