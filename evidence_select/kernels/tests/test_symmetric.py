"""Bounding ellipsoids of points spread over the relabelled copies of a mixture's posterior mode.

The points are draws around one configuration of ``GaussianMixtureModel(3, 2)`` (14 parameters), each mapped by a
random one of its six relabellings, as nested sampling's live points are once the modes separate.
"""

import numpy as np

from evidence_select.kernels._ellipsoid import bounding_ellipsoids
from evidence_select.kernels._symmetric import align_by_symmetries, symmetric_bounding_ellipsoids
from evidence_select.models import GaussianMixtureModel

MODEL = GaussianMixtureModel(3, 2)
MAPS = MODEL.mode_symmetries()


def _relabelled_draws(seed, n=300, spread=0.05):
    """Draws around one mode, each relabelled at random, and the mode's images under every relabelling."""
    rng = np.random.default_rng(seed)
    mode = MODEL.pack(np.array([[0.2, 0.3, 0.5]]), np.array([[[-4.0, 0.0], [0.0, 3.0], [4.0, -1.0]]]),
                      np.array([[[0.5, 0.6], [0.8, 0.4], [0.3, 0.9]]]))[0]
    draws = mode + spread * rng.standard_normal((n, MODEL.n_params))
    which = rng.integers(len(MAPS), size=n)
    return np.einsum("npq,nq->np", MAPS[which], draws), MAPS @ mode


def _nearest_image(points, images):
    return np.argmin(np.sum((points[:, None, :] - images[None]) ** 2, axis=2), axis=1)


def test_alignment_gathers_the_relabelled_draws_around_one_copy():
    for seed in range(3):
        points, images = _relabelled_draws(seed)
        assert len(np.unique(_nearest_image(points, images))) == len(MAPS)  # spread over every copy
        assert len(np.unique(_nearest_image(align_by_symmetries(points, MAPS), images))) == 1, seed


def test_the_union_holds_every_point_in_far_less_volume_than_one_ellipsoid_over_the_copies():
    for seed in range(3):
        points, images = _relabelled_draws(seed)
        union = symmetric_bounding_ellipsoids(points, MAPS)
        assert np.all(union.contains(points))
        assert len(union.ellipsoids) % len(MAPS) == 0
        plain = bounding_ellipsoids(points)
        log_volume = np.logaddexp.reduce([e.log_volume for e in union.ellipsoids])
        assert log_volume < np.logaddexp.reduce([e.log_volume for e in plain.ellipsoids]) - 5.0, seed  # ~8 here
        # Its uniform draws lie around the copies, every copy alike.
        draws = union.sample_uniform(np.random.default_rng(seed), 6000)
        nearest = _nearest_image(draws, images)
        distance = np.sqrt(np.min(np.sum((draws[:, None, :] - images[None]) ** 2, axis=2), axis=1))
        assert np.max(distance) < 20 * 0.05 * np.sqrt(MODEL.n_params)
        counts = np.bincount(nearest, minlength=len(MAPS))
        assert np.all(np.abs(counts - 1000) < 4 * np.sqrt(1000)), counts


def test_a_model_without_symmetries_declares_the_identity_alone():
    from evidence_select.testing._targets import GaussianTarget

    target = GaussianTarget(np.zeros(3), 1.0)
    assert target.n_mode_symmetries == 1 and MODEL.n_mode_symmetries == 6
