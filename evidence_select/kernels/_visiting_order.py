"""The order in which :func:`~evidence_select.kernels._ellipsoid.ellipsoid_sample` visits each chain's candidates,
built only as far as the chain's walk goes.

Each chain visits its candidates and its current point in descending order of the keys ``log w + G`` (``w`` the
weight ``pi / q``, ``G`` a standard Gumbel draw: a draw without replacement with probabilities proportional to the
weights), and stops at the first one inside the constraint, after a few visits where the move pays. Sorting every
chain's thousands of keys, and weighing every candidate exactly (a union of ellipsoids counts the ellipsoids that
hold each), costs more than the walk. Here each key has a bound computed from the candidate's prior alone
(``proposal.log_weight_bound``: the union's weight is the prior over a count of at least one), and a chain's
prefix is ranked from its candidates of largest bound only: a candidate whose exact key exceeds the largest bound
left out is certainly above every candidate left out, so those candidates, sorted, are the order's true first
entries. A chain that walks past them ranks more. The order is the full sort's (the keys are continuous, so they
do not tie), and so are the moves, bit for bit.
"""

import numpy as np

__all__ = ["VisitingOrder"]

#: Candidates a chain ranks first: at least this many, or this share of its candidates.
FIRST_RANKED = 32
FIRST_RANKED_SHARE = 1.0 / 64.0
#: Factor on the candidates ranked when a chain walks past its ranked prefix.
RANK_GROWTH = 4


class VisitingOrder:
    """Each chain's candidates (columns ``0 .. N-1``) and current point (column ``N``) in descending key order.

    Parameters
    ----------
    bounds : ndarray of shape (n_chains, N + 1)
        Upper bounds of the keys (``-inf`` where the weight is 0); the current point's column holds its key.
    exact_keys : callable
        ``(rows, columns) -> keys`` for index arrays of one shape, each at most its bound (rounding included).

    Examples
    --------
    >>> import numpy as np
    >>> keys = np.random.default_rng(0).normal(size=(3, 200))
    >>> order = VisitingOrder(keys + 0.5, lambda rows, columns: keys[rows, columns])
    >>> full = np.argsort(-keys, axis=1, kind="stable")
    >>> all(bool(np.all(order.at(np.arange(3), rank) == full[:, rank])) for rank in range(200))
    True
    """

    def __init__(self, bounds, exact_keys):
        self._bounds, self._exact_keys = bounds, exact_keys
        n_chains, n_columns = bounds.shape
        self._ranked = np.zeros(n_chains, dtype=np.int64)  # candidates each chain has ranked
        self._length = np.zeros(n_chains, dtype=np.int64)  # its certain prefix
        self._prefix = np.empty((n_chains, 0), dtype=np.int64)
        self._rank(np.arange(n_chains), max(FIRST_RANKED, int(FIRST_RANKED_SHARE * n_columns)))

    def at(self, rows, rank):
        """The column at ``rank`` (0: the first visited) of each chain in ``rows``."""
        if len(rows) == 0:
            return np.empty(0, dtype=np.int64)
        short = rows[self._length[rows] <= rank]
        while len(short):
            self._rank(short, RANK_GROWTH * max(int(np.max(self._ranked[short])), rank + 1))
            short = short[self._length[short] <= rank]
        return self._prefix[rows, rank]

    def _rank(self, rows, n_ranked):
        """Rank the ``n_ranked`` candidates of largest bound of each chain in ``rows``; keep their certain prefix."""
        bounds = self._bounds[rows]
        n_columns = bounds.shape[1]
        if n_ranked >= n_columns:  # every key is ranked: the whole order is certain (-inf keys last, as in the
            top = np.broadcast_to(np.arange(n_columns), bounds.shape)  # full sort, after the current point)
            floor = None
        else:
            part = np.argpartition(-bounds, n_ranked, axis=1)
            top = part[:, :n_ranked]
            floor = bounds[np.arange(len(rows)), part[:, n_ranked]]  # the largest bound left out
        keys = self._exact_keys(np.broadcast_to(rows[:, None], top.shape), top)
        by_key = np.argsort(-keys, axis=1, kind="stable")
        ordered = np.take_along_axis(top, by_key, axis=1)
        certain = (np.ones(ordered.shape, dtype=bool) if floor is None
                   else np.take_along_axis(keys, by_key, axis=1) > floor[:, None])
        width = max(self._prefix.shape[1], ordered.shape[1])
        if width > self._prefix.shape[1]:
            grown = np.full((len(self._prefix), width), -1, dtype=np.int64)
            grown[:, :self._prefix.shape[1]] = self._prefix
            self._prefix = grown
        self._prefix[rows, :ordered.shape[1]] = ordered
        self._ranked[rows] = min(n_ranked, n_columns)
        self._length[rows] = np.sum(certain, axis=1)
