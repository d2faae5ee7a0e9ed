"""Internal utilities: log-space helpers, validation and randomness."""

from ._logspace import ess_from_log_weights, log1mexp, log_mean_exp, logsumexp, normalize_log_weights
from ._checkpoint import load_checkpoint, save_checkpoint
from ._random import categorical_draws, make_generator, spawn_seeds
from ._order import fit_order

__all__ = ["categorical_draws", "ess_from_log_weights", "fit_order", "load_checkpoint", "log1mexp", "log_mean_exp", "logsumexp",
           "make_generator", "normalize_log_weights", "save_checkpoint", "spawn_seeds"]
