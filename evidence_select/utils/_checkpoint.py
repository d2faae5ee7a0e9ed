"""Atomic checkpoints of a streaming estimator (temporary file + rename)."""

import os
import tempfile

import joblib

__all__ = ["save_checkpoint", "load_checkpoint"]


def save_checkpoint(estimator, path, *, compress=3):
    """Write ``estimator`` to ``path`` atomically.

    The estimator is dumped with :func:`joblib.dump` into a temporary file in the
    same directory, flushed to disk, then renamed over ``path``
    (:func:`os.replace` is atomic on POSIX and Windows). A crash mid-write leaves
    the previous checkpoint intact; a reader never sees a half-written file.
    Because the random generator travels with the state, a stream resumed from
    the checkpoint continues bit for bit as the uninterrupted one would.

    Parameters
    ----------
    estimator : object
        Any picklable object, typically a fitted estimator or selector.
    path : str or os.PathLike
        Destination file.
    compress : int, default=3
        joblib compression level (0 for none).

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, tempfile
    >>> from evidence_select import BayesianLinearRegressor, load_checkpoint, save_checkpoint
    >>> from evidence_select.datasets import make_linear_regression
    >>> data = make_linear_regression(600, random_state=0)
    >>> reg = BayesianLinearRegressor(n_particles=5, random_state=0).partial_fit(data.X[:300], data.y[:300])
    >>> path = save_checkpoint(reg, os.path.join(tempfile.mkdtemp(), "reg.joblib"))
    >>> resumed = load_checkpoint(path).partial_fit(data.X[300:], data.y[300:])
    >>> resumed.n_samples_seen_
    600
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".checkpoint-", dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            joblib.dump(estimator, stream, compress=compress)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return path


def load_checkpoint(path):
    """Load an object written by :func:`save_checkpoint`.

    Only load checkpoints you wrote yourself: like any pickle, a checkpoint can
    run code when loaded.

    Parameters
    ----------
    path : str or os.PathLike
        A file written by :func:`save_checkpoint` (or :func:`joblib.dump`).

    Returns
    -------
    estimator : object
        The saved object; a streaming estimator resumes exactly where it stopped.

    See Also
    --------
    save_checkpoint : The atomic writer.

    Examples
    --------
    >>> import os, tempfile
    >>> from evidence_select import BayesianMixture, load_checkpoint, save_checkpoint
    >>> from evidence_select.datasets import make_mixture
    >>> X = make_mixture(400, random_state=0).X
    >>> mixture = BayesianMixture(2, n_particles=5, n_mcmc_steps=2, random_state=0).partial_fit(X[:200])
    >>> path = save_checkpoint(mixture, os.path.join(tempfile.mkdtemp(), "mixture.joblib"))
    >>> resumed = load_checkpoint(path).partial_fit(X[200:])
    >>> resumed.log_evidence_ == mixture.partial_fit(X[200:]).log_evidence_   # bit for bit
    True
    """
    return joblib.load(os.fspath(path))
