"""The repeated paths of an update allocate no array above glibc's mmap threshold (128 KiB).

Above it each fresh array costs an ``mmap``, a ``munmap`` and a page fault per
page touched, and how often depends on the allocator's settings: dask's worker
nanny sets ``MALLOC_TRIM_THRESHOLD_``, which pins the threshold at 128 KiB, so
a stream's CPU time there grew with every large temporary. These tests measure
the largest transient allocation of one call (after a warm-up call that fills
the workspaces) with :mod:`tracemalloc`, which sees numpy's allocations; they
fail when a path goes back to building a block of its size afresh.
"""

import tracemalloc

import numpy as np
import pytest

from evidence_select.sgais._mode_check import symmetrised_log_density, symmetrised_t
from evidence_select.kernels._sghmc import TRAJECTORIES
from evidence_select.models import GaussianMixtureModel
from evidence_select.models._mixture_moves import kmeans_plus_plus_centres
from evidence_select.utils import logsumexp

MMAP_THRESHOLD = 128 * 1024


def largest_transient_allocation(call):
    """Bytes allocated at the peak of ``call()`` above those held before it, after one warm-up call."""
    call()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", sorted(TRAJECTORIES))
def test_a_trajectory_draws_its_noise_step_by_step(name):
    # 40 particles of 48 parameters over 60 steps: all the noise at once would be 41 x 40 x 48 doubles (630 KiB).
    theta = np.random.default_rng(0).normal(size=(40, 48))
    rng = np.random.default_rng(1)

    def call():
        TRAJECTORIES[name](rng, theta, lambda t, step: -t, step_size=0.01, friction=0.1, n_steps=60)

    assert largest_transient_allocation(call) < MMAP_THRESHOLD


@pytest.mark.parametrize("name", sorted(TRAJECTORIES))
def test_a_trajectory_consumes_the_same_noise_as_one_draw_of_every_step(name):
    # Step-by-step draws are the numbers of one draw of (n_steps + 1) blocks, and leave the generator where that
    # draw would: the runs, checkpoints and pinned regressions do not depend on how the noise is drawn.
    theta = np.random.default_rng(0).normal(size=(6, 3))
    rng = np.random.default_rng(2)
    TRAJECTORIES[name](rng, theta, lambda t, step: -t, step_size=0.01, friction=0.1, n_steps=25)
    reference = np.random.default_rng(2)
    reference.standard_normal((26, 6, 3))
    assert rng.bit_generator.state == reference.bit_generator.state


def test_the_mixture_gradient_works_in_its_workspace():
    model = GaussianMixtureModel(7, 2)
    rng = np.random.default_rng(0)
    theta = model.sample_prior(rng, 40)
    X = rng.normal(size=(250, 2))
    # The (7, 40, 250) densities are 560 KiB; the gradient returns (40, 34) numbers.
    assert largest_transient_allocation(lambda: model.grad_log_joint(theta, X, None, 4.0)) < MMAP_THRESHOLD


def test_the_mode_checks_symmetrised_density_works_in_its_workspace():
    model = GaussianMixtureModel(5, 2)
    n = model.n_params
    rng = np.random.default_rng(0)
    root = rng.normal(size=(n, n))
    proposal = symmetrised_t(rng.normal(size=n), root @ root.T / n + 0.1 * np.eye(n), 5.0, model.mode_symmetries())
    theta = rng.normal(size=(200, n))  # a block of draws: 120 maps of 24 parameters are 4 MiB of whitened points
    assert largest_transient_allocation(lambda: symmetrised_log_density(proposal, theta)) < MMAP_THRESHOLD


def test_kmeans_plus_plus_measures_distances_to_the_newest_centre_only():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 2))
    # Each step needs the distances to its newest centre, (16, 2000, 2) per-feature terms (0.5 MiB); the distances
    # to every centre so far were up to (16, 2000, 6, 2) terms (3 MiB), several of them alive at once.
    all_centres_block = 16 * 2000 * 7 * 2 * 8
    peak = largest_transient_allocation(
        lambda: kmeans_plus_plus_centres(np.random.default_rng(1), X, np.ones(len(X)), 7, 16))
    assert peak < all_centres_block


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_logsumexp_in_its_input_gives_the_same_bits(axis):
    values = np.random.default_rng(3).normal(size=(300, 120)) * 40.0
    values[5] = -np.inf  # an all -inf row (the masked path)
    values[7, :3] = -np.inf
    expected = logsumexp(values, axis=axis)
    scratch = values.copy()
    np.testing.assert_array_equal(logsumexp(scratch, axis=axis, overwrite_input=True), expected)
    assert largest_transient_allocation(lambda: logsumexp(values.copy(), axis=axis, overwrite_input=True)) \
        < values.nbytes + MMAP_THRESHOLD  # the copy made for the call, and no temporary of its size


def test_logsumexp_leaves_an_input_it_cannot_write_alone():
    values = np.random.default_rng(4).normal(size=(3, 8))
    read_only = np.broadcast_to(values, (2, 3, 8))
    integers = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(logsumexp(read_only, axis=2, overwrite_input=True), logsumexp(read_only, axis=2))
    np.testing.assert_array_equal(logsumexp(integers, axis=1, overwrite_input=True), logsumexp(integers, axis=1))
    np.testing.assert_array_equal(integers, np.arange(6).reshape(2, 3))
