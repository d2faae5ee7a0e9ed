"""The shared scikit-learn shell around the SGAIS engine.

A shell validates, builds a frozen config, delegates each chunk to
:func:`~evidence_select.sgais._engine.sgais_update`, and commits the new state
at the very end, so a failing call leaves the estimator exactly as it was.
"""

import logging
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator

from ..exceptions import FeatureScaleWarning
from ..sgais._engine import (SGAISConfig, evidence_estimate, particle_log_weights,
                             sgais_init, sgais_update)
from ..sgais._settings import EngineTuning
from ..sgais._checks import failed_evidence_checks, raise_notices, reported_estimate
from ..sgais._reservoir import reservoir_undo
from ..utils import make_generator
from ..utils._progress import progress_bar
from ..utils._nested import granted_n_jobs
from ..utils._threads import single_threaded_blas
from ..utils._order import order_generator, warn_if_target_ordered
from ..utils._validation import Interval, StrOptions, check_is_fitted
from ..utils._warnings import warn

__all__ = ["BaseSGAISEstimator", "FeatureScaleWarning"]

logger = logging.getLogger(__name__)

#: Feature root-mean-squares outside ``[1 / FEATURE_SCALE_LIMIT, FEATURE_SCALE_LIMIT]`` draw a warning.
FEATURE_SCALE_LIMIT = 1e4
#: A parameter whose prior variance exceeds its per-row posterior variance (the inverse per-datum Fisher
#: information, :meth:`~evidence_select.models.Model.step_scales`) by more than this draws a warning: one row
#: then pins it ~30 times tighter than its prior, which happens when the features' scale contradicts the prior's.
INFORMATION_LIMIT = 1e3


#: A call whose columns' root-mean-squares (X's, and a float y's) all lie within this factor of those of the last
#: call that ran the data-scale checks skips them: the checks fit the rows (as costly as annealing a small chunk),
#: and data on the scale of rows already checked would give the same verdict. The first call always runs them.
SCALE_RECHECK_FACTOR = 2.0


def warn_if_badly_scaled(X, estimator_name, model=None):
    """Warn when the features' scale contradicts the prior's (a :class:`FeatureScaleWarning`).

    Two checks, both from the data:

    - a non-zero feature's root-mean-square over ``X`` is beyond ``FEATURE_SCALE_LIMIT``
      (either way): the unit-scale priors (``prior_scale=1``, the mixture's inverse-gamma
      variances) then contradict the data outright; a single outlier of ``1e8`` in a chunk
      of 500 rows also trips it;
    - for models with :meth:`~evidence_select.models.Model.step_scales` and
      ``prior_variances``: one row's Fisher information exceeds the prior precision by
      more than ``INFORMATION_LIMIT`` for some parameter (``prior_variances / step_scales``),
      e.g. a raw feature of scale 700 under ``prior_scale=1``. The posterior is then many
      orders of magnitude narrower than the prior and the first chunk must contract the
      particles by as much, which local moves do not equilibrate: the evidence comes out
      hundreds of nats low with a small error bar.

    In both cases standardising is the cure (or prior scales matched to the features).

    Returns
    -------
    warned : bool
    """
    rms = column_scales(X)
    bad = np.flatnonzero((rms > FEATURE_SCALE_LIMIT) | ((rms > 0) & (rms < 1.0 / FEATURE_SCALE_LIMIT)))
    cure = "standardise X (e.g. sklearn.preprocessing.StandardScaler) or adapt the prior scales"
    if len(bad):
        warn(f"{estimator_name}: feature(s) {bad[:10].tolist()} have root-mean-square "
             f"{', '.join(f'{v:.3g}' for v in rms[bad[:10]])} (far from 1); the priors assume "
             f"standardised features, so the evidence can be slow or inaccurate to estimate: {cure}",
             FeatureScaleWarning)
        return True
    ratio = information_ratio(model, X)
    if ratio is None:
        return False
    params = np.flatnonzero(ratio > INFORMATION_LIMIT)
    if len(params):
        warn(f"{estimator_name}: one row informs some parameters {ratio.max():.3g} times more than "
             f"their prior (prior variance / per-row posterior variance > {INFORMATION_LIMIT:g}; "
             f"parameter(s) {params[:10].tolist()}): the features' "
             f"scale contradicts the prior scale, and the online evidence is then typically far too low "
             f"with a small error bar: {cure}", FeatureScaleWarning)
    return bool(len(params))


def column_scales(X, y=None):
    """Root-mean-square of each column of ``X``, then of ``y`` when it is floating point (a regression target)."""
    scales = np.einsum("ij,ij->j", X, X) / max(len(X), 1)  # no n x d temporary
    if y is not None and np.issubdtype(np.asarray(y).dtype, np.floating):
        scales = np.append(scales, np.dot(y, y) / max(len(y), 1))
    return np.sqrt(scales)


def information_ratio(model, X):
    """Per-parameter ``prior variance / inverse per-datum Fisher information`` on the rows ``X``, or None.

    Defined for models offering both ``prior_variances`` and ``step_scales`` (the linear
    and softmax models): ``step_scales`` is the inverse per-row curvature bound, so the
    ratio is how many times more precisely one row determines the parameter than its prior.
    """
    prior_variances = getattr(model, "prior_variances", None)
    if prior_variances is None or len(X) == 0:
        return None
    scales = model.step_scales(X)
    if scales is None:
        return None
    return np.asarray(prior_variances, dtype=float) / np.asarray(scales, dtype=float)


class BaseSGAISEstimator(BaseEstimator):
    """Base shell: shared parameters, streaming, atomic commit, derived attributes.

    Subclasses implement ``_make_model(n_features)``, ``_validate_stream(X, y,
    classes, reset)`` returning float ``X`` and encoded ``y`` (or None), and their
    prediction methods.
    """

    _parameter_constraints = {
        "n_particles": [Interval(Integral, 2, None, closed="left")],
        "n_replicates": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "friction": [Interval(Real, 0, 1, closed="right")],
        "n_mcmc_steps": [Interval(Integral, 1, None, closed="left")],
        "initial_mcmc_factor": [Interval(Integral, 1, None, closed="left")],
        "target_ess": [Interval(Real, 0, 1, closed="right")],
        "resample_threshold": [Interval(Real, 0, 1, closed="both")],
        "control_variates": ["boolean"],
        "step_size_schedule": [StrOptions({"tempered", "data"})],
        "integrator": [StrOptions({"baoab", "sghmc"})],
        "reservoir_size": [Interval(Integral, 1, None, closed="left")],
        "exact_move_rows": [Interval(Integral, 0, None, closed="left"), None],
        "n_jobs": [Interval(Integral, None, -1, closed="right"), Interval(Integral, 1, None, closed="left"), None],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    #: The engine's own numbers (:class:`~evidence_select.sgais.EngineTuning`), passed in the config; a subclass
    #: (or a test) that needs others sets them here.
    _engine_tuning = EngineTuning()

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("n_jobs", None)  # estimators pickled before they had n_jobs
        self.__dict__.setdefault("shuffle", True)

    # -- configuration -----------------------------------------------------------------
    def _sgais_config(self):
        return SGAISConfig(
            n_particles=self.n_particles, n_replicates=self.n_replicates, batch_size=self.batch_size,
            learning_rate=float(self.learning_rate), friction=float(self.friction), n_mcmc_steps=self.n_mcmc_steps,
            initial_mcmc_factor=self.initial_mcmc_factor,
            target_ess=float(self.target_ess), resample_threshold=float(self.resample_threshold),
            control_variates=bool(self.control_variates), step_size_schedule=self.step_size_schedule,
            reservoir_size=self.reservoir_size, integrator=self.integrator, exact_move_rows=self.exact_move_rows,
            tuning=self._engine_tuning)

    def _first_fit_size(self, n_features):
        """Particles times parameters of the model a first fit on ``n_features`` columns builds, or None where
        building it needs the data: what a selector orders its first call's updates by (no update time is known
        yet, and an update's cost grows with both; :func:`~evidence_select.selection._distributed.longest_first`)."""
        return self.n_particles * self.n_replicates * self._make_model(n_features).n_params

    # -- streaming -----------------------------------------------------------------------
    def _partial_fit(self, X, y, classes, *, reset):
        """Validate, then stream ``X`` in ``batch_size`` chunks; commit or roll back whole."""
        first_call = reset or not hasattr(self, "sgais_state_")
        if first_call:
            self._validate_params()
        backup = dict(self.__dict__)  # shallow: states are never mutated, except as undone below
        undo_log = []
        history_length = 0 if first_call else len(self.evidence_history_)
        try:
            if reset:
                for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
                    delattr(self, name)
            X, y = self._validate_stream(X, y, classes, reset=first_call)
            rng = make_generator(self.random_state) if first_call else None
            X, y, order = self._arrange_rows(X, y, rng if reset else None)
            if first_call:
                self.model_ = self._make_model(X.shape[1])
            self._check_data_scale_if_moved(X, y)
            if first_call:
                self.sgais_config_ = self._sgais_config()
                y_dtype = None if y is None else y.dtype
                state = sgais_init(rng, self.model_, self.sgais_config_, X.shape[1], y_dtype)
                history = []
            else:
                state, history = self.sgais_state_, self.evidence_history_
            with single_threaded_blas(), self._replay_context():
                for state, record in self._stream(state, (X, y, order), undo_log, history[-1] if history else None):
                    history.append(record)
            raise_notices(history[history_length:])  # before the commit: an escalated warning rolls the call back
        except BaseException:
            for reservoir, undo in reversed(undo_log):
                reservoir_undo(reservoir, undo)
            if not first_call:  # records were appended to the committed history list
                del backup["evidence_history_"][history_length:]
            self.__dict__.clear()
            self.__dict__.update(backup)
            raise
        self.sgais_state_ = state
        self.evidence_history_ = history
        return self

    def _arrange_rows(self, X, y, fit_rng):
        """``(X, y, order)``: the rows stream as ``X[order]`` (``order`` None: as given).

        ``fit`` (``fit_rng``, the new sampler's generator, not advanced here) with
        ``shuffle=True`` permutes the rows by :func:`~evidence_select.utils._order.order_generator`:
        the evidence of exchangeable rows does not depend on their order, but the online estimate of a
        file sorted by its target would. The permutation is applied a chunk at a time (:meth:`_stream`),
        so a large ``X`` is never copied whole. A ``partial_fit`` call keeps its order and raises one
        :class:`StreamOrderWarning` per stream when its target is sorted or strongly autocorrelated.
        """
        if fit_rng is not None:
            return X, y, (order_generator(fit_rng).permutation(len(X)) if self.shuffle else None)
        if not self.__dict__.get("_order_warned_") and warn_if_target_ordered(
                type(self).__name__, y, labels=getattr(self, "classes_", None) is not None):
            self._order_warned_ = True
        return X, y, None

    def _replay_context(self):
        """The workers of a call's restarts: ``n_jobs`` for the replicate groups' replays.

        A replay's groups are independent runs whose seeds are drawn before they start, so they give the
        same bits on any number of workers. ``n_jobs=None`` leaves the caller's :func:`joblib.parallel_config`
        in force (one worker without one); inside a parallel task (a selector's candidate on a worker), only
        an explicit ``n_jobs`` lets them leave the task (:mod:`~evidence_select.utils._nested`).
        """
        return granted_n_jobs(self.n_jobs)

    def _check_data_scale(self, X, y):
        """Warn (:class:`FeatureScaleWarning`) when the data's scale contradicts the model's priors; whether
        it warned."""
        return warn_if_badly_scaled(X, type(self).__name__, self.model_)

    def _check_data_scale_if_moved(self, X, y):
        """:meth:`_check_data_scale` on the first call and whenever a column's scale left the checked band.

        The band is a factor ``SCALE_RECHECK_FACTOR`` either way around the columns' root-mean-squares
        at the last checked call; a column that was all zeros and is no longer leaves it too. A
        ``partial_fit`` loop over a stationary stream then pays the checks once, while a chunk with an
        outlier, a rescaled feature or a rescaled target is checked when it arrives. A check that warns
        flags the stream's evidence (``"feature_scale"`` in ``evidence_checks_``) for good.
        """
        scales = column_scales(X, y)
        checked = getattr(self, "_checked_scales_", None)
        if (checked is not None and checked.shape == scales.shape
                and np.all((scales <= SCALE_RECHECK_FACTOR * checked) & (checked <= SCALE_RECHECK_FACTOR * scales))):
            return
        if self._check_data_scale(X, y):
            self._scale_flagged_ = True
        self._checked_scales_ = scales

    def _stream(self, state, rows, undo_log, previous):
        """Yield ``(state, record)`` per chunk of at most ``batch_size`` rows of ``rows``, ``(X, y, order)`` as
        :meth:`_arrange_rows` gives them; ``previous`` is the stream's last record before the call (None on a
        first call)."""
        X, y, order = rows
        batch_size = self.sgais_config_.batch_size
        n_chunks = -(-len(X) // batch_size)
        progress = self._progress(n_chunks)
        for start in range(0, len(X), batch_size):
            stop = start + batch_size
            chunk = slice(start, stop) if order is None else order[start:stop]
            # The call's last chunk is checked against the posterior's best mode wherever it can be: its evidence
            # is the one the fitted attributes report.
            state, record, undo = sgais_update(state, X[chunk], None if y is None else y[chunk],
                                               self.model_, self.sgais_config_, check=True if stop >= len(X) else None,
                                               previous=previous)
            previous = record
            undo_log.append((state.reservoir, undo))
            if self.verbose:
                logger.info("n=%d log Z=%.4f +/- %.4f steps=%d ESS=%.1f %.1f ms", record.n_samples_seen,
                            record.log_evidence, record.log_evidence_std, record.n_annealing_steps, record.ess,
                            1e3 * record.seconds)
            if progress is not None:
                progress.update(1)
                progress.set_postfix(log_Z=f"{record.log_evidence:.2f}", refresh=False)
            yield state, record
        if progress is not None:
            progress.close()

    def _progress(self, n_chunks):
        return progress_bar(self.verbose and n_chunks >= 20, n_chunks, type(self).__name__)

    # -- derived fitted attributes (one source of truth: the state) ---------------------
    @property
    def particles_(self):
        """Particles in unconstrained parameters, shape ``(n_replicates * n_particles, n_params)``."""
        return self._state().particles

    @property
    def log_weights_(self):
        """Normalised log-weights of ``particles_``, shape ``(n_replicates * n_particles,)``."""
        return particle_log_weights(self._state())

    @property
    def log_evidence_(self):
        """Log evidence of all data seen so far (float); NaN while the ``unusable`` check fails (a flagged run
        whose error bar exceeds ``CheckSettings.unusable_std`` nats)."""
        return reported_estimate(self._state(), self.evidence_history_)[0]

    @property
    def log_evidence_std_(self):
        """Standard error of ``log_evidence_``: the larger of the replicate spread and the weight-based estimate,
        widened by any gap to a failed check (a degraded chunk, the posterior's best mode)."""
        return evidence_estimate(self._state())[1]

    @property
    def n_samples_seen_(self):
        """Number of samples streamed so far."""
        return self._state().n_samples_seen

    @property
    def evidence_checks_(self):
        """Names of the checks that flag ``log_evidence_`` as possibly wrong (tuple of str, empty when none).

        Each is a warning the stream raised: ``degraded``, ``posterior_mode``,
        ``population_bias``, ``lineages``, ``fallback`` or ``collapsed_weights``
        (:mod:`evidence_select.sgais._checks` says what each means), and
        ``feature_scale`` when a :class:`~evidence_select.exceptions.FeatureScaleWarning` said the data's scale
        is beyond what the priors hold (then the scale, not the sampler, is the first suspect).
        """
        self._state()
        scale = ("feature_scale",) if self.__dict__.get("_scale_flagged_") else ()
        return failed_evidence_checks(self.evidence_history_) + scale

    def _state(self):
        if "sgais_state_" not in vars(self):
            raise AttributeError(f"This {type(self).__name__} instance is not fitted yet")
        return self.sgais_state_

    def _posterior_weights(self):
        """Linear-scale normalised particle weights for posterior-predictive averages."""
        check_is_fitted(self, "sgais_state_")
        weights = np.exp(particle_log_weights(self.sgais_state_))  # already normalised in log space
        return (weights / weights.sum())[:, None]

    def _average_probabilities(self, proba):
        """Posterior-weighted average of per-particle probability rows ``(P, n, K)`` -> ``(n, K)``.

        Dividing by the row sums makes every entry at most 1 exactly (a float sum of non-negative
        terms is at least each of them), where the bare weighted sum can exceed 1 by an ulp.
        """
        average = np.einsum("p,pnk->nk", self._posterior_weights()[:, 0], proba)
        return average / average.sum(axis=1, keepdims=True)
