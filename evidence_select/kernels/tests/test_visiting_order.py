"""The lazily built visiting order of the ellipsoid move is the full sort's, and weighs few candidates exactly.

Checked by breaking it: a union whose weight bound lies below its weights (the prior over two), or a prefix
that takes every ranked candidate as certain (not only those above the largest bound left out), fails the
comparisons below.
"""

import numpy as np
import pytest

from evidence_select.kernels._ellipsoid import Ellipsoid, _candidate_order, ellipsoid_union
from evidence_select.kernels._visiting_order import VisitingOrder


def _walk(order, keys, rng, drop=0.03):
    """Walk every chain down ``order`` (chains leave at random, as a walk that found a valid candidate does) and
    compare each visited column with the full sort of ``keys``, while the full sort's key there is finite (the
    walk stops at the current point, whose key is finite, before any ``-inf``)."""
    full = np.argsort(-keys, axis=1, kind="stable")
    active = np.arange(len(keys))
    for rank in range(keys.shape[1]):
        active = active[rng.uniform(size=len(active)) > drop]
        active = active[np.isfinite(keys[active, full[active, rank]])]
        if len(active) == 0:
            break
        np.testing.assert_array_equal(order.at(active, rank), full[active, rank])


@pytest.mark.parametrize("seed", range(20))
def test_order_is_the_full_sorts(seed):
    rng = np.random.default_rng(seed)
    n_chains, n_columns = rng.integers(1, 9), rng.integers(1, 3000)
    keys = rng.gumbel(size=(n_chains, n_columns)) + rng.uniform(0, 4) * rng.normal(size=(n_chains, n_columns))
    keys[rng.uniform(size=keys.shape) < rng.uniform(0, 0.5)] = -np.inf
    slack = rng.uniform(0, rng.uniform(0, 3), size=keys.shape)  # bounds above the keys by up to a few nats
    order = VisitingOrder(keys + slack, lambda rows, columns: keys[rows, columns])
    _walk(order, keys, rng, drop=rng.uniform(0, 0.1))


def test_empty_walk():
    order = VisitingOrder(np.zeros((3, 5)), lambda rows, columns: np.zeros(rows.shape))
    assert order.at(np.arange(0), 4).shape == (0,)


# Overlapping ellipsoids under a normal prior: the union's weight is the prior over the number that hold a
# candidate (1 to 3 here), below its bound, the prior.
UNION = ellipsoid_union([Ellipsoid(np.array([0.8, 0.0]), np.diag([1.5, 1.0])),
                         Ellipsoid(np.array([-0.6, 0.4]), np.array([[1.2, 0.0], [0.5, 1.0]])),
                         Ellipsoid(np.array([0.0, -0.3]), np.diag([0.9, 1.4]))])


class _CountingUnion:
    """``UNION``, counting the candidates it weighs exactly."""

    def __init__(self):
        self.weighed = 0

    def log_weight(self, points, log_prior):
        self.weighed += int(np.prod(np.shape(log_prior)))
        return UNION.log_weight(points, log_prior)

    def log_weight_bound(self, log_prior):
        return UNION.log_weight_bound(log_prior)


@pytest.mark.parametrize("seed", range(5))
def test_candidate_order_weighs_few_candidates_and_sorts_as_the_full_weights(seed):
    rng = np.random.default_rng(seed)
    n_chains, n_candidates = 40, 2000
    candidates = UNION.sample(rng, (n_chains, n_candidates))
    log_prior = -0.5 * np.sum(candidates**2, axis=2)
    current = UNION.sample(rng, (n_chains,))
    current_log_weight = UNION.log_weight(current, -0.5 * np.sum(current**2, axis=1))
    state = rng.bit_generator.state
    counting = _CountingUnion()
    order = _candidate_order(rng, counting, candidates, log_prior, current_log_weight)
    # The full sort, as the move defines it: every weight exact, the same Gumbel draws.
    rng.bit_generator.state = state
    log_weights = np.column_stack([UNION.log_weight(candidates, log_prior), current_log_weight])
    keys = log_weights + rng.gumbel(size=log_weights.shape)
    assert np.ptp(log_weights - np.column_stack([log_prior, current_log_weight])) > 1.0  # counts of 1 to 3
    _walk(order, keys, rng, drop=0.0)  # every chain walks all the way: the whole order is compared
    # Walking every chain all the way weighs them all; the first ranks alone weigh a few percent.
    first = _candidate_order(rng, counting := _CountingUnion(), candidates, log_prior, current_log_weight)
    for rank in range(10):
        first.at(np.arange(n_chains), rank)
    assert counting.weighed < 0.05 * n_chains * n_candidates
