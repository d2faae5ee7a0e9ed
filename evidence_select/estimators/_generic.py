"""EvidenceRegressor, EvidenceClassifier, EvidenceDensityEstimator: the online shells of any protocol model.

The shared shell (:class:`~._base.BaseSGAISEstimator`) streams, commits and derives the fitted attributes; here the
model is a parameter instead of being built from hyperparameters. A model from
:func:`~evidence_select.models.make_model` whose prior shapes name ``"n_features"`` or ``"n_classes"`` is resolved from
the data on the first call. Before any particle moves, the model is evaluated at a few prior draws on the first
rows (:func:`check_model_on_rows`), so that a likelihood that cannot run on the data, returns the wrong shape or
NaN fails with a message naming it, not deep inside the sampler.
"""

import numpy as np
from sklearn.base import ClassifierMixin, DensityMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets

from ..models import CustomModel, Model
from ..utils import logsumexp
from ..utils._validation import check_is_fitted, validate_data
from ._base import BaseSGAISEstimator

__all__ = ["EvidenceClassifier", "EvidenceDensityEstimator", "EvidenceRegressor", "check_model_on_rows",
           "validate_classification_stream"]

#: Prior draws at which :func:`check_model_on_rows` evaluates a model.
_CHECK_PARTICLES = 4
#: Tolerance on ``sum_k p(y = k | x)`` for a classifier's model (a normalised likelihood sums to 1 to rounding).
_NORMALISATION_TOL = 1e-6


def _fails(estimator_name, what, n_rows, error):
    return ValueError(f"{estimator_name}: the model's {what} failed at prior draws on the first {n_rows} rows: "
                      f"{type(error).__name__}: {error}")


def _bad_rows(values):
    """Indices of the columns (rows of data) with NaN or +inf for any particle."""
    return np.flatnonzero(np.any(np.isnan(values) | np.isposinf(values), axis=0))


def check_model_on_rows(model, X, y, estimator_name):
    """Evaluate ``model`` at a few prior draws on rows ``(X, y)``; raise a ``ValueError`` naming what fails.

    Checks the shapes of prior draws, the log prior (finite), the per-datum
    log-likelihood (shape ``(n_particles, n_rows)``; ``-inf`` is allowed, NaN
    and ``+inf`` are not) and the likelihood's gradient (shape, no NaN where
    the likelihood is finite). The draws come from a generator of their own,
    so the check does not change the stream's random numbers.

    Parameters
    ----------
    model : Model
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_rows,) or None
    estimator_name : str
        Named in the messages.

    Returns
    -------
    theta : ndarray of shape (n_draws, n_params)
        The prior draws checked.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from evidence_select.models import make_model
    >>> from evidence_select.estimators._generic import check_model_on_rows
    >>> def log_lik(params, X, y):
    ...     with np.errstate(invalid="ignore"):
    ...         return np.log(y - params["mu"])      # NaN wherever y < mu
    >>> model = make_model(log_lik, {"mu": stats.norm(0, 1)}, gradient="finite")
    >>> try:
    ...     check_model_on_rows(model, np.zeros((3, 1)), np.array([-5.0, 0.0, 5.0]), "EvidenceRegressor")
    ... except ValueError as error:
    ...     print(str(error).split(" at prior")[0])
    EvidenceRegressor: the model's log_likelihood returned NaN or +inf
    """
    n_rows = len(X)
    try:
        theta = np.asarray(model.sample_prior(np.random.default_rng(0), _CHECK_PARTICLES), dtype=float)
        n_params = model.n_params
    except Exception as error:
        raise _fails(estimator_name, "prior", n_rows, error) from error
    if theta.shape != (_CHECK_PARTICLES, n_params):
        raise ValueError(f"{estimator_name}: the model's sample_prior returned shape {theta.shape}, expected "
                         f"{(_CHECK_PARTICLES, n_params)} (n_samples, n_params)")
    outputs = {}
    for what, call in (("log_prior", lambda: model.log_prior(theta)),
                       ("log_likelihood", lambda: model.log_likelihood(theta, X, y)),
                       ("gradient", lambda: model.grad_log_likelihood(theta, X, y, 1.0))):
        try:
            outputs[what] = np.asarray(call(), dtype=float)
        except Exception as error:
            raise _fails(estimator_name, what, n_rows, error) from error
    expected = {"log_prior": (_CHECK_PARTICLES,), "log_likelihood": (_CHECK_PARTICLES, n_rows),
                "gradient": (_CHECK_PARTICLES, n_params)}
    for what, shape in expected.items():
        if outputs[what].shape != shape:
            raise ValueError(f"{estimator_name}: the model's {what} returned shape {outputs[what].shape} at "
                             f"{_CHECK_PARTICLES} prior draws and {n_rows} rows; expected {shape}")
    if not np.all(np.isfinite(outputs["log_prior"])):
        raise ValueError(f"{estimator_name}: the model's log_prior is not finite at its own prior draws: "
                         f"{outputs['log_prior'].tolist()}")
    bad = _bad_rows(outputs["log_likelihood"])
    if len(bad):
        raise ValueError(f"{estimator_name}: the model's log_likelihood returned NaN or +inf at prior draws on "
                         f"{len(bad)} of the first {n_rows} rows (rows {bad[:10].tolist()}); a log-likelihood may be "
                         "-inf (data impossible under the parameters) but never NaN: check the data against the "
                         "likelihood's support")
    finite = np.all(np.isfinite(outputs["log_likelihood"]), axis=1)
    if np.any(np.isnan(outputs["gradient"][finite])):
        raise ValueError(f"{estimator_name}: the model's likelihood gradient is NaN at prior draws where the "
                         f"log-likelihood is finite (first {n_rows} rows)")
    return theta


def resolve_model(model, estimator_name, *, density, **dims):
    """The estimator's model on data of the given dimensions: a :class:`~evidence_select.models.CustomModel`
    resolved afresh (so fitting never changes the ``model`` parameter), any other model as it is."""
    if model.is_density_model != density:
        kind, other = ("a density model (is_density_model=True)", "EvidenceDensityEstimator") \
            if model.is_density_model else ("a model of y given X (is_density_model=False)",
                                            "EvidenceRegressor or EvidenceClassifier")
        raise TypeError(f"{estimator_name} got {kind}; use {other} for it")
    if isinstance(model, CustomModel):
        return model.resolve(**dims)
    return model


def validate_classification_stream(estimator, X, y, classes, reset):
    """Validate a classifier's chunk; fix ``classes_`` on the first call; return ``X`` and ``y`` as class indices.

    ``classes`` (all labels of the stream) is taken on the first call, else the labels of ``y``; a later
    ``classes`` must agree, and labels outside ``classes_`` are refused.
    """
    name = type(estimator).__name__
    X, y = validate_data(estimator, X, y, reset=reset, dtype=np.float64)
    check_classification_targets(y)
    if reset:
        classes = np.unique(y if classes is None else np.asarray(classes))
        if len(classes) < 2:
            raise ValueError(f"{name} needs at least 2 classes; got {len(classes)} class ({classes.tolist()})")
        estimator.classes_ = classes
    elif classes is not None and not np.array_equal(np.unique(np.asarray(classes)), estimator.classes_):
        raise ValueError(f"classes={np.unique(np.asarray(classes)).tolist()} differs from the classes of the first "
                         f"partial_fit call, {estimator.classes_.tolist()}")
    unknown = np.setdiff1d(np.unique(y), estimator.classes_)
    if len(unknown):
        raise ValueError(f"y contains labels not in classes: {unknown.tolist()[:10]}; "
                         f"classes are {estimator.classes_.tolist()}")
    return X, np.searchsorted(estimator.classes_, y).astype(np.intp)


def class_log_proba(model, theta, X, n_classes):
    """``log p(y = k | x_j, theta_i)``, shape ``(n_particles, n_rows, n_classes)``: the model's ``log_proba`` where
    it has one, else its log-likelihood at each class in turn."""
    log_proba = getattr(model, "log_proba", None)
    if callable(log_proba):
        return np.asarray(log_proba(theta, X), dtype=float)
    return np.stack([model.log_likelihood(theta, X, np.full(len(X), k, dtype=np.intp)) for k in range(n_classes)],
                    axis=2)


class _GenericShell(BaseSGAISEstimator):
    """The generic shells' shared parameters (the model first) and their first-call model checks."""

    _parameter_constraints = {**BaseSGAISEstimator._parameter_constraints, "model": [Model]}
    #: Whether the shell's model is of X alone.
    _density = False

    def __init__(self, model, *, n_particles=30, n_replicates=2, batch_size=500, learning_rate=0.1, friction=0.2,
                 n_mcmc_steps=10, initial_mcmc_factor=2, target_ess=0.9, resample_threshold=0.5,
                 control_variates=True, step_size_schedule="tempered", integrator="baoab", reservoir_size=100_000,
                 exact_move_rows=1000, n_jobs=None, shuffle=True, random_state=None, verbose=0):
        self.model = model
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

    def _model_dims(self, n_features):
        return {"n_features": n_features}

    def _make_model(self, n_features):
        return resolve_model(self.model, type(self).__name__, density=self._density, **self._model_dims(n_features))

    def _first_fit_size(self, n_features):
        return None  # resolving a user's model may need the data (a classifier's classes) or take long

    def _check_data_scale(self, X, y):
        """The feature-scale checks, and on the first call :func:`check_model_on_rows` on the first chunk."""
        super()._check_data_scale(X, y)
        if "sgais_state_" not in vars(self) and len(X):
            rows = slice(0, self.batch_size)
            self._check_model_on_rows(X[rows], None if y is None else y[rows])

    def _check_model_on_rows(self, X, y):
        check_model_on_rows(self.model_, X, y, type(self).__name__)


class EvidenceRegressor(RegressorMixin, _GenericShell):
    """Online evidence and posterior-predictive regression for any model of ``y`` given ``X``.

    The generic shell of the :class:`~evidence_select.models.Model` protocol:
    ``partial_fit`` anneals each chunk into the SGAIS particle state and updates
    ``log_evidence_`` at a cost independent of the data already seen, as the
    built-in estimators do, so any model (from
    :func:`~evidence_select.models.make_model` or written by hand) joins
    :class:`~evidence_select.EvidenceModelSelector`, pipelines and
    :func:`~evidence_select.log_evidence`.

    Parameters
    ----------
    model : Model
        A model of ``y`` given ``X`` (``is_density_model=False``). A
        :func:`~evidence_select.models.make_model` model may size its
        parameters by ``"n_features"``. :meth:`predict` needs the model's
        ``predict_mean(theta, X)`` (``make_model(..., mean=...)``), and
        ``return_std=True`` also ``predict_variance(theta, X)``
        (``make_model(..., variance=...)``), each ``(n_particles, n_rows)``.
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
        SGHMC friction ``alpha`` (momentum decay ``1 - alpha``).
    n_mcmc_steps : int, default=10
        SGHMC steps per intermediate (annealed) distribution.
    initial_mcmc_factor : int, default=2
        Multiplier of ``n_mcmc_steps`` on the first chunk.
    target_ess : float, default=0.9
        Target conditional ESS fraction for choosing the next annealing increment.
    resample_threshold : float, default=0.5
        Resample a group when its ESS fraction falls below this; 0 disables it.
    control_variates : bool, default=True
        Use per-particle control-variate mini-batch gradients.
    step_size_schedule : {"tempered", "data"}, default="tempered"
        ``"tempered"``: ``n_eff = n + lambda |chunk|``; ``"data"``: the paper's ``n_eff = n + |chunk|``.
    integrator : {"baoab", "sghmc"}, default="baoab"
        Langevin discretisation: BAOAB or the paper's SGHMC update, Eq. (3).
    reservoir_size : int, default=100000
        Maximum number of past rows kept for mini-batches (Vitter's Algorithm R).
    exact_move_rows : int, default=1000
        While every row seen is stored and there are at most this many,
        particles move by Metropolis-corrected HMC on the exact tempered
        posterior, preconditioned by the particles themselves (a model of
        unknown curvature needs no step scales there); 0 never does.
    n_jobs : int or None, default=None
        Workers for the replay of a restart's replicate groups.
    shuffle : bool, default=True
        Whether ``fit`` streams the rows in a seeded random order (from ``random_state``; the model treats rows as
        exchangeable, so the evidence does not depend on their order). False streams them as given.
    random_state : int, Generator, RandomState or None, default=None
        Seed; drawn once per ``fit`` and carried (and pickled) with the state.
    verbose : int, default=0
        Log one line per chunk when positive.

    Attributes
    ----------
    log_evidence_ : float
        Log marginal likelihood ``log p(y | X)`` of all data seen so far.
    log_evidence_std_ : float
        Its standard error.
    evidence_checks_ : tuple of str
        Names of the checks that flag ``log_evidence_`` as possibly wrong.
    n_samples_seen_ : int
        Number of samples streamed.
    evidence_history_ : list of ChunkRecord
        One record per processed chunk.
    particles_ : ndarray of shape (n_replicates * n_particles, n_params)
        Posterior particles in the model's unconstrained parameters
        (``model_.unpack(particles_)`` for a ``make_model`` model's natural ones).
    log_weights_ : ndarray of shape (n_replicates * n_particles,)
        Their normalised log-weights.
    model_ : Model
        The model the particles belong to (``model`` resolved to the data).
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
    evidence_select.models.make_model : A model from a log-likelihood and scipy.stats priors.
    EvidenceClassifier, EvidenceDensityEstimator, BayesianPoissonRegressor

    Examples
    --------
    A Gaussian regression with unknown noise scale (a half-normal prior: the
    positive scale is sampled on the log scale, with its Jacobian), written for
    all particles at once (``vectorized=True``) with its gradient, which keeps
    NumPy fast:

    >>> import numpy as np
    >>> from scipy import stats
    >>> from evidence_select import EvidenceRegressor
    >>> from evidence_select.models import make_model
    >>> def log_lik(params, X, y):                      # params["w"]: (n_particles, n_features)
    ...     sigma = params["sigma"][:, None]
    ...     return -0.5 * ((y - params["w"] @ X.T) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    >>> def grad(params, X, y, weights):                # of sum_j weights[:, j] * log_lik[:, j]
    ...     sigma = params["sigma"][:, None]
    ...     z = (y - params["w"] @ X.T) / sigma
    ...     return {"w": (weights * z / sigma) @ X, "sigma": np.sum(weights * (z**2 - 1) / sigma, axis=1)}
    >>> def mean(params, X):
    ...     return params["w"] @ X.T
    >>> model = make_model(log_lik, {"w": (stats.norm(0, 1), "n_features"), "sigma": stats.halfnorm(0, 2)},
    ...                    gradient=grad, mean=mean, vectorized=True)
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = X @ [1.0, -0.5] + 0.3 * rng.normal(size=300)
    >>> reg = EvidenceRegressor(model, n_particles=10, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.9), reg.model_.unpack(reg.particles_)["sigma"].shape
    (True, (20,))
    """

    def _validate_stream(self, X, y, classes, reset):
        X, y = validate_data(self, X, y, reset=reset, dtype=np.float64, y_numeric=True)
        return X, y.astype(np.float64, copy=False)

    def fit(self, X, y):
        """Forget any past data and stream ``(X, y)`` in ``batch_size`` chunks, in a seeded random order
        (``shuffle``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : EvidenceRegressor
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
        self : EvidenceRegressor
        """
        return self._partial_fit(X, y, None, reset=False)

    def _particle_moments(self, X, return_std):
        """Per-particle predictive means (and variances, when ``return_std``), ``(n_particles, n_rows)``."""
        check_is_fitted(self, "sgais_state_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        theta = self.sgais_state_.particles
        members = ("predict_mean", "predict_variance") if return_std else ("predict_mean",)
        moments = []
        for member in members:
            fn = getattr(self.model_, member, None)
            if not callable(fn):
                raise TypeError(f"{type(self).__name__}.predict{'(return_std=True)' * (member != 'predict_mean')} "
                                f"needs the model to provide {member}(theta, X) -> (n_particles, n_rows); "
                                f"{type(self.model_).__name__} does not (make_model: pass "
                                f"{'mean' if member == 'predict_mean' else 'variance'}=...)")
            moments.append(np.asarray(fn(theta, X), dtype=float))
        return moments

    def predict(self, X, return_std=False):
        """Posterior-predictive mean (and standard deviation) of ``y``, averaged over the weighted particles.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation: the particles'
            ``predict_variance`` averaged, plus the spread of their means.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,)
            Only when ``return_std`` is True.
        """
        moments = self._particle_moments(X, return_std)
        weights = self._posterior_weights()
        mean = np.sum(weights * moments[0], axis=0)
        if not return_std:
            return mean
        variance = np.sum(weights * (moments[1] + (moments[0] - mean) ** 2), axis=0)
        return mean, np.sqrt(variance)


class EvidenceClassifier(ClassifierMixin, _GenericShell):
    """Online evidence and posterior-predictive class probabilities for any model of class labels given ``X``.

    The model's likelihood is over class indices ``0..K-1`` (the positions of
    the labels in ``classes_``) and must be a distribution over them: the
    first call checks that the class probabilities sum to one at prior draws.
    :meth:`predict_proba` averages them over the weighted particles, from the
    model's ``log_proba(theta, X)`` (``(n_particles, n_rows, K)``) where it has
    one, else from its log-likelihood at each class.

    Parameters
    ----------
    model : Model
        A model of class indices given ``X``. A
        :func:`~evidence_select.models.make_model` model may size its
        parameters by ``"n_features"`` and ``"n_classes"``.
    n_particles : int, default=30
        Particles in each replicate group.
    n_replicates : int, default=2
        Independent particle groups run together.
    batch_size : int, default=500
        Chunk size for annealing new data in, and SGHMC mini-batch size.
    learning_rate : float, default=0.1
        Per-observation SGHMC learning rate.
    friction : float, default=0.2
        SGHMC friction.
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
        Rows up to which particles move by exact HMC (see :class:`EvidenceRegressor`).
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
    classes_ : ndarray of shape (n_classes,)
        Class labels, fixed by ``classes`` on the first ``partial_fit`` (or by ``fit``).
    log_evidence_ : float
        Log marginal likelihood ``log p(y | X)`` of all data seen so far.
    log_evidence_std_ : float
        Its standard error.
    evidence_checks_ : tuple of str
        Names of the checks that flag ``log_evidence_`` as possibly wrong.
    n_samples_seen_ : int
        Number of samples streamed.
    evidence_history_ : list of ChunkRecord
        One record per processed chunk.
    particles_ : ndarray of shape (n_replicates * n_particles, n_params)
        Posterior particles in the model's unconstrained parameters.
    log_weights_ : ndarray of shape (n_replicates * n_particles,)
        Their normalised log-weights.
    model_ : Model
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
    evidence_select.models.make_model, EvidenceRegressor, BayesianLogisticClassifier

    Examples
    --------
    Logistic regression written as a log-likelihood of all particles at once
    (``y`` arrives as class indices 0 and 1):

    >>> import numpy as np
    >>> from scipy import stats
    >>> from scipy.special import expit, log_expit
    >>> from evidence_select import EvidenceClassifier
    >>> from evidence_select.models import make_model
    >>> def log_lik(params, X, y):                      # (n_particles, n_rows)
    ...     logit = params["w"] @ X.T + params["b"][:, None]
    ...     return np.where(y == 1, log_expit(logit), log_expit(-logit))
    >>> def grad(params, X, y, weights):
    ...     residual = weights * (y - expit(params["w"] @ X.T + params["b"][:, None]))
    ...     return {"w": residual @ X, "b": residual.sum(axis=1)}
    >>> model = make_model(log_lik, {"w": (stats.norm(0, 2), "n_features"), "b": stats.norm(0, 2)},
    ...                    gradient=grad, vectorized=True)
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.where(X[:, 0] - X[:, 1] > 0, "yes", "no")
    >>> clf = EvidenceClassifier(model, n_particles=10, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), bool(clf.score(X, y) > 0.9)
    (['no', 'yes'], True)
    """

    def _model_dims(self, n_features):
        return {"n_features": n_features, "n_classes": len(self.classes_)}

    def _validate_stream(self, X, y, classes, reset):
        return validate_classification_stream(self, X, y, classes, reset)

    def _check_model_on_rows(self, X, y):
        """Also check that the model's class probabilities sum to one on these rows."""
        theta = check_model_on_rows(self.model_, X, y, type(self).__name__)
        n_classes = len(self.classes_)
        try:
            log_total = logsumexp(class_log_proba(self.model_, theta, X, n_classes), axis=2)
        except Exception as error:
            raise ValueError(f"{type(self).__name__}: the model's likelihood failed at the class indices 0..{n_classes - 1} "
                             f"on the first {len(X)} rows: {type(error).__name__}: {error}") from error
        worst = np.unravel_index(np.nanargmax(np.abs(log_total)), log_total.shape) if log_total.size else None
        if worst is not None and not abs(log_total[worst]) <= _NORMALISATION_TOL:
            raise ValueError(f"{type(self).__name__}: the model's likelihood is not a distribution over the "
                             f"{n_classes} classes: at a prior draw its probabilities of the classes 0..{n_classes - 1} "
                             f"sum to {np.exp(log_total[worst]):.6g} on row {worst[1]} (they must sum to 1)")

    def fit(self, X, y):
        """Forget any past data and stream ``(X, y)``, in a seeded random order (``shuffle``); classes are
        taken from ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : EvidenceClassifier
        """
        return self._partial_fit(X, y, None, reset=True)

    def partial_fit(self, X, y, classes=None):
        """Continue the stream with ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All labels of the stream; required on the first call.

        Returns
        -------
        self : EvidenceClassifier
        """
        if classes is None and "sgais_state_" not in vars(self):
            raise ValueError("classes must be passed on the first call to partial_fit "
                             "(all labels the stream will contain), as for SGDClassifier")
        return self._partial_fit(X, y, classes, reset=False)

    def predict_proba(self, X):
        """Posterior-predictive class probabilities, averaged over the weighted particles.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "sgais_state_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        log_proba = class_log_proba(self.model_, self.sgais_state_.particles, X, len(self.classes_))
        return self._average_probabilities(np.exp(log_proba))

    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X):
        """Most probable class under the posterior predictive.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)  # first: it raises NotFittedError before classes_ is read
        return self.classes_[np.argmax(proba, axis=1)]


class EvidenceDensityEstimator(DensityMixin, _GenericShell):
    """Online evidence and posterior-predictive density for any model of ``X`` alone.

    :meth:`score_samples` is the log posterior-predictive density
    ``log sum_i w_i p(x | theta_i)`` over the weighted particles; it needs
    nothing beyond the protocol.

    Parameters
    ----------
    model : Model
        A density model (``is_density_model=True``; ``make_model(...,
        density=True)``). A :func:`~evidence_select.models.make_model` model
        may size its parameters by ``"n_features"``.
    n_particles : int, default=30
        Particles in each replicate group.
    n_replicates : int, default=2
        Independent particle groups run together.
    batch_size : int, default=500
        Chunk size for annealing new data in, and SGHMC mini-batch size.
    learning_rate : float, default=0.1
        Per-observation SGHMC learning rate.
    friction : float, default=0.2
        SGHMC friction.
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
        Rows up to which particles move by exact HMC (see :class:`EvidenceRegressor`).
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
        Log marginal likelihood ``log p(X)`` of all data seen so far.
    log_evidence_std_ : float
        Its standard error.
    evidence_checks_ : tuple of str
        Names of the checks that flag ``log_evidence_`` as possibly wrong.
    n_samples_seen_ : int
        Number of samples streamed.
    evidence_history_ : list of ChunkRecord
        One record per processed chunk.
    particles_ : ndarray of shape (n_replicates * n_particles, n_params)
        Posterior particles in the model's unconstrained parameters.
    log_weights_ : ndarray of shape (n_replicates * n_particles,)
        Their normalised log-weights.
    model_ : Model
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
    evidence_select.models.make_model, BayesianMixture, EvidenceRegressor

    Examples
    --------
    A Gaussian with unknown mean per feature and one unknown scale, for all
    particles at once:

    >>> import numpy as np
    >>> from scipy import stats
    >>> from evidence_select import EvidenceDensityEstimator
    >>> from evidence_select.models import make_model
    >>> def log_lik(params, X):                         # (n_particles, n_rows)
    ...     sigma = params["sigma"][:, None]
    ...     squares = ((X[None] - params["mu"][:, None, :]) ** 2).sum(axis=2)
    ...     return -0.5 * squares / sigma**2 - X.shape[1] * np.log(sigma * np.sqrt(2 * np.pi))
    >>> def grad(params, X, weights):
    ...     sigma = params["sigma"]
    ...     residual = X[None] - params["mu"][:, None, :]
    ...     squares = (residual**2).sum(axis=2)
    ...     return {"mu": np.einsum("pn,pnf->pf", weights, residual) / sigma[:, None] ** 2,
    ...             "sigma": np.sum(weights * (squares / sigma[:, None] ** 3 - X.shape[1] / sigma[:, None]), axis=1)}
    >>> model = make_model(log_lik, {"mu": (stats.norm(0, 3), "n_features"), "sigma": stats.lognorm(1.0)},
    ...                    gradient=grad, density=True, vectorized=True)
    >>> X = np.random.default_rng(0).normal([1.0, -2.0], 0.5, size=(300, 2))
    >>> est = EvidenceDensityEstimator(model, n_particles=10, random_state=0).fit(X)
    >>> est.score_samples(X[:3]).shape
    (3,)
    """

    _density = True

    def _validate_stream(self, X, y, classes, reset):
        return validate_data(self, X, reset=reset, dtype=np.float64), None

    def fit(self, X, y=None):
        """Forget any past data and stream ``X`` in ``batch_size`` chunks, in a seeded random order (``shuffle``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        self : EvidenceDensityEstimator
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
        self : EvidenceDensityEstimator
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

