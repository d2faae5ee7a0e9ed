"""How far the particles lag behind the posterior, measured by Stein's identities on the stored rows.

At the posterior ``p`` the score has mean zero, ``E_p[grad log p] = 0``, and
``E_p[grad log p (theta - mean)^T] = -I``. Particles that lag behind a moving
posterior break the first: for a Gaussian posterior ``N(mu, Sigma)`` and
particles of mean ``m`` the mean score is ``g = -Sigma^{-1} (m - mu)``, so
``g^T Sigma g`` is the squared lag in posterior standard deviations. The
particles' covariance ``S`` stands in for ``Sigma``; particles narrower than
the posterior (``S = c^2 Sigma``) break the second identity, whose trace gives
``c^2``, so the lag is ``g^T S g / c^2``. A degraded chunk's evidence increment
is off by about the lag times the particles' spread of its log-likelihood
(:func:`~._engine.degraded_widening`).

Every quantity is a weighted mean over the particles of all replicate groups, so
the measured lag also carries the particles' own sampling noise: about
``sqrt(n_params / n_particles)`` posterior standard deviations even on exact
draws. The noise only adds to the lag, so the engine takes a measured lag only
where it reads under one standard deviation, the lag it assumes otherwise.

:func:`lag_ratio` divides the lag by that noise, ``sqrt(n_params / n_eff)``
with ``n_eff`` the pooled weights' effective size: about 1 for particles that
follow the posterior, whatever its dimension and the particles' number, which
makes it the engine's test of whether SGHMC kept up
(``ExactMoveSettings.lag_ratio``).
"""

import math
from typing import NamedTuple

import numpy as np

from ._reference import grad_sum

__all__ = ["PosteriorLag", "lag_measurable", "lag_ratio", "posterior_lag"]


class PosteriorLag(NamedTuple):
    """The particles' measured lag behind the posterior of the rows they were checked on."""

    lag: float  # posterior standard deviations between the particles' mean and the posterior's (see module)
    dispersion: float  # c^2: the particles' covariance over the posterior's, clipped to (0, 1]


def posterior_lag(model, particles, X, y):
    """The :class:`PosteriorLag` of ``particles`` on the posterior of every row seen, ``(X, y)``.

    Parameters
    ----------
    model : Model
        Supplies ``grad_log_prior`` and ``grad_log_likelihood``.
    particles : Particles
        ``theta`` ``(n_groups * n_particles, n_params)``, ``log_weights`` normalised within each group.
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or None
    """
    weights = np.exp(particles.log_weights).ravel() / len(particles.log_weights)
    theta = particles.theta
    scores = np.asarray(model.grad_log_prior(theta) + grad_sum(model, theta, X, y), dtype=float)
    mean_score = weights @ scores
    centred = theta - weights @ theta
    dispersion = -float(weights @ np.einsum("ij,ij->i", scores, centred)) / theta.shape[1]
    if not (math.isfinite(dispersion) and dispersion > 0.0):
        return PosteriorLag(math.inf, 0.0)
    dispersion = min(dispersion, 1.0)
    lag_sq = float(weights @ (centred @ mean_score) ** 2) / dispersion
    return PosteriorLag(math.sqrt(lag_sq) if math.isfinite(lag_sq) else math.inf, dispersion)


def lag_ratio(model, particles, X, y):
    """The particles' lag behind the posterior of the rows ``(X, y)`` (:func:`posterior_lag`) over the lag
    their own sampling noise gives, ``sqrt(n_params * sum(w**2))`` with ``w`` the pooled normalised weights.
    """
    weights = np.exp(particles.log_weights).ravel() / len(particles.log_weights)
    noise = math.sqrt(particles.theta.shape[1] * float(weights @ weights))
    return posterior_lag(model, particles, X, y).lag / noise


def lag_measurable(reservoir, n_rows, config):
    """Whether the engine measures the particles' lag on every row seen when there are ``n_rows`` of them: the
    reservoir holds every row it was offered (``reservoir`` before a chunk's insertion, whose rows the caller
    adds, or after it with ``n_rows`` its ``n_seen``), and ``n_rows`` is at most ``CheckSettings.lag_rows`` (a
    gradient per particle and row)."""
    return reservoir.n_stored == reservoir.n_seen and n_rows <= config.tuning.checks.lag_rows
