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

from ..utils._random import categorical_draws

__all__ = ["kmeans_plus_plus_centres", "log_permanent", "ConfigurationProposal"]

_LOG_2PI = np.log(2.0 * np.pi)


def kmeans_plus_plus_centres(rng, X, sample_weight, n_components, n_init):
    """``n_init`` independent k-means++ seedings of ``n_components`` centres on weighted rows.

    The first centre is a row drawn by weight, each further one by weight times
    the squared distance (per-feature scaled) to the nearest centre so far.
    Returns ``(centres (n_init, K, d), feature_variances (d,))``, the second
    being the weighted variance of each feature.
    """
    p = sample_weight / np.sum(sample_weight)
    centre = p @ X
    scale = np.maximum(p @ (X - centre) ** 2, 1e-12)
    centres = [X[categorical_draws(rng.random(n_init), np.broadcast_to(p, (n_init, len(X))))]]
    d2 = None  # (n_init, n): scaled squared distance to the nearest centre so far, updated by the newest one
    for _ in range(1, n_components):
        to_newest = np.sum((X[None] - centres[-1][:, None]) ** 2 / scale, axis=2)
        d2 = to_newest if d2 is None else np.minimum(d2, to_newest, out=d2)
        centres.append(X[categorical_draws(rng.random(n_init), p * d2)])
    return np.stack(centres, axis=1), scale


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
