"""Row order: streaming tests of serial dependence along the rows, and the seeded random order of ``fit``.

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

:func:`fit_order` is the row order in which the estimators' ``fit`` streams its
rows (``shuffle=True``): a permutation from a generator derived from the
sampler's, which it leaves untouched.
"""

import copy
from typing import NamedTuple

import numpy as np

from ..exceptions import StreamOrderWarning
from ._random import make_generator
from ._warnings import warn

__all__ = ["MIN_EFFECT", "Z_THRESHOLD", "OrderTest", "OrderVerdict", "StreamOrderWarning", "fit_order",
           "order_generator", "target_order_verdict", "warn_if_target_ordered"]

Z_THRESHOLD = 4.0
MIN_EFFECT = 0.1
_MIN_ROWS = 20  # below this the normal approximations of the null are too rough to test
#: Spawn key of the generator behind ``fit``'s row order: apart from any child a sampler spawns ((0,), (1,), ...).
_ORDER_SPAWN_KEY = (0x6F72646572,)  # "order"


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

    def describe(self, along="the file"):
        """One sentence for users: the column is ordered ``along`` (e.g. "the file", "the call's rows")."""
        return (f"column {self.column!r} is {'sorted or ' if self.effect > 0.9 else ''}strongly ordered along "
                f"{along} ({self.statistic} {self.effect:.3f}, z = {self.z:.1f} against a random order; "
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


def target_order_verdict(y, labels):
    """The :class:`OrderVerdict` of one call's target ``y`` (None with fewer than 20 rows or no target).

    Parameters
    ----------
    y : ndarray of shape (n_rows,) or None
        Integer class codes when ``labels`` (a runs test), else a numeric target
        (its lag-1 autocorrelation).
    labels : bool
        Whether ``y`` holds class labels.

    Examples
    --------
    >>> import numpy as np
    >>> target_order_verdict(np.repeat([0, 1, 2], 40), labels=True).flagged
    True
    >>> target_order_verdict(np.random.default_rng(0).integers(3, size=120), labels=True).flagged
    False
    """
    if y is None:
        return None
    if labels:
        test = OrderTest([], labels="y")
        test.update(np.empty((len(y), 0)), np.asarray(y))
    else:
        test = OrderTest(["y"])
        test.update(np.asarray(y, dtype=float)[:, None])
    return test.verdict()


def warn_if_target_ordered(estimator_name, y, labels):
    """Raise a :class:`StreamOrderWarning` naming the cure when ``y`` is sorted or strongly autocorrelated.

    Returns
    -------
    warned : bool
    """
    verdict = target_order_verdict(y, labels)
    if verdict is None or not verdict.flagged:
        return False
    warn(f"{estimator_name}: the target of a partial_fit call: {verdict.describe(along='its rows')}. The models "
         "treat rows as exchangeable, but the online evidence of rows in this order can differ from that of the "
         "same rows shuffled (each shift along the stream is harder for the sampler): pass the rows to fit, which "
         "streams them in a seeded random order, or shuffle them before partial_fit (sklearn.utils.shuffle). If "
         "this is the stream's true order (a time series), the estimate stands for it; this warning comes once "
         "per stream", StreamOrderWarning)
    return True


def order_generator(rng):
    """The generator of ``fit``'s row order, derived from the sampler's generator ``rng`` without advancing it.

    Seeded by hashing (:class:`numpy.random.SeedSequence`) the first four 64-bit
    words a copy of ``rng`` would give, under a spawn key of its own: the order is
    a function of ``rng``'s state, statistically independent of the numbers the
    sampler then draws from ``rng`` itself, which are the same as without a
    shuffle.
    """
    words = copy.deepcopy(rng.bit_generator).random_raw(4)
    return np.random.default_rng(np.random.SeedSequence([int(w) for w in words], spawn_key=_ORDER_SPAWN_KEY))


def fit_order(random_state, n_samples):
    """The order in which ``fit`` streams ``n_samples`` rows when ``shuffle=True``.

    An estimator's ``fit(X, y)`` with ``shuffle=True`` gives, to the bit, what a
    fresh copy of it gives from ``partial_fit(X[order], y[order])`` (with
    ``classes``, for a classifier) in chunks of ``batch_size`` rows, where
    ``order = fit_order(random_state, len(X))``: the sampler draws the same
    random numbers with and without the shuffle.

    Parameters
    ----------
    random_state : int, SeedSequence or Generator
        The estimator's ``random_state`` (a Generator is not advanced). With
        None the order is random and cannot be recomputed; a legacy
        ``RandomState`` is advanced by each call, as by ``fit``.
    n_samples : int

    Returns
    -------
    order : ndarray of shape (n_samples,)
        A permutation of ``range(n_samples)``.

    Examples
    --------
    >>> import numpy as np
    >>> from evidence_select import BayesianLinearRegressor
    >>> from evidence_select.datasets import make_linear_regression
    >>> from evidence_select.utils import fit_order
    >>> data = make_linear_regression(300, n_features=2, random_state=0)
    >>> fitted = BayesianLinearRegressor(n_particles=8, batch_size=100, random_state=0).fit(data.X, data.y)
    >>> order = fit_order(0, 300)
    >>> streamed = BayesianLinearRegressor(n_particles=8, batch_size=100, random_state=0)
    >>> streamed = streamed.partial_fit(data.X[order], data.y[order])
    >>> fitted.log_evidence_ == streamed.log_evidence_
    True
    """
    return order_generator(make_generator(random_state)).permutation(n_samples)
