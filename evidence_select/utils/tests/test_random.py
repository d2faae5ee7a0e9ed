"""Copies of generators keep their seed sequence, so what they spawn depends on their seed."""

import numpy as np
import pytest

from evidence_select.utils import make_generator


def test_copies_of_different_seeds_spawn_different_children():
    first = make_generator(np.random.default_rng(1)).spawn(1)[0].random()
    second = make_generator(np.random.default_rng(999)).spawn(1)[0].random()
    assert first != second


def _generator_that_spawned_and_drew(n_spawned):
    rng = np.random.default_rng(7)
    rng.spawn(n_spawned)
    rng.random(5)
    return rng


@pytest.mark.parametrize("n_spawned", [0, 3])
def test_a_copy_spawns_what_the_original_would_and_leaves_it_alone(n_spawned):
    # The reference replays the original's calls (numpy < 2 pickles a generator without its seed sequence).
    original, reference = _generator_that_spawned_and_drew(n_spawned), _generator_that_spawned_and_drew(n_spawned)
    copy = make_generator(original)
    assert [c.random() for c in copy.spawn(2)] == [c.random() for c in reference.spawn(2)]
    assert copy.random() == reference.random()
    # The original has spawned nothing more and drawn nothing more.
    assert original.bit_generator.seed_seq.n_children_spawned == n_spawned
    assert original.bit_generator.state == _generator_that_spawned_and_drew(n_spawned).bit_generator.state


def test_a_generator_without_seed_sequence_is_copied():
    bit_generator = np.random.PCG64()
    bit_generator.state = np.random.PCG64(3).state
    original = np.random.Generator(bit_generator)
    copy = make_generator(original)
    assert copy is not original and copy.random() == original.random()
