"""Bounding ellipsoids of points whose density is invariant under linear maps (a mixture's relabellings).

A mixture's posterior has a copy of each mode under each of its ``K!`` relabellings. Nested sampling's live points
spread over all the copies, and bounding them directly takes one ellipsoid over the lot (the copies are too many
for each to get its own from a few hundred points in many dimensions), so the ellipsoid move finds almost no
valid candidate and the Markov moves do all the work. Mapped by the symmetry that brings each nearest the others,
the points gather in one copy; its ellipsoids, mapped back by every symmetry, bound all the copies tightly. The
union is a union of ellipsoids like any other, so the ellipsoid move on it stays exact
(:class:`~evidence_select.kernels._ellipsoid.EllipsoidUnion` draws uniformly on it, thinned by overlaps).
"""

import numpy as np

from ._ellipsoid import Ellipsoid, _triangular_inverse, bounding_ellipsoids, ellipsoid_union

__all__ = ["align_by_symmetries", "symmetric_bounding_ellipsoids"]

#: Rounds of the alignment (assign each point its nearest image, recentre, rescale).
ALIGN_ROUNDS = 5


def align_by_symmetries(points, maps):
    """Each of ``points`` mapped by the one of ``maps`` that brings it nearest the mapped points' centre.

    Starts from the first point as the centre, then alternates between taking each point's nearest image
    (distances in the mapped points' per-coordinate spread) and recentring, like k-means with one centre over
    the images.

    Parameters
    ----------
    points : ndarray of shape (n_points, n_params)
    maps : ndarray of shape (n_maps, n_params, n_params)
        The linear maps ``A`` with ``p(A x) = p(x)``, the identity among them.

    Returns
    -------
    aligned : ndarray of shape (n_points, n_params)

    Examples
    --------
    >>> import numpy as np
    >>> swap = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])
    >>> x = np.array([[1.0, -1.0], [-1.1, 0.9], [0.9, -1.2]])
    >>> align_by_symmetries(x, swap).round(1).tolist()
    [[1.0, -1.0], [0.9, -1.1], [0.9, -1.2]]
    """
    points = np.asarray(points, dtype=float)
    images = np.einsum("spq,nq->nsp", maps, points)  # (n_points, n_maps, n_params)
    centre, scale = points[0], np.ones(points.shape[1])
    rows = np.arange(len(points))
    for _ in range(ALIGN_ROUNDS):
        nearest = np.argmin(np.sum(((images - centre) / scale) ** 2, axis=2), axis=1)
        aligned = images[rows, nearest]
        centre = aligned.mean(axis=0)
        scale = np.maximum(aligned.std(axis=0), 1e-12 * (1.0 + np.abs(centre)))
    return aligned


def symmetric_bounding_ellipsoids(points, maps, enlarge=2.0):
    """Bounding ellipsoids of ``points`` aligned by :func:`align_by_symmetries`, and their images under ``maps``.

    Every point lies in the union: it is the image of an aligned point, which its ellipsoids hold, under the
    inverse of a map, itself one of ``maps`` (they form a group).

    Parameters
    ----------
    points : ndarray of shape (n_points, n_params)
    maps : ndarray of shape (n_maps, n_params, n_params)
    enlarge : float, default=2.0
        As in :func:`~evidence_select.kernels._ellipsoid.bounding_ellipsoids`.

    Returns
    -------
    EllipsoidUnion

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> swap = np.array([np.eye(2), np.eye(2)[::-1]])
    >>> mode = rng.normal([2.0, -2.0], 0.1, size=(100, 2))
    >>> x = np.concatenate([mode[:50], mode[50:, ::-1]])
    >>> union = symmetric_bounding_ellipsoids(x, swap)
    >>> len(union.ellipsoids), bool(np.all(union.contains(x))), bool(union.contains(np.zeros((1, 2)))[0])
    (2, True, False)
    """
    base = bounding_ellipsoids(align_by_symmetries(points, maps), enlarge)
    images = []
    for A in maps:
        for ellipsoid in base.ellipsoids:
            shape = A @ ellipsoid.factor
            factor = np.linalg.cholesky(shape @ shape.T)  # the same ellipsoid, by a lower-triangular factor
            images.append(Ellipsoid(A @ ellipsoid.centre, factor, _triangular_inverse(factor)))
    return ellipsoid_union(images)
