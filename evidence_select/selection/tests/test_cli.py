"""The evidence-select command line: demo plumbing, compare on CSV files, clear errors."""

import numpy as np
import pytest

from evidence_select.cli import main
from evidence_select.datasets import make_linear_regression, make_mixture, make_softmax_classification

pd = pytest.importorskip("pandas")


@pytest.mark.slow
def test_demo_runs_small_and_reports(capsys, tmp_path):
    plot = tmp_path / "demo.png"
    pytest.importorskip("matplotlib")
    status = main(["demo", "--phases", "100", "100", "100", "--chunk-size", "50", "--n-lines", "6",
                   "--n-replicates", "2", "--no-progress", "--plot", str(plot)])
    out = capsys.readouterr().out
    assert status == 0
    assert "final model probabilities" in out and "detected change points" in out and "K=7" in out
    assert "estimated time: about" in out.splitlines()[1]  # up front, before any streaming
    phases = [line.split(":")[0].strip() for line in out.splitlines() if line.strip().startswith("phase ")]
    assert phases == ["phase 1 (rows 0-100)", "phase 2 (rows 100-200)", "phase 3 (rows 200-300)"]
    # A line per 50 rows from the selector's history, though it had a call per phase.
    table_rows = [int(line.split()[0]) for line in out.splitlines() if line.strip()[:1].isdigit()
                  and len(line.split()) == 8]
    assert table_rows == [50, 100, 150, 200, 250, 300]
    assert plot.exists() and plot.stat().st_size > 10_000


def test_demo_calls_span_a_phase_split_at_most_every_max_rows():
    """Calls end on the chunk grid: after the chunk where a phase ends, every ``max_rows`` rows (rounded down to
    whole chunks, at least one), and at the end."""
    assert _demo.call_bounds(1000, 100, [250, 500, 1000]) == [(0, 300), (300, 500), (500, 1000)]
    assert _demo.call_bounds(1000, 100, [250, 500, 1000], max_rows=250) == [
        (0, 200), (200, 300), (300, 400), (400, 500), (500, 600), (600, 800), (800, 1000)]
    assert _demo.call_bounds(950, 100, [950], max_rows=400) == [(0, 400), (400, 800), (800, 950)]
    assert _demo.call_bounds(300, 100, [300], max_rows=10) == [(0, 100), (100, 200), (200, 300)]
    assert _demo.call_bounds(100_000, 250, [1000, 10_000, 100_000])[:4] == [
        (0, 1000), (1000, 10_000), (10_000, 20_000), (20_000, 30_000)]


@pytest.mark.slow
def test_demo_calls_of_several_chunks_give_the_records_of_one_call_per_chunk():
    """The demo calls the selector once per phase; its candidates split each call into the same chunks,
    so the evidences and every record's sampling fields are the same to the bit as with one call per chunk. The
    posterior-mode check also runs on a call's last chunk (from a copy of the state's generator, so it moves no
    particle): where both runs checked a chunk they agree to the bit, and a call of one chunk checks it. (A check
    that finds the run wanting may restart it at the mode, which a call's last chunk then does where a chunk
    inside a call does not: those restarts are off here.)"""
    X = make_mixture(300, random_state=0).X

    def selector():
        return EvidenceModelSelector([(f"K={k}", NoRestartAfterCheckMixture(k, batch_size=50, n_particles=6))
                                      for k in (1, 2)], random_state=0)

    per_chunk, per_call = selector(), selector()
    for start in range(0, len(X), 50):
        per_chunk.partial_fit(X[start:start + 50])
    for start, stop in _demo.call_bounds(len(X), 50, [125], max_rows=100):
        per_call.partial_fit(X[start:stop])
    assert len(per_call.evidence_history_) == len(per_chunk.evidence_history_) == 6
    checked = ("log_evidence_std", "mode_log_evidence", "mode_log_evidence_std", "failed_checks", "notices")
    blank = dict.fromkeys(checked) | {"seconds": 0.0}
    n_both_checked = 0
    for a, b in zip(per_chunk.evidence_history_, per_call.evidence_history_):
        np.testing.assert_array_equal(a.log_evidences, b.log_evidences)
        np.testing.assert_equal([r._replace(**blank) for r in a.candidate_records],
                                [r._replace(**blank) for r in b.candidate_records])
        for one, several in zip(a.candidate_records, b.candidate_records):
            assert not np.isnan(one.mode_log_evidence)  # every call of one chunk checks it
            if not np.isnan(several.mode_log_evidence):
                assert (one.mode_log_evidence, one.mode_log_evidence_std, one.log_evidence_std) == (
                    several.mode_log_evidence, several.mode_log_evidence_std, several.log_evidence_std)
                n_both_checked += 1
    assert n_both_checked >= 2 * len(_demo.call_bounds(len(X), 50, [125], max_rows=100))  # each call's last chunk


def _write(tmp_path, frame, name="data.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return str(path)


def test_compare_regression_ranks_candidates(capsys, tmp_path):
    data = make_linear_regression(400, n_features=3, noise_variance=0.2, random_state=0)
    frame = pd.DataFrame(data.X, columns=["a", "b", "c"]).assign(target=data.y)
    assert main(["compare", _write(tmp_path, frame), "--target", "target", "--task", "regression",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    ranked = [line.split()[2] for line in out.splitlines() if line.strip()[:1].isdigit() and "linear" in line]
    assert sorted(ranked) == ["scale=0.1", "scale=1", "scale=10", "scale=learned"]


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classification", "density"])
def test_compare_classification_and_density(capsys, tmp_path, task):
    if task == "classification":
        data = make_softmax_classification(200, n_features=2, n_classes=3, random_state=0)
        frame = pd.DataFrame(data.X, columns=["a", "b"]).assign(label=np.array(["x", "y", "z"])[data.y])
        args = ["--target", "label"]
    else:
        frame = pd.DataFrame(make_mixture(200, random_state=0).X, columns=["a", "b"])
        args = []
    assert main(["compare", _write(tmp_path, frame), "--task", task, "--chunk-size", "100", "--no-progress",
                 *args]) == 0
    assert "probability" in capsys.readouterr().out


def test_compare_errors_are_clear(capsys, tmp_path):
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "word": ["u", "v", "w"], "y": [0.1, 0.2, 0.3]})
    path = _write(tmp_path, frame)
    assert main(["compare", str(tmp_path / "missing.csv"), "--target", "y", "--task", "regression"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["compare", path, "--target", "nope", "--task", "regression"]) == 2
    assert "column 'nope' not found" in capsys.readouterr().err
    assert main(["compare", path, "--target", "y", "--task", "regression"]) == 2
    assert "non-numeric feature column(s) ['word']" in capsys.readouterr().err
    assert main(["compare", path, "--task", "classification"]) == 2
    assert "--target is required" in capsys.readouterr().err


def test_continuous_target_is_refused_for_classification(capsys, tmp_path, monkeypatch):
    """A numeric target with a distinct value per row is refused before any candidate runs, naming the cure."""
    monkeypatch.setattr(EvidenceModelSelector, "partial_fit", _must_not_stream)
    data = make_linear_regression(235, n_features=2, random_state=0)
    frame = pd.DataFrame(data.X, columns=["a", "b"]).assign(income=np.round(1000 * data.y, 0))
    path = _write(tmp_path, frame)
    assert main(["compare", path, "--target", "income", "--task", "classification", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--task regression" in err
    assert f"has {frame.income.nunique()} distinct values in 235 rows" in err
    fractional = frame.assign(income=np.resize([0.5, 1.5, 2.5], 235))  # few values, but not labels
    assert main(["compare", _write(tmp_path, fractional), "--target", "income", "--task", "classification"]) == 2
    assert "non-integer values such as 0.5" in capsys.readouterr().err
    labels = frame.assign(income=np.resize([3.0, 7.0], 235))  # integer-valued floats are labels
    assert cli._check_classes(np.array(sorted(labels.income.unique()), dtype=object), 235, "income") is None


def _must_not_stream(self, *args, **kwargs):
    raise AssertionError("a refused file must not reach the candidates")


@pytest.mark.parametrize("value", ["inf", "-inf", "1e400"])
def test_non_finite_values_give_one_line(capsys, tmp_path, value):
    path = tmp_path / "data.csv"
    path.write_text(f"a,b,y\n1,2,0.5\n{value},3,0.1\n4,5,0.2\n")
    for task in ("regression", "density"):
        assert main(["compare", str(path), "--target", "y", "--task", task, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "non-finite values" in err and "column(s) ['a']" in err
    path.write_text(f"a,b,y\n1,2,0.5\n2,3,{value}\n4,5,0.2\n")  # in a regression target
    assert main(["compare", str(path), "--target", "y", "--task", "regression", "--no-progress"]) == 2
    assert "non-finite values" in capsys.readouterr().err


def test_header_only_file_gives_one_line(capsys, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b,y\n")
    for task in ("regression", "classification", "density"):
        assert main(["compare", str(path), "--target", "y", "--task", task, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "has no data rows" in err and "non-numeric" not in err


# -- reading, shuffling and the row-order check -----------------------------------------------------
import warnings  # noqa: E402

from evidence_select import (BayesianLinearRegressor, BayesianLogisticClassifier,  # noqa: E402
                             EvidenceModelSelector)
from evidence_select import _demo, cli  # noqa: E402
from evidence_select.utils._order import StreamOrderWarning  # noqa: E402
from evidence_select.sgais.tests._mixtures import NoRestartAfterCheckMixture  # noqa: E402


FAST = {"n_particles": 5, "n_replicates": 2, "n_mcmc_steps": 2}


@pytest.fixture
def streamed(monkeypatch):
    """Fast candidates, and a record of every chunk the selector receives."""
    chunks = []

    def fast_candidates(task, chunk_size):
        if task == "regression":
            return [(f"noise={v}", BayesianLinearRegressor(noise_variance=v, batch_size=chunk_size, **FAST))
                    for v in (0.2, 1.0)]
        return [(f"prior={s}", BayesianLogisticClassifier(prior_scale=s, batch_size=chunk_size, **FAST))
                for s in (0.3, 1.0)]

    original = EvidenceModelSelector.partial_fit

    def recording_partial_fit(self, X, y=None, classes=None):
        chunks.append((np.array(X), None if y is None else np.array(y)))
        return original(self, X, y, classes)

    monkeypatch.setattr(cli, "_default_candidates", fast_candidates)
    monkeypatch.setattr(EvidenceModelSelector, "partial_fit", recording_partial_fit)
    return chunks


def _regression_frame(n=600, seed=0):
    data = make_linear_regression(n, n_features=2, noise_variance=0.3, random_state=seed)
    return pd.DataFrame(data.X, columns=["a", "b"]).assign(y=data.y)


def _write_any(tmp_path, frame, fmt):
    path = tmp_path / f"data.{fmt}"
    frame.to_csv(path, index=False) if fmt == "csv" else frame.to_parquet(path)
    return str(path)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_sorted_target_warns_without_shuffle(tmp_path, capsys, streamed, fmt):
    pytest.importorskip("pyarrow")
    path = _write_any(tmp_path, _regression_frame().sort_values("y"), fmt)
    with pytest.warns(StreamOrderWarning, match=r"column 'y' is sorted .*lag-1 autocorrelation 0\.9"):
        assert main(["compare", path, "--task", "regression", "--target", "y", "--no-progress", "--no-shuffle",
                     "--chunk-size", "200"]) == 0
    streamed_y = np.concatenate([y for _, y in streamed])
    assert np.all(np.diff(streamed_y) >= 0)  # file order kept


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_sorted_labels_warn_without_shuffle(tmp_path, capsys, streamed, fmt):
    pytest.importorskip("pyarrow")
    data = make_softmax_classification(400, n_features=2, n_classes=3, random_state=0)
    frame = pd.DataFrame(data.X, columns=["a", "b"]).assign(label=np.array(["x", "y", "z"])[data.y])
    path = _write_any(tmp_path, frame.sort_values("label"), fmt)
    with pytest.warns(StreamOrderWarning, match="column 'label' .*runs deficit"):
        assert main(["compare", path, "--task", "classification", "--target", "label", "--no-progress",
                     "--no-shuffle", "--chunk-size", "200"]) == 0


def test_random_order_does_not_warn(tmp_path, capsys, streamed):
    path = _write_any(tmp_path, _regression_frame(), "csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamOrderWarning)
        assert main(["compare", path, "--task", "regression", "--target", "y", "--no-progress", "--no-shuffle",
                     "--chunk-size", "200"]) == 0
    assert "note:" not in capsys.readouterr().out


@pytest.mark.parametrize("memory", ["1024", "0.005"])  # in memory; through temporary files (5 kB < 14 kB of rows)
def test_shuffle_is_the_default_and_streams_a_permutation(tmp_path, capsys, streamed, memory):
    frame = _regression_frame().sort_values("y")
    path = _write_any(tmp_path, frame, "csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamOrderWarning)  # shuffled: a note, not a warning
        assert main(["compare", path, "--task", "regression", "--target", "y", "--no-progress", "--chunk-size", "200",
                     "--shuffle-memory", memory, "--read-rows", "64"]) == 0
    out = capsys.readouterr().out
    assert "note: column 'y' is sorted" in out and "(shuffled, seed 0)" in out
    assert [len(X) for X, _ in streamed] == [200, 200, 200]
    X = np.concatenate([X for X, _ in streamed])
    y = np.concatenate([y for _, y in streamed])
    expected_y = np.sort((frame.y - frame.y.mean()) / frame.y.std(ddof=0))
    np.testing.assert_allclose(np.sort(y), expected_y, atol=1e-12)  # a permutation of the rows...
    order = np.argsort(y)
    expected_X = ((frame[["a", "b"]] - frame[["a", "b"]].mean()) / frame[["a", "b"]].std(ddof=0)).to_numpy()
    np.testing.assert_allclose(X[order], expected_X, atol=1e-12)      # ... rows kept whole ...
    # ... in a random order: the lag-1 autocorrelation of a random permutation is N(0, 1/600); 0.2 is 4.9 sigma
    assert abs(np.corrcoef(y[:-1], y[1:])[0, 1]) < 0.2


def test_shuffle_is_seeded(tmp_path, capsys, streamed):
    path = _write_any(tmp_path, _regression_frame(), "csv")
    runs = []
    for seed in ("1", "1", "2"):
        streamed.clear()
        main(["compare", path, "--task", "regression", "--target", "y", "--no-progress", "--random-state", seed])
        runs.append(np.concatenate([y for _, y in streamed]))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_chunked_reading_streams_the_same_rows(tmp_path, capsys, streamed, fmt):
    pytest.importorskip("pyarrow")
    path = _write_any(tmp_path, _regression_frame(), fmt)
    outputs = []
    for read_rows in ("7", "100000"):
        streamed.clear()
        main(["compare", path, "--task", "regression", "--target", "y", "--no-progress", "--no-shuffle",
              "--read-rows", read_rows, "--chunk-size", "250"])
        outputs.append((np.concatenate([X for X, _ in streamed]), [len(X) for X, _ in streamed],
                        capsys.readouterr().out.splitlines()[2:4]))
    np.testing.assert_allclose(outputs[0][0], outputs[1][0], rtol=0, atol=1e-12)
    assert outputs[0][1] == outputs[1][1] == [250, 250, 100]


def test_iter_frames_reads_in_bounded_chunks(tmp_path):
    pytest.importorskip("pyarrow")
    from evidence_select.utils._tabular import iter_frames

    frame = _regression_frame(103)
    for fmt in ("csv", "parquet"):
        frames = list(iter_frames(_write_any(tmp_path, frame, fmt), 10, fmt))
        assert [len(f) for f in frames] == [10] * 10 + [3]
        np.testing.assert_allclose(pd.concat(frames).to_numpy(), frame.to_numpy())


def test_missing_io_extra_is_named(tmp_path, capsys, monkeypatch):
    import sys

    path = _write_any(tmp_path, _regression_frame(50), "csv")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    assert main(["compare", path, "--task", "regression", "--target", "y", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "optional extra 'io'" in err and "pip install 'evidence-select[io]'" in err


def test_unknown_extension_and_help(tmp_path, capsys):
    path = tmp_path / "data.dat"
    path.write_text("a,y\n1,2\n")
    assert main(["compare", str(path), "--task", "regression", "--target", "y"]) == 2
    assert "cannot tell the format of" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = capsys.readouterr().out
    assert "--no-shuffle" in text and "larger than memory" in text and "temporary files" in text
