"""Posterior modes that the bridge's chains did not connect: grouping the chains, and a census of the modes.

Chains started in different places may settle in different modes and
never cross between them. The fraction of chains in each mode then reflects
the modes' basins of attraction, not their masses, so a bridge over the pooled
draws has no valid posterior side. :func:`chain_mode_groups` finds which
chains sample the same mode (their pairwise split R-hat stays small), and
:func:`cell_of` assigns any point to the *cell* of the group whose proposal
density is highest there. The cells partition the parameter space, so
``Z = sum_m Z_m`` with ``Z_m`` the posterior mass in cell ``m``, and each
``Z_m`` is a bridge between ``p 1[cell m]`` and the proposal fitted to that
group: the relative number of chains per mode no longer matters, only that the
chains in a cell sample ``p`` restricted to it.

What no chain found stays invisible. :func:`unseen_mode_fraction` is the
Good-Turing estimate of how often a further chain would land in a mode not yet
seen: the fraction of chains alone in their mode.
"""

import numpy as np

from ..utils._diagnostics import split_rhat

__all__ = ["chain_mode_groups", "unseen_mode_fraction", "cell_of"]


def _pair_rhat(series, i, j):
    return float(np.max(split_rhat(series[[i, j]])))


def chain_mode_groups(series, threshold):
    """Groups of chains that sample the same mode.

    Two chains are linked when the largest rank-normalised split R-hat of the
    pair, over every column of ``series``, is at most ``threshold``; the groups
    are the connected components of these links. When all chains together pass
    the threshold they are one group without pairwise tests.

    Parameters
    ----------
    series : ndarray of shape (n_chains, n_iter, n_series)
        Draws (and, e.g., the log density as a last column) of each chain.
    threshold : float
        Largest pairwise R-hat of chains in one mode.

    Returns
    -------
    groups : list of ndarray of int
        Chain indices per group, ordered by their first chain.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> series = rng.normal(size=(4, 500, 2)) + np.array([0, 0, 9, 9])[:, None, None]
    >>> [g.tolist() for g in chain_mode_groups(series, 1.1)]
    [[0, 1], [2, 3]]
    """
    n_chains = series.shape[0]
    if n_chains == 1 or np.max(split_rhat(series)) <= threshold:
        return [np.arange(n_chains)]
    parent = list(range(n_chains))

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for i in range(n_chains):
        for j in range(i + 1, n_chains):
            if root(i) != root(j) and _pair_rhat(series, i, j) <= threshold:
                parent[root(j)] = root(i)
    roots = np.array([root(k) for k in range(n_chains)])
    return [np.flatnonzero(roots == r) for r in dict.fromkeys(roots)]


def unseen_mode_fraction(groups):
    """Good-Turing estimate of the chance that one more chain finds a mode no chain found: singletons / chains.

    Examples
    --------
    >>> import numpy as np
    >>> unseen_mode_fraction([np.arange(3), np.array([3])])
    0.25
    """
    n_chains = sum(len(g) for g in groups)
    return sum(len(g) == 1 for g in groups) / n_chains


def cell_of(log_q):
    """The cell of each point: the index of the largest of the groups' proposal log densities.

    Parameters
    ----------
    log_q : ndarray of shape (n_groups, n_points)

    Returns
    -------
    cells : ndarray of shape (n_points,)
    """
    return np.argmax(log_q, axis=0)
