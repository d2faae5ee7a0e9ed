"""The affine whitening shared by the Gaussianization and its quadratic shift."""

import numpy as np

__all__ = ["whitening"]


def whitening(samples):
    """Mean ``(n_params,)`` and lower Cholesky factor ``(n_params, n_params)`` of the samples' covariance.

    A jitter of ``1e-10`` of the mean variance keeps the factor positive
    definite when a direction barely varies; ``chol^-1 (x - mean)`` whitens.

    Examples
    --------
    >>> import numpy as np
    >>> mean, chol = whitening(np.random.default_rng(0).normal(size=(500, 2)) * [1.0, 3.0])
    >>> chol.shape, bool(abs(chol[1, 1] - 3.0) < 0.3)
    ((2, 2), True)
    """
    mean = samples.mean(axis=0)
    cov = np.cov(samples, rowvar=False).reshape(len(mean), len(mean))
    cov = cov + 1e-10 * np.trace(cov) / len(mean) * np.eye(len(mean))
    return mean, np.linalg.cholesky(cov)
