"""Where a nested-sampling replacement comes from independently of its start: the live points' frame and
bounding ellipsoids, the prior, and the rules that say when such a move replaces the Markov chain moves."""

from typing import NamedTuple

import numpy as np

from ..kernels._constrained import LikelihoodConstraint
from ..kernels._cube import CubeEllipsoids, cube_ellipsoid_sample, cube_ellipsoids
from ..kernels._ellipsoid import (MAX_CANDIDATES, EllipsoidInfo, PriorProposal, adapt_efficiency,
                                  bounding_ellipsoids, ellipsoid_sample, n_candidates)
from ..kernels._hmc import preconditioner_from_samples
from ..kernels._symmetric import symmetric_bounding_ellipsoids


def _whitening_factor(points):
    """Lower-triangular factor of the covariance of ``points``, shrunk towards its diagonal only if they are few for
    the dimension (:func:`~evidence_select.kernels._hmc.auto_shrinkage`).

    For a rotated, badly conditioned target, shrinking widens the thin directions in the whitened frame, and
    the replacements then forget their start along the long ones more slowly (``log Z`` reads high).
    """
    return preconditioner_from_samples(points, dense=True, shrinkage="auto")


class _Frame(NamedTuple):
    """What shapes the replacement moves, built from live points other than their starts."""

    factor: np.ndarray  # lower-triangular whitening factor
    centre: np.ndarray  # the points' mean
    ellipsoid: object = None  # the bounding EllipsoidUnion, or None without ellipsoid moves
    volume: float = 0.0  # the expected prior mass above the likelihood bound


#: Volume factor of each bounding ellipsoid over the smallest one that holds its share of the other live points.
ELLIPSOID_ENLARGE = 2.0


#: Above this prior mass the independent proposals come from the prior itself (at most ~10 calls per valid one).
PRIOR_PROPOSALS_VOLUME = 0.1


def _frame(rng, model, points, config, log_volume=-np.inf):
    """The :class:`_Frame` of ``points`` (the live points other than the moves' starts) at ``log_volume``."""
    factor = _whitening_factor(points)
    return _Frame(factor, np.mean(points, axis=0), _bounding_proposal(rng, model, points, factor, config),
                  float(np.exp(log_volume)))


#: Prior draws for the Monte Carlo prior masses of the kinds of bounding ellipsoids (:func:`_bounding_proposal`).
MASS_DRAWS = 1024
#: Most mode symmetries (``K!`` of a mixture: five components) whose images the bounding ellipsoids take.
MAX_SYMMETRIES = 120


def _bounding_proposal(rng, model, points, factor, config):
    """The ellipsoid move's proposal around ``points``, or None without ellipsoid moves.

    The live points' bounding ellipsoids in the parameters (shaped by ``factor``, candidates weighted by the prior)
    and, where the model offers its prior transform and the points sit inside the cube's faces, in the prior's
    unit cube (:mod:`evidence_select.kernels._cube`). A valid draw costs about ``P(E) / P(E & constraint)``
    likelihood calls, the prior masses of the proposal's support ``E``; all hold the same constrained region, so
    the one of least prior mass is taken. The cube's wins where the prior falls steeply across the ellipsoids (a
    box prior through the sigmoid map, an informative prior); the parameters' where the transform bends a thin
    posterior (a Gaussian prior's tail). For a model with mode symmetries, the points' ellipsoids in one copy of
    the modes, mapped to every copy (:func:`_symmetric_ellipsoids`), compete too.
    """
    if not config.ellipsoid:
        return None
    dense = factor if factor.ndim == 2 else np.diag(factor)
    cube = None
    if model.capabilities().prior_transform:
        cube = cube_ellipsoids(points, model.prior_transform, model.prior_cdf, ELLIPSOID_ENLARGE)
    # The masses are estimated in this order (it fixes the random draws each takes).
    return _least_prior_mass(rng, model, (cube, bounding_ellipsoids(points, ELLIPSOID_ENLARGE, factor=dense),
                                          _symmetric_ellipsoids(model, points)))


def _symmetric_ellipsoids(model, points):
    """The bounding ellipsoids of ``points`` gathered in one copy of the posterior's modes and mapped to every
    copy (:mod:`evidence_select.kernels._symmetric`), for a model with 2 to ``MAX_SYMMETRIES`` mode symmetries
    (a mixture's relabellings); None otherwise."""
    if not 1 < model.n_mode_symmetries <= MAX_SYMMETRIES:
        return None
    return symmetric_bounding_ellipsoids(points, model.mode_symmetries(), ELLIPSOID_ENLARGE)


def _least_prior_mass(rng, model, unions):
    """The one of ``unions`` (bounding the same points; None where a kind does not apply) that holds the least
    prior mass, each mass estimated once (none for a lone one)."""
    unions = [union for union in unions if union is not None]
    if len(unions) == 1:
        return unions[0]
    masses = [union.log_prior_mass(rng, model.log_prior, MASS_DRAWS) for union in unions]
    return unions[int(np.argmin(masses))]


#: Most expected share of chains that keep their start in an ellipsoid move replacing the Markov chain moves,
#: with the candidates :func:`~evidence_select.kernels._ellipsoid.n_candidates` draws. A kept point is a copy of
#: a surviving live point chosen uniformly, itself a draw from the constrained prior: copies leave ``log Z``
#: unbiased and widen its spread only a little at this share (``test_ns``'s volume-space simulation).
MAX_KEPT_SHARE = 0.03
#: Most running share of the replacements' starts outside the bounding ellipsoids for the ellipsoid move to
#: replace the Markov chain moves (:func:`ellipsoid_pays`).
MAX_OUTSIDE_SHARE = 0.1


def _markov_cost(markov_calls, n_slice_steps):
    """Likelihood calls the Markov chain moves spend per replacement: their running mean, ``n_slice_steps`` until
    they have run (what an independent move must undercut to replace them)."""
    return markov_calls if np.isfinite(markov_calls) else n_slice_steps


def ellipsoid_pays(efficiency, markov_calls, n_slice_steps, outside_share=float("nan")):
    """Whether the ellipsoid move replaces the Markov chain moves at this running ``efficiency``.

    A valid ellipsoid draw costs about ``1 / efficiency`` likelihood calls and is
    independent of its start; the Markov chain moves cost ``markov_calls`` per
    replacement (their running mean; ``n_slice_steps`` until they have run) and
    leave some memory of it. The ellipsoid is taken while it is the cheaper,
    while the chains that find no valid candidate among those drawn (and keep
    their start) are at most ``MAX_KEPT_SHARE`` of them, and while the running
    share of starts outside the ellipsoids is at most ``MAX_OUTSIDE_SHARE``
    (nan: not measured yet). The starts are draws like the live points that
    shape the ellipsoids but not among them, so that share is the part of the
    constrained region the ellipsoids miss; a chain there takes only the
    short moves kept outside them (``OUTSIDE_LENGTH``), and its replacement
    stays near its start (``log Z`` reads high where many do). In many
    dimensions a few hundred points' covariance and largest radius understate
    where the next draw lands, and that share grows from a few percent to a
    large part of the starts.

    Examples
    --------
    >>> ellipsoid_pays(0.05, float("nan"), 48), ellipsoid_pays(0.015, float("nan"), 48)
    (True, False)
    >>> ellipsoid_pays(0.015, 300.0, 48), ellipsoid_pays(0.005, 300.0, 48)
    (True, False)
    >>> ellipsoid_pays(0.05, float("nan"), 48, outside_share=0.04), ellipsoid_pays(0.05, 300.0, 48, 0.4)
    (True, False)
    """
    cost = _markov_cost(markov_calls, n_slice_steps)
    kept_share = 1.0 / (1.0 + n_candidates(efficiency) * efficiency)
    covers = not outside_share > MAX_OUTSIDE_SHARE  # nan: not measured yet
    return bool(efficiency * cost >= 1.0 and kept_share <= MAX_KEPT_SHARE and covers)


def prior_pays(volume, markov_calls, n_slice_steps):
    """Whether candidates from the prior replace the Markov chain moves below ``PRIOR_PROPOSALS_VOLUME``, at the
    expected prior mass ``volume`` above the likelihood bound, where the ellipsoid move does not pay.

    A valid prior draw costs about ``1 / volume`` calls and is independent of its start: it is taken while that
    is at most what the Markov chain moves spend per replacement (their running mean ``markov_calls``;
    ``n_slice_steps`` until they have run) and while ``MAX_CANDIDATES`` prior candidates leave at most
    ``MAX_KEPT_SHARE`` of the chains at their start. Where the prior falls steeply across the live points'
    ellipsoids (a mixture's, past a tenth of the prior mass), the ellipsoid's candidates, weighted by the
    prior, rank below the chains' own points and are rarely visited; the prior's need no weight.

    Examples
    --------
    >>> prior_pays(0.01, 300.0, 42), prior_pays(0.001, 300.0, 42), prior_pays(0.01, float("nan"), 42)
    (True, False, False)
    """
    cost = _markov_cost(markov_calls, n_slice_steps)
    return bool(volume * cost >= 1.0 and (1.0 - volume) ** MAX_CANDIDATES <= MAX_KEPT_SHARE)


def _independent_move(proposal):
    """The exact independent-proposal move for ``proposal``."""
    return cube_ellipsoid_sample if isinstance(proposal, CubeEllipsoids) else ellipsoid_sample


def _ellipsoid_stage(rng, model, log_lik_fn, config, points, log_lik_min, frame, scales):
    """The ellipsoid move before the Markov chain moves; returns the points, its info, the scales and whether it
    replaces those moves (where :func:`ellipsoid_pays`, or where candidates from the prior do: above
    ``PRIOR_PROPOSALS_VOLUME``, or below it where :func:`prior_pays`).

    Below that efficiency each chain tries one candidate only, which keeps the efficiency measured.
    """
    if frame.ellipsoid is None:
        return points, EllipsoidInfo(0, 0, 0, 0), scales, False
    constraint = LikelihoodConstraint(log_lik_min, model.log_prior, log_lik_fn)
    enough = ellipsoid_pays(scales.efficiency, scales.markov_calls, config.n_slice_steps, scales.outside_share)
    if frame.volume >= PRIOR_PROPOSALS_VOLUME or (
            not enough and prior_pays(frame.volume, scales.markov_calls, config.n_slice_steps)):
        points, info = ellipsoid_sample(rng, points, constraint, PriorProposal(model.sample_prior),
                                        n_candidates(frame.volume))
        # One ellipsoid candidate per chain as well (another exact move): the ellipsoid's efficiency is then
        # measured by the time the prior's falls, and the first ellipsoid iterations need no Markov moves.
        points, probe = _independent_move(frame.ellipsoid)(rng, points, constraint, frame.ellipsoid, 1)
        scales = scales._replace(efficiency=adapt_efficiency(scales.efficiency, probe))
        return points, EllipsoidInfo(*np.add(info, probe)), scales, True
    points, info = _independent_move(frame.ellipsoid)(rng, points, constraint, frame.ellipsoid,
                                                      n_candidates(scales.efficiency) if enough else 1)
    return points, info, scales._replace(efficiency=adapt_efficiency(scales.efficiency, info)), enough
