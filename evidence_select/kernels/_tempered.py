"""The tempered (power-posterior) target ``log p(theta) + lambda log L(theta)`` for HMC.

AIS moves its particles with HMC on ``f_lambda``; this callable evaluates the
prior, the full-data log-likelihood and both gradients once per position and
keeps them in ``aux`` (shape ``(n, 2 + 2 n_params)``: ``[log_prior, log_lik,
grad_prior, grad_lik]``), so a change of ``lambda`` needs no new model evaluation
(:meth:`TemperedTarget.combine`).
"""

import numpy as np

from ..utils._likelihood import log_lik_and_grad

__all__ = ["TemperedTarget"]


class TemperedTarget:
    """``log p(theta) + tempering * log L(theta)`` with the pieces cached in ``aux``.

    Parameters
    ----------
    model : Model
    X, y : the data (``y`` may be None)
    tempering : float or ndarray of shape (n,)
        ``lambda`` in ``[0, 1]``, or one per position (positions in groups on
        their own schedules); may be changed between kernel applications.

    Attributes
    ----------
    n_evaluations : int
        Particle evaluations so far (each one likelihood plus gradient).

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.testing._targets import GaussianTarget
    >>> target = TemperedTarget(GaussianTarget(np.zeros(2)), np.zeros((1, 1)), None, 0.5)
    >>> log_density, grad, aux = target(np.zeros((3, 2)))
    >>> log_density.shape, grad.shape, aux.shape
    ((3,), (3, 2), (3, 6))
    """

    def __init__(self, model, X, y, tempering):
        self.model, self.X, self.y, self.tempering = model, X, y, tempering
        self.n_evaluations = 0

    def __call__(self, theta):
        model = self.model
        # Leapfrog trajectories may diverge to extreme positions where the model
        # overflows; a non-finite density there is a divergence, rejected by HMC.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            log_prior = np.asarray(model.log_prior(theta), dtype=float)
            grad_prior = np.asarray(model.grad_log_prior(theta), dtype=float)
            log_lik, grad_lik = log_lik_and_grad(model, theta, self.X, self.y)
        self.n_evaluations += len(theta)
        aux = np.column_stack([log_prior, log_lik, grad_prior, grad_lik])
        return self.combine(aux)

    def combine(self, aux):
        """``(log_density, grad, aux)`` at the current ``tempering`` from cached pieces."""
        d = (aux.shape[1] - 2) // 2
        lam = self.tempering
        with np.errstate(invalid="ignore"):
            log_density = aux[:, 0] + lam * aux[:, 1]
        log_density = np.where(np.isnan(log_density), -np.inf, log_density)
        grad = aux[:, 2: 2 + d] + np.reshape(lam, (-1, 1)) * aux[:, 2 + d:]
        return log_density, grad, aux
