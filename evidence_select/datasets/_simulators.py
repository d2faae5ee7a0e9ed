"""Simulated data sets of the SGAIS paper (Sec. 6.1, 6.2 and Appendix B).

Every simulator is seeded and prefix-stable: the first ``n`` rows of a draw of
size ``m > n`` equal a draw of size ``n`` with the same seed. Rows are made in
fixed blocks, each from its own ``SeedSequence`` child, so that property does not
depend on how numpy consumes its bit stream.
"""

import numpy as np
from sklearn.utils import Bunch

from ..utils._random import categorical_draws

__all__ = ["make_linear_regression", "make_softmax_classification", "make_mixture", "make_shift_stream",
           "MIXTURE_WEIGHTS", "MIXTURE_MEANS", "MIXTURE_STDS", "SHIFT_MEANS", "SHIFT_STDS",
           "SHIFT_CHANGE_POINTS", "SHIFT_N_CLUSTERS"]

_BLOCK = 4096

#: Component weights, shape (5,), of the paper-style 2-d mixture drawn by :func:`make_mixture`.
MIXTURE_WEIGHTS = np.array([0.30, 0.25, 0.20, 0.15, 0.10])
#: Component means, shape (5, 2), of the mixture drawn by :func:`make_mixture`.
MIXTURE_MEANS = np.array([[-4.0, -3.0], [0.0, 3.0], [4.0, -2.0], [-3.0, 3.5], [3.5, 4.0]])
#: Per-coordinate component standard deviations, shape (5, 2), of the mixture of :func:`make_mixture`.
MIXTURE_STDS = np.array([[1.0, 0.7], [0.8, 1.2], [0.6, 0.9], [1.1, 0.5], [0.7, 0.7]])

#: Means, shape (7, 2), of the seven 2-d clusters of the distribution-shift stream
#: (:func:`make_shift_stream`); some overlap on purpose (the paper: "it is not
#: immediately obvious from the histograms how many clusters there actually are").
SHIFT_MEANS = np.array([[-4.0, 0.0], [0.0, 4.0], [4.0, 0.0],      # phase 1: 3 clusters
                        [0.0, -4.0], [-2.0, 2.5],                # phase 2 adds 2
                        [2.5, -2.5], [5.0, 4.0]])                # phase 3 adds 2
#: Per-coordinate standard deviations, shape (7, 2), of the clusters of the shift stream.
SHIFT_STDS = np.array([[1.0, 1.0], [0.9, 0.9], [1.0, 0.8], [0.9, 1.1], [0.8, 0.8], [0.8, 0.9], [0.7, 0.7]])
#: Sample positions at which the shift stream gains clusters (paper Sec. 6.2).
SHIFT_CHANGE_POINTS = (1000, 10000)
#: Number of active clusters in each phase of the shift stream.
SHIFT_N_CLUSTERS = (3, 5, 7)


def _seed_sequence(random_state):
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return np.random.SeedSequence(random_state)
    raise TypeError(f"random_state must be an int, None or a SeedSequence, got {type(random_state).__name__}")


def _check_n_samples(n_samples):
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 0:
        raise ValueError(f"n_samples must be a non-negative int, got {n_samples!r}")
    return int(n_samples)


def _blocks(seed_seq, stream, n_samples):
    """Yield ``(start, stop, rng)`` for fixed-size blocks of rows of one named stream.

    Callers always draw a *full* block of ``_BLOCK`` rows from ``rng`` and keep
    the first ``stop - start``: the draws of a row never depend on ``n_samples``.
    """
    for block, start in enumerate(range(0, n_samples, _BLOCK)):
        child = np.random.SeedSequence(seed_seq.entropy, spawn_key=(*seed_seq.spawn_key, stream, block))
        yield start, min(start + _BLOCK, n_samples), np.random.default_rng(child)


def _parameter_rng(seed_seq):
    return np.random.default_rng(np.random.SeedSequence(seed_seq.entropy, spawn_key=(*seed_seq.spawn_key, 999_999)))


def make_linear_regression(n_samples=1000, *, n_features=5, noise_variance=1.0, random_state=0):
    """Paper Appendix B.1 data: ``y = w.x + b + N(0, noise_variance)``.

    The true ``w`` and ``b`` are a standard normal draw (the prior) and
    ``x ~ N(0, I)``.

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=5
    noise_variance : float, default=1.0
    random_state : int, default=0

    Returns
    -------
    data : Bunch
        ``X (n_samples, n_features)``, ``y (n_samples,)``, ``coef``, ``intercept``,
        ``noise_variance``.

    Examples
    --------
    >>> data = make_linear_regression(10, random_state=1)
    >>> data.X.shape, data.y.shape
    ((10, 5), (10,))
    """
    n_samples = _check_n_samples(n_samples)
    seed_seq = _seed_sequence(random_state)
    params = _parameter_rng(seed_seq).standard_normal(n_features + 1)
    coef, intercept = params[:-1], params[-1]
    X = np.empty((n_samples, n_features))
    y = np.empty(n_samples)
    for start, stop, rng in _blocks(seed_seq, 0, n_samples):
        # Whole-block arithmetic too: BLAS may sum differently for different row counts.
        X_block = rng.standard_normal((_BLOCK, n_features))
        y_block = X_block @ coef + intercept + np.sqrt(noise_variance) * rng.standard_normal(_BLOCK)
        X[start:stop], y[start:stop] = X_block[: stop - start], y_block[: stop - start]
    return Bunch(X=X, y=y, coef=coef, intercept=intercept, noise_variance=noise_variance)


def make_softmax_classification(n_samples=1000, *, n_features=10, n_classes=4, random_state=0):
    """Paper Appendix B.2 data: labels from a softmax of ``W x + b``.

    True ``W (n_classes, n_features)`` and ``b`` are a standard normal draw and
    ``x ~ N(0, I)``; labels are integers ``0..n_classes-1``.

    Returns
    -------
    data : Bunch
        ``X``, ``y``, ``coef``, ``intercept``.

    Examples
    --------
    >>> data = make_softmax_classification(10, random_state=1)
    >>> data.X.shape, sorted(set(data.y)) <= [0, 1, 2, 3]
    ((10, 10), True)
    """
    n_samples = _check_n_samples(n_samples)
    seed_seq = _seed_sequence(random_state)
    params = _parameter_rng(seed_seq).standard_normal((n_classes, n_features + 1))
    coef, intercept = params[:, :-1], params[:, -1]
    X = np.empty((n_samples, n_features))
    y = np.empty(n_samples, dtype=np.int64)
    for start, stop, rng in _blocks(seed_seq, 0, n_samples):
        X_block = rng.standard_normal((_BLOCK, n_features))
        logits = X_block @ coef.T + intercept
        proba = np.exp(logits - logits.max(axis=1, keepdims=True))
        proba /= proba.sum(axis=1, keepdims=True)
        X[start:stop] = X_block[: stop - start]
        y[start:stop] = categorical_draws(rng.random(_BLOCK), proba)[: stop - start]
    return Bunch(X=X, y=y, coef=coef, intercept=intercept)


def _draw_mixture(rng, n_rows, weights, means, stds):
    labels = categorical_draws(rng.random(_BLOCK)[:n_rows], np.broadcast_to(weights, (n_rows, len(weights))))
    noise = rng.standard_normal((_BLOCK, means.shape[1]))[:n_rows]
    return means[labels] + stds[labels] * noise, labels


def make_mixture(n_samples=1000, *, random_state=0):
    """Paper Appendix B.3 / Sec. 6.1 data: a 2-d mixture of 5 diagonal Gaussians.

    The fixed parameters are :data:`MIXTURE_WEIGHTS`, :data:`MIXTURE_MEANS` and
    :data:`MIXTURE_STDS`.

    Returns
    -------
    data : Bunch
        ``X (n_samples, 2)``, ``labels`` (true components), ``weights``, ``means``, ``stds``.

    Examples
    --------
    >>> make_mixture(7, random_state=3).X.shape
    (7, 2)
    """
    n_samples = _check_n_samples(n_samples)
    seed_seq = _seed_sequence(random_state)
    X = np.empty((n_samples, 2))
    labels = np.empty(n_samples, dtype=np.int64)
    for start, stop, rng in _blocks(seed_seq, 0, n_samples):
        X[start:stop], labels[start:stop] = _draw_mixture(rng, stop - start, MIXTURE_WEIGHTS, MIXTURE_MEANS,
                                                          MIXTURE_STDS)
    return Bunch(X=X, labels=labels, weights=MIXTURE_WEIGHTS, means=MIXTURE_MEANS, stds=MIXTURE_STDS)


def make_shift_stream(n_samples=100_000, *, shuffle=False, random_state=0):
    """The distribution-shift stream of the paper's Sec. 6.2.

    Rows ``[0, 1000)`` come from 3 equally weighted 2-d Gaussian clusters, rows
    ``[1000, 10000)`` from 5 (the first 3 plus 2 new), and later rows from 7.
    With ``shuffle=True`` the same rows are returned in a seeded random order
    (the stationary control of the paper); prefix stability then no longer holds.

    Returns
    -------
    data : Bunch
        ``X (n_samples, 2)``, ``labels``, ``change_points`` (positions of the
        shifts that lie inside the stream), ``n_clusters`` (active clusters per row).

    Examples
    --------
    >>> data = make_shift_stream(12000)
    >>> data.change_points
    [1000, 10000]
    """
    n_samples = _check_n_samples(n_samples)
    seed_seq = _seed_sequence(random_state)
    X = np.empty((n_samples, 2))
    labels = np.empty(n_samples, dtype=np.int64)
    position = np.arange(n_samples)
    n_active = np.where(position < SHIFT_CHANGE_POINTS[0], SHIFT_N_CLUSTERS[0],
                        np.where(position < SHIFT_CHANGE_POINTS[1], SHIFT_N_CLUSTERS[1], SHIFT_N_CLUSTERS[2]))
    for start, stop, rng in _blocks(seed_seq, 0, n_samples):
        u = rng.random(_BLOCK)[: stop - start]
        labels[start:stop] = np.minimum((u * n_active[start:stop]).astype(np.int64), n_active[start:stop] - 1)
        noise = rng.standard_normal((_BLOCK, 2))[: stop - start]
        X[start:stop] = SHIFT_MEANS[labels[start:stop]] + SHIFT_STDS[labels[start:stop]] * noise
    change_points = [c for c in SHIFT_CHANGE_POINTS if c < n_samples]
    if shuffle:
        order = np.random.default_rng(np.random.SeedSequence(seed_seq.entropy, spawn_key=(*seed_seq.spawn_key, 7))
                                      ).permutation(n_samples)
        X, labels, n_active = X[order], labels[order], n_active[order]
        change_points = []
    return Bunch(X=X, labels=labels, change_points=change_points, n_clusters=n_active)
