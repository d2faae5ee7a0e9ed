"""Exact, Metropolis-corrected moves for the first rows of a stream.

While the reservoir still holds every row seen and there are few of them, the
tempered target of a chunk, ``p(theta) p(past|theta) p(chunk|theta)^tempering``,
costs no more to evaluate exactly than a few SGHMC mini-batch gradients. The
first chunks are where the particles travel farthest (from the prior to a
posterior that may be many orders of magnitude narrower in some directions and
as wide as the prior in others: a nearly separable classifier, a stream sorted by
class), and where SGHMC's step, bounded by the worst-case curvature, cannot
follow. Preconditioned HMC (:func:`~evidence_select.kernels._particle_hmc.particle_hmc_move`)
moves each group in the shape of its own particles and is exactly invariant, so
those chunks equilibrate; later chunks, where posteriors change little per chunk,
keep SGHMC and its cost that does not grow with the rows seen.
"""

import numpy as np

from ..kernels._particle_hmc import particle_hmc_move
from ..kernels._reservoir import reservoir_data

__all__ = ["uses_exact_moves", "exact_tempered_log_density", "exact_move"]

#: Leapfrog steps per HMC transition; a move makes ``n_mcmc_steps * EXACT_MOVE_FACTOR / N_LEAPFROG``
#: transitions, i.e. ``EXACT_MOVE_FACTOR`` times the gradients of the SGHMC move it replaces.
N_LEAPFROG = 5
EXACT_MOVE_FACTOR = 2
#: Initial leapfrog step in whitened units (adapted from the acceptance rate afterwards).
INITIAL_STEP_SIZE = 0.5


def uses_exact_moves(exact_move_rows, n_seen, n_chunk, n_stored):
    """Whether a chunk moves its particles exactly: all rows seen are stored and within the budget."""
    return n_stored == n_seen and n_seen + n_chunk <= exact_move_rows


def exact_tempered_log_density(model, X, y, tempering, reservoir):
    """``theta -> (log target, gradient, None)`` of ``p(theta) p(past|theta) p(chunk|theta)^tempering``.

    The past is every row in ``reservoir`` (the caller checks that it holds them all).
    """
    past_X, past_y = reservoir_data(reservoir)
    data_X = np.concatenate([X, past_X]) if len(past_X) else X
    data_y = None if y is None else (np.concatenate([y, past_y]) if len(past_X) else y)
    weights = np.ones(len(data_X))
    weights[:len(X)] = tempering

    def log_density(theta):
        with np.errstate(invalid="ignore", over="ignore"):
            log_lik = model.log_likelihood(theta, data_X, data_y) @ weights
            grad = model.grad_log_prior(theta) + model.grad_log_likelihood(theta, data_X, data_y, weights)
        return model.log_prior(theta) + log_lik, grad, None

    return log_density, len(data_X)


def exact_move(rng, theta, model, X, y, tempering, reservoir, *, n_groups, step_size, n_mcmc_steps):
    """Preconditioned HMC on the exact tempered target.

    Returns
    -------
    theta : ndarray of shape (n_total, n_params)
    step_size : ndarray of shape (n_groups,)
        Each group's adapted leapfrog step, to carry to the next move.
    n_datum_evaluations : int
    """
    log_density, n_rows = exact_tempered_log_density(model, X, y, tempering, reservoir)
    n_transitions = max(1, EXACT_MOVE_FACTOR * n_mcmc_steps // N_LEAPFROG)
    theta, info = particle_hmc_move(rng, theta, log_density, n_groups=n_groups, step_size=step_size,
                                    n_transitions=n_transitions, n_leapfrog=N_LEAPFROG)
    return theta, info.step_size, info.n_evaluations * len(theta) * n_rows
