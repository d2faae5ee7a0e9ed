import os
import subprocess
import sys

import numpy as np
import pytest

from evidence_select import BayesianMixture, load_checkpoint, save_checkpoint
from evidence_select.datasets import make_mixture


def _history(est):
    return [tuple(v for k, v in r._asdict().items() if k != 'seconds') for r in est.evidence_history_]  # all but the wall time


@pytest.mark.slow
def test_resume_from_checkpoint_in_fresh_process_is_bit_identical(tmp_path):
    X = make_mixture(1200, random_state=0).X
    settings = dict(n_particles=6, batch_size=300, random_state=4)
    # The uninterrupted run is checkpointed after its first call and then continues in this process; the
    # checkpoint continues in a fresh one.
    reference = BayesianMixture(3, **settings).partial_fit(X[:600])
    path = save_checkpoint(reference, tmp_path / "mix.joblib")
    reference.partial_fit(X[600:])
    np.save(tmp_path / "rest.npy", X[600:])
    script = ("import sys, pickle, numpy as np; from evidence_select import load_checkpoint;"
              f"est = load_checkpoint({str(path)!r}).partial_fit(np.load({str(tmp_path / 'rest.npy')!r}));"
              "sys.stdout.buffer.write(pickle.dumps([tuple(v for k, v in r._asdict().items() if k != 'seconds') "
              "for r in est.evidence_history_]))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout
    import pickle

    assert pickle.loads(out) == _history(reference)


def test_failed_save_keeps_previous_checkpoint(tmp_path):
    path = tmp_path / "state.joblib"
    save_checkpoint({"version": 1}, path)

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("cannot pickle")

    with pytest.raises(RuntimeError, match="cannot pickle"):
        save_checkpoint(Unpicklable(), path)
    assert load_checkpoint(path) == {"version": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["state.joblib"]  # no temporary left behind
