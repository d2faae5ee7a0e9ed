"""Metropolis-corrected Hamiltonian Monte Carlo, vectorised over chains.

A pure kernel on a small state, in BlackJAX's split: :func:`leapfrog` is the
discretisation step, :func:`hmc_step` loops it and applies the Metropolis
correction, :func:`adapt_step_size` tunes the step size from acceptance rates
*between* applications of the kernel (so each application leaves its target
exactly invariant, which is what AIS needs), and :func:`preconditioner_from_samples`
builds a mass matrix from a weighted particle population.

The target is given as ``log_density_fn(position) -> (log_density, grad, aux)``
with shapes ``(n_chains,)``, ``(n_chains, n_params)`` and ``(n_chains, ...)``;
``aux`` is carried in the state untouched (AIS keeps the full-data
log-likelihood there for its next weight update). A :class:`KickedTarget`
also offers a cheaper gradient for the leapfrog kicks.

The mass matrix is given through ``inv_mass_factor`` ``L`` with inverse mass
``M^-1 = L L^T`` (a vector for a diagonal ``L``, or a stack of matrices, one per
equal contiguous block of chains): momenta are ``r ~ N(0, I)`` in
whitened units and the position moves by ``step_size * L r``, i.e. HMC with
kinetic energy ``r.r / 2``. See "Approximate inference", Sec. 2.3.2 (HMC) in the
project papers and Neal, "MCMC using Hamiltonian dynamics" (2011).
"""

from typing import NamedTuple

import numpy as np

from ..utils._logspace import ess_from_log_weights

__all__ = ["HMCState", "HMCInfo", "KickedTarget", "hmc_init", "hmc_step", "leapfrog", "jittered_leapfrog_count",
           "adapt_step_size", "auto_shrinkage", "preconditioner_from_samples", "held_out_preconditioners",
           "start_correlation"]


class HMCState(NamedTuple):
    """Chain positions with their cached target density, gradient and auxiliary output.

    position : (n_chains, n_params); log_density : (n_chains,);
    grad_log_density : (n_chains, n_params); aux : (n_chains, ...) or None.
    """

    position: np.ndarray
    log_density: np.ndarray
    grad_log_density: np.ndarray
    aux: np.ndarray = None


class HMCInfo(NamedTuple):
    """Per-step diagnostics, all of shape ``(n_chains,)``.

    acceptance_rate is ``min(1, exp(-energy_error))`` (0 for divergent
    trajectories); is_divergent marks non-finite proposals.
    """

    acceptance_rate: np.ndarray
    is_accepted: np.ndarray
    is_divergent: np.ndarray
    energy_error: np.ndarray


class KickedTarget(NamedTuple):
    """A target whose leapfrog kicks use a cheaper gradient than its exact one.

    Called, it is the exact ``log_density_fn`` (``position -> (log_density, grad,
    aux)``), as any other target. :func:`leapfrog` and :func:`hmc_init` instead
    kick with ``kick_gradient_fn(position) -> grad`` (a single-precision
    gradient, say) and read the density only where it is needed, at a
    trajectory's end, from ``density_fn(position) -> (log_density, aux)``; the
    state caches the kick gradient. Leapfrog with any deterministic kick
    gradient is still reversible and volume preserving, so the Metropolis
    correction with the exact density leaves the target exactly invariant; a
    worse approximation only accepts less.

    Examples
    --------
    >>> import numpy as np
    >>> exact = lambda x: (-0.5 * np.sum(x**2, axis=1), -x, None)
    >>> target = KickedTarget(exact, lambda x: -x.astype(np.float32), lambda x: (exact(x)[0], None))
    >>> hmc_init(np.ones((2, 3)), target).grad_log_density.dtype
    dtype('float64')
    """

    log_density_fn: object
    kick_gradient_fn: object
    density_fn: object

    def __call__(self, position):
        return self.log_density_fn(position)


def _evaluate(log_density_fn, position, needs_density=True):
    """``(log_density, grad, aux)`` at ``position``; for a :class:`KickedTarget` the kick gradient.

    Where ``needs_density`` is False (a trajectory's inner steps) a kicked
    target's density is not computed and ``(None, grad, None)`` returned.
    """
    if not isinstance(log_density_fn, KickedTarget):
        return log_density_fn(position)
    grad = log_density_fn.kick_gradient_fn(position)
    if not needs_density:
        return None, grad, None
    log_density, aux = log_density_fn.density_fn(position)
    return log_density, grad, aux


def hmc_init(position, log_density_fn):
    """Evaluate the target at ``position`` and return an :class:`HMCState`.

    Parameters
    ----------
    position : ndarray of shape (n_chains, n_params)
    log_density_fn : callable or KickedTarget
        ``position -> (log_density, grad, aux)``.

    Returns
    -------
    state : HMCState

    Examples
    --------
    >>> import numpy as np
    >>> fn = lambda x: (-0.5 * np.sum(x**2, axis=1), -x, None)
    >>> hmc_init(np.zeros((2, 3)), fn).log_density
    array([-0., -0.])
    """
    position = np.array(position, dtype=float)
    log_density, grad, aux = _evaluate(log_density_fn, position)
    return HMCState(position, np.asarray(log_density, dtype=float), np.asarray(grad, dtype=float), aux)


def _apply(factor, v):
    """``L v`` row-wise for a diagonal (vector), lower-triangular (matrix) or per-group (stack) factor.

    A stack ``(n_groups, n_params, n_params)`` applies ``factor[g]`` to the ``g``-th of
    ``n_groups`` equal contiguous blocks of chains.
    """
    if factor.ndim == 1:
        return v * factor
    if factor.ndim == 2:
        return v @ factor.T
    blocks = v.reshape(len(factor), -1, v.shape[1])
    # One batched product (BLAS, or numpy's matmul loop): with _apply_t it runs at every leapfrog step of every chain.
    return np.matmul(blocks, factor.transpose(0, 2, 1)).reshape(v.shape)


def _apply_t(factor, v):
    """``L^T v`` row-wise."""
    if factor.ndim == 1:
        return v * factor
    if factor.ndim == 2:
        return v @ factor
    blocks = v.reshape(len(factor), -1, v.shape[1])
    return np.matmul(blocks, factor).reshape(v.shape)


def leapfrog(state, momentum, log_density_fn, step_size, n_leapfrog, inv_mass_factor):
    """Run ``n_leapfrog`` leapfrog steps of size ``step_size`` (per chain) from ``state``.

    Parameters
    ----------
    state : HMCState
    momentum : ndarray of shape (n_chains, n_params)
        Whitened momenta ``r``.
    log_density_fn : callable or KickedTarget
        As in :func:`hmc_step`; a kicked target's density is read only after the last step.
    step_size : ndarray of shape (n_chains, 1)
    n_leapfrog : int or ndarray of shape (n_chains,)
        Steps per chain. With different counts every chain is integrated for the
        largest; a chain that has taken its own count stays where it ended (its
        target is evaluated there again, at no change).
    inv_mass_factor : ndarray of shape (n_params,) or (n_params, n_params)

    Returns
    -------
    new_state, new_momentum
        The end point of the trajectory (not yet accepted or rejected).
    """
    position, grad = state.position, state.grad_log_density
    n_steps = np.asarray(n_leapfrog)
    n_max = int(n_steps.max())
    # per chain: which chains still move at each step (None when all do, the common case)
    moving = None if n_steps.ndim == 0 or np.all(n_steps == n_max) else np.arange(n_max)[:, None] < n_steps
    r = momentum + 0.5 * step_size * _apply_t(inv_mass_factor, grad)
    log_density, aux = state.log_density, state.aux
    for step in range(n_max):
        # A divergent chain carries inf/NaN from here on; hmc_step rejects it, so no warning.
        with np.errstate(invalid="ignore", over="ignore"):
            moved = position + step_size * _apply(inv_mass_factor, r)
        position = moved if moving is None else np.where(moving[step][:, None], moved, position)
        log_density, grad, aux = _evaluate(log_density_fn, position, needs_density=step == n_max - 1)
        if moving is None:
            scale = step_size if step == n_max - 1 else 2.0 * step_size
        else:  # the last kick of a chain's own trajectory is a half kick
            scale = np.where((step == n_steps - 1)[:, None], step_size, 2.0 * step_size)
        with np.errstate(invalid="ignore", over="ignore"):
            kicked = r + 0.5 * scale * _apply_t(inv_mass_factor, grad)
        r = kicked if moving is None else np.where(moving[step][:, None], kicked, r)
    return HMCState(position, np.asarray(log_density, dtype=float), np.asarray(grad, dtype=float), aux), r


def jittered_leapfrog_count(rng, step_size, trajectory_length, max_leapfrog):
    """Leapfrog steps for a trajectory of ``trajectory_length * U(0.5, 1.5)`` whitened units at ``step_size``.

    A fixed integration time rather than a fixed count of steps: where the
    adapted step is small (many parameters, a curved or flat target) the
    trajectory still crosses the target instead of diffusing. The jitter, drawn
    independently of the state (a mixture of invariant kernels, so still
    invariant), avoids the resonances of a fixed length. ``step_size`` may be an
    array (one count per entry, each with its own jitter); counts lie in
    ``[1, max_leapfrog]``.

    Examples
    --------
    >>> import numpy as np
    >>> int(jittered_leapfrog_count(np.random.default_rng(0), 0.5, 2.0, 64))
    5
    """
    step_size = np.asarray(step_size, dtype=float)
    length = trajectory_length * rng.uniform(0.5, 1.5, size=step_size.shape or None)
    return np.clip(np.ceil(length / step_size), 1, max_leapfrog).astype(int)


def hmc_step(rng, state, log_density_fn, step_size, n_leapfrog, inv_mass_factor=None):
    """One Metropolis-corrected HMC transition for every chain at once.

    Parameters
    ----------
    rng : numpy.random.Generator
    state : HMCState
    log_density_fn : callable or KickedTarget
        ``position -> (log_density, grad, aux)``.
    step_size : float or ndarray of shape (n_chains,)
        Leapfrog step size in whitened units.
    n_leapfrog : int or ndarray of shape (n_chains,)
        Number of leapfrog steps per trajectory (per chain).
    inv_mass_factor : ndarray of shape (n_params,) or (n_params, n_params), default=None
        Factor ``L`` of the inverse mass ``L L^T``; None means the identity.

    Returns
    -------
    new_state : HMCState
    info : HMCInfo

    Notes
    -----
    The Hamiltonian is ``-log_density + r.r / 2``. Proposals whose density or
    energy is not finite (divergences) are rejected, which keeps the target
    invariant. The kernel leaves the target exactly invariant for any fixed
    ``step_size``, ``n_leapfrog`` and mass.

    Examples
    --------
    >>> import numpy as np
    >>> fn = lambda x: (-0.5 * np.sum(x**2, axis=1), -x, None)
    >>> rng = np.random.default_rng(0)
    >>> state = hmc_init(np.zeros((4, 2)), fn)
    >>> state, info = hmc_step(rng, state, fn, 0.5, 5)
    >>> state.position.shape, info.acceptance_rate.shape
    ((4, 2), (4,))
    """
    n_chains, n_params = state.position.shape
    if inv_mass_factor is None:
        inv_mass_factor = np.ones(n_params)
    inv_mass_factor = np.asarray(inv_mass_factor, dtype=float)
    step = np.broadcast_to(np.asarray(step_size, dtype=float), (n_chains,))[:, None]
    momentum = rng.standard_normal((n_chains, n_params))
    proposal, new_momentum = leapfrog(state, momentum, log_density_fn, step, np.asarray(n_leapfrog, dtype=int),
                                       inv_mass_factor)
    with np.errstate(invalid="ignore", over="ignore"):
        energy_error = (-proposal.log_density + 0.5 * np.sum(new_momentum**2, axis=1)
                        + state.log_density - 0.5 * np.sum(momentum**2, axis=1))
    divergent = ~np.isfinite(energy_error) | ~np.all(np.isfinite(proposal.grad_log_density), axis=1)
    energy_error = np.where(divergent, np.inf, energy_error)
    with np.errstate(over="ignore"):
        acceptance = np.where(divergent, 0.0, np.exp(-np.maximum(energy_error, 0.0)))
    accept = rng.uniform(size=n_chains) < acceptance
    new_state = HMCState(
        np.where(accept[:, None], proposal.position, state.position),
        np.where(accept, proposal.log_density, state.log_density),
        np.where(accept[:, None], proposal.grad_log_density, state.grad_log_density),
        _select_aux(accept, proposal.aux, state.aux),
    )
    return new_state, HMCInfo(acceptance, accept, divergent, energy_error)


def _select_aux(accept, new, old):
    if new is None or old is None:
        return None
    new, old = np.asarray(new), np.asarray(old)
    mask = accept.reshape((-1,) + (1,) * (new.ndim - 1))
    return np.where(mask, new, old)


def adapt_step_size(step_size, acceptance_rate, target=0.75, gain=1.5, bounds=(1e-4, 2.0)):
    """Multiplicative step-size update towards a target mean acceptance rate.

    ``log step_size += gain * (mean(acceptance_rate) - target)``, clipped to
    ``bounds``. Used between kernel applications (e.g. between AIS temperatures),
    never inside one, so every application leaves its target invariant.

    Parameters
    ----------
    step_size : float
    acceptance_rate : array-like
        Acceptance probabilities of the last application(s).
    target : float, default=0.75
    gain : float, default=1.5
    bounds : (float, float), default=(1e-4, 2.0)

    Returns
    -------
    float

    Examples
    --------
    >>> adapt_step_size(0.1, [1.0, 1.0]) > 0.1
    True
    """
    mean_rate = float(np.mean(acceptance_rate))
    return float(np.clip(step_size * np.exp(gain * (mean_rate - target)), *bounds))


def start_correlation(start, position):
    """Mean over coordinates of the across-chain correlation between ``start`` and ``position``.

    Both arrays are ``(n_chains, n_params)``; coordinates that are constant in
    either are left out (0 if all are). Moves that run until it falls to a
    threshold stop once the chains (resampled copies included) have forgotten
    where they started.

    Examples
    --------
    >>> import numpy as np
    >>> start = np.random.default_rng(0).normal(size=(500, 3))
    >>> round(start_correlation(start, start), 6)
    1.0
    >>> abs(start_correlation(start, np.random.default_rng(1).normal(size=(500, 3)))) < 0.1
    True
    """
    z0 = start - start.mean(axis=0)
    z1 = position - position.mean(axis=0)
    denom = np.sqrt(np.sum(z0**2, axis=0) * np.sum(z1**2, axis=0))
    ok = denom > 0
    return float(np.mean(np.sum(z0 * z1, axis=0)[ok] / denom[ok])) if np.any(ok) else 0.0


def sample_weights(log_weights):
    """Normalised weights ``exp(log_weights)`` summing to one (shifted by the maximum first, so none overflows)."""
    log_weights = np.asarray(log_weights, dtype=float)
    weights = np.exp(log_weights - np.max(log_weights))
    return weights / weights.sum()


#: With an effective sample size above this many times the dimension, the sample covariance is well determined and
#: ``shrinkage="auto"`` leaves it unshrunk; below, it is shrunk by ``FEW_SAMPLES_SHRINKAGE`` towards its diagonal.
WELL_DETERMINED = 2
FEW_SAMPLES_SHRINKAGE = 0.05


def auto_shrinkage(effective_size, n_params):
    """The diagonal shrinkage ``shrinkage="auto"`` picks for samples of ``effective_size`` (Kish's, for weighted
    ones) in ``n_params`` dimensions: none above ``WELL_DETERMINED`` samples per dimension, else
    ``FEW_SAMPLES_SHRINKAGE``.

    Shrinking a covariance towards its diagonal keeps a poorly determined
    estimate well conditioned; with ample samples it only does harm. For a
    strongly correlated posterior (a softmax's classes, a regression with
    correlated features) even 5% towards the diagonal widens the thin
    directions by orders of magnitude in the whitened frame, and the step size
    falls with them.

    Examples
    --------
    >>> auto_shrinkage(100, 10), auto_shrinkage(100, 64)
    (0.0, 0.05)
    """
    return 0.0 if effective_size > WELL_DETERMINED * n_params else FEW_SAMPLES_SHRINKAGE


def preconditioner_from_samples(samples, log_weights=None, *, dense=True, shrinkage=0.05, jitter=1e-10):
    """Inverse-mass factor ``L`` from a weighted particle population.

    ``L L^T`` is the weighted covariance of ``samples`` (shrunk towards its
    diagonal by ``shrinkage``), so HMC in whitened units sees a roughly isotropic
    target.

    Parameters
    ----------
    samples : ndarray of shape (n_particles, n_params)
    log_weights : ndarray of shape (n_particles,), default=None
        Unnormalised log-weights; None means equal weights.
    dense : bool, default=True
        Lower Cholesky factor of the covariance if True, else the vector of
        standard deviations.
    shrinkage : float or "auto", default=0.05
        Weight of the diagonal in ``(1 - s) C + s diag(C)``; keeps ``C`` positive
        definite with few particles. ``"auto"``: :func:`auto_shrinkage` of the
        samples' effective size (none once it exceeds ``WELL_DETERMINED``
        times the dimension).
    jitter : float, default=1e-10

    Returns
    -------
    inv_mass_factor : ndarray of shape (n_params, n_params) or (n_params,)

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(500, 2)) * [1.0, 3.0]
    >>> np.round(preconditioner_from_samples(x, dense=False), 1)
    array([1. , 2.9])
    """
    samples = np.asarray(samples, dtype=float)
    weights = np.full(len(samples), 1.0 / len(samples)) if log_weights is None else sample_weights(log_weights)
    mean = weights @ samples
    centred = samples - mean
    variances = weights @ centred**2 + jitter
    if not dense:
        return np.sqrt(variances)
    cov = (centred * weights[:, None]).T @ centred
    if isinstance(shrinkage, str):
        if shrinkage != "auto":
            raise ValueError(f"shrinkage must be a float or 'auto', got {shrinkage!r}")
        effective_size = len(samples) if log_weights is None else ess_from_log_weights(log_weights)
        shrinkage = auto_shrinkage(effective_size, len(mean))
    cov = (1.0 - shrinkage) * cov + shrinkage * np.diag(np.diag(cov)) + jitter * np.eye(len(mean))
    try:
        return np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        return np.sqrt(variances)


def held_out_preconditioners(samples, log_weights=None, n_folds=2, *, dense=True):
    """One inverse-mass factor per fold of chains, each estimated from the *other* folds.

    A mass matrix estimated from the population it then moves makes each chain's
    kernel depend on that chain's own position, and such a kernel does not leave
    its target invariant (with tens of dimensions and a few hundred chains the
    chain's own share of the covariance is large; in AIS the distortion adds up
    over temperatures into a biased ``log Z``). Estimating fold ``g``'s factor
    from the other folds only keeps every chain's kernel independent of where that
    chain is.

    Parameters
    ----------
    samples : ndarray of shape (n_particles, n_params)
        Ordered in ``n_folds`` equal contiguous blocks.
    log_weights : ndarray of shape (n_particles,), default=None
        Unnormalised log-weights; ``-inf`` (or NaN) entries are left out.
    n_folds : int, default=2
        At least 2.
    dense : bool, default=True
        See :func:`preconditioner_from_samples`; the covariance is shrunk
        towards its diagonal only when the other folds' effective sample size
        is small for the dimension (``shrinkage="auto"``).

    Returns
    -------
    inv_mass_factors : ndarray of shape (n_folds, n_params, n_params)
        For :func:`hmc_step` (a diagonal factor is returned as a diagonal matrix).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(400, 2)) * [1.0, 3.0]
    >>> held_out_preconditioners(x, n_folds=4, dense=False).shape
    (4, 2, 2)
    """
    samples = np.asarray(samples, dtype=float)
    n_particles, n_params = samples.shape
    if n_folds < 2 or n_particles % n_folds:
        raise ValueError(f"n_folds must be >= 2 and divide the {n_particles} particles, got {n_folds}")
    log_weights = np.zeros(n_particles) if log_weights is None else np.asarray(log_weights, dtype=float)
    fold = np.repeat(np.arange(n_folds), n_particles // n_folds)
    alive = np.isfinite(log_weights)
    out = np.empty((n_folds, n_params, n_params))
    for g in range(n_folds):
        keep = alive & (fold != g)
        if keep.sum() < 2:  # the other folds are all dead: no scale information, use the identity
            out[g] = np.eye(n_params)
            continue
        factor = preconditioner_from_samples(samples[keep], log_weights[keep], dense=dense, shrinkage="auto")
        out[g] = factor if factor.ndim == 2 else np.diag(factor)
    return out
