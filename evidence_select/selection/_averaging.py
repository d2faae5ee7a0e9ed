"""Bayesian model averaging: posterior model probabilities and mixed predictive distributions.

Plain functions of arrays, tested one by one. Every log quantity stays in log
space until the very end, so model probabilities are exact (and finite) even
when log evidences differ by 1e5 nats or more.
"""

import numpy as np

from ..utils import logsumexp

__all__ = ["log_model_prior", "log_model_probabilities", "model_probability_std", "mix_proba",
           "mix_log_density", "mix_normal"]


def log_model_prior(model_prior, n_candidates):
    """Normalised log prior over candidates.

    Parameters
    ----------
    model_prior : array-like of shape (n_candidates,) or None
        Non-negative prior weights (normalised here); None means uniform.
        A zero weight excludes a candidate (log prior ``-inf``).
    n_candidates : int

    Returns
    -------
    log_prior : ndarray of shape (n_candidates,)
        Sums to one on the linear scale.

    Examples
    --------
    >>> import numpy as np
    >>> np.exp(log_model_prior([1.0, 3.0, 0.0], 3)).round(12).tolist()
    [0.25, 0.75, 0.0]
    >>> np.exp(log_model_prior(None, 4)).round(12).tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    if model_prior is None:
        return np.full(n_candidates, -np.log(n_candidates))
    prior = np.asarray(model_prior, dtype=float)
    if prior.shape != (n_candidates,):
        raise ValueError(f"model_prior must have one entry per candidate ({n_candidates}); got shape {prior.shape}")
    if not np.all(np.isfinite(prior)) or np.any(prior < 0) or not np.any(prior > 0):
        raise ValueError(f"model_prior must be finite, non-negative and not all zero; got {prior.tolist()}")
    with np.errstate(divide="ignore"):  # a zero prior weight is a legal -inf log prior
        return np.log(prior) - np.log(prior.sum())


def log_model_probabilities(log_evidences, log_prior):
    """Log posterior model probabilities, ``log softmax(log_evidences + log_prior)``.

    Parameters
    ----------
    log_evidences : ndarray of shape (n_candidates,)
        Log marginal likelihoods; ``-inf`` is allowed. NaN marks an unusable
        estimate (its error bar exceeds what a probability can carry): that
        candidate's log probability is NaN and the others are normalised among
        themselves.
    log_prior : ndarray of shape (n_candidates,)
        Normalised log prior (see :func:`log_model_prior`).

    Returns
    -------
    log_probabilities : ndarray of shape (n_candidates,)
        ``logsumexp`` is 0; no unnormalised quantity is exponentiated.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.exp(log_model_probabilities(np.array([-1e6, -1e6 + 1e5]), np.log([0.5, 0.5])))
    >>> p.tolist()
    [0.0, 1.0]
    """
    log_evidences = np.asarray(log_evidences, dtype=float)
    log_posterior = log_evidences + log_prior
    usable = ~np.isnan(log_posterior)
    top = np.max(log_posterior[usable]) if usable.any() else np.nan
    if not np.isfinite(top):
        raise ValueError(f"no candidate has a finite log evidence + log prior: {log_posterior.tolist()}")
    # Shift by the max first: differences of nearby large numbers are exact (Sterbenz), whereas
    # subtracting a logsumexp of values near -1e6 would leave errors of ~1e-10 in every log probability.
    shifted = log_posterior - top
    return shifted - logsumexp(shifted[usable])


def model_probability_std(probabilities, log_evidence_stds):
    """First-order (delta-method) standard error of the model probabilities.

    ``d p_k / d log Z_j = p_k (delta_kj - p_j)``, so with independent evidence
    errors ``var p_k = sum_j p_k^2 (delta_kj - p_j)^2 sigma_j^2``.

    Parameters
    ----------
    probabilities : ndarray of shape (n_candidates,)
        NaN for an unusable candidate (left out of the sums; its std is NaN).
    log_evidence_stds : ndarray of shape (n_candidates,)
        Standard errors of the log evidences (NaN propagates).

    Returns
    -------
    std : ndarray of shape (n_candidates,)

    Examples
    --------
    Two candidates at even odds whose log evidences each have an error of 0.1
    nats: the difference has an error of ``0.1 * sqrt(2)``, and ``dp / d(diff) = 1/4``.

    >>> import numpy as np
    >>> model_probability_std(np.array([0.5, 0.5]), np.array([0.1, 0.1])).round(4).tolist()
    [0.0354, 0.0354]
    """
    unusable = np.isnan(np.asarray(probabilities, dtype=float))
    p = np.where(unusable, 0.0, probabilities)
    sigma = np.where(unusable, 0.0, log_evidence_stds)
    jacobian = p[:, None] * (np.eye(len(p)) - p[None, :])  # (k, j)
    return np.where(unusable, np.nan, np.sqrt(np.sum((jacobian * sigma[None, :]) ** 2, axis=1)))


def mix_proba(probabilities, candidate_proba):
    """Model-averaged class probabilities ``sum_k p_k proba_k``.

    Parameters
    ----------
    probabilities : ndarray of shape (n_candidates,)
    candidate_proba : ndarray of shape (n_candidates, n_samples, n_classes)

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)

    Examples
    --------
    >>> import numpy as np
    >>> candidate_proba = np.array([[[0.9, 0.1]], [[0.5, 0.5]]])   # 2 candidates, 1 sample, 2 classes
    >>> mix_proba(np.array([0.75, 0.25]), candidate_proba).round(6).tolist()
    [[0.8, 0.2]]
    """
    proba = np.einsum("k,knc->nc", probabilities, candidate_proba)
    return proba / proba.sum(axis=1, keepdims=True)  # rows sum to 1 exactly, not 1 + rounding (log_loss checks)


def mix_log_density(log_probabilities, candidate_log_density):
    """Log density of the model average, ``logsumexp_k(log p_k + log p_k(x))``.

    Parameters
    ----------
    log_probabilities : ndarray of shape (n_candidates,)
    candidate_log_density : ndarray of shape (n_candidates, n_samples)

    Returns
    -------
    log_density : ndarray of shape (n_samples,)

    Examples
    --------
    Densities ``exp(-1000)`` and ``exp(-1002)`` mixed 50/50, without underflow:

    >>> import numpy as np
    >>> out = mix_log_density(np.log([0.5, 0.5]), np.array([[-1000.0], [-1002.0]]))
    >>> round(float(out[0]) + 1000, 6)   # log((1 + exp(-2)) / 2)
    -0.566219
    """
    return logsumexp(np.asarray(log_probabilities)[:, None] + candidate_log_density, axis=0)


def mix_normal(probabilities, means, stds):
    """Mean and standard deviation of a mixture of predictive distributions.

    The variance is the law of total variance: the probability-weighted
    within-model variance plus the between-model variance of the means.

    Parameters
    ----------
    probabilities : ndarray of shape (n_candidates,)
    means : ndarray of shape (n_candidates, n_samples)
    stds : ndarray of shape (n_candidates, n_samples)

    Returns
    -------
    mean : ndarray of shape (n_samples,)
    std : ndarray of shape (n_samples,)

    Examples
    --------
    >>> import numpy as np
    >>> mean, std = mix_normal(np.array([0.5, 0.5]), np.array([[0.0], [2.0]]), np.array([[1.0], [1.0]]))
    >>> mean.tolist(), std.tolist()
    ([1.0], [1.4142135623730951])
    """
    p = np.asarray(probabilities, dtype=float)[:, None]
    mean = np.sum(p * means, axis=0)
    variance = np.sum(p * stds**2, axis=0) + np.sum(p * (means - mean) ** 2, axis=0)
    return mean, np.sqrt(variance)
