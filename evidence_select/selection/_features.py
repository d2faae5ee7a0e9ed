"""Candidates over feature subsets, the input columns each candidate uses, and posterior inclusion probabilities.

A feature's posterior inclusion probability is the model average of "the
feature is in the model": ``PIP_j = sum_k p_k [column j used by candidate k]``
over the selector's candidates ``k`` with model probabilities ``p_k``. It is
exact for the candidate set given; with a greedy search it averages over the
subsets visited, which carry nearly all of the posterior when the search ends
at its mode and its neighbours are far below it.
"""

import itertools
import math
from numbers import Integral

import numpy as np
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline

from ._streaming import EvidencePipeline

__all__ = ["MAX_SUBSET_CANDIDATES", "candidate_feature_masks", "column_labels", "feature_names",
           "feature_subset_candidates",
           "format_feature_inclusion", "inclusion_probabilities", "subset_candidate"]

#: Default cap on the candidates :func:`feature_subset_candidates` builds (``max_candidates``).
MAX_SUBSET_CANDIDATES = 10_000


def feature_names(features):
    """``(n_features, names)`` from a feature count or a sequence of names; names default to ``x0, x1, ...``."""
    if isinstance(features, Integral) and not isinstance(features, bool):
        if features < 1:
            raise ValueError(f"features must be a positive number of columns or a sequence of names; got {features}")
        return int(features), [f"x{j}" for j in range(features)]
    names = [str(name) for name in features]
    if not names:
        raise ValueError("features must name at least one column")
    if len(set(names)) != len(names):
        raise ValueError(f"feature names must be unique; got {names}")
    bad = [name for name in names if "__" in name or "+" in name or not name]
    if bad:
        raise ValueError(f"feature names must be non-empty and contain neither '__' (the selector's parameter "
                         f"separator) nor '+' (which joins them in candidate names); got {bad}")
    return len(names), names


def subset_candidate(estimator, columns, names):
    """``(name, EvidencePipeline)``: ``estimator`` (cloned) on the input columns ``columns`` (positions).

    The name joins the columns' ``names`` with ``+``; the pipeline selects the
    columns with a ``ColumnTransformer`` of one ``"passthrough"`` part per
    column, named after it, from which the selector reads back the candidate's
    feature subset and the columns' names (:func:`column_labels`).
    """
    columns = [int(j) for j in columns]
    selection = ColumnTransformer([(names[j], "passthrough", [j]) for j in columns])
    return "+".join(names[j] for j in columns), EvidencePipeline([("columns", selection),
                                                                  ("model", clone(estimator))])


def feature_subset_candidates(estimator, features, *, min_size=1, max_size=None,
                              max_candidates=MAX_SUBSET_CANDIDATES):
    """Candidates for :class:`~evidence_select.EvidenceModelSelector`: ``estimator`` on every subset of the columns.

    Each candidate is an :class:`EvidencePipeline` whose first step keeps one
    subset of the input columns (a ``ColumnTransformer`` selecting by position)
    and whose last step is a clone of ``estimator``. Fitted together in a
    selector, they give each subset's posterior probability and each feature's
    posterior inclusion probability (``feature_inclusion_probabilities_``).

    Parameters
    ----------
    estimator : estimator
        An online evidence estimator, e.g.
        :class:`~evidence_select.BayesianLinearRegressor`.
    features : int or sequence of str
        The number of input columns, or their names (one per column, in
        order; they name the candidates, e.g. ``"bmi+bp"``). Names default to
        ``x0, x1, ...``, as in the selector's summary.
    min_size : int, default=1
        Smallest subset size (at least 1: an estimator needs a column).
    max_size : int, default=None
        Largest subset size; None means all columns.
    max_candidates : int, default=10000
        Refuse to build more candidates than this (their number grows as
        ``2^n_features``); for many columns use :func:`feature_subset_search`.

    Returns
    -------
    candidates : list of (str, EvidencePipeline)
        Subsets by size, then in lexicographic order of their columns.

    See Also
    --------
    feature_subset_search : A greedy search by evidence instead of all subsets.
    EvidenceModelSelector : Fits them and reports ``feature_inclusion_probabilities_``.

    Examples
    --------
    >>> from evidence_select import BayesianLinearRegressor
    >>> from evidence_select.selection import feature_subset_candidates
    >>> candidates = feature_subset_candidates(BayesianLinearRegressor(), ["age", "bmi", "bp"], max_size=2)
    >>> [name for name, _ in candidates]
    ['age', 'bmi', 'bp', 'age+bmi', 'age+bp', 'bmi+bp']
    """
    n_features, names = feature_names(features)
    max_size = n_features if max_size is None else max_size
    if not (isinstance(min_size, Integral) and isinstance(max_size, Integral) and 1 <= min_size <= max_size):
        raise ValueError(f"need integers 1 <= min_size <= max_size; got min_size={min_size!r}, "
                         f"max_size={max_size!r}")
    max_size = min(int(max_size), n_features)
    n_candidates = sum(math.comb(n_features, size) for size in range(min_size, max_size + 1))
    if n_candidates > max_candidates:
        raise ValueError(f"{n_candidates} subsets of {n_features} columns with sizes {min_size}..{max_size} exceed "
                         f"max_candidates={max_candidates}; lower max_size, raise max_candidates, or search "
                         "greedily with feature_subset_search")
    return [subset_candidate(estimator, columns, names) for size in range(min_size, max_size + 1)
            for columns in itertools.combinations(range(n_features), size)]


# -- the input columns a candidate uses ----------------------------------------------------------
def _column_positions(spec, n_features, name):
    """Positions (ndarray of int) selected by one ``ColumnTransformer`` column specification on an array."""
    by_name = not isinstance(spec, slice) and np.asarray(spec).dtype.kind in "USO"
    if callable(spec) or isinstance(spec, str) or by_name:
        raise ValueError(f"candidate {name!r} selects columns by name or by a callable ({spec!r}); the selector "
                         "hands its candidates float arrays, so select columns by position (ints, a slice or a "
                         "boolean mask)")
    try:
        return np.atleast_1d(np.arange(n_features)[spec])
    except IndexError as exc:
        raise ValueError(f"candidate {name!r} selects columns {spec!r}, not all among the {n_features} "
                         "input columns") from exc


def _leading_column_transformer(candidate):
    """The ``ColumnTransformer`` that a pipeline candidate starts with (unfrozen), or None."""
    if not (isinstance(candidate, Pipeline) and len(candidate) > 1):
        return None
    first = candidate.steps[0][1]
    first = first.estimator if isinstance(first, FrozenEstimator) else first
    return first if isinstance(first, ColumnTransformer) else None


def _columns_used(transformer, n_features, name):
    """Boolean mask of the input columns a ``ColumnTransformer`` passes on to its output in any form."""
    used = np.zeros(n_features, dtype=bool)
    named = np.zeros(n_features, dtype=bool)
    for _, part, spec in transformer.transformers:
        positions = _column_positions(spec, n_features, name)
        named[positions] = True
        if not (isinstance(part, str) and part == "drop"):
            used[positions] = True
    if not (isinstance(transformer.remainder, str) and transformer.remainder == "drop"):
        used |= ~named
    return used


def candidate_feature_masks(candidates, n_features, names=None):
    """Which input columns each candidate uses: ndarray of bool, shape ``(n_candidates, n_features)``.

    A pipeline that starts with a ``ColumnTransformer`` (frozen or not) uses the
    columns its non-dropped parts select (and the remainder's, unless it is
    dropped); any other candidate uses every column.

    Parameters
    ----------
    candidates : list of estimators
    n_features : int
    names : list of str, default=None
        The candidates' names, for error messages.

    Returns
    -------
    masks : ndarray of shape (n_candidates, n_features)

    Raises
    ------
    ValueError
        For columns selected by name or by a callable (the selector streams
        float arrays) or out of range.
    """
    names = names if names is not None else [str(k) for k in range(len(candidates))]
    masks = np.ones((len(candidates), n_features), dtype=bool)
    for k, (candidate, name) in enumerate(zip(candidates, names)):
        transformer = _leading_column_transformer(candidate)
        if transformer is not None:
            masks[k] = _columns_used(transformer, n_features, name)
    return masks


def column_labels(candidates, n_features):
    """Names of the input columns from the candidates' leading ``ColumnTransformer`` steps; ``x<j>`` where none.

    A ``"passthrough"`` part that selects exactly one column names it (as
    :func:`feature_subset_candidates` builds them); a column named differently
    by two candidates, or by none, is ``x<j>``.

    Parameters
    ----------
    candidates : list of estimators
    n_features : int

    Returns
    -------
    names : list of str
    """
    found = {}
    for candidate in candidates:
        transformer = _leading_column_transformer(candidate)
        for name, part, spec in ([] if transformer is None else transformer.transformers):
            if isinstance(part, str) and part == "passthrough" and np.ndim(spec) <= 1 and np.size(spec) == 1 \
                    and np.asarray(spec).dtype.kind in "iu":
                found.setdefault(int(np.arange(n_features)[np.ravel(spec)[0]]), set()).add(name)
    return [next(iter(found[j])) if len(found.get(j, ())) == 1 else f"x{j}" for j in range(n_features)]


# -- inclusion probabilities ------------------------------------------------------------------------
def inclusion_probabilities(model_probabilities, masks, log_evidence_stds):
    """Posterior inclusion probability of each feature, and its delta-method standard error.

    Parameters
    ----------
    model_probabilities : ndarray of shape (n_candidates,)
        Posterior model probabilities ``p_k`` (they sum to 1; NaN for an
        unusable candidate, which is left out).
    masks : ndarray of shape (n_candidates, n_features)
        Whether candidate ``k`` uses feature ``j``.
    log_evidence_stds : ndarray of shape (n_candidates,)
        Standard errors ``sigma_k`` of the candidates' log evidences
        (independent).

    Returns
    -------
    pip : ndarray of shape (n_features,)
        ``PIP_j = sum_k p_k masks[k, j]``.
    std : ndarray of shape (n_features,)
        ``sqrt(sum_k (p_k (masks[k, j] - PIP_j) sigma_k)^2)``: with
        ``p_k = softmax(log Z + log prior)_k``,
        ``d PIP_j / d log Z_k = p_k (masks[k, j] - PIP_j)``. First order in
        the errors, like ``model_probabilities_std_``.

    Examples
    --------
    >>> import numpy as np
    >>> masks = np.array([[True, False], [True, True]])
    >>> pip, std = inclusion_probabilities(np.array([0.75, 0.25]), masks, np.array([0.2, 0.2]))
    >>> pip.tolist(), std.round(4).tolist()
    ([1.0, 0.25], [0.0, 0.053])
    """
    p = np.nan_to_num(np.asarray(model_probabilities, dtype=float), nan=0.0)
    indicator = np.asarray(masks, dtype=float)
    pip = p @ indicator
    jacobian = p[:, None] * (indicator - pip[None, :])  # (n_candidates, n_features): d PIP_j / d log Z_k
    sigma = np.where(p > 0, np.asarray(log_evidence_stds, dtype=float), 0.0)
    std = np.sqrt(np.sum((jacobian * sigma[:, None]) ** 2, axis=0))
    return np.clip(pip, 0.0, 1.0), std


def format_feature_inclusion(names, pip, std):
    """Aligned text table of the inclusion probabilities, most probable feature first.

    Parameters
    ----------
    names : list of str
    pip, std : ndarray of shape (n_features,)

    Returns
    -------
    text : str

    Examples
    --------
    >>> import numpy as np
    >>> print(format_feature_inclusion(["age", "bmi"], np.array([0.1234, 1.0]), np.array([0.0102, 0.0])))
    feature  inclusion probability
    bmi      1 +/- 0
    age      0.1234 +/- 0.01
    """
    width = max([len("feature")] + [len(name) for name in names])
    lines = [f"{'feature':<{width}}  inclusion probability"]
    for j in sorted(range(len(names)), key=lambda j: (-pip[j], j)):
        lines.append(f"{names[j]:<{width}}  {pip[j]:.4g} +/- {std[j]:.2g}")
    return "\n".join(lines)
