"""Constrained-prior slice sampling: the nested-sampling move for any model.

Linear slice sampling ("Approximate inference", Algorithm 4: random slice
vector, randomly placed unit bracket, stepping out with a randomly split budget,
shrinkage) applied to the unnormalised density

    p~(theta) = p(theta) * 1[log L(theta) > log_lik_min]

in the model's unconstrained parameterisation. The slice height is drawn under
the prior density only; the likelihood constraint is an indicator, so a point
is "on the slice" when ``log p(theta) > log h`` *and* ``log L(theta) > log_lik_min``.
The transition leaves the constrained prior invariant for any slice-vector
distribution that does not depend on the current point; here ``v = width * L u``
with ``u`` uniform on the unit sphere and ``L`` a fixed factor (e.g. the Cholesky
factor of the live points' covariance), i.e. whitened random-direction slice
sampling, or, for a fraction ``axis_fraction`` of the moves, ``v = width * s_j e_j``
along a random coordinate axis ``j``. The axis scale ``s_j`` is coordinate ``j``'s
*conditional* standard deviation under ``Sigma = L L^T``, ``1 / sqrt((Sigma^-1)_jj)``:
the extent of the slice along an axis with every other coordinate held fixed.
With correlated coordinates the marginal standard deviation can be orders of
magnitude larger, and a bracket that size spends its budget on shrinkage while
the shared ``width`` adapts to it, shortening the random-direction moves as
well; for independent coordinates the two scales agree. Axis moves reach what random directions in
many dimensions almost never do: one coordinate far out in a heavy tail, or in
its other mode, while the rest stay put (products of heavy-tailed or multimodal
factors, whose constrained prior is spiked along the axes).

Every chain moves at once: stepping out and shrinkage run as masked loops over
all chains still active, with one batched likelihood call per round. The
likelihood is only evaluated where the prior test passes (the prior is cheap).
"""

from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular

from ._constrained import ConstrainedPoints

__all__ = ["SliceInfo", "SliceSettings", "constrained_slice_step", "constrained_slice_sample", "adapt_slice_width"]


class SliceInfo(NamedTuple):
    """Diagnostics of one or more slice steps (totals over chains).

    n_likelihood_calls : int, likelihood evaluations of one parameter vector;
    n_expansions : int, stepping-out moves taken; n_contractions : int,
    bracket shrinkages; n_stuck : int, chains that hit the shrinkage cap and kept
    their current point.
    """

    n_likelihood_calls: int
    n_expansions: int
    n_contractions: int
    n_stuck: int = 0


def _on_slice(points, log_height, log_lik_min, constraint):
    """Slice membership of ``points`` and their log-likelihoods (``-inf`` where not evaluated).

    Returns ``(inside (n,), log_lik (n,), n_calls)``.
    """
    log_prior = np.asarray(constraint.log_prior_fn(points), dtype=float)
    if np.any(np.isnan(log_prior)):
        raise ValueError("log_prior returned NaN during constrained slice sampling")
    prior_ok = log_prior > log_height
    log_lik = np.full(len(points), -np.inf)
    if np.any(prior_ok):
        values = np.asarray(constraint.log_lik_fn(points[prior_ok]), dtype=float)
        if np.any(np.isnan(values)):
            raise ValueError("log_likelihood returned NaN during constrained slice sampling")
        log_lik[prior_ok] = values
    return prior_ok & (log_lik > log_lik_min), log_lik, int(prior_ok.sum())


def _slice_vectors(rng, n_chains, factor, width, axis_fraction):
    """Slice vectors ``width * L u`` (``u`` uniform on the sphere) or, with probability ``axis_fraction``,
    ``width * s_j e_j`` along a random axis (``s_j`` the conditional standard deviation); drawn
    independently of the chains' positions."""
    n_params = factor.shape[0]
    unit = rng.standard_normal((n_chains, n_params))
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    vector = width * (unit * factor if factor.ndim == 1 else unit @ factor.T)
    on_axis = rng.uniform(size=n_chains) < axis_fraction
    if np.any(on_axis):
        scales = np.abs(factor) if factor.ndim == 1 else _conditional_scales(factor)
        axes = rng.integers(0, n_params, size=int(on_axis.sum()))
        vector[on_axis] = 0.0
        vector[np.flatnonzero(on_axis), axes] = width * scales[axes]
    return vector


def _conditional_scales(factor):
    """Conditional standard deviations ``1 / sqrt((L L^T)^{-1}_jj)`` of a lower-triangular factor ``L``.

    ``(L L^T)^{-1} = L^{-T} L^{-1}``, so its diagonal holds the squared column norms of ``L^{-1}``.

    Examples
    --------
    >>> import numpy as np
    >>> factor = np.linalg.cholesky(np.array([[1.0, 0.9], [0.9, 1.0]]))
    >>> _conditional_scales(factor).round(4)  # sqrt(1 - 0.9^2)
    array([0.4359, 0.4359])
    """
    inverse = solve_triangular(factor, np.eye(factor.shape[0]), lower=True)
    return 1.0 / np.sqrt(np.sum(inverse**2, axis=0))


class SliceSettings(NamedTuple):
    """How :func:`constrained_slice_step` moves.

    direction_factor : ndarray of shape (n_params,) or (n_params, n_params)
        Factor ``L`` (diagonal or lower triangular) that shapes the slice vector.
    width : float, default=1.0
        Bracket width along ``L u`` (in units of the factor's scale).
    max_step_out : int, default=10
        Stepping-out budget ``M`` per move, split at random between the two ends.
    max_shrink : int, default=100
        Cap on shrinkage rounds; a chain that reaches it keeps its point (valid,
        a null move), and is counted in ``SliceInfo.n_stuck``.
    axis_fraction : float, default=0.0
        Probability that a chain's move runs along a random coordinate axis
        instead of a whitened random direction.
    """

    direction_factor: np.ndarray
    width: float = 1.0
    max_step_out: int = 10
    max_shrink: int = 100
    axis_fraction: float = 0.0


class _Lines(NamedTuple):
    """Each chain's slice line ``position + t * vector``, its height under the prior and its constraint."""

    position: np.ndarray
    vector: np.ndarray
    log_height: np.ndarray
    log_lik_min: np.ndarray


def constrained_slice_step(rng, points, constraint, settings):
    """One whitened random-direction slice move per chain, under ``log L > constraint.log_lik_min``.

    Parameters
    ----------
    rng : numpy.random.Generator
    points : ConstrainedPoints
        The chains' current points (each must satisfy the constraint) with
        their log prior and full-data log-likelihood.
    constraint : LikelihoodConstraint
        ``log_lik_min`` (float or one per chain), and ``log_prior_fn`` and
        ``log_lik_fn``, each ``(n, n_params) -> (n,)``.
    settings : SliceSettings

    Returns
    -------
    points : ConstrainedPoints
        The new points with their log prior and log-likelihood.
    info : SliceInfo

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.kernels._constrained import ConstrainedPoints, LikelihoodConstraint
    >>> lp = lambda x: -0.5 * np.sum(x**2, axis=1)
    >>> ll = lambda x: -np.sum(x**2, axis=1)
    >>> x = np.zeros((3, 2)); rng = np.random.default_rng(0)
    >>> new, info = constrained_slice_step(rng, ConstrainedPoints(x, lp(x), ll(x)),
    ...                                    LikelihoodConstraint(-1.0, lp, ll), SliceSettings(np.ones(2)))
    >>> bool(np.all(new.log_lik > -1.0))
    True
    """
    position = np.asarray(points.position, dtype=float)
    n_chains = len(position)
    factor = np.asarray(settings.direction_factor, dtype=float)
    # Slice height under the prior density (log space).
    log_height = points.log_prior + np.log(rng.uniform(size=n_chains))
    vector = _slice_vectors(rng, n_chains, factor, settings.width, settings.axis_fraction)
    lines = _Lines(position, vector, log_height,
                   np.broadcast_to(np.asarray(constraint.log_lik_min, dtype=float), (n_chains,)))
    upper = rng.uniform(size=n_chains)
    lower, upper, n_calls, n_expand = _step_out(rng, lines, constraint, upper - 1.0, upper, settings.max_step_out)
    new_points, shrink_calls, n_contract, n_stuck = _shrink(rng, lines, constraint, points, lower, upper,
                                                           settings.max_shrink)
    return new_points, SliceInfo(n_calls + shrink_calls, n_expand, n_contract, n_stuck)


def _step_out(rng, lines, constraint, lower, upper, max_step_out):
    """Stepping out: the budget ``M`` split as ``L ~ UniformInt(0..M)`` below and ``M - L`` above.

    Returns the brackets ``(lower, upper)``, the likelihood calls and the expansions.
    """
    n_calls = n_expand = 0
    budget_low = rng.integers(0, max_step_out + 1, size=len(lower))
    budget_up = max_step_out - budget_low
    active_low, active_up = budget_low > 0, budget_up > 0
    while np.any(active_low) or np.any(active_up):
        idx_low, idx_up = np.flatnonzero(active_low), np.flatnonzero(active_up)
        idx = np.concatenate([idx_low, idx_up])
        ends = np.concatenate([lower[idx_low], upper[idx_up]])
        points = lines.position[idx] + ends[:, None] * lines.vector[idx]
        inside, _, calls = _on_slice(points, lines.log_height[idx], lines.log_lik_min[idx], constraint)
        n_calls += calls
        in_low, in_up = inside[: len(idx_low)], inside[len(idx_low):]
        grow_low, grow_up = idx_low[in_low], idx_up[in_up]
        lower[grow_low] -= 1.0
        upper[grow_up] += 1.0
        budget_low[grow_low] -= 1
        budget_up[grow_up] -= 1
        n_expand += len(grow_low) + len(grow_up)
        active_low[:] = False
        active_up[:] = False
        active_low[grow_low] = budget_low[grow_low] > 0
        active_up[grow_up] = budget_up[grow_up] > 0
    return lower, upper, n_calls, n_expand


def _shrink(rng, lines, constraint, points, lower, upper, max_shrink):
    """Shrinkage: propose uniformly in the bracket, shrink it towards 0 on rejection.

    Returns the new :class:`ConstrainedPoints`, the likelihood calls, the contractions and the chains that
    reached ``max_shrink`` (they keep their points).
    """
    n_calls = n_contract = 0
    new_position = lines.position.copy()
    new_log_prior = np.array(points.log_prior, dtype=float)
    new_log_lik = np.array(points.log_lik, dtype=float)
    active = np.ones(len(lower), dtype=bool)
    for _ in range(max_shrink):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        step = rng.uniform(lower[idx], upper[idx])
        proposed = lines.position[idx] + step[:, None] * lines.vector[idx]
        inside, point_log_lik, calls = _on_slice(proposed, lines.log_height[idx], lines.log_lik_min[idx],
                                                 constraint)
        n_calls += calls
        accepted = idx[inside]
        new_position[accepted] = proposed[inside]
        new_log_lik[accepted] = point_log_lik[inside]
        active[accepted] = False
        rejected, rejected_step = idx[~inside], step[~inside]
        negative = rejected_step < 0
        lower[rejected[negative]] = rejected_step[negative]
        upper[rejected[~negative]] = rejected_step[~negative]
        n_contract += len(rejected)
    if np.any(~active):
        moved = ~active
        new_log_prior[moved] = constraint.log_prior_fn(new_position[moved])
    return ConstrainedPoints(new_position, new_log_prior, new_log_lik), n_calls, n_contract, int(active.sum())


def constrained_slice_sample(rng, points, constraint, settings, n_steps=10):
    """Apply :func:`constrained_slice_step` ``n_steps`` times (fresh directions each time).

    Parameters are those of :func:`constrained_slice_step`; ``n_steps`` is the
    number of slice moves per chain.

    Returns
    -------
    points : ConstrainedPoints
    info : SliceInfo
        Totals over all steps.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.kernels._constrained import ConstrainedPoints, LikelihoodConstraint
    >>> lp = lambda x: -0.5 * np.sum(x**2, axis=1)
    >>> ll = lambda x: -np.sum(x**2, axis=1)
    >>> x = np.zeros((3, 2)); rng = np.random.default_rng(0)
    >>> new, info = constrained_slice_sample(rng, ConstrainedPoints(x, lp(x), ll(x)),
    ...                                      LikelihoodConstraint(-1.0, lp, ll), SliceSettings(np.ones(2)), n_steps=3)
    >>> new.position.shape
    (3, 2)
    """
    totals = np.zeros(4, dtype=np.int64)
    for _ in range(int(n_steps)):
        points, info = constrained_slice_step(rng, points, constraint, settings)
        totals += np.array(info)
    return points, SliceInfo(*(int(t) for t in totals))


def adapt_slice_width(width, info, gain=0.5, bounds=(1e-3, 1e3)):
    """Balance stepping-out against shrinkage by rescaling the bracket width.

    A bracket that needs many expansions is too small; one that needs many
    contractions is too large. ``log width += gain * (e - c) / (e + c)`` with
    ``e``, ``c`` the expansion and contraction counts. Call between NS
    iterations only, so each move has a fixed width.

    Examples
    --------
    >>> adapt_slice_width(1.0, SliceInfo(10, 8, 2)) > 1.0
    True
    """
    total = info.n_expansions + info.n_contractions
    if total == 0:
        return float(width)
    ratio = (info.n_expansions - info.n_contractions) / total
    return float(np.clip(width * np.exp(gain * ratio), *bounds))
