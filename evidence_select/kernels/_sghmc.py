"""Stochastic gradient Hamiltonian Monte Carlo integrators, one gradient per step.

Two discretisations of the same Langevin dynamics, with the paper's
parameterisation (``eta`` = squared step, ``alpha`` = friction per step):

- :func:`sghmc_trajectory` is the paper's Eq. (3) (Chen et al., 2014):
  ``v <- (1 - alpha) v + eta grad + N(0, 2 alpha eta)``, ``theta <- theta + v``.
  Its stationary law is wider than the target by a relative ``O(eta kappa)``,
  which biases every chunk's predictive low by about ``eps D |chunk| / (2 n)``:
  summed over a stream, ``-(eps D / 2) log(N / n0)`` nats.
- :func:`baoab_trajectory` is the BAOAB splitting (Leimkuhler & Matthews,
  2013): half kick, half drift, exact Ornstein-Uhlenbeck momentum refresh, half
  drift, half kick. It samples a Gaussian target's position marginal exactly for
  any stable step, so near-Gaussian posteriors (large n) carry no such bias.

The gradient estimator is passed in as a function; the mini-batch scaling
``n / |B|`` lives in that estimator, in one place.
"""

import numpy as np

__all__ = ["sghmc_trajectory", "baoab_trajectory", "TRAJECTORIES"]


def sghmc_trajectory(rng, theta, grad_log_target_fn, *, step_size, friction, n_steps):
    """Run ``n_steps`` SGHMC steps from ``theta`` with a fresh momentum.

    Parameters
    ----------
    rng : numpy.random.Generator
    theta : ndarray of shape (n_particles, n_params)
    grad_log_target_fn : callable
        ``grad_log_target_fn(theta, step) -> (n_particles, n_params)``, an unbiased
        estimate of the gradient of the log target at step ``step``.
    step_size : float or ndarray of shape (n_params,)
        The learning rate ``eta``; an array is a diagonal inverse mass matrix
        (exactly SGHMC in coordinates rescaled by ``sqrt(step_size)``).
    friction : float
        ``alpha``; ``1 - alpha`` is the momentum decay.
    n_steps : int

    Returns
    -------
    theta : ndarray of shape (n_particles, n_params)
        A new array (the input is not modified).

    Notes
    -----
    The momentum is refreshed from its stationary law ``N(0, eta)`` at the start
    (the step size changes between calls, so a stale momentum would be mis-scaled).
    The noise is drawn step by step, one ``theta``-shaped block each (the same
    numbers as one draw of all ``n_steps + 1`` blocks, without an array of
    them that would exceed the allocator's mmap threshold).
    """
    velocity = np.sqrt(step_size) * rng.standard_normal(theta.shape)
    noise_scale = np.sqrt(2.0 * friction * step_size)
    theta = theta.copy()
    for step in range(n_steps):
        velocity *= 1.0 - friction
        velocity += step_size * grad_log_target_fn(theta, step)
        velocity += noise_scale * rng.standard_normal(theta.shape)
        theta += velocity
    return theta


def baoab_trajectory(rng, theta, grad_log_target_fn, *, step_size, friction, n_steps):
    """Run ``n_steps`` BAOAB Langevin steps from ``theta`` with a fresh momentum.

    Same arguments and return value as :func:`sghmc_trajectory`: ``step_size``
    is ``eta = h^2`` (scalar or per parameter) and the momentum decays by
    ``1 - friction`` per step in the exact OU refresh. It evaluates
    ``n_steps`` gradients, with step indices ``0..n_steps - 1``: the closing
    half kick of the last step would only change the momentum, which the next
    call draws afresh, so that gradient is never computed. The noise is drawn
    step by step, as in :func:`sghmc_trajectory`.
    """
    half_step = 0.5 * np.sqrt(step_size)
    decay = 1.0 - friction
    refresh = np.sqrt(1.0 - decay**2)
    momentum = rng.standard_normal(theta.shape)
    theta = theta.copy()
    grad = grad_log_target_fn(theta, 0)
    for step in range(n_steps):
        momentum += half_step * grad  # B
        theta += half_step * momentum  # A
        momentum *= decay  # O
        momentum += refresh * rng.standard_normal(theta.shape)
        theta += half_step * momentum  # A
        if step + 1 < n_steps:
            grad = grad_log_target_fn(theta, step + 1)
            momentum += half_step * grad  # B
    return theta


#: Integrators by name, for configuration.
TRAJECTORIES = {"sghmc": sghmc_trajectory, "baoab": baoab_trajectory}
