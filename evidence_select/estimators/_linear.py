"""BayesianLinearRegressor: the online shell of the linear-Gaussian model."""

from numbers import Real

import numpy as np
from sklearn.base import RegressorMixin

from ..models import LinearEvidenceStats, LinearGaussianModel
from ..utils._validation import Interval, check_is_fitted, validate_data
from ..utils._warnings import warn
from ._base import BaseSGAISEstimator, FeatureScaleWarning

__all__ = ["BayesianLinearRegressor"]

#: Residual mean square (at the posterior mean of the call's rows) above this multiple of
#: ``noise_variance`` draws a :class:`FeatureScaleWarning`: the target is on another scale than the noise.
RESIDUAL_LIMIT = 3.0
#: A posterior mean more than this many prior standard deviations from the prior mean draws one too.
CONFLICT_LIMIT = 20.0
#: Rows of a call used for these checks (the first ones): an O(rows d^2) fit.
_CHECK_ROWS = 2000


def target_scale_diagnosis(model, X, y):
    """``(residual mean square / noise_variance, max |posterior mean| / prior std)`` on ``(X, y)``.

    The exact posterior of the rows (a ridge fit, O(n d^2)). The first ratio says how far the
    target's scale is from the noise model's, the second how far the data pull the
    parameters out of their prior; both far above 1 put the posterior where the particles
    cannot follow (the annealing moves them in steps scaled to the posterior's width).
    """
    moments = model.gradient_statistics(X, y)  # [A, y]^T [A, y] in one product
    n_design = model.n_params
    stats = LinearEvidenceStats(moments[:n_design, :n_design], moments[:n_design, -1], moments[-1, -1], len(y))
    mean = stats.posterior_mean(model)
    # The residual sum of squares from the moments, y'y - 2 m'A'y + m'A'A m: no second pass over the rows
    # (this runs on partial_fit calls). Its rounding, eps * y'y, is far below the limit it is tested against.
    residual_sum = max(stats.sum_sq - 2.0 * mean @ stats.cross + mean @ stats.gram @ mean, 0.0)
    conflict = np.abs(mean) / np.sqrt(model.prior_variances)
    return float(residual_sum / max(stats.n_samples, 1) / model.noise_variance), float(conflict.max())


class BayesianLinearRegressor(RegressorMixin, BaseSGAISEstimator):
    """Bayesian linear regression with known noise, evidence updated online by SGAIS.

    ``y = w . x + b + N(0, noise_variance)`` with ``w ~ N(0, prior_scale^2 I)``
    and ``b ~ N(0, intercept_scale^2)`` (paper Appendix B.1). ``partial_fit``
    anneals each chunk into a weighted particle approximation of the posterior
    and updates ``log_evidence_`` at a cost independent of the data already seen.

    Parameters
    ----------
    noise_variance : float, default=1.0
        Known variance of the observation noise.
    prior_scale : float, default=1.0
        Prior standard deviation of each weight.
    intercept_scale : float, default=1.0
        Prior standard deviation of the intercept.
    fit_intercept : bool, default=True
        Whether the model has an intercept.
    n_particles : int, default=40
        Particles in each replicate group. The log evidence reads low by a
        finite-population bias that falls as ``1 / n_particles`` and grows with
        the stream (``ChunkRecord.population_bias``; the user guide's
        limitations); this model's particles are cheap, so its default is
        larger than the other estimators'.
    n_replicates : int, default=2
        Independent particle groups run together (their combined evidence is
        unbiased); their spread is one of the two estimates behind
        ``log_evidence_std_``.
    batch_size : int, default=500
        Chunk size for annealing new data in, and SGHMC mini-batch size.
    learning_rate : float, default=0.1
        Per-observation SGHMC learning rate ``lr``; the step is ``lr / n_eff``.
    friction : float, default=0.2
        SGHMC friction ``alpha`` (momentum decay ``1 - alpha``).
    n_mcmc_steps : int, default=5
        SGHMC steps per intermediate (annealed) distribution
        (``initial_mcmc_factor`` times as many on the first chunk).
    initial_mcmc_factor : int, default=2
        Multiplier of ``n_mcmc_steps`` on the first chunk, which carries the
        particles from the prior to a posterior (the longest way).
    target_ess : float, default=0.9
        Target conditional ESS, as a fraction of ``n_particles``, for choosing
        the next annealing increment.
    resample_threshold : float, default=0.5
        Resample a group when the ESS of its accumulated weights falls below
        this fraction of ``n_particles``; 0 disables resampling.
    control_variates : bool, default=True
        Use per-particle control-variate mini-batch gradients.
    step_size_schedule : {"tempered", "data"}, default="tempered"
        ``"tempered"``: ``n_eff = n + lambda |chunk|``; ``"data"``: the paper's ``n_eff = n + |chunk|``.
    integrator : {"baoab", "sghmc"}, default="baoab"
        Langevin discretisation: BAOAB (exact for Gaussian targets, so no bias
        accumulates over a long stream) or the paper's SGHMC update, Eq. (3).
    exact_move_rows : int or None, default=None
        Up to this many rows seen (None: any number), particles are drawn afresh
        from the exact tempered posterior (a Gaussian here) instead of moving by
        SGHMC (see :ref:`the SGAIS guide <sgais-exact-moves>`); 0 never does. The
        draws need only the summed statistics ``[x, 1, y]^T [x, 1, y]`` of the
        rows seen, which the state keeps, so they cost the same at any ``n``,
        follow a shifting stream exactly and carry no SGHMC bias.
    reservoir_size : int, default=100000
        Maximum number of past rows kept for mini-batches (Vitter's Algorithm R).
    n_jobs : int or None, default=None
        Workers for the restart that a distribution shift triggers: its replay
        of every row seen runs one independent stream per replicate group, side
        by side on up to this many workers, with the same results as on one.
        ``None`` means 1 unless in a :func:`joblib.parallel_config` context.

    shuffle : bool, default=True
        Whether ``fit`` streams the rows in a seeded random order. The model
        treats rows as exchangeable, so its evidence does not depend on their
        order, but the online estimate of rows sorted by their target (to the
        sampler, a sequence of distribution shifts) would. The order comes
        from ``random_state`` and leaves the sampler's random numbers as they
        are: ``fit(X, y)`` gives what a fresh estimator's
        ``partial_fit(X[order], y[order])`` gives, with ``order =
        evidence_select.utils.fit_order(random_state, len(X))``. False streams
        the rows as given: a true stream, whose shifts the evidence history
        should show. ``partial_fit`` keeps its rows' order, and raises a
        :class:`~evidence_select.exceptions.StreamOrderWarning` (once per
        stream) when a call's target is sorted or strongly autocorrelated.
    random_state : int, Generator, RandomState or None, default=None
        Seed; drawn once per ``fit`` and carried (and pickled) with the state.
    verbose : int, default=0
        Log one line per chunk (and show a tqdm bar if installed) when positive.

    Attributes
    ----------
    log_evidence_ : float
        Log marginal likelihood ``log p(y | X)`` of all data seen so far.
    log_evidence_std_ : float
        Its standard error: the larger of the replicate groups' spread and the
        accumulated importance-weight variance.
    evidence_checks_ : tuple of str
        Names of the checks that flag ``log_evidence_`` as possibly wrong
        (each raised its warning during the stream), empty when none; see
        :ref:`limitations`.
    n_samples_seen_ : int
        Number of samples streamed.
    evidence_history_ : list of ChunkRecord
        One record per processed chunk: ``n_samples_seen``, ``log_evidence``,
        ``log_evidence_std``, ``n_annealing_steps``, ``ess``,
        ``log_predictive_per_datum``, ``n_resampled``, ``seconds``.
    particles_ : ndarray of shape (n_replicates * n_particles, n_features + 1)
        Posterior particles ``(w, b)``.
    log_weights_ : ndarray of shape (n_replicates * n_particles,)
        Their normalised log-weights.
    model_ : LinearGaussianModel
        The model the particles belong to.
    sgais_state_ : SGAISState
        The full online state (particles, weights, reservoir, generator).
    sgais_config_ : SGAISConfig
        The settings of this stream, frozen at the first ``partial_fit``.
    n_features_in_ : int
        Number of features seen during the first ``fit``/``partial_fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names, when ``X`` has string column names.

    See Also
    --------
    BayesianLogisticClassifier, BayesianMixture, EvidenceModelSelector

    Notes
    -----
    Each chunk is annealed in along ``p(chunk|theta)^lambda p(past|theta) p(theta)``
    (paper Eq. 2) with ``lambda`` chosen by the conditional ESS, and particles
    move by SGHMC (Eq. 3) on the mini-batch potential of Eq. (4), here with
    control-variate gradients and a tempered step size. The paper's own settings
    are ``set_params(**evidence_select.PAPER_SETTINGS)``. The exact evidence of
    this model is available through ``log_evidence(est, X, y, method="exact")``.

    References
    ----------
    .. [1] S. A. Cameron, H. C. Eggers, S. Kroon, "Stochastic Gradient Annealed
       Importance Sampling for Efficient Online Marginal Likelihood Estimation",
       Entropy 21 (2019) 1109.

    Examples
    --------
    >>> from evidence_select import BayesianLinearRegressor
    >>> from evidence_select.datasets import make_linear_regression
    >>> data = make_linear_regression(2000, random_state=0)
    >>> reg = BayesianLinearRegressor(random_state=0).fit(data.X, data.y)
    >>> round(reg.log_evidence_ / 2000, 2)
    -1.43
    >>> mean, std = reg.predict(data.X[:2], return_std=True)
    >>> bool(std.min() > 0.99)
    True
    """

    _parameter_constraints = {
        **BaseSGAISEstimator._parameter_constraints,
        "noise_variance": [Interval(Real, 0, None, closed="neither")],
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "intercept_scale": [Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
    }

    def __init__(self, *, noise_variance=1.0, prior_scale=1.0, intercept_scale=1.0, fit_intercept=True,
                 n_particles=40, n_replicates=2, batch_size=500, learning_rate=0.1, friction=0.2, n_mcmc_steps=5,
                 initial_mcmc_factor=2, target_ess=0.9, resample_threshold=0.5, control_variates=True,
                 step_size_schedule="tempered",
                 integrator="baoab", reservoir_size=100_000, exact_move_rows=None, n_jobs=None, shuffle=True, random_state=None,
                 verbose=0):
        self.noise_variance = noise_variance
        self.prior_scale = prior_scale
        self.intercept_scale = intercept_scale
        self.fit_intercept = fit_intercept
        self.n_particles = n_particles
        self.n_replicates = n_replicates
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.friction = friction
        self.n_mcmc_steps = n_mcmc_steps
        self.initial_mcmc_factor = initial_mcmc_factor
        self.target_ess = target_ess
        self.resample_threshold = resample_threshold
        self.control_variates = control_variates
        self.step_size_schedule = step_size_schedule
        self.integrator = integrator
        self.reservoir_size = reservoir_size
        self.exact_move_rows = exact_move_rows
        self.n_jobs = n_jobs
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose

    def _make_model(self, n_features):
        return LinearGaussianModel(n_features, noise_variance=self.noise_variance, prior_scale=self.prior_scale,
                                   intercept_scale=self.intercept_scale, fit_intercept=self.fit_intercept)

    def _validate_stream(self, X, y, classes, reset):
        X, y = validate_data(self, X, y, reset=reset, dtype=np.float64, y_numeric=True)
        return X, y.astype(np.float64, copy=False)

    def _check_data_scale(self, X, y):
        """Also warn when ``y`` is on another scale than ``noise_variance`` or the prior (see
        :func:`target_scale_diagnosis`); standardising ``y`` is the cure. Whether it warned."""
        warned = super()._check_data_scale(X, y)
        if len(X) == 0:
            return warned
        residual, conflict = target_scale_diagnosis(self.model_, X[:_CHECK_ROWS], y[:_CHECK_ROWS])
        problems = []
        if residual > RESIDUAL_LIMIT:
            problems.append(f"the residual mean square is {residual:.3g} times noise_variance={self.noise_variance:g}")
        if conflict > CONFLICT_LIMIT:
            problems.append(f"the posterior mean lies {conflict:.3g} prior standard deviations from the prior mean")
        if problems:
            warn(f"BayesianLinearRegressor: {' and '.join(problems)}; the online evidence is then typically "
                 "far too low with a small error bar: standardise y (e.g. y = (y - y.mean()) / y.std()) and "
                 "X, or set noise_variance and the prior scales to the data's scale", FeatureScaleWarning)
        return warned or bool(problems)

    def fit(self, X, y):
        """Forget any past data and stream ``(X, y)`` in ``batch_size`` chunks, in a seeded random order
        (``shuffle``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : BayesianLinearRegressor
        """
        return self._partial_fit(X, y, None, reset=True)

    def partial_fit(self, X, y):
        """Continue the stream with ``(X, y)`` (split into ``batch_size`` chunks).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : BayesianLinearRegressor
        """
        return self._partial_fit(X, y, None, reset=False)

    def predict(self, X, return_std=False):
        """Posterior-predictive mean (and standard deviation) of ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation, which includes the
            noise variance and the spread of the weighted particles.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,)
            Only when ``return_std`` is True.
        """
        check_is_fitted(self, "sgais_state_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        weights = self._posterior_weights()
        particle_means = self.model_.predict_mean(self.sgais_state_.particles, X)  # (n_particles, n_samples)
        mean = np.sum(weights * particle_means, axis=0)
        if not return_std:
            return mean
        variance = self.model_.noise_variance + np.sum(weights * (particle_means - mean) ** 2, axis=0)
        return mean, np.sqrt(variance)
