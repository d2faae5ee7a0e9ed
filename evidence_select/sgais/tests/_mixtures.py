"""Estimators the engine's and the selector's tests share (module-level, so worker processes import them)."""

from evidence_select import BayesianMixture
from evidence_select.sgais._settings import EngineTuning, ModeCheckSettings


class PriorReplayMixture(BayesianMixture):
    """The mixture estimator whose restarts always replay from the prior: none draws at the posterior's mode
    (:mod:`~evidence_select.sgais._mode_restart`), so a run stuck in a poorer configuration stays there, and the
    replays' groups are what runs on parallel workers."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(restart_share=0.0))


class NoRestartAfterCheckMixture(BayesianMixture):
    """The mixture estimator whose posterior-mode checks never restart the run at the mode themselves
    (``ModeCheckSettings.restart_after_check``); its other restarts are as the estimator's."""

    _engine_tuning = EngineTuning(mode_check=ModeCheckSettings(restart_after_check=False))
