"""Chunked-stream helpers of the CLI: running moments, the row-order test, the bounded-memory shuffle."""

import numpy as np
import pytest

from evidence_select.utils._order import OrderTest
from evidence_select.utils._shuffle import rechunk, shuffled_chunks
from evidence_select.utils._tabular import RunningMoments, file_format


def test_running_moments_match_numpy_across_chunks():
    rng = np.random.default_rng(0)
    X = rng.normal(1e6, 3.0, size=(1001, 3))
    moments = RunningMoments()
    for start in range(0, 1001, 97):
        moments.update(X[start:start + 97])
    assert moments.count == 1001
    np.testing.assert_allclose(moments.mean, X.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(moments.var, X.var(axis=0), rtol=1e-9)
    constant = RunningMoments()
    constant.update(np.ones((5, 1)))
    assert constant.std.tolist() == [1.0]  # constant columns are not divided by zero


def _z_scores(kind, n_files, rng):
    out = []
    for _ in range(n_files):
        if kind == "numeric":
            test = OrderTest(["x"])
            x = rng.normal(size=400)
            for start in range(0, 400, 64):
                test.update(x[start:start + 64, None])
        else:
            test = OrderTest([], labels="label")
            codes = rng.permutation(np.repeat([0, 1, 2], [50, 150, 200]))
            for start in range(0, 400, 64):
                test.update(np.empty((len(codes[start:start + 64]), 0)), codes[start:start + 64])
        verdict = test.verdict()
        out.append((verdict.z, verdict.flagged))
    return np.array(out)


@pytest.mark.parametrize("kind", ["numeric", "labels"])
def test_order_statistic_is_standard_normal_under_a_random_order(kind):
    # 400 randomly ordered files: the mean of z is within 4 standard errors (4 / sqrt(400) = 0.2) of 0 and its
    # standard deviation within 0.2 of 1 (its standard error is about 1 / sqrt(800) = 0.035); none is flagged.
    z = _z_scores(kind, 400, np.random.default_rng(1))
    assert abs(z[:, 0].mean()) < 0.2 and abs(z[:, 0].std() - 1.0) < 0.2
    assert not z[:, 1].any()


def test_order_test_flags_sorted_autocorrelated_and_clustered_rows():
    rng = np.random.default_rng(2)
    # an AR(1) target with coefficient 0.5, in a file of 2000 rows
    e = rng.normal(size=2000)
    ar = np.empty(2000)
    ar[0] = e[0]
    for i in range(1, 2000):
        ar[i] = 0.5 * ar[i - 1] + e[i]
    test = OrderTest(["y"])
    test.update(ar[:1000, None])
    test.update(ar[1000:, None])
    verdict = test.verdict()
    assert verdict.flagged and abs(verdict.effect - 0.5) < 0.1  # r1 estimates 0.5 within 3 x 1/sqrt(2000) + bias
    # labels in blocks (two classes alternating every 50 rows)
    labels = OrderTest([], labels="c")
    codes = np.tile(np.repeat([0, 1], 50), 10)
    labels.update(np.empty((1000, 0)), codes)
    assert labels.verdict().flagged and labels.verdict().effect > 0.9
    # weak but significant dependence in a long file is not "strong": r1 = 0.05 at n = 1e5 has z ~ 16
    weak = OrderTest(["y"])
    e = rng.normal(size=100_000)
    weak.update((e[1:] + 0.05 * e[:-1])[:, None])
    assert weak.verdict().z > 4 and not weak.verdict().flagged
    assert OrderTest(["y"]).verdict() is None  # no rows: no verdict


def test_rechunk_gives_exact_chunk_sizes():
    blocks = [np.arange(n, dtype=float)[:, None] for n in (3, 0, 7, 1)]
    chunks = list(rechunk(blocks, 4))
    assert [len(c) for c in chunks] == [4, 4, 3]
    assert np.concatenate(chunks)[:, 0].tolist() == [0, 1, 2, 0, 1, 2, 3, 4, 5, 6, 0]


@pytest.mark.parametrize("max_bytes", [10**6, 24])  # in memory; through 7 temporary files of ~1.5 rows each
def test_shuffle_is_a_uniform_permutation(tmp_path, max_bytes):
    rng = np.random.default_rng(3)
    rows = np.arange(10.0)[:, None]
    counts = np.zeros((10, 10))
    for _ in range(1000):
        blocks = iter([rows[:4], rows[4:7], rows[7:]])
        out = np.concatenate(list(shuffled_chunks(blocks, 10, 1, 3, rng, max_bytes=max_bytes, tmp_dir=tmp_path)))
        assert sorted(out[:, 0].tolist()) == list(range(10))
        counts[out[:, 0].astype(int), np.arange(10)] += 1
    # every row lands in every position with probability 1/10: 100 +- 9.5 per cell; 5 sigma = 47
    assert np.abs(counts - 100).max() < 47
    assert list(tmp_path.iterdir()) == []  # temporary files removed


def test_file_format_from_extension():
    assert file_format("a.csv") == "csv" and file_format("a.csv.gz") == "csv"
    assert file_format("a.parquet") == "parquet" and file_format("a.dat", "parquet") == "parquet"
    with pytest.raises(ValueError, match="cannot tell the format"):
        file_format("a.dat")
