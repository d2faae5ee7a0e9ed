"""The online engine: SGAIS (stochastic gradient annealed importance sampling).

Its state, the chunk update, the move kernels it runs, the policy for surprising chunks, the checks, and the
reservoir of past rows. Every estimator runs this one engine; see :mod:`evidence_select.sgais._engine`.
"""

from ._engine import sgais_stream, sgais_update
from ._settings import CheckSettings, EngineTuning, ExactMoveSettings, ModeCheckSettings, StepSettings, with_tuning
from ._state import PAPER_SETTINGS, ChunkRecord, SamplerDegeneracyWarning, SGAISConfig, SGAISState, sgais_init

__all__ = ["PAPER_SETTINGS", "CheckSettings", "ChunkRecord", "EngineTuning", "ExactMoveSettings", "ModeCheckSettings",
           "SGAISConfig", "SGAISState", "SamplerDegeneracyWarning", "StepSettings", "sgais_init", "sgais_stream",
           "sgais_update", "with_tuning"]
