"""BayesianLogisticClassifier: the online shell of softmax regression."""

from numbers import Real

import numpy as np
from sklearn.base import ClassifierMixin

from ..models import SoftmaxRegressionModel
from ..utils._validation import Interval, check_is_fitted, validate_data
from ._base import BaseSGAISEstimator
from ._generic import validate_classification_stream

__all__ = ["BayesianLogisticClassifier"]


class BayesianLogisticClassifier(ClassifierMixin, BaseSGAISEstimator):
    """Bayesian softmax (multinomial logistic) regression with online SGAIS evidence.

    ``p(y = k | x) = softmax_k(W x + b)`` with Gaussian priors on ``W`` and ``b``
    (paper Appendix B.2); binary problems use the same two-logit softmax.
    ``predict_proba`` averages the class probabilities over the weighted
    posterior particles.

    Parameters
    ----------
    prior_scale : float, default=1.0
        Prior standard deviation of each weight.
    intercept_scale : float, default=1.0
        Prior standard deviation of each intercept.
    fit_intercept : bool, default=True
        Whether the model has intercepts.
    n_particles : int, default=30
        Particles in each replicate group (the softmax posterior has 44
        dimensions in the paper's setup, more than the linear model's; see
        :ref:`parameters`).
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
        the linear model's 5, for the larger posterior (see :ref:`parameters`).
    initial_mcmc_factor : int, default=2
        Multiplier of ``n_mcmc_steps`` on the first chunk, which carries the
        particles from the prior to a posterior (the longest way).
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
    exact_move_rows : int, default=1000
        While every row seen is stored in the reservoir and there are at most this
        many, particles move by Metropolis-corrected HMC on the exact tempered
        posterior, preconditioned by the particles themselves, instead of SGHMC
        (see :ref:`the SGAIS guide <sgais-exact-moves>`); 0 never does.
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
        ``partial_fit(X[order], y[order], classes=...)`` gives, with ``order =
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
    classes_ : ndarray of shape (n_classes,)
        Class labels, fixed by ``classes`` on the first ``partial_fit`` (or by ``fit``).
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
        One record per processed chunk (see :class:`BayesianLinearRegressor`).
    particles_ : ndarray of shape (n_replicates * n_particles, n_classes * (n_features + 1))
        Posterior particles: ``W`` row by row, then ``b``.
    log_weights_ : ndarray of shape (n_replicates * n_particles,)
        Their normalised log-weights.
    model_ : SoftmaxRegressionModel
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
    BayesianLinearRegressor, BayesianMixture, EvidenceModelSelector

    Notes
    -----
    Same engine as :class:`BayesianLinearRegressor` (paper Algorithm 1 with
    control-variate SGHMC). Labels are encoded as indices into ``classes_``.

    References
    ----------
    .. [1] S. A. Cameron, H. C. Eggers, S. Kroon, "Stochastic Gradient Annealed
       Importance Sampling for Efficient Online Marginal Likelihood Estimation",
       Entropy 21 (2019) 1109.

    Examples
    --------
    >>> from evidence_select import BayesianLogisticClassifier
    >>> from evidence_select.datasets import make_softmax_classification
    >>> data = make_softmax_classification(600, random_state=0)
    >>> clf = BayesianLogisticClassifier(n_particles=10, random_state=0)
    >>> clf = clf.partial_fit(data.X[:300], data.y[:300], classes=[0, 1, 2, 3])
    >>> clf = clf.partial_fit(data.X[300:], data.y[300:])
    >>> clf.predict_proba(data.X[:3]).shape
    (3, 4)
    >>> bool(clf.score(data.X, data.y) > 0.7)
    True
    """

    _parameter_constraints = {
        **BaseSGAISEstimator._parameter_constraints,
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "intercept_scale": [Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
    }

    def __init__(self, *, prior_scale=1.0, intercept_scale=1.0, fit_intercept=True, n_particles=30,
                 n_replicates=2, batch_size=500, learning_rate=0.1, friction=0.2, n_mcmc_steps=10,
                 initial_mcmc_factor=2, target_ess=0.9, resample_threshold=0.5, control_variates=True,
                 step_size_schedule="tempered",
                 integrator="baoab", reservoir_size=100_000, exact_move_rows=1000, n_jobs=None, shuffle=True, random_state=None,
                 verbose=0):
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
        return SoftmaxRegressionModel(n_features, len(self.classes_), prior_scale=self.prior_scale,
                                      intercept_scale=self.intercept_scale, fit_intercept=self.fit_intercept)

    def _first_fit_size(self, n_features):
        return None  # the model's size follows the classes, which the data fix

    def _validate_stream(self, X, y, classes, reset):
        return validate_classification_stream(self, X, y, classes, reset)

    def fit(self, X, y):
        """Forget any past data and stream ``(X, y)``, in a seeded random order (``shuffle``); classes are
        taken from ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : BayesianLogisticClassifier
        """
        return self._partial_fit(X, y, None, reset=True)

    def partial_fit(self, X, y, classes=None):
        """Continue the stream with ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All labels of the stream; required on the first call, optional
            (and then checked) later.

        Returns
        -------
        self : BayesianLogisticClassifier
        """
        if classes is None and "sgais_state_" not in vars(self):
            raise ValueError("classes must be passed on the first call to partial_fit "
                             "(all labels the stream will contain), as for SGDClassifier")
        return self._partial_fit(X, y, classes, reset=False)

    def predict_proba(self, X):
        """Posterior-predictive class probabilities, averaged over weighted particles.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "sgais_state_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        proba = np.exp(self.model_.log_proba(self.sgais_state_.particles, X))  # (n_particles, n_samples, K)
        return self._average_probabilities(proba)

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
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
