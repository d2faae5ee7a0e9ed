"""Exact (analytic) evidence, where the model admits one."""

from ..models import LinearEvidenceStats

__all__ = ["exact_log_evidence", "has_exact_evidence"]


def has_exact_evidence(model):
    """True when ``model`` provides an analytic ``exact_log_evidence(X, y)``."""
    return callable(getattr(model, "exact_log_evidence", None))


def exact_log_evidence(model, X, y=None):
    """Analytic ``log p(y | X)`` (or ``log p(X)``) of ``model``.

    Raises
    ------
    ValueError
        If the model has no analytic evidence (e.g. the Gaussian mixture).
    """
    if not has_exact_evidence(model):
        raise ValueError(f"method='exact' is not available for {type(model).__name__}: it has no analytic "
                         "evidence; use method='ais', 'ns', 'bridge' or 'sgais'")
    return float(model.exact_log_evidence(X, y))


__all__ += ["LinearEvidenceStats"]
