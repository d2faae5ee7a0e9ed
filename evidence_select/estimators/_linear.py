"""BayesianLinearRegressor: the online shell of the linear regression models."""

from numbers import Real

import numpy as np
from sklearn.base import RegressorMixin

from ..models import LinearGaussianModel, LinearHyperModel
from ..models._linear_hyper_math import DEFAULT_INTERCEPT_SCALE
from ..utils._validation import Interval, check_is_fitted, validate_data
from ..utils._warnings import warn
from ._base import BaseSGAISEstimator, FeatureScaleWarning
from ._linear_checks import target_scale_problems

__all__ = ["BayesianLinearRegressor"]

#: Rows of a call used for the target's scale checks (the first ones): an O(rows d^2) fit.
_CHECK_ROWS = 2000


class BayesianLinearRegressor(RegressorMixin, BaseSGAISEstimator):
    """Bayesian linear regression, the noise variance and the weights' scale integrated out; evidence online by SGAIS.

    ``y = w . x + b + N(0, sigma2)``. By default (``noise_variance=None``,
    ``prior_scale=None``) ``sigma2`` and the weights' scale are learned by
    integration under proper priors (:class:`~evidence_select.models.LinearHyperModel`):

    - ``w | sigma2, g ~ N(0, g sigma2 I)`` with ``g ~ InvGamma(1/2, 1/2)``, the
      Zellner-Siow prior for standardised features (``w | sigma2`` is then a
      Cauchy of scale ``sigma``), as in R's BAS and Liang et al. (2008);
    - ``b | sigma2 ~ N(0, (1000 sigma)^2)``, nearly flat;
    - ``sigma2`` log-uniform on ``[1e-20, 1e20]``, Jeffreys' ``1 / sigma2`` made proper.

    The priors are in units of the noise, so the evidence of ``c y`` is that of
    ``y`` minus ``n log c``: Bayes factors do not depend on the scale of ``y``, nor
    (but for the intercept prior's small cost) on its mean. The evidence is exact (closed forms and a one-dimensional
    quadrature over ``log g``, ``log_evidence(est, X, y, method="exact")``), and
    SGAIS draws the particles exactly from the rows' summed statistics. A float
    ``noise_variance`` fixes the noise; a float ``prior_scale`` fixes ``sqrt(g)``.
    With both floats the model is the paper's (Appendix B.1) with absolute priors
    ``w ~ N(0, prior_scale^2 I)``, ``b ~ N(0, intercept_scale^2)``
    (:class:`~evidence_select.models.LinearGaussianModel`). ``partial_fit`` anneals
    each chunk into a weighted particle approximation of the posterior and updates
    ``log_evidence_`` at a cost independent of the data already seen.

    Parameters
    ----------
    noise_variance : float or None, default=None
        Known variance of the observation noise, or None to integrate it out.
    prior_scale : float or None, default=None
        The weights' prior standard deviation: absolute when ``noise_variance``
        is a float too, else in noise standard deviations (``sqrt(g)``); None
        integrates it out under the Zellner-Siow prior.
    intercept_scale : float or None, default=None
        The intercept's prior standard deviation: absolute when both
        ``noise_variance`` and ``prior_scale`` are floats (None: 1.0), else in
        noise standard deviations (None: 1000).
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
        from the exact tempered posterior instead of moving by
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
    particles_ : ndarray of shape (n_replicates * n_particles, n_params)
        Posterior particles ``(w, b, log sigma2, log g)`` (without the intercept,
        the noise variance or ``g`` where they are absent or fixed).
    log_weights_ : ndarray of shape (n_replicates * n_particles,)
        Their normalised log-weights.
    model_ : LinearHyperModel or LinearGaussianModel
        The model the particles belong to (the second when ``noise_variance``
        and ``prior_scale`` are both floats).
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
    See :ref:`linear-regression` for the priors, why they make evidences
    comparable across feature subsets and scales of ``y``, and a comparison with
    scikit-learn's ``BayesianRidge`` (which estimates the noise and weight
    precisions by type-II maximum likelihood instead of integrating them out).
    Each chunk is annealed in along ``p(chunk|theta)^lambda p(past|theta) p(theta)``
    (paper Eq. 2) with ``lambda`` chosen by the conditional ESS; the particles are
    drawn exactly from each tempered posterior (from the summed statistics of the
    rows), or, past ``exact_move_rows``, move by SGHMC (Eq. 3) on the mini-batch
    potential of Eq. (4) with control-variate gradients and a tempered step size.
    The paper's own settings are ``set_params(**evidence_select.PAPER_SETTINGS)``. The exact evidence of
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
    >>> mean, std = reg.predict(data.X[:2], return_std=True)  # Student-t predictive
    >>> bool(std.min() > 0.99)
    True
    >>> # The known-noise model of the paper: both scales fixed.
    >>> known = BayesianLinearRegressor(noise_variance=1.0, prior_scale=1.0, random_state=0).fit(data.X, data.y)
    """

    _parameter_constraints = {
        **BaseSGAISEstimator._parameter_constraints,
        "noise_variance": [Interval(Real, 0, None, closed="neither"), None],
        "prior_scale": [Interval(Real, 0, None, closed="neither"), None],
        "intercept_scale": [Interval(Real, 0, None, closed="neither"), None],
        "fit_intercept": ["boolean"],
    }

    def __init__(self, *, noise_variance=None, prior_scale=None, intercept_scale=None, fit_intercept=True,
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
        if self.noise_variance is not None and self.prior_scale is not None:
            return LinearGaussianModel(n_features, noise_variance=self.noise_variance, prior_scale=self.prior_scale,
                                       intercept_scale=1.0 if self.intercept_scale is None else self.intercept_scale,
                                       fit_intercept=self.fit_intercept)
        return LinearHyperModel(n_features, noise_variance=self.noise_variance, prior_scale=self.prior_scale,
                                intercept_scale=(DEFAULT_INTERCEPT_SCALE if self.intercept_scale is None
                                                 else self.intercept_scale), fit_intercept=self.fit_intercept)

    def _validate_stream(self, X, y, classes, reset):
        X, y = validate_data(self, X, y, reset=reset, dtype=np.float64, y_numeric=True)
        return X, y.astype(np.float64, copy=False)

    def _check_data_scale(self, X, y):
        """Also warn when ``y`` is on another scale than the model's noise and priors (see
        :func:`~._linear_checks.target_scale_problems`). Whether it warned."""
        warned = super()._check_data_scale(X, y)
        if len(X) == 0:
            return warned
        problems = target_scale_problems(self.model_, X[:_CHECK_ROWS], y[:_CHECK_ROWS])
        if not problems:
            return warned
        if isinstance(self.model_, LinearGaussianModel):
            warn(f"BayesianLinearRegressor: {' and '.join(problems)}; the online evidence is then typically "
                 "far too low with a small error bar: standardise y (e.g. y = (y - y.mean()) / y.std()) and "
                 "X, or set noise_variance and the prior scales to the data's scale", FeatureScaleWarning)
        else:
            warn(f"BayesianLinearRegressor: {' and '.join(problems)}; the priors then shape the evidence more than "
                 "they should: rescale or center y", FeatureScaleWarning)
        return True

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

        With a learned noise variance or weights' scale the exact predictive of
        the rows seen: a Student-t given ``g`` (a Gaussian for a known noise
        variance), mixed over the posterior of ``g``, from the rows' summed
        statistics. With both fixed, the average over the weighted particles.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation, which includes the
            noise variance and the posterior spread of the weights.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,)
            Only when ``return_std`` is True.
        """
        check_is_fitted(self, "sgais_state_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        if isinstance(self.model_, LinearHyperModel):
            mean, std = self.model_.predictive_from_statistics(self.sgais_state_.past_statistics, X)
            return (mean, std) if return_std else mean
        weights = self._posterior_weights()
        particle_means = self.model_.predict_mean(self.sgais_state_.particles, X)  # (n_particles, n_samples)
        mean = np.sum(weights * particle_means, axis=0)
        if not return_std:
            return mean
        variance = self.model_.noise_variance + np.sum(weights * (particle_means - mean) ** 2, axis=0)
        return mean, np.sqrt(variance)
