"""The ellipsoid move leaves the constrained prior invariant, whatever the ellipsoid covers.

Target: a standard normal prior in 2-d under ``log L = -|x|^2 > -R^2``, i.e. the
normal truncated to the disk of radius ``R``; ``|x|^2`` then has the CDF
``(1 - exp(-s / 2)) / (1 - exp(-R^2 / 2))``. The chains start from exact draws;
after the moves they must still follow it (KS tests, p above 1e-3 on seeded
draws), with most chains moved. The ellipsoid is off-centre and covers only part
of the disk, and the prior varies across it, so a move that weighted its
candidates evenly, or let chains outside the ellipsoid move into it, would
fail (checked by breaking the kernel both ways).

The cube move (:mod:`evidence_select.kernels._cube`) is held to the same test with the prior transform
``x = Phi^-1(u)``, under which the constrained prior is uniform on the disk's image in the unit cube; its
ellipsoids cover part of that image, overlap and reach out of the cube, so a move that did not thin its union
draws by the ellipsoids that hold them, or let chains outside them move, would fail (checked both ways).
"""

import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtr, ndtri

from evidence_select.kernels._constrained import ConstrainedPoints, LikelihoodConstraint
from evidence_select.kernels._cube import CubeEllipsoids, cube_ellipsoid_sample, cube_ellipsoids
from evidence_select.kernels._ellipsoid import (Ellipsoid, PriorProposal, bounding_ellipsoid, bounding_ellipsoids,
                                                ellipsoid_sample, ellipsoid_union, uniform_in_ellipsoid)

RADIUS = 2.0
N_CHAINS = 20000


def _log_prior(x):
    return -0.5 * np.sum(x**2, axis=1) - np.log(2 * np.pi)


def _log_lik(x):
    return -np.sum(x**2, axis=1)


def _exact_draws(rng, n):
    x = rng.standard_normal((4 * n, 2))
    return x[np.sum(x**2, axis=1) < RADIUS**2][:n]


def _radius_cdf(s):
    return (1.0 - np.exp(-0.5 * s)) / (1.0 - np.exp(-0.5 * RADIUS**2))


# Two overlapping ellipsoids that cover part of the disk: a point in both is proposed twice as often, so a move that
# did not divide its weight by the ellipsoids that hold it would crowd the overlap (checked by breaking it).
OVERLAPPING = ellipsoid_union([Ellipsoid(np.array([0.8, 0.0]), np.diag([1.5, 1.0])),
                               Ellipsoid(np.array([-0.6, 0.4]), np.array([[1.2, 0.0], [0.5, 1.0]]))])


def _cube(*ellipsoids):
    return CubeEllipsoids(ellipsoid_union(ellipsoids), ndtri, ndtr)


# In the cube, the disk's image spans about (0.023, 0.977) in each coordinate.
CUBE_PARTIAL = _cube(Ellipsoid(np.array([0.6, 0.5]), np.diag([0.4, 0.35])))
CUBE_OVERLAPPING = _cube(Ellipsoid(np.array([0.65, 0.5]), np.diag([0.4, 0.35])),
                         Ellipsoid(np.array([0.35, 0.55]), np.array([[0.3, 0.0], [0.1, 0.35]])))


@pytest.mark.parametrize("proposal, n_proposals", [
    (Ellipsoid(np.array([0.6, 0.0]), np.diag([1.8, 1.2])), 20), (OVERLAPPING, 20), (OVERLAPPING, 200),
    (PriorProposal(lambda rng, n: rng.standard_normal((n, 2))), 20), (CUBE_PARTIAL, 20), (CUBE_OVERLAPPING, 20)],
    ids=["partial_ellipsoid", "overlapping_ellipsoids", "overlapping_ellipsoids_ranked_lazily", "prior",
         "cube_partial_ellipsoid", "cube_overlapping_ellipsoids"])
def test_constrained_prior_is_invariant(proposal, n_proposals):
    move = cube_ellipsoid_sample if isinstance(proposal, CubeEllipsoids) else ellipsoid_sample
    rng = np.random.default_rng(0)
    x = _exact_draws(rng, N_CHAINS)
    points = ConstrainedPoints(x, _log_prior(x), _log_lik(x))
    constraint = LikelihoodConstraint(-RADIUS**2, _log_prior, _log_lik)
    inside = proposal.contains(x)
    for _ in range(3):
        points, info = move(rng, points, constraint, proposal, n_proposals=n_proposals)
        assert info.n_outside == np.sum(~inside)
    new = points.position
    np.testing.assert_array_equal(new[~inside], x[~inside])  # outside the ellipsoid: left where they were
    assert np.mean(np.any(new != x, axis=1)[inside]) > 0.9
    assert np.all(points.log_lik > -RADIUS**2)
    np.testing.assert_allclose(points.log_prior, _log_prior(new))
    assert stats.kstest(np.sum(new**2, axis=1), _radius_cdf).pvalue > 1e-3
    # The first coordinate: its law under the truncated normal, from a large exact sample.
    assert stats.ks_2samp(new[:, 0], _exact_draws(rng, 4 * N_CHAINS)[:, 0]).pvalue > 1e-3


def test_visits_only_candidates_up_to_the_first_valid():
    # Half the ellipsoid's volume lies in the constrained region, more than half of its candidates' prior weight
    # (the prior peaks inside): under 2 likelihood calls per moved chain, not the 200 candidates.
    rng = np.random.default_rng(1)
    x = np.zeros((500, 2))
    points = ConstrainedPoints(x, _log_prior(x), _log_lik(x))
    ellipsoid = Ellipsoid(np.zeros(2), np.sqrt(2.0) * RADIUS * np.eye(2))
    _, info = ellipsoid_sample(rng, points, LikelihoodConstraint(-RADIUS**2, _log_prior, _log_lik), ellipsoid, 200)
    assert info.n_valid + info.n_stayed == 500 and info.n_stayed < 10
    assert 1.0 < info.n_likelihood_calls / info.n_valid < 2.0


def test_bounding_ellipsoid_and_uniform_draws():
    rng = np.random.default_rng(2)
    points = rng.standard_normal((300, 3)) @ np.array([[2.0, 0, 0], [1.0, 0.5, 0], [0, 0, 0.1]])
    factor = np.linalg.cholesky(np.cov(points.T))
    tight, loose = bounding_ellipsoid(points, factor, 1.0), bounding_ellipsoid(points, factor, 8.0)
    assert np.all(tight.contains(points))
    np.testing.assert_allclose(loose.factor, 2.0 * tight.factor)  # 8 times the volume in 3-d
    draws = uniform_in_ellipsoid(rng, tight, (4000,))
    assert np.all(tight.contains(draws)) and not np.all(tight.contains(0.9 * loose.sample(rng, (4000,))))
    # Uniform in the ellipsoid: the whitened radius cubed is uniform on (0, 1).
    z = np.linalg.solve(tight.factor, (draws - tight.centre).T)
    assert stats.kstest(np.sum(z**2, axis=0) ** 1.5, "uniform").pvalue > 1e-3


def test_bounding_ellipsoids_split_modes_and_ridges_but_not_a_cloud():
    rng = np.random.default_rng(3)
    cloud = rng.standard_normal((300, 3)) @ np.array([[2.0, 0, 0], [1.0, 0.5, 0], [0, 0, 0.1]])
    one = bounding_ellipsoids(cloud)
    assert len(one.ellipsoids) == 1  # an ellipsoidal cloud's halves take more volume than the whole
    # ... in many dimensions too, where the halves' sample covariances read smaller than the whole's by their
    # fewer points (the bias the volumes are corrected for) and their bounding radii by their farthest points
    # (parts of 34 points allowed, fewer than the default asks for in 16 dimensions).
    assert all(len(bounding_ellipsoids(rng.standard_normal((190, 16)), min_points=34).ellipsoids) == 1
               for _ in range(10))
    # Two modes: one ellipsoid each, the gap between them left out.
    modes = np.concatenate([rng.normal(-4.0, 0.3, (150, 2)), rng.normal(4.0, 0.3, (150, 2))])
    split = bounding_ellipsoids(modes)
    assert len(split.ellipsoids) >= 2 and np.all(split.contains(modes)) and not split.contains([[0.0, 0.0]])[0]
    # A curved ridge: several ellipsoids along it, together a small share of the one ellipsoid's volume, holding
    # all its points and nearly all of the ridge's mass.
    def ridge(n):
        t = rng.uniform(-2.0, 2.0, n)
        return np.column_stack([t, t**2 + 0.1 * rng.standard_normal(n)])
    points = ridge(200)
    union, single = bounding_ellipsoids(points), bounding_ellipsoid(points, np.linalg.cholesky(np.cov(points.T)))
    volumes = np.exp([e.log_volume for e in union.ellipsoids])
    assert len(volumes) > 2 and volumes.sum() < 0.25 * np.exp(single.log_volume)
    assert np.all(union.contains(points)) and np.mean(union.contains(ridge(20000))) > 0.95


def test_a_union_of_one_ellipsoid_draws_as_that_ellipsoid():
    ellipsoid = Ellipsoid(np.array([0.5, -1.0]), np.array([[2.0, 0.0], [0.3, 0.5]]))
    union = ellipsoid_union([ellipsoid])
    np.testing.assert_array_equal(union.sample(np.random.default_rng(4), (50, 3)),
                                  ellipsoid.sample(np.random.default_rng(4), (50, 3)))
    x = np.random.default_rng(5).normal(size=(100, 2))
    np.testing.assert_array_equal(union.contains(x), ellipsoid.contains(x))
    np.testing.assert_array_equal(union.log_weight(x, np.arange(100.0)), np.arange(100.0))


def test_union_draws_have_the_density_of_the_ellipsoids_that_hold_them():
    # Two overlapping unit disks, each drawn by its area: a point in both has twice the density of a point in one,
    # so a draw lands in the overlap with probability 2 |overlap| / (2 pi).
    union = ellipsoid_union([Ellipsoid(np.array([0.0, 0.0]), np.eye(2)), Ellipsoid(np.array([1.0, 0.0]), np.eye(2))])
    draws = union.sample(np.random.default_rng(6), (40000,))
    assert np.all(union.contains(draws))
    in_both = np.mean(union._counts(draws) == 2)
    lens = 2 * np.arccos(0.5) - 0.5 * np.sqrt(3.0)  # area of the overlap of two unit disks at distance 1
    share = 2 * lens / (2 * np.pi)
    assert abs(in_both - share) < 4 * np.sqrt(share * (1 - share) / len(draws))


def test_candidates_outside_the_cube_cost_no_call():
    # A disk of radius 1 around the cube's centre: 1 - 1/pi of its draws fall outside the cube. Those are never
    # evaluated; the others are, up to the first valid one, so every call is a candidate in the cube.
    rng = np.random.default_rng(1)
    x = _exact_draws(rng, 2000)
    points = ConstrainedPoints(x, _log_prior(x), _log_lik(x))
    wide = _cube(Ellipsoid(np.array([0.5, 0.5]), np.eye(2)))
    calls = []
    log_lik = lambda t: (calls.append(t), _log_lik(t))[1]  # noqa: E731
    new, info = cube_ellipsoid_sample(rng, points, LikelihoodConstraint(-RADIUS**2, _log_prior, log_lik), wide, 200)
    visited = np.concatenate(calls)
    assert len(visited) == info.n_likelihood_calls and np.all(np.isfinite(visited))
    # Inside the cube, the disk's image takes ~0.91 of it: about 1.1 calls per valid draw, not 1 / (0.91 / pi).
    # A chain keeps its point only where none of its 200 candidates is valid (~0.3 of them are).
    assert info.n_valid == 2000 and info.n_stayed == 0
    assert info.n_likelihood_calls < 1.3 * info.n_valid


def test_log_prior_mass_is_the_cube_volume_inside():
    rng = np.random.default_rng(2)
    # A disk of radius 0.2 inside the cube: its area (the unit disk's pi left out).
    inner = _cube(Ellipsoid(np.array([0.5, 0.5]), 0.2 * np.eye(2)))
    assert abs(np.exp(inner.log_prior_mass(rng, None, 4096)) - 0.04) < 1e-12
    # Centred on a corner: a quarter of it inside, to the Monte Carlo error of 20000 draws.
    corner = _cube(Ellipsoid(np.zeros(2), 0.2 * np.eye(2)))
    share = np.exp(corner.log_prior_mass(rng, None, 20000)) / 0.04
    assert abs(share - 0.25) < 4 * np.sqrt(0.25 * 0.75 / 20000)
    # The parameters' union: the prior mass of a disk of radius r around the normal's mode, 1 - exp(-r^2 / 2).
    disk = ellipsoid_union([Ellipsoid(np.zeros(2), 1.5 * np.eye(2))])
    mass = np.exp(disk.log_prior_mass(rng, _log_prior, 20000)) * np.pi
    assert abs(mass - (1.0 - np.exp(-0.5 * 1.5**2))) < 0.01


def test_cube_ellipsoids_bound_the_points_and_decline_near_the_faces():
    rng = np.random.default_rng(3)
    x = _exact_draws(rng, 300)
    cube = cube_ellipsoids(x, ndtri, ndtr)
    assert np.all(cube.contains(x))
    np.testing.assert_allclose(cube.union.centres, bounding_ellipsoids(ndtr(x)).centres)
    # A point 9 standard deviations out maps to within 1e-10 of a face: its tail would not survive the way back.
    assert cube_ellipsoids(np.vstack([x, [[9.0, 0.0]]]), ndtri, ndtr) is None
