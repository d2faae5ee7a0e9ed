"""The one result type returned by every evidence method."""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["EvidenceResult"]


@dataclass(frozen=True)
class EvidenceResult:
    """Log evidence estimate with its uncertainty and cost, for any method.

    Attributes
    ----------
    log_evidence : float
        Estimate of ``log p(data)``.
    log_evidence_std : float
        Standard error of ``log_evidence`` (0.0 for ``method="exact"``).
    method : str
        ``"exact"``, ``"ais"``, ``"ns"``, ``"bridge"`` or ``"sgais"``.
    n_likelihood_calls : float
        Cost in full-data likelihood evaluations of one parameter vector (the
        unit dynesty reports as ``ncall``); per-datum work divided by ``n_samples``.
    n_datum_evaluations : int
        Number of per-datum log-likelihood terms evaluated (particles x rows).
    seconds : float
        Wall time.
    settings : dict
        The method's settings as used.
    samples : ndarray of shape (n_draws, n_params) or None
        Posterior samples (unconstrained parameters) where the method yields them.
    log_weights : ndarray of shape (n_draws,) or None
        Log importance weights of ``samples`` (unnormalised).
    info : dict
        Method-specific diagnostics (e.g. per-repeat estimates, schedule, H).

    Examples
    --------
    >>> r = EvidenceResult(-1.0, 0.1, "exact", 1.0, 10, 0.01)
    >>> r
    EvidenceResult(method='exact', log_evidence=-1.0000 +/- 0.1000, seconds=0.010)
    """

    log_evidence: float
    log_evidence_std: float
    method: str
    n_likelihood_calls: float
    n_datum_evaluations: int
    seconds: float
    settings: dict = field(default_factory=dict)
    samples: np.ndarray = None
    log_weights: np.ndarray = None
    info: dict = field(default_factory=dict)

    def __repr__(self):
        return (f"EvidenceResult(method={self.method!r}, log_evidence={self.log_evidence:.4f} "
                f"+/- {self.log_evidence_std:.4f}, seconds={self.seconds:.3f})")
