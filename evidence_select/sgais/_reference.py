"""Control-variate references of the SGAIS gradient estimator.

Each particle carries a reference point with the exact sum over every row seen
of ``grad log p(y|x, reference)``; the mini-batch then estimates only the
difference ``g(theta) - g(reference)``, whose variance shrinks with the distance
between the two. Each chunk's rows are added to the sums exactly; the
references move to their particles when the rows seen have grown
``recentre_factor``-fold (amortised ``O(1)`` per row).
"""

import numpy as np

from ._reservoir import reservoir_data

__all__ = ["grad_sum", "past_grad_sum", "refresh_reference"]

_GRADIENT_BLOCK_ROWS = 8192


def grad_sum(model, theta, X, y):
    """Sum over rows of ``grad log p(y|x, theta)``, in blocks to bound memory; ``(n_particles, n_params)``."""
    total = np.zeros_like(theta)
    for start in range(0, len(X), _GRADIENT_BLOCK_ROWS):
        stop = start + _GRADIENT_BLOCK_ROWS
        total += model.grad_log_likelihood(theta, X[start:stop], None if y is None else y[start:stop], 1.0)
    return total


def past_grad_sum(model, reservoir, n_past, theta, reference, reference_grad):
    """``sum over the n_past rows seen of grad log p(y|theta)``: exact while the reservoir holds them all.

    Otherwise the change from the references' exact sums is estimated from the
    uniform reservoir sample, ``G(theta) = G(ref) + n/|R| sum_R [g(theta) - g(ref)]``,
    whose error shrinks with the distance moved. Returns ``(sums, n_datum_evaluations)``.
    """
    res_X, res_y = reservoir_data(reservoir)
    if reservoir.n_stored == n_past:
        return grad_sum(model, theta, res_X, res_y), len(theta) * n_past
    scale = n_past / reservoir.n_stored
    change = grad_sum(model, theta, res_X, res_y) - grad_sum(model, reference, res_X, res_y)
    return reference_grad + scale * change, 2 * len(theta) * len(res_X)


def refresh_reference(state, model, config, particles, X, y, chunk_statistics=None):
    """References and their exact gradient sums after the chunk ``(X, y)`` is in.

    ``state`` is the state before the chunk, ``particles`` (:class:`Particles`)
    the system after it, ``chunk_statistics`` the chunk's ``gradient_statistics``
    where the model offers them (the chunk's sums then come from them). Returns
    ``(reference, reference_grad, n_reference, n_datum_evaluations)``.
    """
    if not config.control_variates:
        return None, None, 0, 0
    n_before, n_after = state.n_samples_seen, state.n_samples_seen + len(X)
    theta, reference, reference_grad = particles.theta, particles.reference, particles.reference_grad
    if reference is not None and n_after < config.recentre_factor * state.n_reference:
        grad = reference_grad + _chunk_grad_sum(model, reference, X, y, chunk_statistics)
        return reference, grad, state.n_reference, len(theta) * len(X)
    past, evaluations = past_grad_sum(model, state.reservoir, n_before, theta, reference, reference_grad)
    chunk_grad = _chunk_grad_sum(model, theta, X, y, chunk_statistics)
    evaluations += len(theta) * len(X)
    grad = past + chunk_grad
    if not np.all(np.isfinite(grad)):
        raise FloatingPointError(f"non-finite gradient at the control-variate references after {n_after} samples")
    return theta.copy(), grad, n_after, evaluations


def _chunk_grad_sum(model, theta, X, y, chunk_statistics):
    """Sum over the chunk's rows of ``grad log p(y|x, theta)``, from their statistics when given."""
    if chunk_statistics is not None:
        return model.grad_from_statistics(theta, chunk_statistics)
    return model.grad_log_likelihood(theta, X, y, 1.0)
