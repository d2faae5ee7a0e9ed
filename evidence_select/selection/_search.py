"""A greedy search over feature subsets by evidence: forward, backward or stepwise."""

import logging
from numbers import Real

import numpy as np
from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d

from ..utils import fit_order, make_generator
from ._features import feature_names, subset_candidate
from ._selector import EvidenceModelSelector

__all__ = ["feature_subset_search", "neighbour_subsets"]

logger = logging.getLogger(__name__)

DIRECTIONS = ("forward", "backward", "stepwise")
#: Parameters of the selectors the search fits. The others are the search's: the candidates, their seeds, no model
#: prior, and the online backend (a reference backend's seeds would come from each round's unseeded selector).
SELECTOR_PARAMS = ("n_jobs", "parallel", "verbose")


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


class _Search:
    """The subsets fitted so far, in one selector grown round by round (:meth:`EvidenceModelSelector._merged`)."""

    def __init__(self, estimator, X, y, names, base_seed, selector_params):
        self.estimator, self.X, self.y, self.names = estimator, X, y, names
        self.base_seed, self.selector_params = base_seed, selector_params
        self.selector, self.log_evidences = None, {}

    def fit(self, subsets):
        """Fit the subsets not fitted yet, all in one selector, and add them to the others."""
        new = [subset for subset in dict.fromkeys(subsets) if subset not in self.log_evidences]
        if not new:
            return
        fitted = EvidenceModelSelector(_candidates(self.estimator, new, self.names, self.base_seed), shuffle=False,
                                       **self.selector_params).fit(self.X, self.y)
        self.selector = fitted if self.selector is None else self.selector._merged(fitted)
        self.log_evidences.update(zip(new, fitted.log_evidences_.tolist()))

    def best(self, subsets):
        return max(subsets, key=self.log_evidences.__getitem__, default=None)


def _greedy(search, n_features, direction, max_size):
    """Move to the best neighbour while it beats the current subset; return where the moves end."""
    current = None
    while True:
        moves = neighbour_subsets(current, n_features, direction, max_size)
        search.fit(moves)
        best = search.best(moves)
        if best is None or (current is not None and search.log_evidences[best] <= search.log_evidences[current]):
            return current
        current = best
        logger.info("feature_subset_search: %s (log evidence %.2f)", "+".join(search.names[j] for j in sorted(current)),
                    search.log_evidences[current])


def _widen(search, n_features, direction, max_size, window):
    """Fit the neighbours of every subset within ``window`` nats of the best, until there are none left (Occam's
    window): each round's best may move, so the window is measured from the best so far."""
    expanded = set()
    while True:
        top = max(search.log_evidences.values())
        inside = [subset for subset, value in search.log_evidences.items()
                  if value >= top - window and subset not in expanded]
        if not inside:
            return
        search.fit([move for subset in inside for move in neighbour_subsets(subset, n_features, direction, max_size)])
        expanded.update(inside)


def _check_search(direction, max_size, window, n_features, selector_params):
    """``(max_size, selector_params)`` checked, or a ValueError naming the bad argument."""
    if not (isinstance(window, Real) and window >= 0):
        raise ValueError(f"window must be a non-negative number of nats; got {window!r}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
    max_size = n_features if max_size is None else max_size
    if not (isinstance(max_size, (int, np.integer)) and max_size >= 1):
        raise ValueError(f"max_size must be a positive integer or None; got {max_size!r}")
    params = dict(selector_params or {})
    unknown = sorted(set(params) - set(SELECTOR_PARAMS))
    if unknown:
        raise ValueError(f"selector_params may set {list(SELECTOR_PARAMS)}; got {unknown} (the search sets the "
                         "candidates, the model prior, the seeds and the backend)")
    return min(int(max_size), n_features), params


def feature_subset_search(estimator, X, y, *, direction="stepwise", max_size=None, window=3.0, features=None,
                          random_state=None, selector_params=None):
    """Search feature subsets by evidence, greedily and then through Occam's window; return the fitted selector.

    First a greedy search: starting from every single column (``"forward"``,
    ``"stepwise"``) or from all columns (``"backward"``), each round fits the
    subsets one move from the current one (adding a column, removing one, or
    either) and moves to the one with the highest log evidence while it beats
    the current subset. Then Occam's window (Madigan & Raftery 1994): the
    moves from every subset within ``window`` nats of the best are fitted too,
    until every subset within the window has had its neighbours fitted. The
    greedy part finds the mode in O(n_features^2) fits; the window collects
    the subsets near it that carry the posterior, so that the inclusion
    probabilities stay right when correlated columns stand in for each other
    and no single subset dominates. :func:`feature_subset_candidates` builds
    all 2^n_features subsets instead.

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
        Largest subset reached by adding a column (None: all columns).
    window : float, default=3.0
        Occam's window in nats of log evidence: subsets this close to the best
        have their neighbours fitted (3 nats is a posterior odds of 1 to 20,
        Madigan & Raftery's cut-off). 0 keeps the greedy search alone.
    features : sequence of str, default=None
        Column names, for the candidates' names and the summary's inclusion
        table; None takes ``X``'s column names if it has them, else
        ``x0, x1, ...``.
    random_state : int, Generator or None, default=None
        Seeds the row order and the candidates. The rows are streamed in one
        random order, ``evidence_select.utils.fit_order(random_state,
        len(X))``, in every round (the selectors' ``shuffle`` is off); each
        subset's seed is drawn from ``random_state`` and the subset, so its
        evidence does not depend on when it was visited.
    selector_params : dict, default=None
        Parameters of the :class:`~evidence_select.EvidenceModelSelector` that
        fits the subsets: ``n_jobs``, ``parallel``, ``verbose``. The
        evidences are the online (SGAIS) ones.

    Returns
    -------
    selector : EvidenceModelSelector
        Fitted on the rows of ``(X, y)`` in that order, with ``shuffle=False``
        and one candidate per subset visited (built as
        :func:`feature_subset_candidates` builds them), in the order visited,
        each fitted once: each round's fitted subsets join the others' (the
        selector equals one ``fit`` over all of them). ``best_estimator_`` is
        the best subset visited, and ``feature_inclusion_probabilities_``
        average over the subsets visited: exact up to the posterior mass of
        the subsets never reached, which lie outside the window and are no
        neighbours of any subset inside it.

    See Also
    --------
    feature_subset_candidates : All subsets.
    sklearn.feature_selection.SequentialFeatureSelector : A greedy search by cross-validated score.

    References
    ----------
    .. [1] D. Madigan, A. E. Raftery, "Model Selection and Accounting for Model
       Uncertainty in Graphical Models Using Occam's Window", Journal of the
       American Statistical Association 89 (1994) 1535-1546.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select import BayesianLinearRegressor
    >>> from evidence_select.selection import feature_subset_search
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 4))
    >>> y = X[:, 0] - 0.7 * X[:, 2] + rng.normal(size=600)
    >>> regressor = BayesianLinearRegressor(noise_variance=1.0, prior_scale=1.0, n_particles=20)
    >>> selector = feature_subset_search(regressor, X, y, window=0, random_state=0)
    >>> list(selector.named_estimators_)      # the subsets the greedy search visited
    ['x0', 'x1', 'x2', 'x3', 'x0+x1', 'x0+x2', 'x0+x3', 'x0+x1+x2', 'x0+x2+x3']
    >>> list(selector.named_estimators_)[selector.best_index_]
    'x0+x2'
    >>> selector.feature_inclusion_probabilities_.round(2).tolist()
    [1.0, 0.04, 1.0, 0.06]
    """
    names_given = features if features is not None else getattr(X, "columns", None)
    X = check_array(X, dtype=np.float64)
    n_features, names = feature_names(X.shape[1] if names_given is None else list(names_given))
    if n_features != X.shape[1]:
        raise ValueError(f"features names {n_features} columns; X has {X.shape[1]}")
    max_size, selector_params = _check_search(direction, max_size, window, n_features, selector_params)
    if y is None:
        raise ValueError("feature_subset_search needs targets y: the evidences of density models of different "
                         "columns are densities of different data, which no posterior compares")
    y = column_or_1d(y)
    check_consistent_length(X, y)
    order = fit_order(random_state, len(X))  # one order for every round (the selectors' own shuffle is off)
    search = _Search(estimator, X[order], y[order], names, int(make_generator(random_state).integers(0, 2**32)),
                     selector_params)
    end = _greedy(search, n_features, direction, max_size)
    if window > 0 and end is not None:
        _widen(search, n_features, direction, max_size, window)
    return search.selector
