"""Stochastic gradient Hamiltonian Monte Carlo (Chen et al., 2014; paper Eq. 3).

``v <- (1 - alpha) v + eta * grad log f_hat(theta) + N(0, 2 alpha eta)``,
``theta <- theta + v``. The gradient estimator is passed in as a function; the
mini-batch scaling ``n / |B|`` lives in that estimator, in one place.
"""

import numpy as np

__all__ = ["sghmc_trajectory"]


def sghmc_trajectory(rng, theta, grad_log_target_fn, *, step_size, friction, n_steps):
    """Run ``n_steps`` SGHMC steps from ``theta`` with a fresh momentum.

    Parameters
    ----------
    rng : numpy.random.Generator
    theta : ndarray of shape (n_particles, n_params)
    grad_log_target_fn : callable
        ``grad_log_target_fn(theta, step) -> (n_particles, n_params)``, an unbiased
        estimate of the gradient of the log target at step ``step``.
    step_size : float
        The learning rate ``eta``.
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
    All noise is drawn in one call.
    """
    noise = rng.standard_normal((n_steps + 1,) + theta.shape)
    velocity = np.sqrt(step_size) * noise[0]
    noise_scale = np.sqrt(2.0 * friction * step_size)
    theta = theta.copy()
    for step in range(n_steps):
        velocity *= 1.0 - friction
        velocity += step_size * grad_log_target_fn(theta, step)
        velocity += noise_scale * noise[step + 1]
        theta += velocity
    return theta
