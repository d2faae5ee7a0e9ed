"""Independent proposals from bounding ellipsoids in the prior's unit cube (dynesty's and MultiNest's frame).

A prior with a transform ``theta = T(u)`` from the unit cube (the inverse CDF of
each coordinate, or a Rosenblatt transform) and its inverse ``u = F(theta)`` is
uniform in ``u``: the constrained prior ``p(theta) 1[log L(theta) > log_lik_min]``
is the image of the uniform density on ``{u : log L(T(u)) > log_lik_min}``.
Ellipsoids around the live points' ``u`` then bound that set, and a candidate
uniform in them needs no weight but the constraint's indicator. In the
unconstrained parameters the same ellipsoids would have to be weighed by the
prior density (:mod:`._ellipsoid`), and where the prior falls steeply across
them (an informative prior, a box prior through the sigmoid map) the candidates
that the weights put first lie on the side where the prior is high, mostly
outside the constraint: each valid draw costs many more likelihood calls.

Each chain inside the ellipsoids draws candidates uniform on their union
(:meth:`~evidence_select.kernels._ellipsoid.EllipsoidUnion.sample_uniform`: from
an ellipsoid picked by volume, kept with probability ``1 / m``, ``m`` the number
of ellipsoids that hold it), one per round, until one is valid, at most
``n_proposals``; a chain whose candidates all fail keeps its point. The move is
then a mixture of staying and an independent draw from the constrained prior
restricted to the union, so it leaves that restriction invariant (the weighted
choice of :func:`~evidence_select.kernels._ellipsoid.ellipsoid_sample` among
candidates of equal weight). A candidate outside the cube has zero prior mass
and costs no likelihood call; chains outside the ellipsoids stay where they are.
"""

from typing import NamedTuple

import numpy as np

from ._constrained import ConstrainedPoints
from ._ellipsoid import EllipsoidInfo, bounding_ellipsoids

__all__ = ["CubeEllipsoids", "cube_ellipsoids", "cube_ellipsoid_sample"]

#: Live points whose cube coordinates come within this of a face are not given cube ellipsoids: near ``u = 1``
#: a double keeps ~16 digits of ``1 - u``, and the transform back loses the tail the point came from.
CUBE_MARGIN = 1e-10


class CubeEllipsoids(NamedTuple):
    """Uniform proposals on a union of ellipsoids in the unit cube of a prior transform.

    ``union`` is an :class:`~evidence_select.kernels._ellipsoid.EllipsoidUnion` in
    cube coordinates; ``prior_transform`` maps ``(n, n_params)`` cube points to
    the model's parameters and ``prior_cdf`` maps parameters back.
    """

    union: object
    prior_transform: object
    prior_cdf: object

    @property
    def ellipsoids(self):
        """The ellipsoids of the union, in cube coordinates."""
        return self.union.ellipsoids

    def contains(self, theta):
        """Whether each of ``theta`` ``(n, n_params)`` maps into the cube and one of the ellipsoids."""
        u = np.asarray(self.prior_cdf(np.atleast_2d(theta)), dtype=float)
        return _in_cube(u, 0.0) & self.union.contains(u)

    def log_prior_mass(self, rng, log_prior_fn, n_draws):
        """Monte Carlo log of the prior mass of the union (its volume inside the cube), less the log volume of
        the unit ball, as :meth:`~evidence_select.kernels._ellipsoid.EllipsoidUnion.log_prior_mass` (whose
        prior here is uniform on the cube: ``log_prior_fn`` is not needed)."""
        return self.union.log_prior_mass(rng, lambda u: np.where(_in_cube(u, 0.0), 0.0, -np.inf), n_draws)


def _in_cube(u, margin):
    """Whether each row of ``u`` lies inside the open cube ``(margin, 1 - margin)^n_params``."""
    return np.all((u > margin) & (u < 1.0 - margin), axis=1)


def cube_ellipsoids(points, prior_transform, prior_cdf, enlarge=2.0):
    """The :class:`CubeEllipsoids` bounding ``points`` (parameters) in the cube, or None where one of them maps
    within ``CUBE_MARGIN`` of the cube's faces (or off it).

    The ellipsoids are :func:`~evidence_select.kernels._ellipsoid.bounding_ellipsoids` of the points' cube
    coordinates, each ``enlarge`` times its smallest volume.
    """
    u = np.asarray(prior_cdf(np.asarray(points, dtype=float)), dtype=float)
    if not np.all(_in_cube(u, CUBE_MARGIN)):
        return None
    return CubeEllipsoids(bounding_ellipsoids(u, enlarge), prior_transform, prior_cdf)


def cube_ellipsoid_sample(rng, points, constraint, proposal, n_proposals):
    """One exact move of every chain from candidates uniform in ``proposal``'s cube ellipsoids (module docstring).

    Parameters and returns as :func:`~evidence_select.kernels._ellipsoid.ellipsoid_sample`; ``proposal`` is a
    :class:`CubeEllipsoids`, ``n_proposals`` the most candidates a chain draws. Chains that start outside it stay
    where they are.
    """
    position = np.array(points.position, dtype=float)
    log_prior, log_lik = np.array(points.log_prior, dtype=float), np.array(points.log_lik, dtype=float)
    inside = np.flatnonzero(proposal.contains(position))
    active = inside  # chains still drawing, one candidate per round
    n_calls = 0
    for _ in range(int(n_proposals)):
        if len(active) == 0:
            break
        u = proposal.union.sample_uniform(rng, len(active))
        theta, values = np.full(u.shape, np.nan), np.full(len(active), -np.inf)
        in_cube = _in_cube(u, 0.0)
        if np.any(in_cube):
            theta[in_cube] = proposal.prior_transform(u[in_cube])
            in_cube &= np.all(np.isfinite(theta), axis=1)  # a transform that overflowed: no prior mass here
        if np.any(in_cube):
            values[in_cube] = constraint.log_lik_fn(theta[in_cube])
        if np.any(np.isnan(values)):
            raise ValueError("log_likelihood returned NaN during ellipsoid sampling")
        n_calls += int(np.sum(in_cube))
        valid = values > constraint.log_lik_min
        if np.any(valid):
            chosen = active[valid]
            position[chosen], log_lik[chosen] = theta[valid], values[valid]
            log_prior[chosen] = np.asarray(constraint.log_prior_fn(theta[valid]), dtype=float)
        active = active[~valid]
    n_valid = len(inside) - len(active)
    return (ConstrainedPoints(position, log_prior, log_lik),
            EllipsoidInfo(n_calls, n_valid, len(active), len(position) - len(inside)))
