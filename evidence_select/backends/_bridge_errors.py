"""The bridge's reported error: the halves' mean Eq. (9) error, widened where a check voids it (to span the
sandwich) or where chains that never moved may hide posterior mass."""

import numpy as np
from scipy.stats import beta


# Checks whose failure voids Eq. (9), so that the error is widened to span the sandwich: too few draws where the
# proposal and the posterior overlap, or an unsolved bridge equation. Chains dropped for never moving widen it
# too (:func:`_widened_std`).
_SANDWICH_CHECKS = ("overlap_draws", "bridge_iterations")
#: Upper quantile of the share of posterior mass that stuck chains stand for (:func:`_stuck_share_std`).
_STUCK_SHARE_QUANTILE = 0.95


def _combined_std(halves, halves_agree):
    """The error of the halves' mean: their mean Eq. (9) error, widened to their gap when they disagree.

    A half whose error estimate is not finite (its bridge weights overflowed)
    contributes none: the other half's error and the gap between the halves
    stand in, so a flagged run still reports a finite, wide error rather than
    NaN. Infinite only when nothing finite is left.
    """
    stds = np.array([h.std for h in halves], dtype=float)
    finite = stds[np.isfinite(stds)]
    std = float(np.mean(stds) if finite.size == len(stds) else finite.max() if finite.size else np.nan)
    if halves_agree and np.isfinite(std):
        return std
    candidates = [value for value in (std, abs(halves[0].log_z - halves[1].log_z)) if np.isfinite(value)]
    return float(max(candidates)) if candidates else float("inf")


def _log_z_bounds(lowers, uppers, log_correction):
    """The widest of the halves' ``lowers`` and ``uppers`` (their sandwiches, :func:`~._bridge_equation._sandwich`,
    or their reaches, :class:`~._bridge._HalfResult`), as ``[lower, upper]`` of the reported ``log Z``."""
    return [float(min(lowers) + log_correction), float(max(uppers) + log_correction)]


def _spanning_std(std, log_z, bounds):
    """``std`` widened so that ``log_z +- 3 std`` spans the finite ``bounds``.

    Eq. (9) is a first-order error that holds only where the proposal overlaps
    the posterior; without overlap the bridge can sit anywhere between the
    sandwich's loose ends, so its error is taken to be at least that wide.
    """
    reach = [abs(b - log_z) for b in bounds if np.isfinite(b)]
    return float(max([std] + [r / 3.0 for r in reach]))


def _stuck_share_std(n_stuck, n_chains):
    """An error whose three-sigma reach covers the bias of missing the mass that stuck chains stand for.

    Tempered starts are draws from (an approximation to) the posterior, so
    ``n_stuck`` of ``n_chains`` starts that never moved estimate the share
    ``w`` of its mass in places the sampler cannot move through. The moving
    chains may never reach them, and ``log Z`` then reads low by
    ``-log(1 - w)``; this is a third of that at the upper end of Jeffreys'
    90% interval for ``w``.
    """
    share = beta.ppf(_STUCK_SHARE_QUANTILE, n_stuck + 0.5, n_chains - n_stuck + 0.5)
    return float(-np.log1p(-share) / 3.0)


def _widened_std(std, log_z, bounds, reach, diagnostics, tempered_starts, n_chains):
    """The error after the checks that void Eq. (9).

    It spans the halves' ``reach`` (:func:`_spanning_std`; the sandwich, or
    for cells :func:`~._bridge._reach_of_cells`) when a check of ``_SANDWICH_CHECKS``
    fails. When chains were dropped as stuck, it covers the mass they stand
    for (:func:`_stuck_share_std`), or, where their starts were not drawn from
    the posterior or no chain moved, spans the sandwich ``bounds``.
    """
    if not all(diagnostics[name]["passed"] for name in _SANDWICH_CHECKS if name in diagnostics):
        std = _spanning_std(std, log_z, reach)
    stuck = diagnostics.get("stuck_chains")
    if stuck is None or stuck["passed"]:
        return std
    if tempered_starts and stuck["value"] < n_chains:
        return max(std, _stuck_share_std(stuck["value"], n_chains))
    return _spanning_std(std, log_z, bounds)
