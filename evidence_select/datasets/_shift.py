"""The paper's distribution-shift stream with shortened phases (for the demo, tests and examples)."""

import numpy as np
from sklearn.utils import Bunch

from . import SHIFT_CHANGE_POINTS, make_shift_stream

__all__ = ["PAPER_PHASES", "shift_stream"]

#: Rows per phase of the paper's stream (3, 5 then 7 clusters; Sec. 6.2).
PAPER_PHASES = (SHIFT_CHANGE_POINTS[0], SHIFT_CHANGE_POINTS[1] - SHIFT_CHANGE_POINTS[0], 90_000)


def shift_stream(phase_sizes=PAPER_PHASES, *, shuffle=False, random_state=0):
    """The 3 -> 5 -> 7 cluster stream with ``phase_sizes`` rows per phase.

    Each phase keeps the first rows of the corresponding phase of
    :func:`~evidence_select.datasets.make_shift_stream` (rows are i.i.d. within
    a phase), so ``PAPER_PHASES`` gives the paper's stream exactly and shorter
    phases give the same distributions with earlier change points.

    Parameters
    ----------
    phase_sizes : tuple of 3 int, default=PAPER_PHASES
        Rows with 3, 5 and 7 clusters; the first two at most 1000 and 9000.
    shuffle : bool, default=False
        Permute the rows (the paper's stationary control).
    random_state : int, default=0
        Seed of the stream (and of the permutation).

    Returns
    -------
    data : Bunch
        ``X (n_samples, 2)``, ``change_points`` (empty when shuffled) and
        ``n_clusters`` (active clusters per row).

    Examples
    --------
    >>> from evidence_select.datasets._shift import shift_stream
    >>> data = shift_stream((100, 200, 300))
    >>> data.X.shape, data.change_points, data.n_clusters[[0, 100, 300]].tolist()
    ((600, 2), [100, 300], [3, 5, 7])
    >>> shift_stream((100, 200, 300), shuffle=True).change_points
    []
    """
    n1, n2, n3 = (int(n) for n in phase_sizes)
    if not (0 < n1 <= PAPER_PHASES[0] and 0 < n2 <= PAPER_PHASES[1] and n3 > 0):
        raise ValueError(f"phase_sizes must be positive with at most {PAPER_PHASES[:2]} rows in the first two "
                         f"phases; got {phase_sizes}")
    full = make_shift_stream(SHIFT_CHANGE_POINTS[1] + n3, random_state=random_state)
    rows = np.concatenate([np.arange(n1), SHIFT_CHANGE_POINTS[0] + np.arange(n2),
                           SHIFT_CHANGE_POINTS[1] + np.arange(n3)])
    X, n_clusters = full.X[rows], full.n_clusters[rows]
    change_points = [n1, n1 + n2]
    if shuffle:
        order = np.random.default_rng(np.random.SeedSequence([int(random_state), 7])).permutation(len(rows))
        X, n_clusters, change_points = X[order], n_clusters[order], []
    return Bunch(X=X, change_points=change_points, n_clusters=n_clusters)
