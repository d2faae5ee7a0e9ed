"""Global moves for the Gaussian mixture: whole-configuration independence proposals.

A mixture posterior fitted to a stream can sit in a configuration that later
data make a poor local mode (three components that partitioned three clusters
must re-partition seven: two components move and change width *together*).
No move of one component reaches the better configuration, and gradient moves
do not cross the barrier. The proposal here draws a whole configuration at
once from a mixture of approximations around

- configurations fitted to the current target's data by EM (the way to new
  partitions), and
- the other particles of the group (so that a particle's own mode is covered
  too: an independence proposal that does not cover the current state never
  leaves it, since the Hastings ratio carries ``q(current)``).

Each approximation is a Dirichlet on the weights and independent Gaussians on
the means and log variances with the posterior widths of its component
counts. The density is symmetrised over the ``K!`` labellings by summing
over permutations (:func:`log_permanent`, ``O(2^K K)``), so the proposal does
not care which label a component carries.
"""

import functools

import numpy as np
from scipy.special import gammaln

__all__ = ["weighted_em", "log_permanent", "ConfigurationProposal", "draw_rows"]

_LOG_2PI = np.log(2.0 * np.pi)


def weighted_em(rng, X, sample_weight, n_components, *, n_init=4, n_iter=20):
    """Diagonal Gaussian mixtures fitted by EM to weighted rows, from ``n_init`` k-means++ starts.

    Parameters
    ----------
    rng : numpy.random.Generator
    X : ndarray of shape (n_rows, d)
    sample_weight : ndarray of shape (n_rows,)
        Non-negative row weights (tempered counts); their sum is the data size.
    n_components : int
    n_init, n_iter : int
        Starts (fitted together, vectorised) and EM iterations.

    Returns
    -------
    weights : ndarray of shape (n_init, K)
    means : ndarray of shape (n_init, K, d)
    variances : ndarray of shape (n_init, K, d)
    """
    X = np.asarray(X, dtype=float)
    w = np.asarray(sample_weight, dtype=float)
    total = w.sum()
    p = w / total
    centre = p @ X
    scale = np.maximum(p @ (X - centre) ** 2, 1e-12)  # per-feature data variance
    floor = 1e-6 * scale  # a component on one row must not reach zero variance
    K, d = n_components, X.shape[1]
    # k-means++ seeding, each start drawing its own centres (weighted D^2 sampling).
    first = draw_rows(rng, np.broadcast_to(p, (n_init, len(X))))
    centres = X[first][:, None, :]
    for _ in range(1, K):
        d2 = np.min(np.sum((X[None, :, None, :] - centres[:, None]) ** 2 / scale, axis=3), axis=2)
        centres = np.concatenate([centres, X[draw_rows(rng, p * d2)][:, None, :]], axis=1)
    means, variances = centres, np.broadcast_to(scale / K, centres.shape).copy()
    weights = np.full((n_init, K), 1.0 / K)
    X_sq = X**2
    for _ in range(n_iter):
        # log w_k + log N(x; mu_k, diag v_k) up to a constant, as two matrix products over the rows
        # (all starts and components side by side in the columns).
        precision = 1.0 / variances
        const = np.log(weights) - 0.5 * np.sum(np.log(variances) + means**2 * precision, axis=2)
        log_dens = (X @ (means * precision).reshape(-1, d).T - 0.5 * X_sq @ precision.reshape(-1, d).T
                    + const.ravel()).reshape(len(X), n_init, K)
        resp = np.exp(log_dens - log_dens.max(axis=2, keepdims=True))
        resp *= (w[:, None] / resp.sum(axis=2))[:, :, None]  # responsibilities times row weights
        flat = resp.reshape(len(X), n_init * K).T
        counts = np.maximum(resp.sum(axis=0), 1e-300)  # (n_init, K)
        means = (flat @ X).reshape(n_init, K, d) / counts[..., None]
        variances = np.maximum((flat @ X_sq).reshape(n_init, K, d) / counts[..., None] - means**2, floor)
        weights = np.maximum(counts / total, 1e-12)
        weights /= weights.sum(axis=1, keepdims=True)
    return weights, means, variances


def draw_rows(rng, probabilities):
    """One row index per line of ``probabilities`` (unnormalised, shape (n_lines, n_rows))."""
    cdf = np.cumsum(probabilities, axis=1)
    u = rng.random(len(cdf)) * cdf[:, -1]
    return np.minimum(np.sum(cdf < u[:, None], axis=1), cdf.shape[1] - 1)


def log_permanent(log_matrix):
    """``log sum over permutations s of exp(sum_k A[..., k, s(k)])``, by dynamic programming over subsets.

    ``table[S]`` sums over the ways to give the first ``|S|`` rows the columns
    ``S``; the subsets of one size are done together. ``O(2^K K)`` log-additions
    instead of ``K!`` terms, in log space (no cancellation, unlike Ryser's formula).

    Examples
    --------
    >>> import numpy as np
    >>> A = np.log(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> round(float(np.exp(log_permanent(A))), 12)  # 1*4 + 2*3
    10.0
    """
    log_matrix = np.asarray(log_matrix, dtype=float)
    K = log_matrix.shape[-1]
    table = np.empty((1 << K,) + log_matrix.shape[:-2])
    table[0] = 0.0
    for subsets, smaller, columns in _subset_steps(K):
        row = log_matrix[..., len(columns[0]) - 1, :]
        terms = table[smaller] + np.moveaxis(row[..., columns], (-2, -1), (0, 1))  # (subsets, r, ...)
        top = terms.max(axis=1)
        finite_top = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(divide="ignore"):
            table[subsets] = finite_top + np.log(np.sum(np.exp(terms - finite_top[:, None]), axis=1))
    return table[-1]


@functools.lru_cache(maxsize=None)
def _subset_steps(K):
    """Per subset size r = 1..K: the subsets, each minus one of its columns, and those columns."""
    steps = []
    for size in range(1, K + 1):
        subsets = [mask for mask in range(1 << K) if bin(mask).count("1") == size]
        columns = np.array([[col for col in range(K) if mask >> col & 1] for mask in subsets])
        smaller = np.array(subsets)[:, None] ^ (1 << columns)
        steps.append((np.array(subsets), smaller, columns))
    return tuple(steps)


class ConfigurationProposal:
    """Label-symmetric approximations around mixture configurations (one per candidate).

    Candidate ``c`` is ``Dirichlet(n w_c + 1)`` on the weights times
    ``N(m_ck, v_ck / (n w_ck))`` on each mean and ``N(log v_ck, 2 / (n w_ck))``
    on each log variance (the posterior widths of a component holding
    ``n w_ck`` of ``n`` effective rows), with its labels randomly permuted.

    Parameters
    ----------
    weights : ndarray of shape (n_candidates, K)
    means, variances : ndarray of shape (n_candidates, K, d)
    n_effective : float
        Tempered data size of the target (rows times their powers).
    """

    def __init__(self, weights, means, variances, n_effective):
        self.means = np.asarray(means, dtype=float)
        self.log_variances = np.log(variances)
        counts = np.maximum(n_effective * np.asarray(weights, dtype=float), 1.0)[..., None]
        self.alpha = n_effective * np.asarray(weights, dtype=float) + 1.0
        self.mean_var = np.exp(self.log_variances) / counts
        self.log_var_var = np.broadcast_to(2.0 / counts, self.means.shape)
        K = self.alpha.shape[1]
        self._log_norm = (gammaln(self.alpha.sum(axis=1)) - gammaln(self.alpha).sum(axis=1) - gammaln(K + 1)
                          - 0.5 * np.sum(np.log(self.mean_var) + np.log(self.log_var_var), axis=(1, 2))
                          - self.means.shape[1] * self.means.shape[2] * _LOG_2PI)

    def sample(self, rng, which):
        """Draw from candidates ``which`` (n,): ``(weights (n, K), means (n, K, d), log_variances (n, K, d))``."""
        weights = rng.gamma(self.alpha[which])
        weights = np.maximum(weights / weights.sum(axis=1, keepdims=True), np.finfo(float).tiny)
        shape = self.means[which].shape
        means = self.means[which] + np.sqrt(self.mean_var[which]) * rng.standard_normal(shape)
        log_variances = self.log_variances[which] + np.sqrt(self.log_var_var[which]) * rng.standard_normal(shape)
        labels = np.argsort(rng.random(weights.shape), axis=1)  # a uniform relabelling per draw
        rows = np.arange(len(which))[:, None]
        return weights[rows, labels], means[rows, labels], log_variances[rows, labels]

    def log_density(self, log_weights, means, log_variances):
        """Log density of every candidate at every point, shape ``(n_points, n_candidates)``.

        The density is that of the mixture's unconstrained parameters (additive
        log-ratio weights, means, log variances): the Dirichlet's density on the
        simplex times the map's Jacobian ``prod_k w_k``.
        """
        # pair[p, c, k, l]: candidate c's component k evaluated at point p's component l.
        pair = (self.alpha[None, :, :, None] - 1.0) * log_weights[:, None, None, :]
        pair = pair - 0.5 * np.sum((means[:, None, None] - self.means[None, :, :, None]) ** 2
                                   / self.mean_var[None, :, :, None], axis=4)
        pair -= 0.5 * np.sum((log_variances[:, None, None] - self.log_variances[None, :, :, None]) ** 2
                             / self.log_var_var[None, :, :, None], axis=4)
        return self._log_norm[None] + log_permanent(pair) + log_weights.sum(axis=1)[:, None]
