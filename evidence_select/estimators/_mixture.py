"""BayesianMixture: the online shell of the diagonal Gaussian mixture."""

import math
from numbers import Integral, Real

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.base import DensityMixin

from ..models import GaussianMixtureModel
from ..utils import logsumexp
from ..exceptions import FeatureScaleWarning
from ..utils._validation import Interval, check_is_fitted, validate_data
from ..utils._warnings import warn
from ._base import BaseSGAISEstimator

__all__ = ["BayesianMixture"]

# Annealing target ESS of a chunk flagged by surprise_threshold: finer steps give particles that missed the new
# clusters time to reach them before the chunk is annealed in.
_SURPRISE_TARGET_ESS = 0.99
# With restarts, one also each time the rows seen double (SGAISConfig.restart_growth).
_RESTART_GROWTH = 2.0

#: A column whose mean lies more than this many prior-predictive scales from ``mean_prior_loc``, or whose
#: standard deviation is more than this factor above or below the prior-predictive scale, draws a
#: :class:`~evidence_select.exceptions.FeatureScaleWarning` and flags the evidence. The prior predictive of one
#: coordinate is a Student t with ``2 variance_shape`` degrees of freedom; with the default priors it puts 0.2% of
#: its mass beyond 20 scales. Beyond that the particles do not get from the prior to the posterior
#: (``benchmarks/bench_user_data.py`` has raw real columns on both sides of the limit).
PREDICTIVE_SCALE_LIMIT = 20.0
#: Fewer rows than this in a call give too noisy a spread to judge: only the columns' means are checked then.
_SPREAD_MIN_ROWS = 20


def prior_predictive_scale(model):
    """Scale of the mixture prior's predictive distribution of one coordinate.

    A component's coordinate is ``mu + sigma * e`` with ``mu | sigma2 ~ N(m0, c sigma2)`` and
    ``sigma2 ~ InvGamma(a, b)``: a Student t with ``2 a`` degrees of freedom, location ``m0`` and scale
    ``sqrt(b (1 + c) / a)`` (``sqrt(5)`` with the defaults).
    """
    return math.sqrt(model.variance_scale * (1.0 + model.mean_variance_factor) / model.variance_shape)


def mixture_scale_diagnosis(model, X):
    """Per column, ``(|mean - m0|, std)`` of the rows ``X`` in units of :func:`prior_predictive_scale`.

    Returns
    -------
    location, spread : ndarray of shape (n_features,)
        ``spread`` is NaN with fewer than ``_SPREAD_MIN_ROWS`` rows.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models import GaussianMixtureModel
    >>> X = np.random.default_rng(0).normal([0.0, 750.0], [1.0, 300.0], size=(500, 2))
    >>> location, spread = mixture_scale_diagnosis(GaussianMixtureModel(1, 2), X)
    >>> (location > PREDICTIVE_SCALE_LIMIT).tolist(), (spread > PREDICTIVE_SCALE_LIMIT).tolist()
    ([False, True], [False, True])
    """
    scale = prior_predictive_scale(model)
    location = np.abs(X.mean(axis=0) - model.mean_prior_loc) / scale
    spread = X.std(axis=0) / scale if len(X) >= _SPREAD_MIN_ROWS else np.full(X.shape[1], np.nan)
    return location, spread


def warn_if_mixture_badly_scaled(model, X):
    """Raise a :class:`FeatureScaleWarning` when a column's mean or spread is beyond what the prior holds.

    See :data:`PREDICTIVE_SCALE_LIMIT`. Returns whether it warned.
    """
    if len(X) == 0:
        return False
    location, spread = mixture_scale_diagnosis(model, X)
    limit = PREDICTIVE_SCALE_LIMIT
    with np.errstate(invalid="ignore"):  # NaN spreads (few rows) compare False
        bad = np.flatnonzero((location > limit) | (spread > limit) | (spread < 1.0 / limit))
    if not len(bad):
        return False
    shown = bad[:10]
    scale = prior_predictive_scale(model)
    warn(f"BayesianMixture: column(s) {shown.tolist()} have mean "
         f"{', '.join(f'{v:.3g}' for v in X[:, shown].mean(axis=0))} and standard deviation "
         f"{', '.join(f'{v:.3g}' for v in X[:, shown].std(axis=0))}, more than {limit:g} times (or less than "
         f"1/{limit:g} of) the prior's predictive scale {scale:.3g} around mean_prior_loc={model.mean_prior_loc:g} "
         "(sqrt(variance_scale (1 + mean_variance_factor) / variance_shape)): the particles cannot get from the "
         "prior to this posterior, and the evidence is then typically far too low whatever the sampler's settings "
         "(evidence_checks_ lists 'feature_scale'). Standardise X (e.g. sklearn.preprocessing.StandardScaler; "
         "that shifts every mixture's log evidence by the same -n sum(log std) of the columns, so their ranking "
         "stands), or, for columns on one common scale, set mean_prior_loc and variance_scale to their mean and "
         "variance", FeatureScaleWarning)
    return True


class BayesianMixture(DensityMixin, BaseSGAISEstimator):
    """Bayesian diagonal Gaussian mixture with online SGAIS evidence.

    ``p(x) = sum_k beta_k N(x; mu_k, diag sigma2_k)`` with ``beta ~ Dirichlet``,
    ``sigma2 ~ InvGamma`` and ``mu | sigma2 ~ N(m0, c sigma2)`` (paper Appendix
    B.3). Latent labels are marginalised; ``score_samples`` is the
    posterior-predictive log density. ``predict_proba`` and ``predict`` align the
    particles' component labels to the most probable particle first (the
    posterior is symmetric under relabelling), so labels are consistent.

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components ``K``. ``K`` larger than the number of
        samples (or of clusters) is allowed: the model is Bayesian, so surplus
        components keep (nearly) their prior and the evidence penalises them;
        only ``K < 1`` or a non-integer is an error.
    weight_concentration : float, default=1.0
        Symmetric Dirichlet concentration ``alpha`` of the weights.
    variance_shape : float, default=1.0
        Shape of the inverse-gamma prior on each variance.
    variance_scale : float, default=1.0
        Scale of the inverse-gamma prior on each variance.
    mean_prior_loc : float, default=0.0
        Prior mean of every component mean.
    mean_variance_factor : float, default=4.0
        ``c`` in ``mu | sigma2 ~ N(m0, c sigma2)`` (the paper uses 4).
    n_particles : int, default=20
        Particles in each replicate group.
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
    n_mcmc_steps : int, default=10
        SGHMC steps per intermediate (annealed) distribution
        (``initial_mcmc_factor`` times as many on the first chunk). More than
        the linear model's 5: the mixture posterior has local modes, and more
        moves per temperature let particles reach the good ones (see
        :ref:`parameters`).
    initial_mcmc_factor : int, default=6
        Multiplier of ``n_mcmc_steps`` on the first chunk, which carries the
        particles from the prior to a posterior through the mixture's local modes
        (one component on two clusters, two on one); more moves there than the
        other estimators' 2 keep whole replicate groups from staying in such a
        mode (see :ref:`parameters`).
    reheat_after_steps : int or None, default=12
        A chunk that needs this many annealing steps has surprised the particles
        (new clusters, a change point). The rest of the chunk gets 3 times the
        SGHMC steps and Metropolis-Hastings moves that relocate a component
        onto the chunk's rows or redraw the whole configuration from EM fits
        (``GaussianMixtureModel.propose_jump``); then the chunk restarts (see
        ``restarts``). Without a restart, the past data are instead tempered
        down to the weight of one chunk and back with those moves (the
        excursion of ``sgais_update``), ``O(min(n, reservoir_size))`` per step.
        None disables both.
    restarts : bool, default=True
        Re-estimate the evidence of everything seen so far at a surprising chunk
        (``reheat_after_steps``, ``surprise_threshold``) and each time the rows
        seen double, while ``reservoir_size`` still holds them all: each
        replicate group re-estimates the evidence of all rows seen and is
        pooled with its online run (particles resampled from both). Where the
        posterior-mode check's proposal at the best mode fits the posterior,
        the group's run is replaced by importance draws from it; otherwise it
        is run again from the prior, in its own random order (their
        mean ``Z``; the groups' spread, in ``log_evidence_std_``, then also shows
        how much the evidence depends on the order of the rows). Where that
        proposal fits, a chunk whose check finds the run below the mode's
        value, or resting on a few annealing paths (``lineages``), also
        restarts every group at the mode. Particles that
        settled in a poorer mode find every later chunk easy, so no surprise
        reveals them; the periodic restarts re-estimate the evidence all the
        same. The cost is amortised
        ``O(1)`` per row and flat once the stream outgrows the reservoir.
        False uses the excursion. Restarts, excursions and global moves need
        every past row, so they stop once the stream outgrows
        ``reservoir_size``; a surprise or shift after that is flagged
        (``ChunkRecord.degraded``, an ``EvidenceConvergenceWarning``, a widened
        ``log_evidence_std_``). See :ref:`limitations` for the in-order against
        shuffled check.
    surprise_threshold : float or None, default=None
        Nats per row. A chunk whose mean per-row log-likelihood the particles
        disagree on by more than this (weighted standard deviation across
        particles, checked before its first annealing step) is treated as a
        surprise from that first step: Metropolis-Hastings jumps at every step,
        3 times the SGHMC steps, and annealing steps 10 times finer in ESS loss
        (target ESS 0.99, also for the rest of any chunk that reaches
        ``reheat_after_steps`` while it is set); the excursion still waits for
        ``reheat_after_steps``. None leaves the detection to
        ``reheat_after_steps``, which fires only after that many annealing
        steps. See :ref:`limitations`.
    surprise_budget : float, default=4.0
        Bound on the cost of restarts and excursions: their likelihood and
        gradient evaluations stay within this multiple of the stream's own
        annealing (plus one restart or excursion). A surprise the budget
        cannot pay for is flagged as degraded; ``float("inf")`` lifts the bound.
    target_ess : float, default=0.9
        Target conditional ESS fraction for choosing the next annealing increment.
    resample_threshold : float, default=0.5
        Resample a group when its ESS fraction falls below this; 0 disables it.
    control_variates : bool, default=True
        Use per-particle control-variate mini-batch gradients.
    step_size_schedule : {"tempered", "data"}, default="tempered"
        ``"tempered"``: ``n_eff = n + lambda |chunk|``; ``"data"``: the paper's ``n_eff = n + |chunk|``.
    integrator : {"baoab", "sghmc"}, default="baoab"
        Langevin discretisation: BAOAB (exact for Gaussian targets, so no bias
        accumulates over a long stream) or the paper's SGHMC update, Eq. (3).
    exact_move_rows : int, default=0
        While every row seen is stored in the reservoir and there are at most this
        many, particles move by Metropolis-corrected HMC on the exact tempered
        posterior, preconditioned by the particles themselves, instead of SGHMC
        (see :ref:`the SGAIS guide <sgais-exact-moves>`); 0 never does. Off by
        default for mixtures, whose restarts replay the first rows again and
        again (each replay would pay the exact moves anew; ``bench_speed.py``
        shows the cost) and whose global moves already carry particles between
        modes; 1000 follows rows on a wildly different scale, such as a 1e8
        outlier, that SGHMC's step cannot.
    reservoir_size : int, default=100000
        Maximum number of past rows kept for mini-batches (Vitter's Algorithm R).
    n_jobs : int or None, default=None
        Workers for the replicate groups of a restart's replay (every row seen
        run again from the prior, one independent run per group), the bulk of
        a restart's cost. ``None`` means 1 unless in a
        :func:`joblib.parallel_config` context; ``-1`` means all cores. The
        results are the same bits for any value.

    shuffle : bool, default=True
        Whether ``fit`` streams the rows in a seeded random order. The model
        treats rows as exchangeable, so its evidence does not depend on their
        order, but the online estimate of rows sorted by a column (to the
        sampler, a sequence of distribution shifts) would. The order comes
        from ``random_state`` and leaves the sampler's random numbers as they
        are: ``fit(X)`` gives what a fresh estimator's
        ``partial_fit(X[order])`` gives, with ``order =
        evidence_select.utils.fit_order(random_state, len(X))``. False streams
        the rows as given: a true stream, whose shifts the evidence history
        should show (:func:`~evidence_select.detect_change_points`).
        ``partial_fit`` keeps its rows' order.
    random_state : int, Generator, RandomState or None, default=None
        Seed; drawn once per ``fit`` and carried (and pickled) with the state.
    verbose : int, default=0
        Log one line per chunk (and show a tqdm bar if installed) when positive.

    Attributes
    ----------
    log_evidence_ : float
        Log marginal likelihood ``log p(X)`` of all data seen so far.
    log_evidence_std_ : float
        Its standard error: the larger of the replicate groups' spread and the
        accumulated importance-weight variance, widened by the gap to a failed
        posterior-mode check (Notes).
    evidence_checks_ : tuple of str
        Names of the checks that flag ``log_evidence_`` as possibly wrong
        (each raised its warning during the stream), empty when none; see
        :ref:`limitations`.
    n_samples_seen_ : int
        Number of samples streamed.
    evidence_history_ : list of ChunkRecord
        One record per processed chunk (see :class:`BayesianLinearRegressor`).
    particles_ : ndarray of shape (n_replicates * n_particles, K - 1 + 2 K n_features)
        Posterior particles in unconstrained parameters (see :class:`~evidence_select.models.GaussianMixtureModel`).
    log_weights_ : ndarray of shape (n_replicates * n_particles,)
        Their normalised log-weights.
    model_ : GaussianMixtureModel
        The model the particles belong to.
    sgais_state_ : SGAISState
        The full online state.
    sgais_config_ : SGAISConfig
        The settings of this stream, frozen at the first ``partial_fit``.
    n_features_in_ : int
        Number of features seen during the first ``fit``/``partial_fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names, when ``X`` has string column names.

    See Also
    --------
    BayesianLinearRegressor, BayesianLogisticClassifier, EvidenceModelSelector

    Notes
    -----
    SGAIS (paper Algorithm 1) with control-variate SGHMC. Particles are usually
    confined to one of the ``K!`` symmetric label modes; the evidence is not
    affected, because the modes carry equal mass.

    Particles that all settle in a poorer cluster configuration read the
    evidence low, and their spread cannot show it. With up to five components,
    six in up to eight features or seven in up to two, and 5000 rows (all
    stored), chunks are checked against the posterior's best
    mode, found by EM and a quasi-Newton search and importance-sampled
    (:func:`~evidence_select.sgais._mode_check.apply_mode_check`; after
    the chunks that cross 100, 141, 200, 282, ... rows, a factor ``sqrt(2)``
    apart, after each chunk that ran a restart or an excursion, and after the
    last chunk of every ``fit`` or ``partial_fit`` call, whose evidence the
    fitted attributes report; reading them computes nothing). A run reading more than two standard deviations
    below that mode's mass raises an
    :class:`~evidence_select.EvidenceConvergenceWarning` and its error bar grows
    by the gap; ``ChunkRecord.mode_log_evidence`` records the chunks' checks.

    The likelihood and its gradient run compiled (numba) kernels. The first fit
    in a fresh environment compiles them once; later processes load them from
    numba's cache (``NUMBA_CACHE_DIR`` chooses where it lives).

    References
    ----------
    .. [1] S. A. Cameron, H. C. Eggers, S. Kroon, "Stochastic Gradient Annealed
       Importance Sampling for Efficient Online Marginal Likelihood Estimation",
       Entropy 21 (2019) 1109.

    Examples
    --------
    >>> from evidence_select import BayesianMixture
    >>> from evidence_select.datasets import make_mixture
    >>> X = make_mixture(500, random_state=0).X
    >>> gmm = BayesianMixture(n_components=5, random_state=0).fit(X)
    >>> gmm.score_samples(X[:4]).shape
    (4,)
    >>> gmm.predict_proba(X[:2]).shape
    (2, 5)
    """

    _parameter_constraints = {
        **BaseSGAISEstimator._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "weight_concentration": [Interval(Real, 0, None, closed="neither")],
        "variance_shape": [Interval(Real, 0, None, closed="neither")],
        "variance_scale": [Interval(Real, 0, None, closed="neither")],
        "mean_prior_loc": [Real],
        "mean_variance_factor": [Interval(Real, 0, None, closed="neither")],
        "reheat_after_steps": [Interval(Integral, 1, None, closed="left"), None],
        "restarts": ["boolean"],
        "surprise_threshold": [Interval(Real, 0, None, closed="neither"), None],
        "surprise_budget": [Interval(Real, 0, None, closed="both")],
    }

    def __init__(self, n_components=1, *, weight_concentration=1.0, variance_shape=1.0, variance_scale=1.0,
                 mean_prior_loc=0.0, mean_variance_factor=4.0, n_particles=20, n_replicates=2, batch_size=500,
                 learning_rate=0.1, friction=0.2, n_mcmc_steps=10, initial_mcmc_factor=6, reheat_after_steps=12,
                 restarts=True, surprise_threshold=None, surprise_budget=4.0, target_ess=0.9, resample_threshold=0.5,
                 control_variates=True, step_size_schedule="tempered", integrator="baoab", reservoir_size=100_000,
                 exact_move_rows=0, n_jobs=None, shuffle=True, random_state=None, verbose=0):
        self.n_components = n_components
        self.weight_concentration = weight_concentration
        self.variance_shape = variance_shape
        self.variance_scale = variance_scale
        self.mean_prior_loc = mean_prior_loc
        self.mean_variance_factor = mean_variance_factor
        self.n_particles = n_particles
        self.n_replicates = n_replicates
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.friction = friction
        self.n_mcmc_steps = n_mcmc_steps
        self.initial_mcmc_factor = initial_mcmc_factor
        self.reheat_after_steps = reheat_after_steps
        self.restarts = restarts
        self.surprise_threshold = surprise_threshold
        self.surprise_budget = surprise_budget
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

    def _sgais_config(self):
        return super()._sgais_config()._replace(
            reheat_after_steps=self.reheat_after_steps, restart_on_surprise=bool(self.restarts),
            restart_growth=_RESTART_GROWTH if self.restarts else None,
            surprise_threshold=self.surprise_threshold, surprise_budget=float(self.surprise_budget),
            reheat_target_ess=None if self.surprise_threshold is None else _SURPRISE_TARGET_ESS)

    def _make_model(self, n_features):
        return GaussianMixtureModel(self.n_components, n_features, weight_concentration=self.weight_concentration,
                                    variance_shape=self.variance_shape, variance_scale=self.variance_scale,
                                    mean_prior_loc=self.mean_prior_loc, mean_variance_factor=self.mean_variance_factor)

    def _validate_stream(self, X, y, classes, reset):
        return validate_data(self, X, reset=reset, dtype=np.float64), None

    def _check_data_scale(self, X, y):
        """Warn when a root-mean-square is extreme (the shared check), else when a column's mean or spread is
        beyond what the prior holds (:func:`mixture_scale_diagnosis`); whether it warned (once per call)."""
        return super()._check_data_scale(X, y) or warn_if_mixture_badly_scaled(self.model_, X)

    def fit(self, X, y=None):
        """Forget any past data and stream ``X`` in ``batch_size`` chunks, in a seeded random order
        (``shuffle``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        self : BayesianMixture
        """
        return self._partial_fit(X, None, None, reset=True)

    def partial_fit(self, X, y=None):
        """Continue the stream with ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        self : BayesianMixture
        """
        return self._partial_fit(X, None, None, reset=False)

    def score_samples(self, X):
        """Posterior-predictive log density ``log p(x | data)`` of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_density : ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "sgais_state_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        log_lik = self.model_.log_likelihood(self.sgais_state_.particles, X)
        return logsumexp(self.log_weights_[:, None] + log_lik, axis=0)

    def score(self, X, y=None):
        """Mean posterior-predictive log density of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        score : float
        """
        return float(np.mean(self.score_samples(X)))

    def _aligned_permutations(self):
        """Per particle, the permutation of its components that best matches the top particle."""
        theta = self.sgais_state_.particles
        _, means, log_variances = self.model_.unpack(theta)
        top = int(np.argmax(self.log_weights_))
        with np.errstate(over="ignore"):  # inf or 0 on extreme data: the costs below treat it as "far"
            scale = np.exp(0.5 * log_variances[top])  # (K, d)
        permutations = np.empty((len(theta), self.model_.n_components), dtype=np.intp)
        for i in range(len(theta)):  # K x K assignment per particle; K and n_particles are small
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                cost = np.sum(((means[i][:, None, :] - means[top][None, :, :]) / scale[None]) ** 2, axis=2)
            # linear_sum_assignment needs finite costs: inf/NaN (a zero or overflowed scale) become "far".
            cost = np.nan_to_num(cost, nan=np.finfo(float).max / cost.size, posinf=np.finfo(float).max / cost.size)
            rows, cols = linear_sum_assignment(cost)
            permutations[i, cols] = rows
        return permutations

    def predict_proba(self, X):
        """Posterior probability of each component for each sample (labels aligned).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        resp : ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self, "sgais_state_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        resp = self.model_.responsibilities(self.sgais_state_.particles, X)  # (P, n, K)
        resp = np.take_along_axis(resp, self._aligned_permutations()[:, None, :], axis=2)
        return self._average_probabilities(resp)

    def predict(self, X):
        """Most probable component of each sample (consistent across particles).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return np.argmax(self.predict_proba(X), axis=1)
