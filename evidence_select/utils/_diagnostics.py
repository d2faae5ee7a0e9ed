"""Convergence diagnostics of MCMC output: split R-hat, bulk ESS, autocorrelation time.

Chains are arrays of shape ``(n_chains, n_iter)`` for one scalar quantity or
``(n_chains, n_iter, n_params)`` for several (one value per parameter is
returned). Everything follows Vehtari, Gelman, Simpson, Carpenter and Bürkner,
"Rank-normalization, folding, and localization: an improved R-hat for assessing
convergence of MCMC" (Bayesian Analysis, 2021): chains are split in halves,
draws are replaced by the normal scores of their pooled ranks, and the R-hat is
the larger of the bulk (ranks) and tail (ranks of ``|x - median|``) values. The
effective sample size uses Geyer's initial monotone sequence on the
autocorrelations averaged over chains (their Eq. 10, as Stan does).
:func:`integrated_autocorrelation_time` is the windowed estimator of Sokal
(1997) that emcee uses, for one series pooled over chains.
"""

import numpy as np
from scipy.special import ndtri
from scipy.stats import rankdata

__all__ = ["split_rhat", "ess_bulk", "integrated_autocorrelation_time", "autocorrelation", "mean_and_squared_error"]


def mean_and_squared_error(values):
    """The mean of a 1-d sample and its squared standard error, ``sample variance / n`` (NaN below 2 values).

    By hand rather than with ``np.std``, whose overhead dominates on the few values (replicate groups, a
    chunk's rows) the SGAIS engine passes once per chunk.

    Examples
    --------
    >>> mean_and_squared_error(np.array([0.0, 1.0]))
    (0.5, 0.25)
    """
    n = len(values)
    mean = values.sum() / n
    if n < 2:
        return float(mean), float("nan")
    deviations = values - mean
    return float(mean), float(deviations @ deviations) / (n - 1) / n


def _as_chains(chains):
    """``(n_chains, n_iter, n_params)`` view of scalar or vector chains, and whether the input was scalar."""
    chains = np.asarray(chains, dtype=float)
    if chains.ndim == 1:
        chains = chains[None, :]
    if chains.ndim not in (2, 3):
        raise ValueError(f"chains must have shape (n_chains, n_iter[, n_params]), got {chains.shape}")
    scalar = chains.ndim == 2
    return (chains[..., None] if scalar else chains), scalar


def _split(chains):
    """Cut each chain in two halves (the middle draw of an odd chain is dropped)."""
    half = chains.shape[1] // 2
    return np.concatenate([chains[:, :half], chains[:, chains.shape[1] - half:]], axis=0)


def _rank_normalise(chains):
    """Normal scores of the ranks pooled over chains (average ranks for ties), same shape."""
    n_chains, n_iter, n_params = chains.shape
    flat = chains.reshape(-1, n_params)
    ranks = rankdata(flat, axis=0)
    scores = ndtri((ranks - 0.375) / (flat.shape[0] + 0.25))
    return scores.reshape(n_chains, n_iter, n_params)


def _rhat(chains):
    """Classic potential scale reduction of ``(n_chains, n_iter, n_params)`` chains."""
    n_iter = chains.shape[1]
    within = np.var(chains, axis=1, ddof=1).mean(axis=0)
    between = n_iter * np.var(chains.mean(axis=1), axis=0, ddof=1)
    var_plus = (n_iter - 1) / n_iter * within + between / n_iter
    with np.errstate(divide="ignore", invalid="ignore"):
        rhat = np.sqrt(var_plus / within)
    # Constant chains: equal constants mix perfectly, different ones not at all.
    return np.where(within > 0, rhat, np.where(between > 0, np.inf, 1.0))


def split_rhat(chains):
    """Rank-normalised split R-hat (bulk and tail, the larger), per parameter.

    Parameters
    ----------
    chains : array-like of shape (n_chains, n_iter) or (n_chains, n_iter, n_params)
        Draws after warm-up; at least 4 iterations.

    Returns
    -------
    rhat : float or ndarray of shape (n_params,)
        About 1 for chains that mix; values above 1.01 say the chains disagree
        (unmixed modes, too short runs, trends).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> bool(split_rhat(rng.normal(size=(4, 1000))) < 1.01)
    True
    >>> stuck = rng.normal(size=(4, 1000)) + np.arange(4)[:, None]
    >>> bool(split_rhat(stuck) > 1.5)
    True
    """
    values, scalar = _as_chains(chains)
    if values.shape[1] < 4:
        raise ValueError(f"split R-hat needs at least 4 iterations per chain, got {values.shape[1]}")
    split = _split(values)
    bulk = _rhat(_rank_normalise(split))
    folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
    tail = _rhat(_rank_normalise(folded))
    rhat = np.maximum(bulk, tail)
    return float(rhat[0]) if scalar else rhat


def autocorrelation(chains):
    """Autocorrelation function of each chain by FFT, shape ``(n_chains, n_iter, n_params)``.

    Parameters
    ----------
    chains : ndarray of shape (n_chains, n_iter, n_params)

    Returns
    -------
    acov : ndarray of shape (n_chains, n_iter, n_params)
        Autocovariances (biased, divided by ``n_iter``) at lags ``0 .. n_iter - 1``.
    """
    n_iter = chains.shape[1]
    centred = chains - chains.mean(axis=1, keepdims=True)
    n_fft = 1 << (2 * n_iter - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=n_fft, axis=1)
    return np.fft.irfft(spectrum * np.conj(spectrum), n=n_fft, axis=1)[:, :n_iter] / n_iter


def _ess(chains):
    """Effective sample size of ``(n_chains, n_iter, n_params)`` chains (Geyer's monotone sequence)."""
    n_chains, n_iter, n_params = chains.shape
    acov = autocorrelation(chains)
    chain_var = acov[:, 0] * n_iter / (n_iter - 1.0)
    within = chain_var.mean(axis=0)
    var_plus = within * (n_iter - 1.0) / n_iter
    if n_chains > 1:
        var_plus = var_plus + np.var(chains.mean(axis=1), axis=0, ddof=1)
    ess = np.empty(n_params)
    for j in range(n_params):
        if not var_plus[j] > 0:
            ess[j] = n_chains * n_iter if np.all(acov[:, 0, j] == 0) and n_chains > 0 else 1.0
            continue
        rho = 1.0 - (within[j] - acov[:, :, j].mean(axis=0)) / var_plus[j]
        rho[0] = 1.0
        # Sums of consecutive pairs are positive and decreasing for a reversible chain (Geyer, 1992).
        n_pairs = n_iter // 2
        pairs = rho[: 2 * n_pairs].reshape(n_pairs, 2).sum(axis=1)
        negative = np.nonzero(pairs <= 0)[0]
        pairs = pairs[: negative[0] if len(negative) else n_pairs]
        pairs = np.minimum.accumulate(pairs)
        tau = -1.0 + 2.0 * pairs.sum() if len(pairs) else 1.0
        total = n_chains * n_iter
        ess[j] = min(total / max(tau, 1.0 / np.log10(total)), total * np.log10(total))
    return ess


def ess_bulk(chains):
    """Bulk effective sample size (rank-normalised split chains), per parameter.

    Parameters
    ----------
    chains : array-like of shape (n_chains, n_iter) or (n_chains, n_iter, n_params)
        Draws after warm-up; at least 4 iterations.

    Returns
    -------
    ess : float or ndarray of shape (n_params,)
        Number of independent draws with the same precision for the centre of
        the distribution; at most ``n_chains * n_iter`` (times ``log10`` of it
        for antithetic chains).

    Examples
    --------
    >>> import numpy as np
    >>> draws = np.random.default_rng(0).normal(size=(4, 500))
    >>> 1500 < ess_bulk(draws) < 2500
    True
    """
    values, scalar = _as_chains(chains)
    if values.shape[1] < 4:
        raise ValueError(f"the ESS needs at least 4 iterations per chain, got {values.shape[1]}")
    ess = _ess(_rank_normalise(_split(values)))
    return float(ess[0]) if scalar else ess


def integrated_autocorrelation_time(chains, c=5.0):
    """Integrated autocorrelation time of a scalar series with Sokal's automatic window.

    Parameters
    ----------
    chains : array-like of shape (n_chains, n_iter)
        One scalar series per chain (autocovariances are averaged over chains).
    c : float, default=5.0
        Window constant: the smallest lag ``M >= c * tau(M)`` is used.

    Returns
    -------
    tau : float
        ``>= 1``; 1 for independent draws. The estimate is reliable when
        ``n_iter`` exceeds about ``50 tau`` (emcee's rule).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(4, 2000))
    >>> round(integrated_autocorrelation_time(x))
    1
    """
    values, _ = _as_chains(chains)
    if values.shape[2] != 1:
        raise ValueError("integrated_autocorrelation_time takes one scalar series per chain")
    n_iter = values.shape[1]
    if n_iter < 4:
        return 1.0
    acov = autocorrelation(values)[:, :, 0].mean(axis=0)
    if not acov[0] > 0:
        return 1.0
    taus = 2.0 * np.cumsum(acov / acov[0]) - 1.0
    window = np.arange(n_iter) >= c * taus
    lag = int(np.argmax(window)) if np.any(window) else n_iter - 1
    return float(max(taus[lag], 1.0))
