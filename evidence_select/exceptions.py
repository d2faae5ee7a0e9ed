"""Warnings that say an evidence may not be right.

Every evidence method checks its own convergence. A failed check never only
logs: it raises one of these warnings and marks the result (for
:func:`~evidence_select.log_evidence`, ``EvidenceResult.converged`` is False and
``EvidenceResult.diagnostics`` names the checks that failed). Escalate them to
errors with :func:`warnings.simplefilter` where a doubtful number must stop a
pipeline.
"""

__all__ = ["EvidenceConvergenceWarning"]


class EvidenceConvergenceWarning(RuntimeWarning):
    """An evidence estimate failed one of its method's convergence checks.

    Raised by the reference backends (R-hat or effective sample size of the
    posterior chains, bridge iterations, ESS per temperature, the nested
    sampling insertion test) and by the online engine when a degradation makes
    its error bar doubtful. The message names the failed checks; the result
    carries them in its diagnostics and its error bar is widened or flagged.

    Examples
    --------
    >>> import warnings
    >>> from evidence_select.exceptions import EvidenceConvergenceWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", EvidenceConvergenceWarning)  # stop instead of a doubtful number
    ...     issubclass(EvidenceConvergenceWarning, RuntimeWarning)
    True
    """
