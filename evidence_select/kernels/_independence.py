"""Independence Metropolis-Hastings over proposals drawn in advance, vectorised over chains.

The proposal does not depend on the chain's state, so every proposal of a run
can be drawn and evaluated in one batch before the chains move; the chains
then only compare importance weights ``w = p / q``. A move from ``x`` to ``z``
is accepted with probability ``min(1, w(z) / w(x))``, which leaves ``p``
invariant for any proposal density ``q`` that is positive wherever ``p`` is.
"""

from typing import NamedTuple

import numpy as np

__all__ = ["IndependenceOutput", "independence_metropolis"]


class IndependenceOutput(NamedTuple):
    """Draws of :func:`independence_metropolis`.

    draws : (n_chains, n_steps, n_params); log_density : (n_chains, n_steps);
    log_weight : (n_chains,), ``log p - log q`` at each chain's last state;
    acceptance : float, the share of accepted proposals.
    """

    draws: np.ndarray
    log_density: np.ndarray
    log_weight: np.ndarray
    acceptance: float


def independence_metropolis(rng, position, log_density, log_weight, proposals, proposal_log_density,
                            proposal_log_weight):
    """Run independence Metropolis-Hastings chains through proposals drawn in advance.

    Parameters
    ----------
    rng : numpy.random.Generator
    position : ndarray of shape (n_chains, n_params)
        Starting states.
    log_density : ndarray of shape (n_chains,)
        ``log p`` at the starting states (``p`` unnormalised).
    log_weight : ndarray of shape (n_chains,)
        ``log p - log q`` at the starting states.
    proposals : ndarray of shape (n_chains, n_steps, n_params)
        Independent draws of ``q``, one per chain and step.
    proposal_log_density, proposal_log_weight : ndarray of shape (n_chains, n_steps)
        ``log p`` and ``log p - log q`` at the proposals (``-inf`` where ``p`` is 0).

    Returns
    -------
    output : IndependenceOutput

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(2, 5, 1))          # proposals from q = p = N(0, 1): every move is accepted
    >>> lp = -0.5 * z[..., 0] ** 2
    >>> out = independence_metropolis(rng, np.zeros((2, 1)), np.zeros(2), np.zeros(2), z, lp, np.zeros((2, 5)))
    >>> out.acceptance, bool(np.all(out.draws == z))
    (1.0, True)
    """
    n_chains, n_steps, n_params = proposals.shape
    state = np.array(position, dtype=float)
    state_log_p = np.array(log_density, dtype=float)
    state_log_w = np.array(log_weight, dtype=float)
    draws = np.empty((n_chains, n_steps, n_params))
    log_p = np.empty((n_chains, n_steps))
    log_u = np.log(rng.uniform(size=(n_steps, n_chains)))
    accepted = 0
    for step in range(n_steps):
        # Comparing with -inf weights: a state outside the support is left at the first finite proposal.
        with np.errstate(invalid="ignore"):
            take = log_u[step] < proposal_log_weight[:, step] - state_log_w
        take |= np.isneginf(state_log_w) & np.isfinite(proposal_log_weight[:, step])
        state[take] = proposals[take, step]
        state_log_p[take] = proposal_log_density[take, step]
        state_log_w[take] = proposal_log_weight[take, step]
        accepted += int(np.count_nonzero(take))
        draws[:, step] = state
        log_p[:, step] = state_log_p
    return IndependenceOutput(draws, log_p, state_log_w, accepted / max(n_chains * n_steps, 1))
