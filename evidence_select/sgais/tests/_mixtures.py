"""Estimators and models the engine's, the selector's and the backends' tests share (module-level, so worker
processes import them)."""

from evidence_select import BayesianMixture
from evidence_select.models import GaussianMixtureModel
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


class ExactDrawsMixtureModel(GaussianMixtureModel):
    """The mixture with its importance draws weighed by the double-precision likelihood sum."""

    def approximate_log_likelihood_sum(self, theta, X, y=None):
        return self.log_likelihood_sum(theta, X, y)


class OneNatAboveMixtureModel(GaussianMixtureModel):
    """The mixture with an approximate likelihood sum one nat above its exact one."""

    def approximate_log_likelihood_sum(self, theta, X, y=None):
        return self.log_likelihood_sum(theta, X, y) + 1.0


class AnotherLikelihoodMixtureModel(GaussianMixtureModel):
    """A subclass whose likelihood (one nat above the mixture's) does not come with an approximate sum."""

    def log_likelihood(self, theta, X, y=None):
        return super().log_likelihood(theta, X, y) + 1.0 / len(X)

    def log_likelihood_sum(self, theta, X, y=None):
        return super().log_likelihood_sum(theta, X, y) + 1.0
