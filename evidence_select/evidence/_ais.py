"""Annealed importance sampling on the full data (thesis Ch. 3.3, Algorithm 6).

Independent chains start from the prior and follow the geometric path
``f_lambda(theta) = p(theta) L(theta)^lambda`` from ``lambda = 0`` to ``1``. At
each temperature the log-weights grow by ``(lambda_t - lambda_{t-1}) log L`` at
the particles' current positions (Eq. 3.37), then every chain makes
``n_mcmc_steps`` Metropolis-corrected HMC transitions that leave ``f_lambda_t``
invariant. ``Z`` is the mean of the final weights (Eq. 3.39 with ``h = 1``).

Schedules:

- ``"adaptive"`` (Alg. 6): the next increment solves ``CESS(Delta) = target_ess``
  by bisection on ``Delta`` in ``(0, 1 - lambda]``, taking the whole remaining
  step when it keeps the CESS above target. ``CESS = (sum_i W_i w_i)^2 /
  sum_i W_i w_i^2`` is the conditional ESS (Zhou, Johansen and Aston, 2016) of
  the incremental weights ``w_i = L_i^Delta`` under the normalised current
  weights ``W_i``, as a fraction of ``n_chains``; with equal ``W`` it is Eq. (3.42).
- ``"sigmoid"``: Grosse et al.'s fixed sigmoidal schedule
  ``lambda_t = (s(delta (2t/T - 1)) - s(-delta)) / (s(delta) - s(-delta))``
  with ``s`` the logistic function.

Adaptation (schedule, HMC step size, mass matrix from the weighted population)
uses only states *before* each kernel application, so each transition leaves its
intermediate target invariant; the estimator is consistent, with the usual
O(1/n_chains) bias of adaptive SMC/AIS.
"""

import logging
import numbers
import time

import numpy as np

from ..kernels._hmc import adapt_step_size, hmc_init, hmc_step, preconditioner_from_samples
from ..utils._logspace import ess_from_log_weights, log_mean_exp, logsumexp, normalize_log_weights
from ._result import EvidenceResult

__all__ = ["ais_log_evidence", "sigmoid_schedule", "next_tempering"]

logger = logging.getLogger(__name__)

_MAX_CELLS = 2**20  # particles x rows per model call; bounds memory at N = 1e4..1e5


# -- shared helpers (also used by _ns and _bridge) ----------------------------------------
def _rng_from(random_state):
    """A ``numpy.random.Generator`` from an int, None, Generator or RandomState."""
    if random_state is None or isinstance(random_state, (numbers.Integral, np.random.SeedSequence)):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise ValueError(f"random_state must be an int, None, a numpy Generator or RandomState, got {random_state!r}")


def _check_positive_int(value, name, minimum=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _check_data(X, y):
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or len(X) == 0:
        raise ValueError(f"X must be a non-empty 2-d array, got shape {X.shape}")
    if y is not None:
        y = np.asarray(y)
        if len(y) != len(X):
            raise ValueError(f"y has {len(y)} rows but X has {len(X)}")
    return X, y


def _chunks(n_particles, n_rows):
    step = max(1, _MAX_CELLS // max(n_rows, 1))
    return [slice(i, min(i + step, n_particles)) for i in range(0, n_particles, step)]


def _log_lik_sum(model, theta, X, y):
    """Full-data log-likelihood per particle, ``(n_particles,)``, in memory-bounded chunks."""
    theta = np.asarray(theta, dtype=float)
    out = np.empty(len(theta))
    for part in _chunks(len(theta), len(X)):
        out[part] = model.log_likelihood_sum(theta[part], X, y)
    if np.any(np.isnan(out)):
        raise ValueError(f"log_likelihood of {type(model).__name__} returned NaN for "
                         f"{int(np.isnan(out).sum())} of {len(out)} particles")
    return out


def _log_lik_and_grad(model, theta, X, y):
    """Full-data log-likelihood ``(n,)`` and its gradient ``(n, n_params)``."""
    theta = np.asarray(theta, dtype=float)
    log_lik = np.empty(len(theta))
    grad = np.empty_like(theta)
    for part in _chunks(len(theta), len(X)):
        log_lik[part] = model.log_likelihood_sum(theta[part], X, y)
        grad[part] = model.grad_log_likelihood(theta[part], X, y, 1.0)
    return log_lik, grad


def _progress(verbose, total, desc):
    """A tqdm bar when ``verbose`` and tqdm is installed, else None."""
    if not verbose:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # optional extra
        return None
    return tqdm(total=total, desc=desc, leave=False)


# -- schedules -------------------------------------------------------------------------
def sigmoid_schedule(n_temperatures, delta=4.0):
    """Grosse et al.'s sigmoidal annealing schedule from 0 to 1.

    Parameters
    ----------
    n_temperatures : int
        Number of steps ``T`` (the result has ``T + 1`` values).
    delta : float, default=4.0
        Steepness; larger values put more temperatures near both ends.

    Returns
    -------
    tempering : ndarray of shape (n_temperatures + 1,)

    Examples
    --------
    >>> sigmoid_schedule(4)[[0, -1]]
    array([0., 1.])
    """
    n_temperatures = _check_positive_int(n_temperatures, "n_temperatures")
    s = 1.0 / (1.0 + np.exp(-delta * (2.0 * np.arange(n_temperatures + 1) / n_temperatures - 1.0)))
    out = (s - s[0]) / (s[-1] - s[0])
    out[0], out[-1] = 0.0, 1.0
    return out


def _log_cess_fraction(log_weights_norm, log_lik, delta):
    """``log(CESS / n)`` of the increment ``delta`` under normalised log-weights."""
    with np.errstate(invalid="ignore"):
        inc = delta * log_lik
    inc = np.where(np.isnan(inc), -np.inf, inc)  # 0 * -inf: a zero-likelihood particle
    return 2.0 * logsumexp(log_weights_norm + inc) - logsumexp(log_weights_norm + 2.0 * inc)


def next_tempering(tempering, log_weights, log_lik, target_ess, n_bisect=60):
    """Next annealing parameter by bisection on the conditional ESS (Alg. 6, line 5).

    Parameters
    ----------
    tempering : float
        Current ``lambda`` in ``[0, 1)``.
    log_weights : ndarray of shape (n_chains,)
        Current (unnormalised) log-weights.
    log_lik : ndarray of shape (n_chains,)
        Full-data log-likelihood at the current positions.
    target_ess : float
        Target CESS as a fraction of ``n_chains`` in ``(0, 1)``.
    n_bisect : int, default=60

    Returns
    -------
    float
        The new ``lambda``; exactly 1.0 when the whole step keeps CESS >= target.

    Examples
    --------
    >>> import numpy as np
    >>> next_tempering(0.0, np.zeros(3), np.zeros(3), 0.5)
    1.0
    """
    remaining = 1.0 - tempering
    log_w = normalize_log_weights(log_weights)
    log_target = np.log(target_ess)
    if _log_cess_fraction(log_w, log_lik, remaining) >= log_target:
        return 1.0
    low, high = 0.0, remaining
    for _ in range(n_bisect):
        mid = 0.5 * (low + high)
        if _log_cess_fraction(log_w, log_lik, mid) >= log_target:
            low = mid
        else:
            high = mid
    return tempering + max(low, np.finfo(float).eps * remaining)


# -- one AIS run -----------------------------------------------------------------------
class _TemperedTarget:
    """``log p(theta) + tempering * log L(theta)`` with the pieces cached in ``aux``.

    ``aux`` has shape ``(n, 2 + 2 n_params)``: ``[log_prior, log_lik, grad_prior, grad_lik]``,
    so a change of ``tempering`` needs no new model evaluation.
    """

    def __init__(self, model, X, y, tempering):
        self.model, self.X, self.y, self.tempering = model, X, y, tempering
        self.n_evaluations = 0

    def __call__(self, theta):
        model = self.model
        # Leapfrog trajectories may diverge to extreme positions where the model
        # overflows; a non-finite density there is a divergence, rejected by HMC.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            log_prior = np.asarray(model.log_prior(theta), dtype=float)
            grad_prior = np.asarray(model.grad_log_prior(theta), dtype=float)
            log_lik, grad_lik = _log_lik_and_grad(model, theta, self.X, self.y)
        self.n_evaluations += len(theta)
        aux = np.column_stack([log_prior, log_lik, grad_prior, grad_lik])
        return self.combine(aux)

    def combine(self, aux):
        d = (aux.shape[1] - 2) // 2
        lam = self.tempering
        with np.errstate(invalid="ignore"):
            log_density = aux[:, 0] + lam * aux[:, 1]
        log_density = np.where(np.isnan(log_density), -np.inf, log_density)
        grad = aux[:, 2: 2 + d] + lam * aux[:, 2 + d:]
        return log_density, grad, aux


def _ais_run(rng, model, X, y, *, n_chains, schedule, target_ess, n_temperatures, sigmoid_delta, n_mcmc_steps,
             n_leapfrog, step_size, target_accept, mass, max_temperatures, bar):
    target = _TemperedTarget(model, X, y, 0.0)
    state = hmc_init(np.asarray(model.sample_prior(rng, n_chains), dtype=float), target)
    log_weights = np.zeros(n_chains)
    fixed = sigmoid_schedule(n_temperatures, sigmoid_delta) if schedule == "sigmoid" else None
    tempering, t = 0.0, 0
    temperatures, acceptance, cess = [0.0], [], []
    while tempering < 1.0:
        t += 1
        log_lik = state.aux[:, 1]
        if fixed is not None:
            new_tempering = float(fixed[t])
        else:
            new_tempering = next_tempering(tempering, log_weights, log_lik, target_ess)
            if t >= max_temperatures and new_tempering < 1.0:
                raise RuntimeError(f"AIS needed more than max_temperatures={max_temperatures} temperatures "
                                   f"(reached lambda={tempering:.3g}); raise target_ess less or raise the cap")
        delta = new_tempering - tempering
        cess.append(float(np.exp(_log_cess_fraction(normalize_log_weights(log_weights), log_lik, delta))))
        with np.errstate(invalid="ignore"):
            increment = delta * log_lik
        log_weights = log_weights + np.where(np.isnan(increment), -np.inf, increment)
        tempering = new_tempering
        temperatures.append(tempering)
        # Kernel for f_tempering: mass from the weighted population, fixed during the moves.
        target.tempering = tempering
        log_density, grad, _ = target.combine(state.aux)
        state = state._replace(log_density=log_density, grad_log_density=grad)
        alive = np.isfinite(log_weights)
        if mass == "identity":
            factor = np.ones(model.n_params)
        else:
            factor = preconditioner_from_samples(state.position[alive], log_weights[alive], dense=(mass == "dense"))
        rates = []
        for _ in range(n_mcmc_steps):
            jitter = rng.uniform(0.8, 1.2, size=n_chains)
            state, info = hmc_step(rng, state, target, step_size * jitter, n_leapfrog, factor)
            rates.append(info.acceptance_rate)
        mean_rate = float(np.mean(rates))
        acceptance.append(mean_rate)
        step_size = adapt_step_size(step_size, mean_rate, target=target_accept)
        if bar is not None:
            bar.update(tempering - bar.n)
    return state, log_weights, target.n_evaluations, dict(
        temperatures=np.array(temperatures), acceptance=np.array(acceptance), cess=np.array(cess),
        final_step_size=step_size)


def ais_log_evidence(model, X, y=None, *, n_chains=200, schedule="adaptive", target_ess=0.99, n_temperatures=500,
                     sigmoid_delta=4.0, n_mcmc_steps=2, n_leapfrog=10, step_size=0.5, target_accept=0.75,
                     mass="dense", n_repeats=1, max_temperatures=20_000, random_state=None, verbose=0):
    """Annealed-importance-sampling estimate of ``log p(y | X)`` for any protocol model.

    Parameters
    ----------
    model : Model
        Any object implementing the model protocol, gradients included.
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), default=None
    n_chains : int, default=200
        Independent annealing chains, moved together in vectorised HMC.
    schedule : {"adaptive", "sigmoid"}, default="adaptive"
        Adaptive CESS bisection (thesis Alg. 6) or Grosse et al.'s fixed sigmoid.
    target_ess : float, default=0.99
        Target conditional ESS per temperature, as a fraction of ``n_chains``.
    n_temperatures : int, default=500
        Number of steps of the sigmoid schedule (ignored when adaptive).
    sigmoid_delta : float, default=4.0
        Steepness of the sigmoid schedule.
    n_mcmc_steps : int, default=2
        HMC transitions per temperature.
    n_leapfrog : int, default=10
        Leapfrog steps per HMC trajectory.
    step_size : float, default=0.5
        Initial leapfrog step in whitened units; adapted between temperatures.
    target_accept : float, default=0.75
        Target mean acceptance rate of the step-size adaptation.
    mass : {"dense", "diag", "identity"}, default="dense"
        Inverse mass from the weighted population's covariance (dense or its
        diagonal), re-estimated at every temperature, or the identity.
    n_repeats : int, default=1
        Independent AIS runs; the estimate pools all chains.
    max_temperatures : int, default=20000
        Cap on adaptive temperatures.
    random_state : int, numpy.random.Generator or None, default=None
    verbose : int, default=0
        ``>= 1`` shows a progress bar (tqdm, if installed).

    Returns
    -------
    result : EvidenceResult
        ``log_evidence`` is ``log mean exp`` of all final log-weights;
        ``log_evidence_std`` is the delta-method standard error from the weights,
        ``sqrt(1/ESS - 1/n)``; ``info`` adds ``"std_weights"``,
        ``"std_repeats"`` (spread of the per-repeat estimates over
        ``sqrt(n_repeats)``, NaN for one repeat), ``"log_evidence_repeats"``, the
        schedules, acceptance rates and ESS. ``samples``/``log_weights`` are the
        final particles and their log-weights.

    Notes
    -----
    Neal, "Annealed importance sampling" (2001); the thesis "Evidence
    Estimation Using Stochastic Likelihood Approximations", Sec. 3.3,
    Eq. (3.36)-(3.43) and Algorithm 6; Grosse, Ghahramani and Adams,
    "Sandwiching the marginal likelihood using bidirectional Monte Carlo" (2015)
    for the sigmoid schedule. ``n_likelihood_calls`` counts one per particle
    and leapfrog step (each evaluates the full-data log-likelihood and its
    gradient together) plus the initial evaluation.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.models._targets import GaussianTarget
    >>> target = GaussianTarget(np.zeros(2), cov=0.1)
    >>> res = ais_log_evidence(target, np.zeros((1, 1)), n_chains=100, random_state=0)
    >>> res.method, bool(abs(res.log_evidence - target.exact_log_evidence()) < 0.5)
    ('ais', True)
    """
    start_time = time.perf_counter()
    X, y = _check_data(X, y)
    n_chains = _check_positive_int(n_chains, "n_chains", minimum=2)
    if schedule not in ("adaptive", "sigmoid"):
        raise ValueError(f"schedule must be 'adaptive' or 'sigmoid', got {schedule!r}")
    if not (isinstance(target_ess, numbers.Real) and 0.0 < target_ess < 1.0):
        raise ValueError(f"target_ess must be a fraction in (0, 1), got {target_ess!r}")
    if mass not in ("dense", "diag", "identity"):
        raise ValueError(f"mass must be 'dense', 'diag' or 'identity', got {mass!r}")
    if not (isinstance(step_size, numbers.Real) and step_size > 0):
        raise ValueError(f"step_size must be positive, got {step_size!r}")
    if not (isinstance(target_accept, numbers.Real) and 0.0 < target_accept < 1.0):
        raise ValueError(f"target_accept must be in (0, 1), got {target_accept!r}")
    n_mcmc_steps = _check_positive_int(n_mcmc_steps, "n_mcmc_steps", minimum=0)
    n_leapfrog = _check_positive_int(n_leapfrog, "n_leapfrog")
    n_repeats = _check_positive_int(n_repeats, "n_repeats")
    n_temperatures = _check_positive_int(n_temperatures, "n_temperatures")
    rng = _rng_from(random_state)

    runs = []
    n_calls = 0
    for repeat in range(n_repeats):
        bar = _progress(verbose, total=1.0, desc=f"AIS {repeat + 1}/{n_repeats}")
        state, log_weights, n_eval, run_info = _ais_run(
            rng, model, X, y, n_chains=n_chains, schedule=schedule, target_ess=target_ess,
            n_temperatures=n_temperatures, sigmoid_delta=sigmoid_delta, n_mcmc_steps=n_mcmc_steps,
            n_leapfrog=n_leapfrog, step_size=float(step_size), target_accept=target_accept, mass=mass,
            max_temperatures=max_temperatures, bar=bar)
        if bar is not None:
            bar.close()
        n_calls += n_eval
        runs.append((state.position, log_weights, run_info))
        logger.info("AIS repeat %d: log Z = %.4f with %d temperatures", repeat, log_mean_exp(log_weights),
                    len(run_info["temperatures"]) - 1)

    samples = np.vstack([r[0] for r in runs])
    log_weights = np.concatenate([r[1] for r in runs])
    log_z = float(log_mean_exp(log_weights))
    n_total = len(log_weights)
    ess = float(ess_from_log_weights(log_weights))
    std_weights = float(np.sqrt(max(1.0 / ess - 1.0 / n_total, 0.0))) if ess > 0 else np.inf
    # Lognormal-weight variant: var(Z_hat)/Z^2 = (exp(var log w) - 1) / n, robust to few large weights.
    finite = log_weights[np.isfinite(log_weights)]
    std_lognormal = float(np.sqrt(np.expm1(np.var(finite, ddof=1)) / n_total)) if len(finite) > 1 else np.inf
    per_repeat = np.array([log_mean_exp(r[1]) for r in runs])
    std_repeats = float(np.std(per_repeat, ddof=1) / np.sqrt(n_repeats)) if n_repeats > 1 else float("nan")
    info = dict(std_weights=std_weights, std_lognormal=std_lognormal, std_repeats=std_repeats, log_evidence_repeats=per_repeat, ess=ess,
                n_temperatures=[len(r[2]["temperatures"]) - 1 for r in runs],
                temperatures=[r[2]["temperatures"] for r in runs], acceptance=[r[2]["acceptance"] for r in runs],
                cess=[r[2]["cess"] for r in runs], final_step_size=[r[2]["final_step_size"] for r in runs])
    settings = dict(n_chains=n_chains, schedule=schedule, target_ess=target_ess, n_temperatures=n_temperatures,
                    sigmoid_delta=sigmoid_delta, n_mcmc_steps=n_mcmc_steps, n_leapfrog=n_leapfrog,
                    step_size=step_size, target_accept=target_accept, mass=mass, n_repeats=n_repeats)
    return EvidenceResult(log_z, std_weights, "ais", float(n_calls), int(n_calls * len(X)),
                          time.perf_counter() - start_time, settings, samples, log_weights, info)
