"""BayesianPoissonRegressor: the online shell of Poisson regression, a thin subclass of EvidenceRegressor."""

from numbers import Real

import numpy as np

from ..models import PoissonRegressionModel
from ..utils._validation import Interval, validate_data
from ._generic import EvidenceRegressor, _GenericShell

__all__ = ["BayesianPoissonRegressor"]


class BayesianPoissonRegressor(EvidenceRegressor):
    """Bayesian Poisson regression with a log link, evidence updated online by SGAIS.

    Counts ``y ~ Poisson(exp(w . x + b))`` with ``w ~ N(0, prior_scale^2 I)``
    and ``b ~ N(0, intercept_scale^2)``
    (:class:`~evidence_select.models.PoissonRegressionModel`). ``predict``
    returns the posterior-predictive mean count, and ``return_std=True`` its
    standard deviation (the Poisson variance averaged over the particles plus
    the spread of their rates).

    Parameters
    ----------
    prior_scale : float, default=1.0
        Prior standard deviation of each weight (the change of the log rate
        per unit of a standardised feature).
    intercept_scale : float, default=3.0
        Prior standard deviation of the intercept, the log of the baseline
        rate: wider than the weights' because counts come on any scale (a
        baseline of 20 counts is a log rate of 3).
    fit_intercept : bool, default=True
        Whether the model has an intercept.
    n_particles : int, default=30
        Particles in each replicate group.
    n_replicates : int, default=2
        Independent particle groups run together; their spread is one of the
        two estimates behind ``log_evidence_std_``.
    batch_size : int, default=500
        Chunk size for annealing new data in, and SGHMC mini-batch size.
    learning_rate : float, default=0.1
        Per-observation SGHMC learning rate ``lr``; the step is ``lr / n_eff``.
    friction : float, default=0.2
        SGHMC friction ``alpha``.
    n_mcmc_steps : int, default=10
        SGHMC steps per intermediate (annealed) distribution.
    initial_mcmc_factor : int, default=2
        Multiplier of ``n_mcmc_steps`` on the first chunk.
    target_ess : float, default=0.9
        Target conditional ESS fraction.
    resample_threshold : float, default=0.5
        Resample a group when its ESS fraction falls below this; 0 disables it.
    control_variates : bool, default=True
        Use per-particle control-variate mini-batch gradients.
    step_size_schedule : {"tempered", "data"}, default="tempered"
        SGHMC step size schedule.
    integrator : {"baoab", "sghmc"}, default="baoab"
        Langevin discretisation.
    reservoir_size : int, default=100000
        Maximum number of past rows kept for mini-batches.
    exact_move_rows : int, default=1000
        Rows up to which particles move by exact HMC on the tempered posterior.
    n_jobs : int or None, default=None
        Workers for the replay of a restart's replicate groups.
    shuffle : bool, default=True
        Whether ``fit`` streams the rows in a seeded random order (from ``random_state``; the model treats rows as
        exchangeable, so the evidence does not depend on their order). False streams them as given.
    random_state : int, Generator, RandomState or None, default=None
        Seed.
    verbose : int, default=0
        Log one line per chunk when positive.

    Attributes
    ----------
    log_evidence_ : float
        Log marginal likelihood ``log p(y | X)`` of all counts seen so far.
    log_evidence_std_ : float
        Its standard error.
    evidence_checks_ : tuple of str
        Names of the checks that flag ``log_evidence_`` as possibly wrong.
    n_samples_seen_ : int
        Number of samples streamed.
    evidence_history_ : list of ChunkRecord
        One record per processed chunk.
    particles_ : ndarray of shape (n_replicates * n_particles, n_features + fit_intercept)
        Posterior particles ``(w, b)``.
    log_weights_ : ndarray of shape (n_replicates * n_particles,)
        Their normalised log-weights.
    model_ : PoissonRegressionModel
        The model the particles belong to.
    sgais_state_ : SGAISState
        The full online state.
    sgais_config_ : SGAISConfig
        The settings of this stream.
    n_features_in_ : int
        Number of features seen during the first ``fit``/``partial_fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names, when ``X`` has string column names.

    See Also
    --------
    EvidenceRegressor : The generic shell this specialises.
    evidence_select.models.poisson_regression_model : The same model built by ``make_model``.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select import BayesianPoissonRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = rng.poisson(np.exp(X @ [0.5, -0.3] + 1.0))
    >>> reg = BayesianPoissonRegressor(n_particles=10, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:2], return_std=True)
    >>> bool(np.all(std > 0)), reg.particles_.shape
    (True, (20, 3))
    """

    _parameter_constraints = {
        **{k: v for k, v in _GenericShell._parameter_constraints.items() if k != "model"},
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "intercept_scale": [Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
    }

    def __init__(self, *, prior_scale=1.0, intercept_scale=3.0, fit_intercept=True, n_particles=30, n_replicates=2,
                 batch_size=500, learning_rate=0.1, friction=0.2, n_mcmc_steps=10, initial_mcmc_factor=2,
                 target_ess=0.9, resample_threshold=0.5, control_variates=True, step_size_schedule="tempered",
                 integrator="baoab", reservoir_size=100_000, exact_move_rows=1000, n_jobs=None, shuffle=True,
                 random_state=None, verbose=0):
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
        return PoissonRegressionModel(n_features, prior_scale=self.prior_scale, intercept_scale=self.intercept_scale,
                                      fit_intercept=self.fit_intercept)

    def _validate_stream(self, X, y, classes, reset):
        """Also require counts: ``y`` non-negative and integer-valued (a Poisson likelihood is a mass function of
        counts; on other values its evidence means nothing)."""
        X, y = validate_data(self, X, y, reset=reset, dtype=np.float64, y_numeric=True)
        y = y.astype(np.float64, copy=False)
        bad = np.flatnonzero((y < 0) | (y != np.round(y)))
        if len(bad):
            raise ValueError(f"BayesianPoissonRegressor: y must be counts (non-negative integers); got "
                             f"{y[bad[:5]].tolist()} at rows {bad[:5].tolist()}")
        return X, y

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags
