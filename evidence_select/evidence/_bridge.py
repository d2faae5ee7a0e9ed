"""Bridge sampling of the evidence from posterior samples (Meng and Wong, 1996).

With ``q(theta) = p(theta) L(theta)`` (unnormalised posterior, ``Z`` its mass)
and a normalised proposal ``g``, the optimal bridge estimate of ``r = Z`` is the
fixed point of

    r = [ (1/n2) sum_j l2_j / (s1 l2_j + s2 r) ] / [ (1/n1) sum_i 1 / (s1 l1_i + s2 r) ]

with ``l = q / g`` at ``n1`` posterior draws (``l1``) and ``n2`` proposal draws
(``l2``), ``s_k = n_k / (n1 + n2)``; ``n1`` is the *effective* number of
posterior draws, since they come from MCMC. Everything is iterated in log space.
The relative mean-square error follows Frühwirth-Schnatter (2004, Eq. 16 in
Gronau et al.'s tutorial), with the posterior term multiplied by the integrated
autocorrelation time of the MCMC draws.

Proposal: a multivariate t (or Gaussian) at the MAP with the inflated Laplace
covariance (inverse Hessian of ``-log q`` by central differences of the
analytic gradient). It is fitted without the posterior draws used in the
bridge, so no sample is used twice.

Label switching. A mixture posterior has ``K!`` symmetric label modes, and a
proposal at one mode covers only one of them: bridge sampling would then
estimate ``Z / K!`` (read ``log K!`` low). For :class:`GaussianMixtureModel` the
proposal is *symmetrised*, ``g_sym(theta) = (1/K!) sum_sigma g(A_sigma theta)``,
where ``A_sigma`` is the linear map that relabels the components in the
unconstrained parameters (a permutation of means and log-variances and, for
the additive log-ratio weights, ``eta'_k = eta_sigma(k) - eta_sigma(K)``; every
``A_sigma`` has ``|det| = 1``). ``g_sym`` is a valid density over all modes for
any overlap between them, so no separation assumption is needed. Because ``q``
and ``g_sym`` are both label-invariant, ``l = q / g_sym`` is unchanged by
relabelling, so the single-mode MCMC draws and un-relabelled proposal draws give
the same ``l`` values as relabelled ones would. For other models exposing
``n_components`` (unknown parameter layout) or ``K > 7`` the estimate is
corrected by ``+log K!`` instead, which assumes the modes do not overlap; the
choice is recorded in ``info["label_switching"]``.
"""

import itertools
import logging
import math
import numbers
import time

import numpy as np
from scipy import optimize
from scipy.special import gammaln

from ..kernels._hmc import adapt_step_size, hmc_init, hmc_step
from ..utils._logspace import logsumexp, log_mean_exp
from ..utils._random import make_generator
from ._ais import _check_data, _check_positive_int, _log_lik_and_grad, _log_lik_sum
from ._result import EvidenceResult

__all__ = ["bridge_log_evidence", "bridge_iteration", "integrated_autocorrelation_time", "find_map"]

logger = logging.getLogger(__name__)

_MAX_PERMUTED_COMPONENTS = 7


# -- building blocks ---------------------------------------------------------------------
def bridge_iteration(log_ratio_post, log_ratio_prop, n_eff_post=None, tol=1e-10, max_iter=10_000):
    """Solve Meng and Wong's optimal bridge equation in log space.

    Parameters
    ----------
    log_ratio_post : ndarray of shape (n1,)
        ``log q - log g`` at posterior draws.
    log_ratio_prop : ndarray of shape (n2,)
        ``log q - log g`` at proposal draws.
    n_eff_post : float, default=None
        Effective size of the posterior sample (``n1`` if None), used in ``s1, s2``.
    tol : float, default=1e-10
        Convergence tolerance on ``log r``.
    max_iter : int, default=10000

    Returns
    -------
    log_r : float
        ``log Z``.
    n_iter : int

    Examples
    --------
    >>> import numpy as np
    >>> round(bridge_iteration(np.full(5, -2.0), np.full(7, -2.0))[0], 6)
    -2.0
    """
    l1 = np.asarray(log_ratio_post, dtype=float)
    l2 = np.asarray(log_ratio_prop, dtype=float)
    n1 = float(len(l1) if n_eff_post is None else n_eff_post)
    n2 = float(len(l2))
    log_s1, log_s2 = np.log(n1 / (n1 + n2)), np.log(n2 / (n1 + n2))
    log_r = float(log_mean_exp(l2))  # importance-sampling start
    if not np.isfinite(log_r):
        log_r = float(np.median(l1))
    for n_iter in range(1, max_iter + 1):
        log_num = logsumexp(l2 - np.logaddexp(log_s1 + l2, log_s2 + log_r)) - np.log(len(l2))
        log_den = logsumexp(-np.logaddexp(log_s1 + l1, log_s2 + log_r)) - np.log(len(l1))
        new = float(log_num - log_den)
        if abs(new - log_r) < tol:
            return new, n_iter
        log_r = new
    logger.warning("bridge iteration did not converge in %d iterations", max_iter)
    return log_r, max_iter


def integrated_autocorrelation_time(chains, c=5.0):
    """Integrated autocorrelation time of scalar MCMC output with Sokal's window.

    Parameters
    ----------
    chains : ndarray of shape (n_chains, n_iter)
        One scalar series per chain (autocovariances are averaged over chains).
    c : float, default=5.0
        Window constant: the smallest lag ``M >= c * tau(M)`` is used.

    Returns
    -------
    tau : float
        ``>= 1`` up to noise; 1 for independent draws.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(4, 2000))
    >>> round(integrated_autocorrelation_time(x))
    1
    """
    chains = np.atleast_2d(np.asarray(chains, dtype=float))
    n_iter = chains.shape[1]
    if n_iter < 4:
        return 1.0
    centred = chains - chains.mean(axis=1, keepdims=True)
    n_fft = 1 << (2 * n_iter - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=n_fft, axis=1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), n=n_fft, axis=1)[:, :n_iter].mean(axis=0)
    if acov[0] <= 0:
        return 1.0
    rho = acov / acov[0]
    taus = 2.0 * np.cumsum(rho) - 1.0
    window = np.arange(n_iter) >= c * taus
    lag = int(np.argmax(window)) if np.any(window) else n_iter - 1
    return float(max(taus[lag], 1.0))


def _log_posterior_and_grad(model, theta, X, y):
    log_lik, grad_lik = _log_lik_and_grad(model, theta, X, y)
    log_prior = np.asarray(model.log_prior(theta), dtype=float)
    return log_prior + log_lik, np.asarray(model.grad_log_prior(theta), dtype=float) + grad_lik


def find_map(model, X, y=None, *, n_starts=5, n_candidates=200, random_state=None):
    """Maximum a posteriori ``theta`` by L-BFGS on the analytic gradient.

    Starts from the ``n_starts`` best of ``n_candidates`` prior draws and keeps
    the best optimum.

    Returns
    -------
    theta_map : ndarray of shape (n_params,)
    log_posterior : float
        Unnormalised log posterior at the MAP.
    n_evaluations : int
        Full-data likelihood evaluations used.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models._targets import GaussianTarget
    >>> theta, _, _ = find_map(GaussianTarget(np.ones(2), 0.01), np.zeros((1, 1)), random_state=0)
    >>> np.round(theta, 2)
    array([0.99, 0.99])
    """
    rng = make_generator(random_state)
    candidates = np.asarray(model.sample_prior(rng, n_candidates), dtype=float)
    scores = model.log_prior(candidates) + _log_lik_sum(model, candidates, X, y)
    n_eval = n_candidates
    best_theta, best_value = None, -np.inf
    for start in candidates[np.argsort(-scores)[:n_starts]]:
        counter = [0]

        def objective(theta):
            counter[0] += 1
            value, grad = _log_posterior_and_grad(model, theta[None], X, y)
            if not np.isfinite(value[0]):
                return np.inf, np.zeros_like(theta)
            return -value[0], -grad[0]

        res = optimize.minimize(objective, start, jac=True, method="L-BFGS-B", options=dict(maxiter=2000))
        n_eval += counter[0]
        if -res.fun > best_value:
            best_theta, best_value = res.x, -res.fun
    return best_theta, float(best_value), n_eval


def _laplace_covariance(model, theta_map, X, y, rel_step=1e-4):
    """Inverse of the Hessian of ``-log q`` at the MAP (central differences of the gradient)."""
    d = len(theta_map)
    steps = rel_step * np.maximum(np.abs(theta_map), 1.0)
    points = np.vstack([theta_map + np.diag(steps), theta_map - np.diag(steps)])
    _, grads = _log_posterior_and_grad(model, points, X, y)
    hessian = -(grads[:d] - grads[d:]) / (2.0 * steps[:, None])
    hessian = 0.5 * (hessian + hessian.T)
    values, vectors = np.linalg.eigh(hessian)
    floor = max(values.max(), 1e-12) * 1e-10
    values = np.maximum(values, floor)  # not PD -> regularise; the bridge stays valid
    return (vectors / values) @ vectors.T, 2 * d


class _Proposal:
    """Multivariate t (``df`` finite) or Gaussian (``df=None``) proposal from a mean and Cholesky factor."""

    def __init__(self, mean, chol, df):
        self.mean, self.chol, self.df = mean, chol, df
        self.d = len(mean)
        self.log_det = float(np.sum(np.log(np.diag(chol))))

    def sample(self, rng, n):
        z = rng.standard_normal((n, self.d))
        if self.df is not None:
            z = z / np.sqrt(rng.chisquare(self.df, size=n) / self.df)[:, None]
        return self.mean + z @ self.chol.T

    def log_pdf(self, theta):
        diff = np.asarray(theta) - self.mean
        shape = diff.shape
        z = np.linalg.solve(self.chol, diff.reshape(-1, self.d).T).T
        maha = np.sum(z**2, axis=1).reshape(shape[:-1])
        d = self.d
        if self.df is None:
            return -0.5 * maha - self.log_det - 0.5 * d * np.log(2.0 * np.pi)
        nu = self.df
        return (gammaln(0.5 * (nu + d)) - gammaln(0.5 * nu) - 0.5 * d * np.log(nu * np.pi) - self.log_det
                - 0.5 * (nu + d) * np.log1p(maha / nu))


def mixture_relabel_maps(model):
    """Linear relabelling maps ``A_sigma`` of a :class:`GaussianMixtureModel`, shape ``(K!, P, P)``.

    ``theta' = A_sigma theta`` gives component ``k`` the parameters of component
    ``sigma(k)``; the additive log-ratio weights transform as
    ``eta'_k = eta_sigma(k) - eta_sigma(K)`` (with ``eta_K = 0``).

    Examples
    --------
    >>> from evidence_select.models import GaussianMixtureModel
    >>> mixture_relabel_maps(GaussianMixtureModel(2, 1)).shape
    (2, 5, 5)
    """
    K, d = model.n_components, model.n_features
    P = model.n_params
    maps = []
    for perm in itertools.permutations(range(K)):
        A = np.zeros((P, P))
        # eta_full = E theta[:K-1] with a zero last entry; eta'_k = eta_full[perm[k]] - eta_full[perm[K-1]].
        for k in range(K - 1):
            if perm[k] < K - 1:
                A[k, perm[k]] += 1.0
            if perm[K - 1] < K - 1:
                A[k, perm[K - 1]] -= 1.0
        for k in range(K):
            for block in (K - 1, K - 1 + K * d):
                src, dst = block + perm[k] * d, block + k * d
                A[dst: dst + d, src: src + d] = np.eye(d)
        maps.append(A)
    return np.array(maps)


def _label_strategy(model, label_permutations):
    K = getattr(model, "n_components", None)
    if not label_permutations or K is None or K < 2:
        return "none", None, 0.0
    from ..models._mixture import GaussianMixtureModel

    if isinstance(model, GaussianMixtureModel) and K <= _MAX_PERMUTED_COMPONENTS:
        return "symmetrised", mixture_relabel_maps(model), 0.0
    return "log_k_factorial", None, float(math.lgamma(K + 1))


# -- posterior sampling ------------------------------------------------------------------
def _hmc_posterior_samples(rng, model, X, y, start, chol, n_chains, n_warmup, n_iter, n_leapfrog):
    """Short dense-mass HMC run from near the MAP; returns ``(n_chains, n_iter, d)`` and evaluations."""
    counter = [0]

    def fn(theta):
        counter[0] += len(theta)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # divergences are rejected
            value, grad = _log_posterior_and_grad(model, theta, X, y)
        value = np.where(np.isnan(value), -np.inf, value)
        return value, grad, None

    position = start + 0.5 * rng.standard_normal((n_chains, len(start))) @ chol.T
    state = hmc_init(position, fn)
    step = 0.5
    draws = np.empty((n_chains, n_iter, len(start)))
    for it in range(n_warmup + n_iter):
        state, info = hmc_step(rng, state, fn, step * rng.uniform(0.8, 1.2, size=n_chains), n_leapfrog, chol)
        if it < n_warmup:
            step = adapt_step_size(step, info.acceptance_rate, target=0.8, gain=0.5)
        else:
            draws[:, it - n_warmup] = state.position
    return draws, counter[0], step


# -- public function ---------------------------------------------------------------------
def bridge_log_evidence(model, X, y=None, *, posterior_samples=None, n_proposal=4000, proposal="t", df=10.0,
                        inflation=1.5, n_chains=32, n_warmup=100, n_iter=100, n_leapfrog=8,
                        label_permutations=True, random_state=None, verbose=0):
    """Bridge-sampling estimate of ``log p(y | X)`` from posterior samples.

    Parameters
    ----------
    model : Model
        Any object implementing the model protocol, gradients included.
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), default=None
    posterior_samples : ndarray of shape (n_draws, n_params) or (n_chains, n_iter, n_params), default=None
        Posterior draws (e.g. SGAIS particles refined by MCMC). A 3-d array is
        read as MCMC chains and its autocorrelation is estimated; a 2-d array is
        treated as independent draws. None runs a short HMC from the MAP.
    n_proposal : int, default=4000
        Draws from the proposal.
    proposal : {"t", "normal"}, default="t"
        Multivariate t with ``df`` degrees of freedom or Gaussian.
    df : float, default=10.0
    inflation : float, default=1.5
        Factor on the Laplace covariance.
    n_chains, n_warmup, n_iter, n_leapfrog : int, default=32, 100, 100, 8
        The HMC run used when ``posterior_samples`` is None.
    label_permutations : bool, default=True
        Correct for the ``K!`` label modes of models with ``n_components``
        (symmetrised proposal, see the module notes).
    random_state : int, numpy.random.Generator or None, default=None
    verbose : int, default=0

    Returns
    -------
    result : EvidenceResult
        ``log_evidence_std`` is the relative RMSE of Frühwirth-Schnatter (2004),
        which is the standard error of ``log Z`` to first order; ``info`` holds
        the MAP, the autocorrelation time, the effective ``n1``, the label
        strategy and the IS estimate from the same proposal draws.

    Notes
    -----
    Meng and Wong, "Simulating ratios of normalizing constants via a simple
    identity" (1996); Frühwirth-Schnatter, "Estimating marginal likelihoods for
    mixture and Markov switching models using bridge sampling techniques"
    (2004); Gronau et al., "A tutorial on bridge sampling" (2017).
    ``n_likelihood_calls`` counts the MAP search, the Hessian, the HMC
    gradients and the evaluations at all draws.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models._targets import GaussianTarget
    >>> target = GaussianTarget(np.zeros(2), cov=0.1)
    >>> res = bridge_log_evidence(target, np.zeros((1, 1)), n_proposal=500, random_state=0)
    >>> abs(res.log_evidence - target.exact_log_evidence()) < 4 * res.log_evidence_std
    True
    """
    start_time = time.perf_counter()
    X, y = _check_data(X, y)
    n_proposal = _check_positive_int(n_proposal, "n_proposal", minimum=2)
    if proposal not in ("t", "normal"):
        raise ValueError(f"proposal must be 't' or 'normal', got {proposal!r}")
    if proposal == "t" and not (isinstance(df, numbers.Real) and df > 0):
        raise ValueError(f"df must be positive, got {df!r}")
    if not (isinstance(inflation, numbers.Real) and inflation > 0):
        raise ValueError(f"inflation must be positive, got {inflation!r}")
    rng = make_generator(random_state)
    d = model.n_params

    theta_map, log_q_map, n_calls = find_map(model, X, y, random_state=rng)
    cov, n_hess = _laplace_covariance(model, theta_map, X, y)
    n_calls += n_hess
    chol = np.linalg.cholesky(cov + 1e-12 * np.eye(d) * np.trace(cov) / d)

    if posterior_samples is None:
        _check_positive_int(n_chains, "n_chains")
        _check_positive_int(n_iter, "n_iter", minimum=4)
        draws, n_hmc, step = _hmc_posterior_samples(rng, model, X, y, theta_map, chol, n_chains,
                                                    _check_positive_int(n_warmup, "n_warmup", minimum=0),
                                                    n_iter, _check_positive_int(n_leapfrog, "n_leapfrog"))
        n_calls += n_hmc
    else:
        draws = np.asarray(posterior_samples, dtype=float)
        if draws.ndim == 2:
            draws = draws[:, None, :]
        if draws.ndim != 3 or draws.shape[-1] != d:
            raise ValueError(f"posterior_samples must have shape (n_draws, {d}) or (n_chains, n_iter, {d}), "
                             f"got {np.shape(posterior_samples)}")
        step = None
    n_chain_post, n_iter_post = draws.shape[:2]
    flat = draws.reshape(-1, d)

    strategy, maps, log_correction = _label_strategy(model, label_permutations)
    g = _Proposal(theta_map, np.sqrt(inflation) * chol, df if proposal == "t" else None)

    def log_g(theta):
        if maps is None:
            return g.log_pdf(theta)
        relabelled = np.einsum("kpq,nq->knp", maps, theta)  # (K!, n, P)
        return logsumexp(g.log_pdf(relabelled), axis=0) - np.log(len(maps))

    prop = g.sample(rng, n_proposal)
    log_q_post = model.log_prior(flat) + _log_lik_sum(model, flat, X, y)
    log_q_prop = model.log_prior(prop) + _log_lik_sum(model, prop, X, y)
    n_calls += len(flat) + n_proposal
    l1 = log_q_post - log_g(flat)
    l2 = log_q_prop - log_g(prop)

    # Effective n1 from the autocorrelation of the bridge's posterior-side function f1 (at the IS start).
    log_r0, _ = bridge_iteration(l1, l2)
    n1 = len(l1)
    f1_chains = _f1(l1, l2, log_r0, n1).reshape(n_chain_post, n_iter_post) if n_iter_post > 1 else None
    tau = integrated_autocorrelation_time(f1_chains) if f1_chains is not None else 1.0
    n1_eff = n1 / tau
    log_r, n_bridge_iter = bridge_iteration(l1, l2, n_eff_post=n1_eff)
    rel_error = _relative_error(l1, l2, log_r, n1_eff, tau)
    log_z = log_r + log_correction
    info = dict(theta_map=theta_map, log_posterior_map=log_q_map, laplace_covariance=cov, tau=tau, n1_eff=n1_eff,
                n_bridge_iterations=n_bridge_iter, label_switching=strategy, log_label_correction=log_correction,
                log_evidence_importance=float(log_mean_exp(l2)) + log_correction, hmc_step_size=step,
                log_evidence_laplace=float(log_q_map + 0.5 * d * np.log(2 * np.pi)
                                           + np.sum(np.log(np.diag(chol))) + log_correction))
    settings = dict(n_proposal=n_proposal, proposal=proposal, df=df, inflation=inflation, n_chains=n_chain_post,
                    n_iter=n_iter_post, n_warmup=n_warmup if posterior_samples is None else 0,
                    n_leapfrog=n_leapfrog, label_permutations=label_permutations)
    return EvidenceResult(float(log_z), float(rel_error), "bridge", float(n_calls), int(n_calls * len(X)),
                          time.perf_counter() - start_time, settings, flat, None, info)


def _s(n1, n2):
    return n1 / (n1 + n2), n2 / (n1 + n2)


def _f1(l1, l2, log_r, n1):
    """``g / (s1 q / r + s2 g)`` at posterior draws (linear scale, bounded by 1 / s2)."""
    s1, s2 = _s(n1, len(l2))
    return np.exp(-np.logaddexp(np.log(s1) + l1 - log_r, np.log(s2)))


def _relative_error(l1, l2, log_r, n1_eff, tau):
    """Frühwirth-Schnatter (2004) relative RMSE of the bridge estimate of ``r``."""
    s1, s2 = _s(n1_eff, len(l2))
    f1 = np.exp(-np.logaddexp(np.log(s1) + l1 - log_r, np.log(s2)))
    f2 = np.exp(l2 - log_r - np.logaddexp(np.log(s1) + l2 - log_r, np.log(s2)))
    term2 = np.var(f2) / np.mean(f2) ** 2 / len(l2)
    term1 = tau * np.var(f1) / np.mean(f1) ** 2 / len(l1)
    return float(np.sqrt(term1 + term2))
