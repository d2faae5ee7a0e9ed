"""EvidenceModelSelector: online Bayesian model selection and averaging over candidates."""

import copy
import logging
import time
from numbers import Integral
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.metrics import accuracy_score, r2_score
from sklearn.pipeline import Pipeline
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets

from ..sgais._engine import ChunkRecord
from ..sgais._checks import with_chunk_checks
from ..utils import fit_order, make_generator
from ..utils._validation import StrOptions, check_is_fitted, validate_data
from ._distributed import (PARALLEL_OPTIONS, AdvanceTask, JoblibPayoff, ResidentNamedCandidates, advance_candidates,
                           relay_warnings)
from ._averaging import (log_model_prior, log_model_probabilities, mix_log_density, mix_normal, mix_proba,
                         model_probability_std)
from ._streaming import EvidencePipeline, check_evidence_step
from ._features import candidate_feature_masks, column_labels, format_feature_inclusion, inclusion_probabilities
from ._summary import format_summary, selection_results

__all__ = ["EvidenceModelSelector", "SelectionRecord"]

logger = logging.getLogger(__name__)

BACKENDS = ("sgais", "ais", "ns", "bridge")
_KINDS = ("classifier", "regressor", "density_estimator")


class SelectionRecord(NamedTuple):
    """One entry of ``EvidenceModelSelector.evidence_history_``.

    One record per chunk that every candidate completed (per call with a
    reference backend). :func:`~evidence_select.detect_change_points` reads the
    candidates' records from a selector's history.

    Attributes
    ----------
    n_samples_seen : int
        Rows streamed when the record was made.
    log_evidences : ndarray of shape (n_candidates,)
        Each candidate's log evidence of those rows.
    log_evidence_stds : ndarray of shape (n_candidates,)
        Their standard errors.
    model_probabilities : ndarray of shape (n_candidates,)
        The posterior over the candidates at that point.
    candidate_records : tuple of ChunkRecord
        Each candidate's own :class:`~evidence_select.ChunkRecord` at
        ``n_samples_seen`` (annealing steps, ESS, per-datum log predictive).

    Examples
    --------
    >>> from evidence_select import BayesianLinearRegressor, EvidenceModelSelector
    >>> from evidence_select.datasets import make_linear_regression
    >>> data = make_linear_regression(1000, random_state=0)
    >>> selector = EvidenceModelSelector(
    ...     [(f"noise={v}", BayesianLinearRegressor(noise_variance=v, n_particles=10)) for v in (0.5, 1.0)],
    ...     random_state=0).fit(data.X, data.y)
    >>> record = selector.evidence_history_[-1]
    >>> record.n_samples_seen, record.model_probabilities.round(3).tolist()
    (1000, [0.0, 1.0])
    >>> [r.n_samples_seen for r in record.candidate_records]
    [1000, 1000]
    """

    n_samples_seen: int
    log_evidences: np.ndarray
    log_evidence_stds: np.ndarray
    model_probabilities: np.ndarray
    candidate_records: tuple


# -- candidate validation -------------------------------------------------------------------------
_CANDIDATE_NEEDS = ("a candidate needs partial_fit and the fitted attributes log_evidence_ and log_evidence_std_ "
                    "(its online log marginal likelihood and standard error), as evidence_select's "
                    "BayesianLinearRegressor, BayesianLogisticClassifier and BayesianMixture provide")


def _check_online_candidate(name, estimator):
    """Raise a TypeError unless ``estimator`` is an estimator instance with ``partial_fit``, or a ``Pipeline``
    that streams into one through preprocessing that learns nothing from the rows."""
    if isinstance(estimator, type):
        raise TypeError(f"candidate {name!r} is the class {estimator.__name__}, not an instance; "
                        f"pass {estimator.__name__}(...)")
    if isinstance(estimator, Pipeline):
        if not estimator.steps:
            raise TypeError(f"candidate {name!r} is a Pipeline without steps")
        check_evidence_step(estimator, name)
    elif not hasattr(estimator, "partial_fit"):
        raise TypeError(f"candidate {name!r} ({type(estimator).__name__}) has no partial_fit; {_CANDIDATE_NEEDS}")


def _check_evidence_candidate(name, estimator):
    """Raise a TypeError saying what is missing when ``estimator`` cannot give an online evidence.

    ``log_evidence_`` and ``log_evidence_std_`` must be declared on the class
    (as properties derived from the fitted state, or class attributes), so that
    the check needs no fitting: a point-estimate learner such as
    ``SGDRegressor`` is refused before any candidate has run.
    """
    if isinstance(estimator, Pipeline):
        return  # its last step was checked with the rest of the pipeline (_check_online_candidate)
    missing = [attr for attr in ("log_evidence_", "log_evidence_std_") if not hasattr(type(estimator), attr)]
    if missing:
        raise TypeError(f"candidate {name!r} ({type(estimator).__name__}) cannot give an evidence: it does not "
                        f"define {' or '.join(missing)}; {_CANDIDATE_NEEDS}")


def _feature_masks(candidates, n_features, names, kind):
    """The candidates' :func:`candidate_feature_masks`; a ValueError when density candidates use different
    columns (their evidences would then be densities of different data, which no posterior compares)."""
    masks = candidate_feature_masks(candidates, n_features, names)
    if kind == "density_estimator" and np.any(masks != masks[:1]):
        used = {name: np.flatnonzero(mask).tolist() for name, mask in zip(names, masks)}
        raise ValueError(f"density candidates must model the same input columns (the evidence of each is a density "
                         f"of the data it sees); they use {used}")
    return masks


def _joined_record(first, second, log_prior):
    """One :class:`SelectionRecord` over the candidates of two records made at the same position."""
    log_evidences = np.concatenate([first.log_evidences, second.log_evidences])
    return SelectionRecord(first.n_samples_seen, log_evidences,
                           np.concatenate([first.log_evidence_stds, second.log_evidence_stds]),
                           np.exp(log_model_probabilities(log_evidences, log_prior)),
                           first.candidate_records + second.candidate_records)


def _streamable(candidate):
    """``candidate`` itself, or an :class:`EvidencePipeline` with the steps and settings of a ``Pipeline``
    candidate (which has no ``partial_fit`` of its own)."""
    if isinstance(candidate, Pipeline) and not isinstance(candidate, EvidencePipeline):
        return EvidencePipeline(**candidate.get_params(deep=False))
    return candidate


def _seeded(candidate, seed):
    """``candidate`` with ``random_state=seed`` (a pipeline's: its last step's), when it has one."""
    key = f"{candidate.steps[-1][0]}__random_state" if isinstance(candidate, Pipeline) else "random_state"
    return candidate.set_params(**{key: seed}) if key in candidate.get_params() else candidate


def _in_given_order(estimator):
    """``estimator`` with its own ``fit``-time shuffle off (also as a Pipeline's last step), when it has one:
    the selector's ``fit`` orders the rows once, so that every candidate's history follows the same rows."""
    steps = getattr(estimator, "steps", None)
    name, last = (steps[-1][0] + "__", steps[-1][1]) if steps else ("", estimator)
    if hasattr(last, "get_params") and "shuffle" in last.get_params(deep=False):
        estimator.set_params(**{name + "shuffle": False})
    return estimator


def _describe_kinds(kinds):
    """``{"regressor": ["a", "b"], ...}`` from ``{name: kind}``, for error messages."""
    grouped = {}
    for name, kind in kinds.items():
        grouped.setdefault(kind or "unknown", []).append(name)
    return ", ".join(f"{kind}: {names}" for kind, names in grouped.items())


def _candidate_kind(estimators):
    """The common estimator type of the candidates, or None when invalid or mixed."""
    try:
        kinds = {get_tags(est).estimator_type for _, est in estimators}
    except (TypeError, ValueError, AttributeError):
        return None
    return kinds.pop() if len(kinds) == 1 else None


def _is_classifier_selector(selector):
    return _candidate_kind(selector.estimators) == "classifier"


def _is_supervised_selector(selector):
    return _candidate_kind(selector.estimators) in ("classifier", "regressor")


def _is_density_selector(selector):
    return _candidate_kind(selector.estimators) == "density_estimator"


class EvidenceModelSelector(MetaEstimatorMixin, BaseEstimator):
    """Online Bayesian model selection and averaging by marginal likelihood.

    Keeps several candidate models up to date on a stream, weighs them by their
    evidence ``p(data | model)`` times a model prior, and predicts with all of
    them (Bayesian model averaging, BMA).

    Parameters
    ----------
    estimators : list of (str, estimator) tuples
        Candidates, all regressors, all classifiers or all density estimators
        (e.g. :class:`~evidence_select.BayesianMixture` with different
        ``n_components``). Each must support ``partial_fit`` and expose
        ``log_evidence_`` and ``log_evidence_std_`` once fitted, or be a
        :class:`~sklearn.pipeline.Pipeline` whose last step does and whose
        other steps learn nothing from the rows (stateless or frozen; see
        :class:`~evidence_select.selection.EvidencePipeline`), which is streamed
        as an ``EvidencePipeline``: that is how feature subsets
        (:func:`~evidence_select.selection.feature_subset_candidates`) and
        feature maps are compared. They are cloned; their parameters are
        reachable as ``<name>__<param>``.
    backend : {"sgais", "ais", "ns", "bridge"}, default="sgais"
        Where ``log_evidences_`` come from. ``"sgais"``: the candidates' own
        online estimates, at a cost per chunk independent of the data seen.
        ``"ais"``, ``"ns"``, ``"bridge"``: the full-data reference backends of
        :func:`~evidence_select.log_evidence`; the selector then keeps every row
        seen and *recomputes* each evidence on all of them at every
        ``partial_fit``, so the cost of a call grows linearly with the data
        seen (the cost SGAIS removes). Predictions always use the candidates'
        online posteriors.
    model_prior : array-like of shape (n_candidates,), default=None
        Prior weights of the candidates (normalised; zeros exclude a
        candidate). None means uniform.
    backend_params : dict, default=None
        Keyword arguments of the reference backend (e.g. ``{"n_live": 200}``
        for NS, ``{"n_chains": 100}`` for AIS); ignored for ``"sgais"``.
    n_jobs : int, default=None
        Candidates advanced in parallel through joblib (``parallel="joblib"``).
        None means 1 unless in a :func:`joblib.parallel_config` context.
        Results do not depend on it. The candidates whose last chunk took
        longest start first, so that with fewer workers than candidates the
        slowest does not run on alone at the end of a call. A call runs in
        this process instead, one candidate after another, when the last
        call's update times and the workers' measured overhead (shipping each
        candidate's state both ways) predict that the workers would be slower
        (cheap candidates, small chunks); the workers are tried again at least
        every 64 calls.
    parallel : {"joblib", "dask"}, default="joblib"
        ``"joblib"``: each call ships every candidate to a joblib job and back.
        ``"dask"``: the candidates live on the workers of the current
        dask.distributed ``Client`` (create one first), one worker each for the
        whole stream; a call sends only its chunk to the workers and gets back
        a few numbers per candidate. ``estimators_`` then fetches the fitted
        candidates on first access. Results are bit-identical to
        ``parallel="joblib"`` for any ``n_jobs``.
    shuffle : bool, default=True
        Whether ``fit`` streams the rows in a seeded random order, the same
        for every candidate (their own ``shuffle`` is turned off, so that
        their histories follow the same rows). The candidates treat rows as
        exchangeable, so their evidences do not depend on the order, but the
        online estimates of rows sorted by their target would; in
        :func:`~sklearn.model_selection.cross_val_score` each fold's ``fit``
        is shuffled too. The order comes from ``random_state`` and leaves the
        candidates' seeds as they are: ``fit(X, y)`` gives what a fresh
        selector's ``partial_fit(X[order], y[order])`` gives (with ``classes``
        for classifiers), with ``order =
        evidence_select.utils.fit_order(random_state, len(X))``. False streams
        the rows as given (a true stream, whose shifts the history should
        show). ``partial_fit`` keeps its rows' order; its candidates warn
        (:class:`~evidence_select.exceptions.StreamOrderWarning`, once per
        stream) when a call's target is sorted or strongly autocorrelated.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the candidates (one independent seed each, drawn before
        dispatch), the reference backends and ``fit``'s row order. None keeps
        each candidate's own ``random_state``.
    verbose : int, default=0
        Log the model probabilities after each call when positive.

    Attributes
    ----------
    estimators_ : list of estimators
        The fitted candidates, in the order of ``estimators``.
    named_estimators_ : dict
        The fitted candidates by name.
    log_evidences_ : ndarray of shape (n_candidates,)
        Log evidence of each candidate on all data seen so far.
    log_evidence_stds_ : ndarray of shape (n_candidates,)
        Their standard errors.
    evidence_checks_ : list of tuple of str
        For each candidate, the names of the checks that flag its evidence as
        possibly wrong (empty when none): the estimator's ``evidence_checks_``
        with ``backend="sgais"`` (a chunk's check, once raised, stays), the
        reference backend's failed diagnostics otherwise. ``summary()`` adds
        them as a column when any candidate has one.
    log_model_probabilities_ : ndarray of shape (n_candidates,)
        Log posterior model probabilities.
    model_probabilities_ : ndarray of shape (n_candidates,)
        ``softmax(log_evidences_ + log prior)``; exact even when the evidences
        differ by 1e5 nats. A candidate whose evidence is unusable (NaN, with
        ``'unusable'`` in its ``evidence_checks_``) gets NaN and no weight in
        the model average; the others are normalised among themselves.
    model_probabilities_std_ : ndarray of shape (n_candidates,)
        Delta-method standard errors of ``model_probabilities_`` from
        ``log_evidence_stds_``.
    results_ : dict of str -> ndarray of shape (n_candidates,)
        The results by candidate name, ready for ``pandas.DataFrame``; see
        :attr:`results_` and :meth:`summary`.
    candidate_features_ : ndarray of bool of shape (n_candidates, n_features_in_)
        Which input columns each candidate uses: those a pipeline's leading
        ``ColumnTransformer`` keeps (selected by position), all of them for
        any other candidate.
    feature_inclusion_probabilities_ : ndarray of shape (n_features_in_,)
        Posterior probability that each input column is in the model: the sum
        of ``model_probabilities_`` over the candidates that use it (model
        averaging over feature subsets). ``summary()`` lists them when the
        candidates differ in the columns they use.
    feature_inclusion_probabilities_std_ : ndarray of shape (n_features_in_,)
        Their delta-method standard errors from ``log_evidence_stds_``.
    best_index_ : int
        Index of the most probable candidate.
    best_estimator_ : estimator
        The most probable fitted candidate.
    evidence_history_ : list of SelectionRecord
        One record per chunk that all candidates completed (per call for the
        reference backends): samples seen, log evidences, their stds, model
        probabilities and each candidate's :class:`~evidence_select.ChunkRecord`.
    n_samples_seen_ : int
        Number of samples streamed.
    classes_ : ndarray of shape (n_classes,)
        Class labels (classifier candidates only).
    n_features_in_ : int
        Number of features seen during the first ``fit``/``partial_fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names, when ``X`` has string column names.
    X_seen_, y_seen_ : ndarray
        All rows seen (reference backends only; ``y_seen_`` encoded for
        classifiers, None for density estimators).
    random_generator_ : numpy.random.Generator
        Seeds the reference backend at each call (pickled with the selector).

    See Also
    --------
    detect_change_points : Distribution shifts from an evidence history.
    partial_fit_pipeline : Stream through a fitted preprocessing pipeline.
    evidence_select.log_evidence : One evidence by any method.

    Notes
    -----
    With candidates :math:`M_k`, prior :math:`\\pi_k` and evidences
    :math:`Z_k = p(D \\mid M_k)`, the model probabilities are
    :math:`p_k = \\pi_k Z_k / \\sum_j \\pi_j Z_j`, computed as a log-softmax.
    Model averaging mixes predictive distributions, not point estimates:
    ``predict_proba`` is :math:`\\sum_k p_k\\, p(y \\mid x, D, M_k)`,
    ``score_samples`` is :math:`\\log \\sum_k p_k\\, p(x \\mid D, M_k)`
    (a logsumexp), and ``predict(X, return_std=True)`` returns the mixture's
    mean and standard deviation, whose variance is the weighted within-model
    variance plus the between-model variance of the means.

    Seeds are drawn per candidate in the calling process before any dispatch,
    each job works on a copy of its candidate, and every update (reference
    backends included) runs with a one-thread BLAS, so results are
    bit-identical for any ``n_jobs``, any joblib backend and
    ``parallel="dask"``. To spread the candidates over a cluster, use
    dask.distributed (extra ``distributed``)::

        from dask.distributed import Client
        client = Client("tcp://scheduler:8786")   # or Client(LocalCluster(threads_per_worker=1))
        selector = EvidenceModelSelector(candidates, parallel="dask")
        for X_chunk in stream:
            selector.partial_fit(X_chunk)

    Each candidate then stays on one worker for the whole stream and only the
    chunks and a few numbers per candidate travel. With ``parallel="joblib"``
    each candidate's state (its reservoir of past rows included) travels to a
    worker and back at every call, so send large chunks.

    The online evidences are SGAIS estimates (Cameron, Eggers & Kroon 2019,
    Algorithm 1); the paper's Sec. 7.2 uses them to compare mixtures with 3, 5
    and 7 components on a stream with distribution shifts.

    References
    ----------
    .. [1] S. A. Cameron, H. C. Eggers, S. Kroon, "Stochastic Gradient Annealed
       Importance Sampling for Efficient Online Marginal Likelihood Estimation",
       Entropy 21 (2019) 1109.
    .. [2] J. A. Hoeting, D. Madigan, A. E. Raftery, C. T. Volinsky, "Bayesian
       Model Averaging: A Tutorial", Statistical Science 14 (1999) 382-417.

    Examples
    --------
    >>> from evidence_select import BayesianLinearRegressor, EvidenceModelSelector
    >>> from evidence_select.datasets import make_linear_regression
    >>> data = make_linear_regression(1000, noise_variance=1.0, random_state=0)
    >>> selector = EvidenceModelSelector(
    ...     [("quiet", BayesianLinearRegressor(noise_variance=0.5)),
    ...      ("true", BayesianLinearRegressor(noise_variance=1.0)),
    ...      ("noisy", BayesianLinearRegressor(noise_variance=2.0))], random_state=0)
    >>> selector = selector.partial_fit(data.X[:500], data.y[:500]).partial_fit(data.X[500:], data.y[500:])
    >>> selector.best_index_, selector.model_probabilities_.round(3).tolist()
    (1, [0.0, 1.0, 0.0])
    >>> mean, std = selector.predict(data.X[:2], return_std=True)
    >>> bool(std.min() > 0.99)
    True
    """

    _parameter_constraints = {
        "estimators": [list],
        "backend": [StrOptions(set(BACKENDS))],
        "model_prior": ["array-like", None],
        "backend_params": [dict, None],
        "n_jobs": [Integral, None],
        "parallel": [StrOptions(set(PARALLEL_OPTIONS))],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, estimators, *, backend="sgais", model_prior=None, backend_params=None, n_jobs=None,
                 parallel="joblib", shuffle=True, random_state=None, verbose=0):
        self.estimators = estimators
        self.backend = backend
        self.model_prior = model_prior
        self.backend_params = backend_params
        self.n_jobs = n_jobs
        self.parallel = parallel
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose

    # -- nested parameters (name__param), as scikit-learn's compositions do ----------
    def get_params(self, deep=True):
        """Parameters of the selector and, with ``deep``, of each candidate as ``<name>__<param>``.

        Parameters
        ----------
        deep : bool, default=True

        Returns
        -------
        params : dict
        """
        out = super().get_params(deep=deep)
        if not deep:
            return out
        try:
            named = dict(self.estimators)
        except (TypeError, ValueError):  # not (yet) a list of pairs: set_params may be fixing it
            return out
        out.update(named)
        for name, estimator in named.items():
            if hasattr(estimator, "get_params"):
                out.update({f"{name}__{key}": value for key, value in estimator.get_params(deep=True).items()})
        return out

    def set_params(self, **params):
        """Set parameters; ``estimators`` first, then whole candidates by name, then ``<name>__<param>``.

        Parameters
        ----------
        **params : dict

        Returns
        -------
        self : EvidenceModelSelector
        """
        if "estimators" in params:
            self.estimators = params.pop("estimators")
        if isinstance(self.estimators, list):
            try:
                names = [name for name, _ in self.estimators]
            except (TypeError, ValueError):
                names = []
            for name in [key for key in params if "__" not in key and key in names]:
                replacement = params.pop(name)
                self.estimators = [(n, replacement if n == name else est) for n, est in self.estimators]
        return super().set_params(**params)

    # -- validation ------------------------------------------------------------------------
    def _validate_estimators(self):
        """Check the candidate list; return ``(names, estimators, kind)``."""
        if not self.estimators:
            raise ValueError("estimators must be a non-empty list of (name, estimator) tuples")
        pairs = []
        for item in self.estimators:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(f"each candidate must be a (name, estimator) tuple with a str name; got {item!r}")
            pairs.append(item)
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            duplicates = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"candidate names must be unique; {duplicates} appear more than once in {names}")
        if [name for name in names if "__" in name]:
            raise ValueError(f"candidate names must not contain '__'; got {names}")
        clashes = sorted(set(names) & set(self._get_param_names()))
        if clashes:
            raise ValueError(f"candidate names conflict with parameters of EvidenceModelSelector: {clashes}")
        for name, estimator in pairs:
            _check_online_candidate(name, estimator)
        kinds = {name: get_tags(estimator).estimator_type for name, estimator in pairs}
        if len(set(kinds.values())) != 1:
            raise ValueError(f"candidates must all be regressors, all classifiers or all density estimators, so "
                             f"that one model average exists; got {_describe_kinds(kinds)}")
        kind = next(iter(kinds.values()))
        if kind not in _KINDS:
            raise ValueError(f"candidates must be regressors, classifiers or density estimators; got {kind!r}")
        for name, estimator in pairs:
            _check_evidence_candidate(name, estimator)
        return names, [estimator for _, estimator in pairs], kind

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            candidate_tags = [get_tags(estimator) for _, estimator in self.estimators]
        except (TypeError, ValueError, AttributeError):
            return tags
        if not candidate_tags:
            return tags
        first = candidate_tags[0]  # mixed kinds are rejected at fit; tags must not raise
        tags.estimator_type = first.estimator_type
        tags.classifier_tags = first.classifier_tags
        tags.regressor_tags = first.regressor_tags
        tags.target_tags = first.target_tags
        tags.input_tags = first.input_tags
        tags.non_deterministic = any(t.non_deterministic for t in candidate_tags)
        return tags

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, X, y=None):
        """Clone every candidate and stream ``(X, y)`` through it from scratch, in a seeded random order
        (``shuffle``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Targets; ignored for density estimators.

        Returns
        -------
        self : EvidenceModelSelector
        """
        return self._partial_fit(X, y, None, reset=True)

    def partial_fit(self, X, y=None, classes=None):
        """Advance every candidate with ``(X, y)`` and update the model probabilities.

        With the ``"sgais"`` backend the cost is independent of the data seen
        before; with the reference backends every evidence is recomputed on all
        rows seen so far.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Targets; ignored for density estimators.
        classes : array-like of shape (n_classes,), default=None
            All labels of the stream; required on the first call with
            classifier candidates (as for ``SGDClassifier``).

        Returns
        -------
        self : EvidenceModelSelector
        """
        return self._partial_fit(X, y, classes, reset=False)

    def _partial_fit(self, X, y, classes, *, reset):
        """Validate, advance all candidates, then commit; a failure restores the previous state."""
        backup = dict(self.__dict__)
        try:
            self._update(X, y, classes, reset=reset, first_call=reset or not hasattr(self, "estimators_"))
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(backup)
            raise
        return self

    def _update(self, X, y, classes, *, reset, first_call):
        """One call's work: advance every candidate by ``(X, y)``, then commit the results to ``self``."""
        tic = time.perf_counter()
        names, candidates, kind, rng = self._fresh_candidates() if first_call else self._current_candidates()
        log_prior = log_model_prior(self.model_prior, len(candidates))
        X, y, fit_params = self._validate_stream(X, y, classes, kind, reset=reset, first_call=first_call)
        masks = (_feature_masks(candidates, X.shape[1], names, kind) if first_call
                 else getattr(self, "candidate_features_", np.ones((len(candidates), X.shape[1]), dtype=bool)))
        if reset and self.shuffle:  # see ``shuffle``: one seeded order for every candidate
            order = fit_order(self.random_state, len(X))
            X, y = X[order], (None if y is None else y[order])
        X_all, y_all = self._rows_for_backend(X, y, kind, first_call)
        backend_seeds = ([None] * len(candidates) if X_all is None
                         else [int(s) for s in rng.integers(0, 2**32, size=len(candidates))])
        n_before = 0 if first_call else self.n_samples_seen_
        history_lengths = self._candidate_history_lengths(first_call, candidates)
        task = AdvanceTask("fit" if reset else "partial_fit", X, y, fit_params, self.backend, X_all, y_all,
                           {} if self.backend_params is None else dict(self.backend_params))
        payoff = JoblibPayoff() if first_call else getattr(self, "_joblib_payoff", JoblibPayoff())
        fitted, summaries, payoff = advance_candidates(candidates, task, backend_seeds, history_lengths,
                                                       parallel=self.parallel, n_jobs=self.n_jobs, names=names,
                                                       payoff=payoff)
        relay_warnings(names, summaries)
        log_evidences, log_evidence_stds, new_records = self._call_evidences(summaries, log_prior, n_before,
                                                                              first_call, n_all=n_before + len(X))
        log_probabilities = log_model_probabilities(log_evidences, log_prior)  # raises if none is usable, uncommitted
        # Commit: nothing above has touched self's fitted state.
        self.estimators_ = fitted
        self.named_estimators_ = (dict(zip(names, fitted)) if isinstance(fitted, list)
                                  else ResidentNamedCandidates(names, fitted))
        self._n_candidate_records = [start + len(summary.new_records)
                                     for start, summary in zip(history_lengths, summaries)]
        self._joblib_payoff = payoff
        self.candidate_features_ = masks
        self._commit_evidences(log_evidences, log_evidence_stds, log_probabilities,
                               self._evidence_checks(summaries, self.backend, first_call))
        self.evidence_history_ = (new_records if first_call else self.evidence_history_ + new_records)
        self.n_samples_seen_ = n_before + len(X)
        self.random_generator_ = rng
        if X_all is not None:
            self.X_seen_, self.y_seen_ = X_all, y_all
        if self.verbose:
            logger.info("n=%d model probabilities %s (%.2f s)", self.n_samples_seen_,
                        dict(zip(names, np.round(self.model_probabilities_, 4).tolist())),
                        time.perf_counter() - tic)

    def _fresh_candidates(self):
        """``(names, candidates, kind, rng)`` of a first call: fitted attributes cleared, candidates cloned, each
        seeded from the selector's generator when it has a ``random_state``."""
        self._validate_params()
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)
        names, candidates, kind = self._validate_estimators()
        rng = make_generator(self.random_state)
        seeds = [int(s) for s in rng.integers(0, 2**32, size=len(candidates))]
        candidates = [_in_given_order(_streamable(clone(est))) for est in candidates]
        if self.random_state is not None:
            candidates = [_seeded(est, seed) for est, seed in zip(candidates, seeds)]
        return names, candidates, kind, rng

    def _current_candidates(self):
        """``(names, candidates, kind, rng)`` of a later call: the fitted candidates and a copy of the generator."""
        # The kind from the unfitted estimators: the fitted ones may live on dask workers.
        return (list(self.named_estimators_), self.estimators_, _candidate_kind(self.estimators),
                copy.deepcopy(self.random_generator_))

    def _rows_for_backend(self, X, y, kind, first_call):
        """``(X_all, y_all)``: every row seen, chunk included (labels encoded), for a reference backend, which
        recomputes the evidence on all of them; ``(None, None)`` for ``"sgais"``."""
        if self.backend == "sgais":
            return None, None
        X_all = X if first_call else np.concatenate([self.X_seen_, X])
        y_enc = None if y is None else (np.searchsorted(self.classes_, y) if kind == "classifier" else y)
        y_all = y_enc if first_call or y is None else np.concatenate([self.y_seen_, y_enc])
        return X_all, y_all

    def _call_evidences(self, summaries, log_prior, n_before, first_call, n_all):
        """``(log_evidences, log_evidence_stds, new_records)`` of the call, from the candidates' summaries."""
        if self.backend == "sgais":
            return (np.array([summary.log_evidence for summary in summaries], dtype=float),
                    np.array([summary.log_evidence_std for summary in summaries], dtype=float),
                    self._aligned_records([summary.new_records for summary in summaries], log_prior))
        results = [summary.result for summary in summaries]
        previous = None if first_call else self.log_evidences_
        return (np.array([r.log_evidence for r in results], dtype=float),
                np.array([r.log_evidence_std for r in results], dtype=float),
                [self._reference_record(results, previous, n_before, n_all, log_prior)])

    def _commit_evidences(self, log_evidences, log_evidence_stds, log_probabilities, checks):
        """Set the evidences, their checks and the model probabilities they give (``log_model_probabilities``)."""
        self.log_evidences_ = log_evidences
        self.log_evidence_stds_ = log_evidence_stds
        self.evidence_checks_ = checks
        self.log_model_probabilities_ = log_probabilities
        self.model_probabilities_ = np.exp(log_probabilities)
        self.model_probabilities_std_ = model_probability_std(self.model_probabilities_, log_evidence_stds)
        self.best_index_ = int(np.nanargmax(log_probabilities))
        self.feature_inclusion_probabilities_, self.feature_inclusion_probabilities_std_ = inclusion_probabilities(
            self.model_probabilities_, self.candidate_features_, log_evidence_stds)

    def _validate_stream(self, X, y, classes, kind, *, reset, first_call):
        """Validated float ``X``, ``y`` (None for density candidates) and the candidates' fit kwargs."""
        if kind == "density_estimator":
            return validate_data(self, X, reset=first_call, dtype=np.float64), None, {}
        X, y = validate_data(self, X, y, reset=first_call, dtype=np.float64, y_numeric=kind == "regressor")
        if kind == "regressor":
            return X, y, {}
        check_classification_targets(y)
        if first_call:
            if classes is None and not reset:
                raise ValueError("classes must be passed on the first call to partial_fit with classifier "
                                 "candidates (all labels the stream will contain), as for SGDClassifier")
            self.classes_ = np.unique(y if classes is None else np.asarray(classes))
        elif classes is not None and not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
            raise ValueError(f"classes={np.unique(np.asarray(classes)).tolist()} differs from the classes of the "
                             f"first partial_fit call, {self.classes_.tolist()}")
        unknown = np.setdiff1d(np.unique(y), self.classes_)
        if len(unknown):
            raise ValueError(f"y contains labels not in classes: {unknown.tolist()[:10]}; "
                             f"classes are {self.classes_.tolist()}")
        return X, y, ({"classes": self.classes_} if first_call and not reset else {})

    def _merged(self, other):
        """The fitted selector over this one's candidates followed by ``other``'s.

        Both must have been fitted on the same rows by the same calls, with the
        same settings, no ``model_prior`` and ``random_state=None`` (each
        candidate keeps its own seed). Candidates do not interact, so the
        result equals one ``fit`` over all of them:
        :func:`~evidence_select.selection.feature_subset_search` adds each
        round's subsets this way instead of fitting every subset again.
        """
        settings = [{key: value for key, value in selector.get_params(deep=False).items() if key != "estimators"}
                    for selector in (self, other)]
        if (settings[0] != settings[1] or self.model_prior is not None or self.random_state is not None
                or self.n_samples_seen_ != other.n_samples_seen_):
            raise ValueError("only selectors with the same settings, fitted on the same rows, without model_prior "
                             "and with random_state=None can be merged")
        merged = clone(self).set_params(estimators=[*self.estimators, *other.estimators])
        merged.__dict__.update({key: value for key, value in vars(self).items() if key.endswith("_")})
        names = [*self.named_estimators_, *other.named_estimators_]
        merged.estimators_ = [*self.estimators_, *other.estimators_]
        merged.named_estimators_ = dict(zip(names, merged.estimators_))
        merged._n_candidate_records = [*self._n_candidate_records, *other._n_candidate_records]
        merged.candidate_features_ = np.vstack([self.candidate_features_, other.candidate_features_])
        log_prior = log_model_prior(None, len(names))
        log_evidences = np.concatenate([self.log_evidences_, other.log_evidences_])
        merged._commit_evidences(log_evidences, np.concatenate([self.log_evidence_stds_, other.log_evidence_stds_]),
                                 log_model_probabilities(log_evidences, log_prior),
                                 [*self.evidence_checks_, *other.evidence_checks_])
        theirs = {record.n_samples_seen: record for record in other.evidence_history_}
        merged.evidence_history_ = [_joined_record(record, theirs[record.n_samples_seen], log_prior)
                                    for record in self.evidence_history_ if record.n_samples_seen in theirs]
        return merged

    @property
    def best_estimator_(self):
        """The most probable fitted candidate, ``estimators_[best_index_]``."""
        return self.estimators_[self.best_index_]

    def _candidate_history_lengths(self, first_call, candidates):
        """How many chunk records each candidate has (without fetching candidates resident on dask workers)."""
        if first_call:
            return [0] * len(candidates)
        stored = getattr(self, "_n_candidate_records", None)
        return list(stored) if stored is not None else [len(est.evidence_history_) for est in candidates]

    def _evidence_checks(self, summaries, backend, first_call):
        """Each candidate's failed checks after this call: a reference backend's own, or the SGAIS candidate's
        together with the chunk checks its earlier calls raised (a job sees only the recent records)."""
        if backend != "sgais" or first_call:
            return [tuple(summary.checks) for summary in summaries]
        earlier = getattr(self, "evidence_checks_", [()] * len(summaries))  # selectors pickled before this existed
        return [with_chunk_checks(summary.checks, before) for summary, before in zip(summaries, earlier)]

    @staticmethod
    def _aligned_records(new, log_prior):
        """Selection records at every position that all candidates' new chunk records share."""
        by_position = [{record.n_samples_seen: record for record in records} for records in new]
        shared = sorted(set.intersection(*(set(positions) for positions in by_position)))
        out = []
        for position in shared:
            records = tuple(positions[position] for positions in by_position)
            log_evidences = np.array([r.log_evidence for r in records])
            log_probabilities = log_model_probabilities(log_evidences, log_prior)
            out.append(SelectionRecord(position, log_evidences, np.array([r.log_evidence_std for r in records]),
                                       np.exp(log_probabilities), records))
        return out

    @staticmethod
    def _reference_record(results, previous_log_evidences, n_before, n_total, log_prior):
        """One selection record for a reference-backend recomputation on all ``n_total`` rows."""
        n_new = max(n_total - n_before, 1)
        records = []
        for k, result in enumerate(results):
            before = 0.0 if previous_log_evidences is None else previous_log_evidences[k]
            # No annealing steps or ESS: the reference backends do not anneal chunk by chunk (0 and NaN).
            records.append(ChunkRecord(n_total, float(result.log_evidence), float(result.log_evidence_std),
                                       0, float("nan"), (result.log_evidence - before) / n_new, 0,
                                       float(result.seconds)))
        log_evidences = np.array([r.log_evidence for r in records])
        return SelectionRecord(n_total, log_evidences, np.array([r.log_evidence_std for r in records]),
                               np.exp(log_model_probabilities(log_evidences, log_prior)), tuple(records))

    # -- model-averaged predictions --------------------------------------------------------
    def _candidate_outputs(self, method, X, weights, **kwargs):
        """``(indices, outputs)`` of ``method`` for the candidates whose ``weights`` are non-zero."""
        check_is_fitted(self, "estimators_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        active = np.flatnonzero(weights > 0) if weights is not None else np.arange(len(self.estimators_))
        return active, [getattr(self.estimators_[k], method)(X, **kwargs) for k in active]

    @available_if(_is_classifier_selector)
    def predict_proba(self, X):
        """Model-averaged class probabilities ``sum_k p_k p(y | x, M_k)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        weights = getattr(self, "model_probabilities_", None)
        active, proba = self._candidate_outputs("predict_proba", X, weights)
        return mix_proba(self.model_probabilities_[active], np.stack(proba))

    @available_if(_is_classifier_selector)
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    @available_if(_is_supervised_selector)
    def predict(self, X, return_std=False):
        """Model-averaged prediction.

        Classifiers: the class with the highest averaged probability.
        Regressors: the mean of the mixture of the candidates' predictive
        distributions, and with ``return_std`` its standard deviation
        (within-model plus between-model variance).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Regressors only.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        std : ndarray of shape (n_samples,)
            Only when ``return_std`` is True.
        """
        check_is_fitted(self, "estimators_")
        if get_tags(self.estimators_[0]).estimator_type == "classifier":
            if return_std:
                raise ValueError("return_std is only available with regressor candidates")
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        active, outputs = self._candidate_outputs("predict", X, self.model_probabilities_, return_std=True)
        means = np.stack([mean for mean, _ in outputs])
        stds = np.stack([std for _, std in outputs])
        mean, std = mix_normal(self.model_probabilities_[active], means, stds)
        return (mean, std) if return_std else mean

    @available_if(_is_density_selector)
    def score_samples(self, X):
        """Log density of the model average, ``log sum_k p_k p(x | M_k)``, per sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_density : ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "estimators_")
        log_p = self.log_model_probabilities_
        active, outputs = self._candidate_outputs("score_samples", X, np.where(np.isfinite(log_p), 1.0, 0.0))
        return mix_log_density(log_p[active], np.stack(outputs))

    def score(self, X, y=None):
        """Accuracy (classifiers), R^2 (regressors) or mean log density (density estimators) of the average.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Targets; ignored for density estimators.

        Returns
        -------
        score : float
        """
        check_is_fitted(self, "estimators_")
        kind = get_tags(self.estimators_[0]).estimator_type
        if kind == "density_estimator":
            return float(np.mean(self.score_samples(X)))
        if kind == "classifier":
            return float(accuracy_score(y, self.predict(X)))
        return float(r2_score(y, self.predict(X)))

    # -- results by candidate name -----------------------------------------------------------
    @property
    def results_(self):
        """Results by candidate, a dict of arrays in the manner of ``cv_results_``.

        One entry per column, each an array of shape ``(n_candidates,)`` in the
        order of ``estimators``, so ``pandas.DataFrame(selector.results_)`` is
        the table: ``name``, ``log_evidence``, ``log_evidence_std``,
        ``log_evidence_per_datum`` (divided by ``n_samples_seen_``),
        ``log_model_probability`` and its standard error
        ``log_model_probability_std``, ``model_probability`` and
        ``model_probability_std``, ``backend``, ``rank`` (1 for the most
        probable) and ``checks`` (the names in ``evidence_checks_``, joined by
        commas; empty when none). :meth:`summary` prints it.

        Returns
        -------
        results : dict of str -> ndarray of shape (n_candidates,)
        """
        check_is_fitted(self, "estimators_")
        return selection_results(list(self.named_estimators_), self.log_evidences_, self.log_evidence_stds_,
                                 self.log_model_probabilities_, self.model_probabilities_std_,
                                 self.n_samples_seen_, self.backend, getattr(self, "evidence_checks_", None))

    def summary(self, order="rank"):
        """The results as an aligned text table, best candidate first.

        A probability below 1e-300, or whose error exceeds it, is printed as an
        upper bound (``< 1e-16``): the log probability plus two of its
        standard errors, rounded up to a power of ten. When the candidates
        differ in the input columns they use (feature subsets), a second table
        follows with each feature's inclusion probability and its error
        (``feature_inclusion_probabilities_``), most probable first; columns
        are named by ``feature_names_in_``, else by the single-column parts of
        the candidates' ``ColumnTransformer`` (as
        :func:`~evidence_select.selection.feature_subset_candidates` names
        them), else ``x0, x1, ...``.

        Parameters
        ----------
        order : {"rank", "input"}, default="rank"
            Rows by rank or in the order of ``estimators``.

        Returns
        -------
        text : str

        Examples
        --------
        >>> from evidence_select import BayesianLinearRegressor, EvidenceModelSelector
        >>> from evidence_select.datasets import make_linear_regression
        >>> data = make_linear_regression(1000, noise_variance=1.0, random_state=0)
        >>> selector = EvidenceModelSelector(
        ...     [(f"noise={v}", BayesianLinearRegressor(noise_variance=v, n_particles=20)) for v in (0.5, 1.0)],
        ...     random_state=0).fit(data.X, data.y)
        >>> print(selector.summary())  # doctest: +ELLIPSIS
        rank  candidate  log evidence  +/- std  per datum  probability...backend
           1  noise=1.0  ...  sgais
           2  noise=0.5  ...  sgais
        >>> selector.results_["rank"].tolist(), selector.results_["name"].tolist()
        ([2, 1], ['noise=0.5', 'noise=1.0'])
        """
        text = format_summary(self.results_, order=order)
        masks = getattr(self, "candidate_features_", None)
        if masks is None or not np.any(masks != masks[:1]):
            return text
        names = (list(map(str, self.feature_names_in_)) if hasattr(self, "feature_names_in_")
                 else column_labels([estimator for _, estimator in self.estimators], self.n_features_in_))
        return f"{text}\n\n" + format_feature_inclusion(names, self.feature_inclusion_probabilities_,
                                                          self.feature_inclusion_probabilities_std_)
