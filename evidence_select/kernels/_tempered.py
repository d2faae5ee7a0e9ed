"""The tempered (power-posterior) target ``log p(theta) + lambda log L(theta)`` for HMC.

AIS moves its particles with HMC on ``f_lambda``; this callable evaluates the
prior, the full-data log-likelihood and both gradients once per position and
keeps them in ``aux`` (shape ``(n, 2 + 2 n_params)``: ``[log_prior, log_lik,
grad_prior, grad_lik]``), so a change of ``lambda`` needs no new model evaluation
(:meth:`TemperedTarget.combine`).

For a model whose gradient alone costs well under its likelihood and gradient together (``fast_gradient``),
:meth:`TemperedTarget.kicked` gives HMC a :class:`~._hmc.KickedTarget`: the leapfrog steps inside a trajectory
take that gradient alone and the log-likelihood is read at the trajectory's end. Every gradient the target gives,
cached ones included, is then that one function of the position, so each trajectory stays reversible and volume
preserving and the Metropolis correction, with the exact densities, keeps the target exactly invariant.
"""

import numpy as np

from ..utils._likelihood import grad_lik_sum, log_lik_and_grad, log_lik_sum
from ._hmc import KickedTarget

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
        Particle evaluations so far (each a full-data likelihood and gradient, or a kick's gradient and the
        likelihood at a trajectory's end).

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
        self._kicks = bool(getattr(model, "fast_gradient", False))
        self._last_kick = None  # (position, grad_prior, grad_lik) of the last kick, for the density at its end

    def __call__(self, theta):
        # Leapfrog trajectories may diverge to extreme positions where the model
        # overflows; a non-finite density there is a divergence, rejected by HMC.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            if self._kicks:  # the kicks' gradient here too: one gradient function throughout
                grad_prior, grad_lik = self._gradients(theta)
                log_prior, log_lik = self._log_terms(theta)
            else:
                log_prior = np.asarray(self.model.log_prior(theta), dtype=float)
                grad_prior = np.asarray(self.model.grad_log_prior(theta), dtype=float)
                log_lik, grad_lik = log_lik_and_grad(self.model, theta, self.X, self.y)
        self.n_evaluations += len(theta)
        return self.combine(np.column_stack([log_prior, log_lik, grad_prior, grad_lik]))

    def kicked(self):
        """The target HMC's kernel should take: a :class:`~._hmc.KickedTarget` on this one where the model has a
        ``fast_gradient`` (see the module's notes), else this target itself."""
        return KickedTarget(self, self._kick_gradient, self._density) if self._kicks else self

    def _log_terms(self, theta):
        return (np.asarray(self.model.log_prior(theta), dtype=float),
                log_lik_sum(self.model, theta, self.X, self.y, allow_nan=True))

    def _gradients(self, theta):
        return (np.asarray(self.model.grad_log_prior(theta), dtype=float),
                grad_lik_sum(self.model, theta, self.X, self.y))

    def _kick_gradient(self, theta):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            grad_prior, grad_lik = self._gradients(theta)
        self._last_kick = (theta, grad_prior, grad_lik)
        self.n_evaluations += len(theta)
        return grad_prior + np.reshape(self.tempering, (-1, 1)) * grad_lik

    def _density(self, theta):
        """``(log_density, aux)`` at a trajectory's end, where the last kick was (its gradients are reused, and the
        call counted with it; elsewhere the kick's gradients are taken, and counted, first)."""
        if self._last_kick is None or self._last_kick[0] is not theta:
            self._kick_gradient(theta)
        _, grad_prior, grad_lik = self._last_kick
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            log_prior, log_lik = self._log_terms(theta)
        log_density, _, aux = self.combine(np.column_stack([log_prior, log_lik, grad_prior, grad_lik]))
        return log_density, aux

    def combine(self, aux):
        """``(log_density, grad, aux)`` at the current ``tempering`` from cached pieces."""
        d = (aux.shape[1] - 2) // 2
        lam = self.tempering
        with np.errstate(invalid="ignore"):
            log_density = aux[:, 0] + lam * aux[:, 1]
        log_density = np.where(np.isnan(log_density), -np.inf, log_density)
        grad = aux[:, 2: 2 + d] + np.reshape(lam, (-1, 1)) * aux[:, 2 + d:]
        return log_density, grad, aux
