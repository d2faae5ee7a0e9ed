"""Chunked reading of CSV and Parquet files through pandas/pyarrow (the optional extra ``io``).

Files are never loaded whole: :func:`iter_frames` yields ``pandas.DataFrame``
chunks of at most ``chunk_rows`` rows, so a file larger than memory streams.
:class:`RunningMoments` accumulates column means and variances over the chunks
(Chan et al.'s pairwise update, stable for large means).
"""

import os

import numpy as np

__all__ = ["IO_EXTRA_HINT", "RunningMoments", "file_format", "import_pandas", "iter_frames"]

IO_EXTRA_HINT = "pip install 'evidence-select[io]'"
_FORMATS = {".csv": "csv", ".txt": "csv", ".tsv": "csv", ".gz": "csv", ".bz2": "csv", ".zip": "csv",
            ".xz": "csv", ".parquet": "parquet", ".pq": "parquet"}


def import_pandas(purpose):
    """``pandas``, or an ImportError naming the extra that provides it."""
    try:
        import pandas
    except ImportError as exc:
        raise ImportError(f"{purpose} needs pandas, from the optional extra 'io': {IO_EXTRA_HINT}") from exc
    return pandas


def _import_parquet():
    try:
        import pyarrow.parquet
    except ImportError as exc:
        raise ImportError(f"reading Parquet files needs pyarrow, from the optional extra 'io': {IO_EXTRA_HINT}") from exc
    return pyarrow.parquet


def file_format(path, declared=None):
    """``"csv"`` or ``"parquet"``: ``declared`` if given, else from the file name's extension."""
    if declared is not None:
        if declared not in ("csv", "parquet"):
            raise ValueError(f"format must be 'csv' or 'parquet'; got {declared!r}")
        return declared
    extension = os.path.splitext(str(path))[1].lower()
    if extension not in _FORMATS:
        raise ValueError(f"cannot tell the format of {path} from its extension {extension!r}; "
                         "name it .csv or .parquet, or pass the format")
    return _FORMATS[extension]


def iter_frames(path, chunk_rows, fmt="csv"):
    """Yield the rows of a CSV or Parquet file as DataFrames of at most ``chunk_rows`` rows, in file order.

    Parameters
    ----------
    path : str or path-like
    chunk_rows : int
        Rows per chunk; memory use is proportional to it, not to the file.
    fmt : {"csv", "parquet"}, default="csv"
        CSV files need a header row (compressed CSV is recognised by pandas).

    Yields
    ------
    frame : pandas.DataFrame
    """
    pd = import_pandas("reading data files")
    if fmt == "parquet":
        parquet = _import_parquet()
        for batch in parquet.ParquetFile(path).iter_batches(batch_size=chunk_rows):
            yield batch.to_pandas()
        return
    with pd.read_csv(path, chunksize=chunk_rows) as reader:
        yield from reader


class RunningMoments:
    """Column-wise count, mean and variance accumulated over chunks of rows.

    Uses the pairwise update of Chan, Golub & LeVeque, which keeps the
    precision of a two-pass computation when the mean is large against the
    standard deviation.

    Examples
    --------
    >>> import numpy as np
    >>> moments = RunningMoments()
    >>> x = np.arange(10.0)[:, None] + 1e9
    >>> for chunk in (x[:3], x[3:]):
    ...     moments.update(chunk)
    >>> float(moments.mean[0] - 1e9), float(moments.var[0])
    (4.5, 8.25)
    """

    def __init__(self):
        self.count = 0
        self.mean = None
        self._m2 = None

    def update(self, chunk):
        """Add the rows of ``chunk`` (shape ``(n_rows, n_columns)``)."""
        chunk = np.asarray(chunk, dtype=float)
        if len(chunk) == 0:
            return
        n, mean = len(chunk), chunk.mean(axis=0)
        m2 = ((chunk - mean) ** 2).sum(axis=0)
        if self.count == 0:
            self.count, self.mean, self._m2 = n, mean, m2
            return
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self._m2 = self._m2 + m2 + delta**2 * (self.count * n / total)
        self.count = total

    @property
    def var(self):
        """Population variance of each column (divides by the count)."""
        return self._m2 / max(self.count, 1)

    @property
    def std(self):
        """Population standard deviation of each column; 1 where it is 0 (constant columns stay put)."""
        std = np.sqrt(self.var)
        return np.where(std > 0, std, 1.0)
