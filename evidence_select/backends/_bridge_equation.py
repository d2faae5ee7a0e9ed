"""Meng and Wong's optimal bridge equation, its relative mean-square error (the excerpt's Eq. 9), and the
sandwich of importance and reciprocal importance sampling that bounds ``log Z`` from the same values."""

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit

from ..utils._logspace import log_mean_exp, logsumexp


def solve_bridge_equation(log_ratio_post, log_ratio_prop, tol=1e-10, max_iter=1000):
    """Solve Meng and Wong's optimal bridge equation for ``log r`` by a bracketed root search.

    The equation is the score of the logistic regression that tells posterior
    from proposal draws: with ``x = log r``, ``a = log(n_p / n_q)``,

    ``h(x) = sum_p expit(x - a - l1_i) - sum_q expit(l2_j + a - x) = 0``,

    which Meng and Wong's fixed-point iteration also solves. ``h`` rises
    strictly from ``-n_q`` to ``n_p``, so the root is unique, and Brent's
    method on a bracket grown from the importance-sampling estimate reaches it
    in a few tens of evaluations, however little the proposal overlaps the
    posterior; the fixed-point iteration's steps shrink with the overlap and
    may stop far from the root.

    Parameters
    ----------
    log_ratio_post : ndarray of shape (n_p,)
        ``log p - log q`` at posterior draws (``p`` unnormalised, ``q`` normalised).
    log_ratio_prop : ndarray of shape (n_q,)
        ``log p - log q`` at proposal draws (``-inf`` where ``p = 0``).
    tol : float, default=1e-10
        Absolute tolerance on ``log r``.
    max_iter : int, default=1000
        Most iterations of the root search.

    Returns
    -------
    log_r : float
        ``log Z_p`` (``q`` being normalised).
    n_iter : int
        Iterations of the bracket growth and the root search.
    converged : bool
        False when no sign change was found (no finite root: e.g. every
        proposal draw has ``p = 0``) or the search ran out of iterations.

    Examples
    --------
    >>> import numpy as np
    >>> log_r, n_iter, converged = solve_bridge_equation(np.full(5, -2.0), np.full(7, -2.0))
    >>> round(log_r, 6), converged
    (-2.0, True)
    """
    l1 = np.asarray(log_ratio_post, dtype=float)
    l2 = np.asarray(log_ratio_prop, dtype=float)
    shift = np.log(len(l1) / len(l2))
    post_offset, prop_offset = l1 + shift, l2 + shift

    def score(x):
        return float(np.sum(expit(x - post_offset)) - np.sum(expit(prop_offset - x)))

    finite = l2[np.isfinite(l2)]
    start = float(np.median(l1)) if len(finite) == 0 else float(logsumexp(finite) - np.log(len(l2)))
    if len(finite) == 0 or not np.any(l1 < np.inf):
        return start, 0, False  # one of the sums vanishes everywhere: no finite root
    bracket, n_grow = _bracket_root(score, start, max_iter)
    if bracket is None:
        return start, n_grow, False
    root, info = brentq(score, *bracket, xtol=tol, maxiter=max(max_iter - n_grow, 1), full_output=True,
                        disp=False)
    return float(root), n_grow + info.iterations, bool(info.converged)


def _bracket_root(score, start, max_iter):
    """``((lo, hi), n_steps)`` around the root of an increasing ``score``, stepping away from ``start`` with
    doubling steps; ``(None, n_steps)`` when the steps run out first."""
    direction = -1.0 if score(start) > 0 else 1.0
    x, step = start, 1.0
    for n_steps in range(1, max_iter + 1):
        new = x + direction * step
        if direction * score(new) >= 0:  # crossed (or reached) the root
            return (min(x, new), max(x, new)), n_steps
        x, step = new, 2.0 * step
    return None, max_iter


def _f_terms(l1, l2, log_r):
    """Eq. (9)'s ``f2`` at posterior draws and ``f1`` at proposal draws (linear scale, bounded)."""
    n1, n2 = len(l1), len(l2)
    log_s1, log_s2 = np.log(n1 / (n1 + n2)), np.log(n2 / (n1 + n2))
    f2_post = np.exp(-np.logaddexp(log_s1 + l1 - log_r, log_s2))
    f1_prop = np.exp(l2 - log_r - np.logaddexp(log_s1 + l2 - log_r, log_s2))
    return f2_post, f1_prop


def bridge_relative_error(l1, l2, log_r, tau=1.0):
    """Terms of the relative mean-square error of the optimal bridge, Eq. (9) of the excerpt.

    Parameters
    ----------
    l1, l2 : ndarray
        ``log p - log q`` at ``n_p`` posterior and ``n_q`` proposal draws.
    log_r : float
        The bridge estimate of ``log Z``.
    tau : float, default=1.0
        Integrated autocorrelation time of ``f2`` along the posterior chains.

    Returns
    -------
    proposal_term, posterior_term : float
        ``Var_q(f1) / (n_q E_q(f1)^2)`` and ``tau Var_p(f2) / (n_p E_p(f2)^2)``;
        their sum is ``RE^2``, the squared standard error of ``log Z`` to first order.
        The proposal term is infinite when no proposal draw has ``p > 0``.

    Examples
    --------
    >>> import numpy as np
    >>> bridge_relative_error(np.zeros(10), np.zeros(10), 0.0)
    (0.0, 0.0)
    """
    f2_post, f1_prop = _f_terms(np.asarray(l1, float), np.asarray(l2, float), log_r)
    if not np.any(f1_prop > 0):
        return np.inf, float(tau * np.var(f2_post) / np.mean(f2_post) ** 2 / len(f2_post))
    proposal_term = float(np.var(f1_prop) / np.mean(f1_prop) ** 2 / len(f1_prop))
    posterior_term = float(tau * np.var(f2_post) / np.mean(f2_post) ** 2 / len(f2_post))
    return proposal_term, posterior_term


def _sandwich(l1, l2):
    """Stochastic lower and upper bounds of ``log Z`` from the same ``log p - log q`` values as the bridge.

    Importance sampling from ``q``, ``log mean(p / q)`` over proposal draws,
    has ``E[p / q] <= Z``; reciprocal importance sampling from the posterior,
    ``-log mean(q / p)`` over posterior draws, has ``E[q / p] <= 1 / Z``. By
    Markov's inequality each bound overshoots ``log Z`` by more than ``t`` nats
    with probability at most ``exp(-t)``, however poor the proposal and
    however correlated the draws (the lower bound needs nothing of the
    chains, the upper one only that they sample ``p``). With a poor proposal
    both are loose, in their own direction, while the bridge between them may
    be off by any amount.
    """
    return float(log_mean_exp(l2)), float(-log_mean_exp(-np.asarray(l1)))


def _overlap(l1, l2, log_r):
    """``E_p[q / (p' + q)] + E_q[p' / (p' + q)]`` with ``p' = p / Z``: 1 for ``q = p'``, 0 when disjoint."""
    return float(np.mean(expit(-(l1 - log_r))) + np.mean(expit(l2 - log_r)))


def _overlap_draws(l1, l2, log_r, tau=1.0):
    """Effective number of draws in the overlap of posterior and proposal, on which the bridge rests.

    With ``s_i = n_i / (n_1 + n_2)``, ``A_p = sum_p s_2 q / (s_1 p' + s_2 q)``
    over the ``n_1`` posterior draws and ``A_q = sum_q s_1 p' / (s_1 p' + s_2 q)``
    over the ``n_2`` proposal draws count the draws of each kind that look like
    draws of the other; at the root of the bridge equation they are equal.
    The optimal bridge's relative variance is ``(1 - H) / A`` with ``H`` the
    overlap fraction (Meng and Wong, 1996), so Eq. (9)'s error is about
    ``A**-0.5``, an average over those few draws, and when they are few the
    error itself cannot be trusted. The posterior draws count ``tau`` times
    less for their autocorrelation. Returns ``min(A_p / tau, A_q)``.
    """
    l1, l2 = np.asarray(l1, float), np.asarray(l2, float)
    log_s = np.log(len(l1) / len(l2))  # log (s_1 / s_2)
    posterior_side = float(np.sum(expit(-(log_s + l1 - log_r))))
    proposal_side = float(np.sum(expit(log_s + l2 - log_r)))
    return min(posterior_side / max(tau, 1.0), proposal_side)
