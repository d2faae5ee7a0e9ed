"""BayesianLinearRegressor's data-scale checks: where the target's scale contradicts the model's priors.

Each check fits the call's first rows exactly (O(rows d^2)) and returns the problems it sees as sentences; the
shell joins them into one :class:`~evidence_select.estimators.FeatureScaleWarning`.
"""

import numpy as np

from ..models import LinearEvidenceStats, LinearGaussianModel
from ..models._linear_hyper_math import NOISE_VARIANCE_BOUNDS, _residual_sums

__all__ = ["target_scale_problems", "target_scale_diagnosis", "RESIDUAL_LIMIT", "CONFLICT_LIMIT",
           "INTERCEPT_CONFLICT_LIMIT", "NOISE_BOUND_MARGIN"]

#: Residual mean square (at the posterior mean of the call's rows) above this multiple of
#: ``noise_variance`` draws a :class:`FeatureScaleWarning`: the target is on another scale than the noise.
RESIDUAL_LIMIT = 3.0
#: A posterior mean more than this many prior standard deviations from the prior mean draws one too.
CONFLICT_LIMIT = 20.0
#: With the noise integrated out: an intercept this many of its prior standard deviations
#: (``intercept_scale`` noise standard deviations) from 0 costs ``0.02`` nat, which then differs between
#: candidates of different noise: center ``y``.
INTERCEPT_CONFLICT_LIMIT = 0.2
#: A residual variance within this factor of an end of the noise variance's prior support draws a warning: the
#: prior then cuts the posterior of the noise variance by about ``NOISE_BOUND_MARGIN^(-n/2)``, so its cost is no
#: longer the same for every candidate once ``n`` is small.
NOISE_BOUND_MARGIN = 1e4


def target_scale_diagnosis(model, X, y):
    """``(residual mean square / noise_variance, max |posterior mean| / prior std)`` on ``(X, y)``.

    For :class:`~evidence_select.models.LinearGaussianModel`: the exact posterior of the rows (a ridge fit,
    O(n d^2)). The first ratio says how far the target's scale is from the noise model's, the second how far
    the data pull the parameters out of their prior; both far above 1 put the posterior where the particles
    cannot follow (the annealing moves them in steps scaled to the posterior's width).
    """
    moments = model.gradient_statistics(X, y)  # [A, y]^T [A, y] in one product
    n_design = model.n_params
    stats = LinearEvidenceStats(moments[:n_design, :n_design], moments[:n_design, -1], moments[-1, -1], len(y))
    mean = stats.posterior_mean(model)
    # The residual sum of squares from the moments, y'y - 2 m'A'y + m'A'A m: no second pass over the rows
    # (this runs on partial_fit calls). Its rounding, eps * y'y, is far below the limit it is tested against.
    residual_sum = max(stats.sum_sq - 2.0 * mean @ stats.cross + mean @ stats.gram @ mean, 0.0)
    conflict = np.abs(mean) / np.sqrt(model.prior_variances)
    return float(residual_sum / max(stats.n_samples, 1) / model.noise_variance), float(conflict.max())


def _fixed_model_problems(model, X, y):
    residual, conflict = target_scale_diagnosis(model, X, y)
    problems = []
    if residual > RESIDUAL_LIMIT:
        problems.append(f"the residual mean square is {residual:.3g} times noise_variance={model.noise_variance:g}")
    if conflict > CONFLICT_LIMIT:
        problems.append(f"the posterior mean lies {conflict:.3g} prior standard deviations from the prior mean")
    return problems


def _hyper_model_problems(model, X, y):
    """The fit at ``g = prior_scale^2`` (1 when learned): its residual variance against the noise prior (or the
    known noise) and its intercept against its prior. The particles are exact draws, so a prior the data
    contradict shows in the (exact) evidence rather than as particles left behind; these two checks guard the
    priors whose costs are meant to be the same for every candidate."""
    reduced = model.reduce(model.gradient_statistics(X, y))
    n_free = reduced.count - model.n_design
    if n_free < 1:
        return []  # too few rows to say anything of the noise
    g = 1.0 if model.prior_scale is None else model.prior_scale**2
    weights = reduced.eigenvectors @ (reduced.rotated_cross / (1.0 / g + reduced.eigenvalues))
    residual = float(_residual_sums(reduced, np.asarray(g))) / n_free
    problems = []
    noise = model.noise_variance
    if noise is None:
        lo, hi = NOISE_VARIANCE_BOUNDS
        if not lo * NOISE_BOUND_MARGIN < residual < hi / NOISE_BOUND_MARGIN:
            problems.append(f"the residual variance {residual:.3g} lies near an end of the noise variance's prior "
                            f"support [{lo:g}, {hi:g}]")
        noise = max(residual, lo)
    elif residual / noise > RESIDUAL_LIMIT:
        problems.append(f"the residual mean square is {residual / noise:.3g} times noise_variance={noise:g}")
    if model.fit_intercept:
        intercept = (reduced.sum_y - weights @ reduced.sum_x) / reduced.intercept_precision
        distance = abs(intercept) / (model.intercept_scale * np.sqrt(noise))
        if distance > INTERCEPT_CONFLICT_LIMIT:
            problems.append(f"the intercept lies {distance:.3g} prior standard deviations from 0 (center y or raise "
                            "intercept_scale)")
    return problems


def target_scale_problems(model, X, y):
    """Sentences naming where ``y``'s scale contradicts ``model``'s priors on the rows ``(X, y)`` (empty: none).

    Parameters
    ----------
    model : LinearGaussianModel or LinearHyperModel
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_rows,)

    Returns
    -------
    problems : list of str
    """
    if isinstance(model, LinearGaussianModel):
        return _fixed_model_problems(model, X, y)
    return _hyper_model_problems(model, X, y)
