"""Is a file's row order random? Streaming tests of serial dependence along the rows.

The models of evidence_select treat rows as exchangeable, so their evidence
does not depend on the row order; the online sampler does: a file sorted by
its target (or strongly autocorrelated along the rows) is a stream of
distribution shifts, which is harder for it than the same rows shuffled. Both
statistics here are accumulated chunk by chunk, in memory independent of the
file's length, and compared with their distribution under a uniformly random
row order:

- numeric columns: the lag-1 autocorrelation ``r1``; under a random order
  ``E r1 = -1/n`` and ``var r1 = 1/n`` to leading order, so
  ``z = (r1 + 1/n) sqrt(n)`` is standard normal;
- class labels: the number of runs ``R`` (maximal blocks of equal labels); its
  mean and variance under a random order, given the class counts, are
  Mood's (1940), and ``z = (E R - R) / sd R`` (few runs: sorted or clustered).

:class:`OrderTest` flags an order when ``z > Z_THRESHOLD`` (one-sided, a
false alarm in 3 of 100,000 randomly ordered files) *and* the effect is at
least ``MIN_EFFECT``: an autocorrelation of 0.1, or 10% of the expected label
changes missing, so that a huge file with negligible dependence is not flagged.
"""

from typing import NamedTuple

import numpy as np

__all__ = ["MIN_EFFECT", "Z_THRESHOLD", "OrderTest", "OrderVerdict", "StreamOrderWarning"]

Z_THRESHOLD = 4.0
MIN_EFFECT = 0.1
_MIN_ROWS = 20  # below this the normal approximations of the null are too rough to test


class StreamOrderWarning(UserWarning):
    """The rows of a stream are sorted or autocorrelated: online evidences may depend on the order."""


class OrderVerdict(NamedTuple):
    """Outcome of :class:`OrderTest` for the most dependent column.

    Attributes
    ----------
    column : str
        The column with the largest ``z``.
    statistic : str
        ``"lag-1 autocorrelation"`` or ``"runs"``.
    effect : float
        The autocorrelation, or the fraction of the label changes expected
        under a random order that are missing.
    z : float
        Standardised statistic; large means ordered.
    flagged : bool
        ``z > Z_THRESHOLD`` and ``effect >= MIN_EFFECT``.
    """

    column: str
    statistic: str
    effect: float
    z: float
    flagged: bool

    def describe(self):
        """One sentence for users."""
        return (f"column {self.column!r} is {'sorted or ' if self.effect > 0.9 else ''}strongly ordered along the "
                f"file ({self.statistic} {self.effect:.3f}, z = {self.z:.1f} against a random order; "
                f"threshold z > {Z_THRESHOLD:g} and effect >= {MIN_EFFECT:g})")


class OrderTest:
    """Accumulate serial-dependence statistics over consecutive chunks of rows.

    Parameters
    ----------
    names : list of str
        Names of the numeric columns tested by lag-1 autocorrelation.
    labels : str or None, default=None
        Name of the class-label column tested by runs (its values are given
        to :meth:`update` as integer codes).

    Examples
    --------
    >>> import numpy as np
    >>> test = OrderTest(["y"])
    >>> y = np.sort(np.random.default_rng(0).normal(size=1000))
    >>> test.update(y[:400, None]); test.update(y[400:, None])
    >>> verdict = test.verdict()
    >>> verdict.flagged, round(verdict.effect, 2)
    (True, 0.99)
    """

    def __init__(self, names, labels=None):
        self.names = list(names)
        self.labels = labels
        self._n = 0
        self._shift = None   # first row: subtracting it keeps the sums free of cancellation
        self._sum = self._sum_sq = self._lag_sum = self._head = None
        self._last = None
        self._label_counts = {}
        self._label_changes = 0
        self._last_label = None

    def update(self, values, codes=None):
        """Add the next rows, in file order.

        Parameters
        ----------
        values : ndarray of shape (n_rows, len(names))
        codes : ndarray of shape (n_rows,) of int, default=None
            Class codes of the rows (when ``labels`` is set).
        """
        values = np.asarray(values, dtype=float)
        if len(values) == 0:
            return
        if self._shift is None:
            self._shift = values[0].copy()
            zeros = np.zeros(values.shape[1])
            self._sum, self._sum_sq, self._lag_sum = zeros, zeros.copy(), zeros.copy()
            self._head = values[0] - self._shift
        v = values - self._shift
        joined = v if self._last is None else np.vstack([self._last[None, :], v])
        self._lag_sum = self._lag_sum + np.sum(joined[1:] * joined[:-1], axis=0)
        self._sum = self._sum + v.sum(axis=0)
        self._sum_sq = self._sum_sq + (v**2).sum(axis=0)
        self._last = v[-1].copy()
        self._n += len(v)
        if codes is not None:
            self._update_labels(np.asarray(codes))

    def _update_labels(self, codes):
        joined = codes if self._last_label is None else np.concatenate([[self._last_label], codes])
        self._label_changes += int(np.count_nonzero(joined[1:] != joined[:-1]))
        for code, count in zip(*np.unique(codes, return_counts=True)):
            self._label_counts[code] = self._label_counts.get(code, 0) + int(count)
        self._last_label = codes[-1]

    def _autocorrelations(self):
        """``(r1, z)`` per numeric column."""
        n = self._n
        mean = self._sum / n
        # sum_{i<n} (v_i - m)(v_{i+1} - m) = lag_sum - m (2 sum - v_first - v_last) + (n - 1) m^2
        lagged = self._lag_sum - mean * (2 * self._sum - self._head - self._last) + (n - 1) * mean**2
        centred = self._sum_sq - n * mean**2
        with np.errstate(divide="ignore", invalid="ignore"):  # a constant column has no autocorrelation
            r1 = np.where(centred > 0, lagged / centred, 0.0)
        return r1, (r1 + 1.0 / n) * np.sqrt(n)

    def _runs(self):
        """``(effect, z)`` of the runs test on the labels (Mood 1940)."""
        n = self._n
        counts = np.array(list(self._label_counts.values()), dtype=float)
        if len(counts) < 2:
            return 0.0, 0.0
        s2, s3 = np.sum(counts**2), np.sum(counts**3)
        expected_runs = (n * (n + 1) - s2) / n
        var_runs = (s2 * (s2 + n * (n + 1)) - 2 * n * s3 - n**3) / (n**2 * (n - 1))
        runs = self._label_changes + 1
        effect = 1.0 - (runs - 1) / (expected_runs - 1)
        return effect, (expected_runs - runs) / np.sqrt(var_runs)

    def verdict(self):
        """The :class:`OrderVerdict` of the most dependent column, or None with fewer than 20 rows."""
        if self._n < _MIN_ROWS:
            return None
        candidates = []
        if self.names:
            r1, z = self._autocorrelations()
            candidates += [(name, "lag-1 autocorrelation", float(e), float(s)) for name, e, s in zip(self.names, r1, z)]
        if self.labels is not None:
            effect, z = self._runs()
            candidates.append((self.labels, "runs deficit", float(effect), float(z)))
        if not candidates:
            return None
        column, statistic, effect, z = max(candidates, key=lambda item: item[3])
        return OrderVerdict(column, statistic, effect, z, bool(z > Z_THRESHOLD and effect >= MIN_EFFECT))
