"""Independent proposals from a bounding ellipsoid, chosen exactly under a likelihood constraint.

Nested sampling's cheapest replacement, where it works, is an independent draw
from the constrained prior ``pi(theta) ~ p(theta) 1[log L(theta) > log_lik_min]``.
Uniform draws from an ellipsoid ``E`` around the live points (Mukherjee, Parkinson
and Liddle, 2006; Feroz and Hobson's MultiNest; dynesty's ``"unif"`` bound) need
about ``|E| / |E & {log L > log_lik_min}|`` likelihood calls each when the
prior is flat. Here the prior need not be flat on ``E``, and ``E`` need not cover
the constrained region: the move is a Markov kernel that leaves ``pi`` invariant
whatever ``E`` is (Tjelmeland, "Using all Metropolis-Hastings proposals to
estimate mean values", 2004; Calderhead, "A general construction for parallelizing
Metropolis-Hastings algorithms", 2014).

From the current point ``x_0`` (inside ``E``), ``n_proposals`` points
``x_1 .. x_N`` are drawn uniformly from ``E``, independently of ``x_0``; the new
state is ``x_j`` with probability proportional to ``pi(x_j) / q(x_j)``, ``q`` the
uniform density on ``E``, i.e. to ``p(x_j) 1[log L(x_j) > log_lik_min]``. With
the current point's index uniform and the others drawn from ``q``, that choice is
a Gibbs update of the index, so ``pi`` restricted to ``E`` is invariant, and a
chain that starts outside ``E`` (where ``q`` is 0) stays put. The choice is made
lazily: the candidates are visited in the order of a draw without replacement
with probabilities proportional to ``p(x_j)`` (the Gumbel-top-k trick: descending
``log p(x_j) + G_j``, ``G_j`` standard Gumbel), and the first one inside the
constraint is taken; the current point is always inside, so the walk ends at the
latest there. Visiting in that order and stopping at the first valid candidate
chooses ``j`` with probability proportional to ``p(x_j) 1[valid]``, and only the
candidates visited cost a likelihood call (the prior is cheap). With many more
valid candidates than one, the new point is an independent draw from ``pi``
restricted to ``E``, for about ``1 / efficiency`` calls.

The proposal may also be uniform on a union of ellipsoids (:class:`EllipsoidUnion`,
MultiNest's and dynesty's ``"multi"`` bound): a point in ``m`` of them has
density ``m / sum(volumes)`` there, so its weight is ``p(x) / m``, and the move
stays exact. :func:`bounding_ellipsoids` splits the live points by 2-means
while the parts' covariances take much less volume than the whole's, so that a
curved or multimodal constrained region is covered tightly.

Every chain moves at once: one batched likelihood call per round, one round per
candidate visited.
"""

from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import digamma

from ..utils._logspace import logsumexp
from ._constrained import ConstrainedPoints
from ._hmc import preconditioner_from_samples
from ._visiting_order import VisitingOrder

__all__ = ["Ellipsoid", "EllipsoidUnion", "PriorProposal", "EllipsoidInfo", "bounding_ellipsoid",
           "bounding_ellipsoids", "ellipsoid_union", "uniform_in_ellipsoid", "ellipsoid_sample", "n_candidates",
           "adapt_efficiency"]


class Ellipsoid(NamedTuple):
    """The ellipsoid ``{centre + factor z : |z| <= 1}``; ``factor`` is lower triangular, ``inverse`` its inverse
    where known (:func:`bounding_ellipsoid` sets it: a nested sampler tests points against its ellipsoids at
    every Markov step)."""

    centre: np.ndarray
    factor: np.ndarray
    inverse: np.ndarray = None

    def contains(self, points):
        """Whether each of ``points`` ``(n, n_params)`` lies in the ellipsoid."""
        centred = np.atleast_2d(points) - self.centre
        if self.inverse is None:
            z = solve_triangular(self.factor, centred.T, lower=True).T
        else:
            z = centred @ self.inverse.T
        return np.einsum("ij,ij->i", z, z) <= 1.0

    def sample(self, rng, shape):
        """Uniform draws, of shape ``shape + (n_params,)``."""
        return uniform_in_ellipsoid(rng, self, shape)

    @property
    def log_volume(self):
        """Log of the volume, less the unit ball's (a constant of the dimension)."""
        return float(np.sum(np.log(np.abs(np.diag(self.factor)))))

    def log_weight(self, points, log_prior):
        """``log(pi / q)`` up to a constant at ``points`` inside, of log prior ``log_prior``: the uniform ``q``
        cancels."""
        return log_prior

    def log_weight_bound(self, log_prior):
        """An upper bound of :meth:`log_weight` from the log prior alone: the weight itself."""
        return log_prior


class PriorProposal(NamedTuple):
    """Candidates drawn from the prior itself: ``pi / q`` is the constraint's indicator, every chain is covered.

    Worth it while the constrained prior holds much of the prior's mass (the first iterations of a run), where
    the prior density varies too much across a bounding ellipsoid for its candidates to be weighted evenly.
    """

    sample_prior: object  # (rng, n_samples) -> (n_samples, n_params)

    def contains(self, points):
        """Every point (the prior's support is the whole space)."""
        return np.ones(len(points), dtype=bool)

    def sample(self, rng, shape):
        """Prior draws, of shape ``shape + (n_params,)``."""
        draws = np.asarray(self.sample_prior(rng, int(np.prod(shape))), dtype=float)
        return draws.reshape(tuple(shape) + (draws.shape[-1],))

    def log_weight(self, points, log_prior):
        """``log(pi / q)`` up to a constant: 0 (the prior cancels), ``-inf`` where the prior vanishes."""
        return np.where(np.isfinite(log_prior), 0.0, -np.inf)

    def log_weight_bound(self, log_prior):
        """An upper bound of :meth:`log_weight` from the log prior alone: the weight itself."""
        return self.log_weight(None, log_prior)


def bounding_ellipsoid(points, factor, enlarge=2.0):
    """The ellipsoid shaped by ``factor`` that holds ``points``, made ``enlarge`` times larger in volume.

    Parameters
    ----------
    points : ndarray of shape (n_points, n_params)
    factor : ndarray of shape (n_params, n_params)
        Lower-triangular factor of the points' covariance (the shape).
    enlarge : float, default=2.0
        Factor on the volume of the smallest such ellipsoid (at least 1): points
        like these but not among them, and the constrained region between them,
        then lie inside it too with high probability.

    Returns
    -------
    Ellipsoid

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(200, 3))
    >>> e = bounding_ellipsoid(x, np.linalg.cholesky(np.cov(x.T)))
    >>> bool(np.all(e.contains(x)))
    True
    """
    points = np.asarray(points, dtype=float)
    centre = points.mean(axis=0)
    z = solve_triangular(factor, (points - centre).T, lower=True)
    radius = np.sqrt(np.max(np.sum(z**2, axis=0))) * float(enlarge) ** (1.0 / points.shape[1])
    factor = np.asarray(factor, dtype=float)
    return Ellipsoid(centre, radius * factor, _triangular_inverse(factor) / radius)


def _triangular_inverse(factor):
    """The inverse of a lower-triangular ``factor``."""
    return solve_triangular(factor, np.eye(len(factor)), lower=True)


class EllipsoidUnion(NamedTuple):
    """Uniform proposals on the union of ``ellipsoids`` (a tuple of :class:`Ellipsoid`; build it with
    :func:`ellipsoid_union`, which stacks their centres and inverse factors for the tests of many points).

    A draw picks an ellipsoid with probability proportional to its volume, then a
    uniform point in it; a point inside ``m`` of them then has density
    ``m / sum(volumes)``, and its weight ``pi / q`` is ``p(x) / m`` up to a
    constant. A union of one ellipsoid draws and weighs exactly as that ellipsoid.
    """

    ellipsoids: tuple
    centres: np.ndarray  # (n_ellipsoids, n_params)
    inverses: np.ndarray  # (n_ellipsoids, n_params, n_params), each factor's inverse

    def _counts(self, points):
        """How many of the ellipsoids hold each of ``points`` ``(..., n_params)``."""
        points = np.asarray(points, dtype=float)
        flat = points.reshape(-1, points.shape[-1])
        counts = np.empty(len(flat), dtype=np.int64)
        block = max(1, COUNT_BLOCK // len(self.ellipsoids))
        for start in range(0, len(flat), block):
            centred = flat[None, start:start + block] - self.centres[:, None, :]  # (n_ellipsoids, block, n_params)
            z = np.matmul(centred, self.inverses.transpose(0, 2, 1))
            counts[start:start + block] = np.sum(np.einsum("kij,kij->ki", z, z) <= 1.0, axis=0)
        return counts.reshape(points.shape[:-1])

    def contains(self, points):
        """Whether each of ``points`` ``(n, n_params)`` lies in one of the ellipsoids at least."""
        if len(self.ellipsoids) == 1:
            return self.ellipsoids[0].contains(points)
        return self._counts(np.atleast_2d(points)) > 0

    def sample(self, rng, shape):
        """Draws of shape ``shape + (n_params,)``: each from an ellipsoid picked by volume, uniform in it."""
        if len(self.ellipsoids) == 1:
            return self.ellipsoids[0].sample(rng, shape)
        shape = tuple(shape)
        log_volumes = np.array([ellipsoid.log_volume for ellipsoid in self.ellipsoids])
        shares = np.exp(log_volumes - log_volumes.max())
        which = rng.choice(len(shares), size=int(np.prod(shape)), p=shares / shares.sum())
        draws = np.empty((len(which), self.centres.shape[1]))
        # Each ellipsoid's draws fill its rows in increasing order: one stable sort groups them.
        by_ellipsoid = np.argsort(which, kind="stable")
        ends = np.cumsum(np.bincount(which, minlength=len(self.ellipsoids)))
        for ellipsoid, start, end in zip(self.ellipsoids, ends - np.diff(ends, prepend=0), ends):
            draws[by_ellipsoid[start:end]] = ellipsoid.sample(rng, (int(end - start),))
        return draws.reshape(shape + (draws.shape[-1],))

    def sample_uniform(self, rng, n):
        """``n`` draws uniform on the union, of shape ``(n, n_params)``: each of :meth:`sample`'s kept with
        probability ``1 / m``, ``m`` the ellipsoids that hold it."""
        if len(self.ellipsoids) == 1:
            return self.sample(rng, (n,))
        kept = []
        while sum(len(k) for k in kept) < n:
            draws = self.sample(rng, (n,))
            kept.append(draws[rng.uniform(size=n) * self._counts(draws) < 1.0])
        return np.concatenate(kept)[:n]

    def log_weight(self, points, log_prior):
        """``log(pi / q)`` up to a constant at ``points`` inside the union: the log prior less the log of how
        many ellipsoids hold each point."""
        if len(self.ellipsoids) == 1:
            return log_prior
        return log_prior - np.log(self._counts(points))

    def log_weight_bound(self, log_prior):
        """An upper bound of :meth:`log_weight` from the log prior alone: the log prior (every point drawn from
        the union lies in one of its ellipsoids at least)."""
        return log_prior

    def log_prior_mass(self, rng, log_prior_fn, n_draws):
        """Monte Carlo log of the prior mass of the union, less the log volume of the unit ball: the sum of
        the ellipsoids' volumes times the mean of ``p(x) / m`` over ``n_draws`` union draws (``m`` the
        ellipsoids that hold each). Costs prior evaluations only."""
        draws = self.sample(rng, (int(n_draws),))
        log_prior = np.asarray(log_prior_fn(draws), dtype=float)
        log_volume = logsumexp([ellipsoid.log_volume for ellipsoid in self.ellipsoids])
        return log_volume + logsumexp(self.log_weight(draws, log_prior)) - np.log(len(draws))


#: Points tested against all of a union's ellipsoids at once, times the ellipsoids (bounds the temporaries).
COUNT_BLOCK = 65536


def ellipsoid_union(ellipsoids):
    """The :class:`EllipsoidUnion` of ``ellipsoids``."""
    ellipsoids = tuple(ellipsoids)
    inverses = [e.inverse if e.inverse is not None else _triangular_inverse(e.factor) for e in ellipsoids]
    return EllipsoidUnion(ellipsoids, np.array([e.centre for e in ellipsoids]), np.array(inverses))


#: A split of a point set's ellipsoid into its halves' (each split again where that pays) is kept when their
#: volumes sum to less than this share of the whole's (:func:`_split`).
SPLIT_VOLUME = 0.8
#: Lloyd iterations of the 2-means split at most.
MAX_TWO_MEANS_ITERATIONS = 20


def bounding_ellipsoids(points, enlarge=2.0, factor=None, min_points=None):
    """A union of ellipsoids that holds ``points``, each ``enlarge`` times its smallest size in volume.

    The points are split in two by 2-means in the frame their covariance (or
    ``factor``) whitens, each half split in turn, and a split is kept where the
    halves' covariance volumes, after their own splits, sum to less than
    ``SPLIT_VOLUME`` of the whole's (:func:`_split`); each part holds
    ``min_points`` points at least (by default ``2 (n_params + 1)`` and
    ``n_params (n_params + 3) / 2``, the numbers of its mean and covariance, so
    that its shape is not noise: a few hundred live points are split in up to
    ~8 dimensions, never in 16). Each part is then bounded by
    :func:`bounding_ellipsoid`, shaped by its covariance.

    Parameters
    ----------
    points : ndarray of shape (n_points, n_params)
    enlarge : float, default=2.0
        Factor on the volume of each ellipsoid over the smallest that holds its points.
    factor : ndarray of shape (n_params, n_params), default=None
        Lower-triangular factor of the points' covariance (the first split's frame, and the whole's shape
        where it is not split); None: the Cholesky factor of their covariance.
    min_points : int, default=None
        Fewest points an ellipsoid of a split may hold.

    Returns
    -------
    EllipsoidUnion

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(-5.0, 0.3, (100, 2)), rng.normal(5.0, 0.3, (100, 2))])
    >>> union = bounding_ellipsoids(x)
    >>> len(union.ellipsoids), bool(np.all(union.contains(x))), bool(union.contains(np.zeros((1, 2)))[0])
    (2, True, False)
    """
    points = np.asarray(points, dtype=float)
    n_params = points.shape[1]
    min_points = max(2 * (n_params + 1), n_params * (n_params + 3) // 2) if min_points is None else int(min_points)
    factor = _shape_factor(points) if factor is None else factor
    parts, _ = _split(points, factor, min_points)
    return ellipsoid_union([bounding_ellipsoid(part, part_factor, enlarge) for part, part_factor in parts])


def _shape_factor(points):
    """Lower-triangular factor of the covariance of ``points``, shrunk towards its diagonal where they are few."""
    return preconditioner_from_samples(points, dense=True, shrinkage="auto")


def _split(points, factor, min_points):
    """``(parts, log_volume)`` of :func:`bounding_ellipsoids` for ``points``, whose covariance's factor is
    ``factor``: the ``(points, factor)`` of each ellipsoid, and the log of the sum of their covariance volumes.

    Each half is decomposed first and the split kept where the halves' decompositions take less than
    ``SPLIT_VOLUME`` of the whole's volume: the first cut of a parabola separates its bottom from its two arms,
    which only the next cut separates. Volumes are the covariances', corrected for the bias of a sample
    covariance's log determinant (:func:`_covariance_log_volume`), not the bounding ellipsoids': a bounding
    ellipsoid's size follows its farthest point, whose noise, raised to the dimension in a volume, would split a
    single cloud of points in many dimensions. Halves of an ellipsoidal cloud take about 0.6 of the whole's
    volume each, whatever the dimension, and their own halves more again, so such a cloud is never split.
    """
    log_volume = _covariance_log_volume(points)
    if len(points) < 2 * min_points or not np.isfinite(log_volume):
        return [(points, factor)], log_volume
    halves = _two_means(points, factor)
    parts = [points[halves == side] for side in (0, 1)]
    if min(len(part) for part in parts) < min_points:
        return [(points, factor)], log_volume
    (first, first_volume), (second, second_volume) = (_split(part, _shape_factor(part), min_points)
                                                      for part in parts)
    split_volume = np.logaddexp(first_volume, second_volume)
    if not split_volume < np.log(SPLIT_VOLUME) + log_volume:
        return [(points, factor)], log_volume
    return first + second, split_volume


def _covariance_log_volume(points):
    """Half the log determinant of the sample covariance of ``points``, less its expected bias (Wishart: the
    sum over ``i < d`` of ``digamma((n - 1 - i) / 2) + log(2 / (n - 1))``, which falls well below 0 when
    ``n`` is a few times ``d``), or NaN where the covariance is singular."""
    n, d = points.shape
    sign, log_det = np.linalg.slogdet(np.atleast_2d(np.cov(points.T)))
    if sign <= 0:
        return float("nan")
    bias = np.sum(digamma((n - 1 - np.arange(d)) / 2.0)) + d * np.log(2.0 / (n - 1))
    return 0.5 * float(log_det - bias)


def _two_means(points, factor):
    """Labels 0 or 1 of ``points`` by 2-means in the frame ``factor`` whitens (their covariance's factor), started
    from the split at their mean along the covariance's longest axis (no random draw)."""
    centred = points - points.mean(axis=0)
    z = solve_triangular(factor, centred.T, lower=True).T
    _, vectors = np.linalg.eigh(factor @ factor.T)
    labels = (centred @ vectors[:, -1] > 0).astype(np.int64)
    for _ in range(MAX_TWO_MEANS_ITERATIONS):
        if labels.min() == labels.max():
            break
        centres = np.array([z[labels == side].mean(axis=0) for side in (0, 1)])
        new = np.argmin(np.sum((z[:, None, :] - centres[None]) ** 2, axis=2), axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels


def uniform_in_ellipsoid(rng, ellipsoid, shape):
    """Uniform draws from ``ellipsoid``, of shape ``shape + (n_params,)``.

    Examples
    --------
    >>> import numpy as np
    >>> e = Ellipsoid(np.zeros(2), np.eye(2))
    >>> x = uniform_in_ellipsoid(np.random.default_rng(0), e, (1000,))
    >>> bool(np.all(e.contains(x)))
    True
    """
    n_params = len(ellipsoid.centre)
    direction = rng.standard_normal(tuple(shape) + (n_params,))
    radius = rng.uniform(size=tuple(shape) + (1,)) ** (1.0 / n_params)
    direction *= radius / np.sqrt(np.einsum("...i,...i->...", direction, direction))[..., None]
    return ellipsoid.centre + direction @ ellipsoid.factor.T


class EllipsoidInfo(NamedTuple):
    """Totals of :func:`ellipsoid_sample` over chains.

    n_likelihood_calls : int, candidates whose likelihood was evaluated;
    n_valid : int, of those, candidates inside the constraint (each one a chain's
    new point); n_stayed : int, chains inside the ellipsoid whose current point
    was chosen; n_outside : int, chains that started outside the ellipsoid (and
    stayed).
    """

    n_likelihood_calls: int
    n_valid: int
    n_stayed: int
    n_outside: int


def _keys(log_weights, gumbel):
    """Gumbel-top-k keys ``log w + G``; ``-inf`` where the weight is 0 (zero prior density: never chosen)."""
    with np.errstate(invalid="ignore"):
        keys = log_weights + gumbel
    return np.where(np.isfinite(log_weights), keys, -np.inf)


def _candidate_order(rng, proposal, candidates, cand_log_prior, log_weight_current):
    """Per chain, the candidates (``0 .. N-1``) and the current point (``N``) in the order of a draw without
    replacement with probabilities proportional to their weights (Gumbel-top-k), as a :class:`VisitingOrder`:
    each candidate weighed exactly only where its chain's walk may reach it."""
    n_chains, n_proposals = cand_log_prior.shape
    gumbel = rng.gumbel(size=(n_chains, n_proposals + 1))
    current_keys = _keys(log_weight_current, gumbel[:, n_proposals])
    bounds = np.column_stack([_keys(proposal.log_weight_bound(cand_log_prior), gumbel[:, :n_proposals]),
                              current_keys])

    def exact_keys(rows, columns):
        keys = np.empty(rows.shape)
        current = columns == n_proposals
        keys[current] = current_keys[rows[current]]
        rows, columns = rows[~current], columns[~current]
        keys[~current] = _keys(proposal.log_weight(candidates[rows, columns], cand_log_prior[rows, columns]),
                               gumbel[rows, columns])
        return keys

    return VisitingOrder(bounds, exact_keys)


def ellipsoid_sample(rng, points, constraint, ellipsoid, n_proposals):
    """One exact ensemble move of every chain from independent proposals (see the module docstring).

    Parameters
    ----------
    rng : numpy.random.Generator
    points : ConstrainedPoints
        The chains' current points, each inside the constraint.
    constraint : LikelihoodConstraint
        With a float ``log_lik_min`` and a ``log_lik_fn`` returning log-likelihoods.
    ellipsoid : Ellipsoid or PriorProposal
        The proposal: uniform in an :class:`Ellipsoid`, which must not depend on
        the chains' current points (e.g. built from other live points), or the prior.
    n_proposals : int
        Candidates per chain; the chance of keeping the current point falls as
        ``1 / (1 + n_proposals * efficiency)``, and calls grow only with the
        candidates visited.

    Returns
    -------
    points : ConstrainedPoints
    info : EllipsoidInfo

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.kernels._constrained import ConstrainedPoints, LikelihoodConstraint
    >>> lp = lambda x: -0.5 * np.sum(x**2, axis=1)
    >>> ll = lambda x: -np.sum(x**2, axis=1)
    >>> x = np.zeros((3, 2)); rng = np.random.default_rng(0)
    >>> new, info = ellipsoid_sample(rng, ConstrainedPoints(x, lp(x), ll(x)), LikelihoodConstraint(-1.0, lp, ll),
    ...                              Ellipsoid(np.zeros(2), 1.5 * np.eye(2)), 50)
    >>> bool(np.all(new.log_lik > -1.0)) and info.n_valid == 3
    True
    """
    position = np.array(points.position, dtype=float)
    log_prior, log_lik = np.array(points.log_prior, dtype=float), np.array(points.log_lik, dtype=float)
    inside = np.flatnonzero(ellipsoid.contains(position))
    n_params, n_proposals = position.shape[1], int(n_proposals)
    candidates = ellipsoid.sample(rng, (len(inside), n_proposals))
    flat = candidates.reshape(-1, n_params)
    cand_log_prior = np.asarray(constraint.log_prior_fn(flat), dtype=float).reshape(len(inside), n_proposals)
    if np.any(np.isnan(cand_log_prior)):
        raise ValueError("log_prior returned NaN during ellipsoid sampling")
    order = _candidate_order(rng, ellipsoid, candidates, cand_log_prior,
                             ellipsoid.log_weight(position[inside], log_prior[inside]))
    n_calls = n_valid = 0
    active = np.arange(len(inside))  # rows of ``inside`` still walking down their order
    for rank in range(n_proposals + 1):
        choice = order.at(active, rank)
        at_current = choice == n_proposals
        active = active[~at_current]  # reached the current point: it stays
        if len(active) == 0:
            break
        choice = choice[~at_current]
        values = np.asarray(constraint.log_lik_fn(candidates[active, choice]), dtype=float)
        if np.any(np.isnan(values)):
            raise ValueError("log_likelihood returned NaN during ellipsoid sampling")
        n_calls += len(active)
        valid = values > constraint.log_lik_min
        rows, chosen = active[valid], choice[valid]
        position[inside[rows]] = candidates[rows, chosen]
        log_prior[inside[rows]], log_lik[inside[rows]] = cand_log_prior[rows, chosen], values[valid]
        n_valid += len(rows)
        active = active[~valid]
    n_stayed = len(inside) - n_valid
    return (ConstrainedPoints(position, log_prior, log_lik),
            EllipsoidInfo(n_calls, n_valid, n_stayed, len(position) - len(inside)))


#: Candidates per chain when the ellipsoid is worth using: enough that a chain keeps its current point with
#: probability about ``1 / (1 + CANDIDATES_VALID)`` (a kept point is a copy of a live point), at most
#: ``MAX_CANDIDATES`` (their prior densities cost memory and time, not likelihood calls).
CANDIDATES_VALID = 500
MAX_CANDIDATES = 4000
#: The running efficiency's weight on one iteration's measurement (high: an estimate that lags a falling
#: efficiency draws many candidates that are visited in vain).
EFFICIENCY_SMOOTHING = 0.5


def n_candidates(efficiency):
    """Candidates per chain that leave about ``CANDIDATES_VALID`` valid ones at this efficiency.

    Examples
    --------
    >>> n_candidates(0.5), n_candidates(1e-6)
    (1000, 4000)
    """
    return int(min(np.ceil(CANDIDATES_VALID / max(efficiency, 1e-12)), MAX_CANDIDATES))


def adapt_efficiency(efficiency, info):
    """The running fraction of visited candidates inside the constraint, updated by one move's ``info``.

    Examples
    --------
    >>> round(adapt_efficiency(0.5, EllipsoidInfo(10, 1, 0, 0)), 2)
    0.3
    """
    if info.n_likelihood_calls == 0:
        return float(efficiency)
    measured = info.n_valid / info.n_likelihood_calls
    return float((1.0 - EFFICIENCY_SMOOTHING) * efficiency + EFFICIENCY_SMOOTHING * measured)
