"""Turning a scikit-learn ``random_state`` into a numpy ``Generator``."""

import numbers

import numpy as np

__all__ = ["make_generator", "spawn_seeds"]


def make_generator(random_state):
    """A fresh ``numpy.random.Generator`` from ``random_state``.

    ``None`` draws fresh OS entropy, an int or ``SeedSequence`` seeds a PCG64 stream, a legacy
    ``RandomState`` is consumed once for a seed (so seeded scikit-learn code stays
    reproducible), and a ``Generator`` is copied (never shared and advanced behind
    the caller's back).
    """
    if random_state is None or isinstance(random_state, (numbers.Integral, np.integer, np.random.SeedSequence)):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        # Seeding with 0 skips the OS entropy draw; the state is overwritten at once.
        # Three times faster than copy.deepcopy, and this runs once per chunk.
        new = np.random.Generator(type(random_state.bit_generator)(0))
        new.bit_generator.state = random_state.bit_generator.state
        return new
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    raise ValueError(f"random_state must be None, an int, a numpy Generator or RandomState; got {random_state!r}")


def spawn_seeds(random_state, n):
    """``n`` independent integer seeds derived from ``random_state`` (for parallel candidates)."""
    return [int(s) for s in make_generator(random_state).integers(0, 2**63 - 1, size=n)]
