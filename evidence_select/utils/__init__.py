"""Internal utilities: log-space helpers, validation and randomness."""

from ._logspace import ess_from_log_weights, log1mexp, log_mean_exp, logsumexp, normalize_log_weights

__all__ = ["ess_from_log_weights", "log1mexp", "log_mean_exp", "logsumexp", "normalize_log_weights"]
