"""The evidence-select command line: demo plumbing, compare on CSV files, clear errors."""

import numpy as np
import pytest

from evidence_select.cli import main
from evidence_select.datasets import make_linear_regression, make_mixture, make_softmax_classification

pd = pytest.importorskip("pandas")


def test_demo_runs_small_and_reports(capsys, tmp_path):
    plot = tmp_path / "demo.png"
    pytest.importorskip("matplotlib")
    status = main(["demo", "--phases", "100", "100", "100", "--chunk-size", "100", "--n-replicates", "2",
                   "--no-progress", "--plot", str(plot)])
    out = capsys.readouterr().out
    assert status == 0
    assert "final model probabilities" in out and "detected change points" in out and "K=7" in out
    assert plot.exists() and plot.stat().st_size > 10_000


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
    assert len(ranked) == 5 and all(name.startswith("noise=") for name in ranked)


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
