"""The one result type returned by every evidence method."""

import warnings
from dataclasses import dataclass, field

import numpy as np

from .exceptions import EvidenceConvergenceWarning
from .utils._warnings import warn

__all__ = ["EvidenceResult", "check", "failed_checks", "warn_not_converged"]


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
        Method-specific details (e.g. per-repeat estimates, schedule, H).
    diagnostics : dict
        Convergence checks, each ``name -> {"value": ..., "threshold": ...,
        "passed": bool}`` (e.g. ``"rhat"``, ``"ess"``, ``"bridge_iterations"``,
        ``"insertion_test"``; for ``"sgais"`` the online checks of
        :mod:`~evidence_select.sgais._checks`, such as
        ``"population_bias"``). Empty for ``method="exact"``.
    converged : bool
        True when every check in ``diagnostics`` passed. A False verdict has
        already raised :class:`~evidence_select.exceptions.EvidenceConvergenceWarning`.

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
    diagnostics: dict = field(default_factory=dict)
    converged: bool = True

    def __repr__(self):
        flag = "" if self.converged else ", converged=False"
        return (f"EvidenceResult(method={self.method!r}, log_evidence={self.log_evidence:.4f} "
                f"+/- {self.log_evidence_std:.4f}, seconds={self.seconds:.3f}{flag})")


def check(value, threshold, passed):
    """One diagnostics entry: the measured value, the threshold it was held to, the outcome."""
    return {"value": value, "threshold": threshold, "passed": bool(passed)}


def failed_checks(diagnostics):
    """Names of the checks in a diagnostics dict that did not pass, in order."""
    return [name for name, entry in diagnostics.items() if not entry["passed"]]


def warn_not_converged(method, diagnostics):
    """Warn at the user's line, naming every failed check; return the verdict (True if all passed).

    Parameters
    ----------
    method : str
        The evidence method, for the message.
    diagnostics : dict
        ``name -> check(value, threshold, passed)``.

    Returns
    -------
    converged : bool

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_not_converged("bridge", {"rhat": check(1.3, 1.01, False)})
    False
    >>> caught[0].category.__name__
    'EvidenceConvergenceWarning'
    """
    failed = failed_checks(diagnostics)
    if failed:
        details = "; ".join(f"{name} = {diagnostics[name]['value']!r} (threshold {diagnostics[name]['threshold']!r})"
                            for name in failed)
        warn(f"the {method!r} evidence may be wrong: failed {details}", EvidenceConvergenceWarning)
    return not failed
