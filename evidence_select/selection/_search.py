"""A greedy search over feature subsets by evidence: forward, backward or stepwise."""

import logging
import warnings

import numpy as np
from sklearn.utils.validation import check_array

from ..utils import make_generator
from ._features import feature_names, subset_candidate
from ._selector import EvidenceModelSelector

__all__ = ["feature_subset_search", "neighbour_subsets"]

logger = logging.getLogger(__name__)

DIRECTIONS = ("forward", "backward", "stepwise")
#: Parameters of the selectors the search fits (every other one is the search's to set).
SELECTOR_PARAMS = ("backend", "backend_params", "n_jobs", "parallel", "verbose")


def neighbour_subsets(current, n_features, direction, max_size):
    """The subsets one move from ``current`` (a frozenset of columns; None before the first move).

    ``"forward"`` adds one column, ``"backward"`` removes one, ``"stepwise"``
    does either; none is empty or larger than ``max_size``. Before the first
    move a forward or stepwise search starts from every single column, a
    backward one from all of them (``max_size`` does not apply to it).

    Examples
    --------
    >>> sorted(map(sorted, neighbour_subsets(frozenset({0}), 3, "stepwise", 3)))
    [[0, 1], [0, 2]]
    >>> sorted(map(sorted, neighbour_subsets(frozenset({0, 1}), 3, "stepwise", 3)))
    [[0], [0, 1, 2], [1]]
    """
    if current is None:
        if direction == "backward":
            return [frozenset(range(n_features))]
        return [frozenset({j}) for j in range(n_features)]
    moves = []
    if direction in ("forward", "stepwise") and len(current) < max_size:
        moves += [current | {j} for j in range(n_features) if j not in current]
    if direction in ("backward", "stepwise") and len(current) > 1:
        moves += [current - {j} for j in sorted(current)]
    return moves


def _subset_seed(base_seed, subset):
    """The seed of a subset's candidate: the same in every round and in the returned selector."""
    return int(np.random.SeedSequence([base_seed, *sorted(subset)]).generate_state(1)[0])


def _candidates(estimator, subsets, names, base_seed):
    """``(name, EvidencePipeline)`` per subset, each seeded by :func:`_subset_seed`."""
    out = []
    for subset in subsets:
        name, pipeline = subset_candidate(estimator, sorted(subset), names)
        if "random_state" in pipeline[-1].get_params():
            pipeline[-1].set_params(random_state=_subset_seed(base_seed, subset))
        out.append((name, pipeline))
    return out


def _evaluate(estimator, subsets, X, y, names, base_seed, selector_params):
    """Log evidence of each subset, from one selector over all of them (its warnings are left to the final fit,
    which repeats these fits with the same seeds)."""
    selector = EvidenceModelSelector(_candidates(estimator, subsets, names, base_seed), **selector_params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        selector.fit(X, y)
    return dict(zip(subsets, selector.log_evidences_.tolist()))


def _check_search(direction, max_size, n_features, selector_params):
    """``(max_size, selector_params)`` checked, or a ValueError naming the bad argument."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
    max_size = n_features if max_size is None else max_size
    if not (isinstance(max_size, (int, np.integer)) and max_size >= 1):
        raise ValueError(f"max_size must be a positive integer or None; got {max_size!r}")
    params = dict(selector_params or {})
    unknown = sorted(set(params) - set(SELECTOR_PARAMS))
    if unknown:
        raise ValueError(f"selector_params may set {list(SELECTOR_PARAMS)}; got {unknown} (the search sets the "
                         "candidates, the model prior and the seeds)")
    return min(int(max_size), n_features), params


def feature_subset_search(estimator, X, y, *, direction="stepwise", max_size=None, features=None,
                          random_state=None, selector_params=None):
    """Search feature subsets greedily by evidence; return a selector fitted on every subset visited.

    Starting from every single column (``"forward"``, ``"stepwise"``) or from
    all columns (``"backward"``), each round fits the subsets one move from the
    current one (adding a column, removing one, or either) and moves to the one
    with the highest log evidence if it beats the current subset; the search
    stops when none does. Each round costs one fit per neighbour, so a search
    visits O(n_features^2) subsets where :func:`feature_subset_candidates`
    builds 2^n_features.

    Parameters
    ----------
    estimator : estimator
        An online evidence estimator, e.g.
        :class:`~evidence_select.BayesianLinearRegressor` (cloned per subset).
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    direction : {"forward", "backward", "stepwise"}, default="stepwise"
        The moves allowed: add a column, remove one, or either.
    max_size : int, default=None
        Largest subset visited by adding (None: all columns).
    features : sequence of str, default=None
        Column names for the candidates' names; None takes ``X``'s column
        names if it has them, else ``x0, x1, ...``.
    random_state : int, Generator or None, default=None
        Seeds the candidates: each subset's seed is drawn from it and the
        subset, so a subset gets the same evidence in every round and in the
        returned selector.
    selector_params : dict, default=None
        Parameters of the :class:`~evidence_select.EvidenceModelSelector` used
        to fit the subsets: ``backend``, ``backend_params``, ``n_jobs``,
        ``parallel``, ``verbose``.

    Returns
    -------
    selector : EvidenceModelSelector
        Fitted on ``(X, y)`` with one candidate per subset visited (the same
        kind of candidates as :func:`feature_subset_candidates` builds), in the
        order visited. Its ``best_estimator_`` is the subset where the search
        ended (the best visited: every move improved the evidence), and
        ``feature_inclusion_probabilities_`` average over the visited subsets,
        a good approximation when the subsets not visited lie far below the
        mode (as the neighbours of the end point did).

    See Also
    --------
    feature_subset_candidates : All subsets (exact inclusion probabilities).
    sklearn.feature_selection.SequentialFeatureSelector : The same search by cross-validated score.

    Notes
    -----
    Every subset visited is fitted twice: once in its round and once more,
    with the same seed and so with the same evidence, in the returned selector
    (whose fit raises the candidates' warnings once).

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select import BayesianLinearRegressor
    >>> from evidence_select.selection import feature_subset_search
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 4))
    >>> y = X[:, 0] - 0.7 * X[:, 2] + rng.normal(size=600)
    >>> selector = feature_subset_search(BayesianLinearRegressor(n_particles=20), X, y, random_state=0)
    >>> list(selector.named_estimators_)      # the subsets visited
    ['x0', 'x1', 'x2', 'x3', 'x0+x1', 'x0+x2', 'x0+x3', 'x0+x1+x2', 'x0+x2+x3']
    >>> list(selector.named_estimators_)[selector.best_index_]
    'x0+x2'
    >>> selector.feature_inclusion_probabilities_.round(2).tolist()
    [1.0, 0.05, 1.0, 0.05]
    """
    names_given = features if features is not None else getattr(X, "columns", None)
    X = check_array(X, dtype=np.float64)
    n_features, names = feature_names(X.shape[1] if names_given is None else list(names_given))
    if n_features != X.shape[1]:
        raise ValueError(f"features names {n_features} columns; X has {X.shape[1]}")
    max_size, selector_params = _check_search(direction, max_size, n_features, selector_params)
    base_seed = int(make_generator(random_state).integers(0, 2**32))
    log_evidences, visited, current = {}, [], None
    while True:
        moves = neighbour_subsets(current, n_features, direction, max_size)
        new = [subset for subset in dict.fromkeys(moves) if subset not in log_evidences]
        if new:
            log_evidences.update(_evaluate(estimator, new, X, y, names, base_seed, selector_params))
            visited += new
        best = max(moves, key=lambda subset: log_evidences[subset], default=None)
        if best is None or (current is not None and log_evidences[best] <= log_evidences[current]):
            break
        current = best
        logger.info("feature_subset_search: %s (log evidence %.2f)", "+".join(names[j] for j in sorted(current)),
                    log_evidences[current])
    return EvidenceModelSelector(_candidates(estimator, visited, names, base_seed), **selector_params).fit(X, y)
