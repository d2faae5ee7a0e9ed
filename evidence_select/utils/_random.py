"""Turning a scikit-learn ``random_state`` into a numpy ``Generator``, and categorical draws."""

import copy
import numbers

import numpy as np

__all__ = ["categorical_draws", "make_generator", "spawn_seeds"]


def make_generator(random_state):
    """A fresh ``numpy.random.Generator`` from ``random_state``.

    ``None`` draws fresh OS entropy, an int or ``SeedSequence`` seeds a PCG64 stream, a legacy
    ``RandomState`` is consumed once for a seed (so seeded scikit-learn code stays
    reproducible), and a ``Generator`` is copied (never shared and advanced behind
    the caller's back).

    Parameters
    ----------
    random_state : None, int, SeedSequence, Generator or RandomState
        The scikit-learn style seed.

    Returns
    -------
    rng : numpy.random.Generator
        A new generator; advancing it never advances ``random_state``.

    Raises
    ------
    ValueError
        For any other type.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select.utils import make_generator
    >>> make_generator(0).integers(100, size=3).tolist() == np.random.default_rng(0).integers(100, size=3).tolist()
    True
    >>> rng = np.random.default_rng(1)
    >>> copy = make_generator(rng)
    >>> copy is rng, float(copy.random()) == float(rng.random())   # same stream, separate state
    (False, True)
    >>> float(copy.spawn(1)[0].random()) == float(rng.spawn(1)[0].random())  # and the same seed sequence
    True
    """
    if random_state is None or isinstance(random_state, (numbers.Integral, np.integer, np.random.SeedSequence)):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return _copy_generator(random_state)
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    raise ValueError(f"random_state must be None, an int, a numpy Generator or RandomState; got {random_state!r}")


def _copy_generator(generator):
    """An independent copy of ``generator``: the same bit state and the same seed sequence.

    The seed sequence (entropy, spawn key and the number of children spawned so far) travels with the copy, so
    ``copy.spawn()`` gives the children the original would give next, and spawning from the copy leaves the
    original's sequence alone. A bit generator without a seed sequence of its own is deep-copied.
    """
    bit_generator = generator.bit_generator
    seed_seq = bit_generator.seed_seq
    if not isinstance(seed_seq, np.random.SeedSequence):
        return copy.deepcopy(generator)
    sequence = np.random.SeedSequence(seed_seq.entropy, spawn_key=seed_seq.spawn_key, pool_size=seed_seq.pool_size,
                                      n_children_spawned=seed_seq.n_children_spawned)
    new = type(bit_generator)(sequence)
    new.state = bit_generator.state
    return np.random.Generator(new)


def spawn_seeds(random_state, n):
    """``n`` independent integer seeds derived from ``random_state`` (for parallel candidates).

    The seeds are drawn in the calling process before any parallel dispatch, so
    results do not depend on the number of jobs or the joblib backend.

    Parameters
    ----------
    random_state : None, int, SeedSequence, Generator or RandomState
        See :func:`make_generator`; a Generator is not advanced.
    n : int
        Number of seeds.

    Returns
    -------
    seeds : list of int
        In ``[0, 2**63 - 1)``.

    Examples
    --------
    >>> from evidence_select.utils import spawn_seeds
    >>> seeds = spawn_seeds(0, 3)
    >>> len(set(seeds)), seeds == spawn_seeds(0, 3)
    (3, True)
    """
    return [int(s) for s in make_generator(random_state).integers(0, 2**63 - 1, size=n)]


def categorical_draws(uniforms, weights):
    """One index per row of ``weights`` (non-negative, unnormalised) by inverse CDF of ``uniforms`` in [0, 1).

    Examples
    --------
    >>> import numpy as np
    >>> categorical_draws(np.array([0.1, 0.9]), np.array([[1.0, 3.0], [1.0, 3.0]])).tolist()
    [0, 1]
    """
    cdf = np.cumsum(weights, axis=1)
    return np.minimum(np.sum(cdf < (uniforms * cdf[:, -1])[:, None], axis=1), cdf.shape[1] - 1)
