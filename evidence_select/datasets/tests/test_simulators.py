import numpy as np
import pytest

from evidence_select.datasets import (
    SHIFT_N_CLUSTERS,
    make_linear_regression,
    make_mixture,
    make_shift_stream,
    make_softmax_classification,
)

SIMULATORS = [make_linear_regression, make_softmax_classification, make_mixture, make_shift_stream]


@pytest.mark.parametrize("simulator", SIMULATORS)
@pytest.mark.parametrize("small, large", [(1, 5), (100, 4096), (4095, 4097), (5000, 12000)])
def test_prefix_of_larger_draw_equals_smaller_draw(simulator, small, large):
    a, b = simulator(small, random_state=11), simulator(large, random_state=11)
    for key, value in a.items():
        if isinstance(value, np.ndarray) and len(value) == small and key not in ("weights",):
            np.testing.assert_array_equal(value, b[key][:small])


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_seeded_and_seed_dependent(simulator):
    np.testing.assert_array_equal(simulator(50, random_state=1).X, simulator(50, random_state=1).X)
    assert not np.array_equal(simulator(50, random_state=1).X, simulator(50, random_state=2).X)


def test_paper_shapes():
    assert make_linear_regression(10).X.shape == (10, 5)
    soft = make_softmax_classification(20000)
    assert soft.X.shape == (20000, 10) and set(np.unique(soft.y)) == {0, 1, 2, 3}
    mix = make_mixture(20000)
    assert mix.X.shape == (20000, 2)
    np.testing.assert_allclose(np.bincount(mix.labels) / 20000, mix.weights, atol=0.015)


def test_linear_data_follows_its_model():
    data = make_linear_regression(50000, noise_variance=2.0, random_state=4)
    residual = data.y - data.X @ data.coef - data.intercept
    assert residual.var() == pytest.approx(2.0, rel=0.03)


def test_shift_stream_phases():
    data = make_shift_stream(20000, random_state=0)
    assert data.change_points == [1000, 10000]
    assert data.labels[:1000].max() == SHIFT_N_CLUSTERS[0] - 1
    assert data.labels[1000:10000].max() == SHIFT_N_CLUSTERS[1] - 1
    assert set(np.unique(data.labels[10000:])) == set(range(SHIFT_N_CLUSTERS[2]))
    shuffled = make_shift_stream(20000, shuffle=True, random_state=0)
    assert shuffled.change_points == []
    np.testing.assert_allclose(np.sort(shuffled.X[:, 0]), np.sort(data.X[:, 0]))


@pytest.mark.parametrize("bad", [-1, 2.5, "10", True])
def test_bad_n_samples(bad):
    with pytest.raises(ValueError, match="n_samples"):
        make_mixture(bad)
