"""The calibration suite: named cases with exact evidence, for every backend to be judged by."""

from typing import NamedTuple

import numpy as np

from ..datasets import make_linear_regression
from ._calibration import (BananaTarget, BoxBananaTarget, BoxProductTarget, FunnelTarget, ProductTarget, RingChainTarget,
                           StudentTFactor, TwoPeakFactor, ill_conditioned_gaussian_target)
from ._conjugate import BetaBinomialModel, PoissonGammaModel, TinyMixtureModel
from ..models._linear import LinearGaussianModel

__all__ = ["CalibrationCase", "CALIBRATION_DIMS", "CALIBRATION_FAMILIES", "calibration_cases"]

#: Dimensions of every family (the ring needs at least 3 sites: its 2 becomes 3).
CALIBRATION_DIMS = (2, 8, 16, 32, 64)


class CalibrationCase(NamedTuple):
    """One calibration problem: ``log_evidence(model, X, y, method=...)`` should return ``exact``.

    ``X`` and ``y`` are None for targets without data.

    Examples
    --------
    >>> from evidence_select.testing import calibration_cases
    >>> case = calibration_cases(8, families=["poisson_gamma"], dims=(8,))[0]
    >>> case.name, case.dim, case.X.shape, case.y is None
    ('poisson_gamma_d8', 8, (20, 8), True)
    """

    name: str
    family: str
    dim: int
    model: object
    X: object
    y: object
    exact: float


def _no_data(model):
    return model, None, None


def _linear(d):
    data = make_linear_regression(100, n_features=d - 1, random_state=d)
    return LinearGaussianModel(d - 1), data.X, data.y


def _poisson_gamma(d):
    rng = np.random.default_rng(d)
    rates = rng.gamma(2.0, 1.0, size=d)
    return PoissonGammaModel(d), rng.poisson(rates, size=(20, d)).astype(float), None


def _beta_binomial(d):
    rng = np.random.default_rng(d)
    p = rng.beta(2.0, 2.0, size=d)
    return BetaBinomialModel(d, 10), rng.binomial(10, p, size=(5, d)).astype(float), None


def _tiny_mixture(d):
    rng = np.random.default_rng(d)
    n_features = d // 2
    centres = np.where(np.arange(10)[:, None] < 4, 1.5, -1.5)  # 4 rows near +1.5, 6 near -1.5
    X = centres + rng.standard_normal((10, n_features))
    return TinyMixtureModel(2, n_features, weights=[0.4, 0.6]), X, None


#: family name -> builder ``dim -> (model, X, y)``.
CALIBRATION_FAMILIES = {
    "gauss_cond1e2": lambda d: _no_data(ill_conditioned_gaussian_target(d, 1e2)),
    "gauss_cond1e4": lambda d: _no_data(ill_conditioned_gaussian_target(d, 1e4)),
    "student_t": lambda d: _no_data(ProductTarget(StudentTFactor(df=1.5, loc=0.5, scale=0.3), d)),
    "two_peak": lambda d: _no_data(ProductTarget(TwoPeakFactor(), d)),
    "funnel": lambda d: _no_data(FunnelTarget(d)),
    "banana": lambda d: _no_data(BananaTarget(d)),
    "banana_rotated": lambda d: _no_data(BananaTarget(d, rotation_seed=0)),
    "ring_chain": lambda d: _no_data(RingChainTarget(max(d, 3))),
    "box_two_peak_t": lambda d: _no_data(BoxProductTarget(TwoPeakFactor(df=2.0), d)),
    "box_banana": lambda d: _no_data(BoxBananaTarget(d)),
    "linear": _linear,
    "poisson_gamma": _poisson_gamma,
    "beta_binomial": _beta_binomial,
    "tiny_mixture": _tiny_mixture,
}


def calibration_cases(max_dim=64, *, families=None, dims=CALIBRATION_DIMS):
    """The calibration suite: every family at every dimension up to ``max_dim``, with its exact log evidence.

    Families (all with exact evidence computed here): ill-conditioned Gaussians
    (condition numbers 1e2 and 1e4), products of heavy-tailed (Student-t) and of
    two-peak 1-d densities, Neal's funnel, Rosenbrock-type banana pairs (plain
    and randomly rotated), a ring of double wells with heavy-tailed coupling, a
    heavy-tailed two-peak product and thin rotated banana pairs under a uniform
    box prior (sigmoid map), and
    models with data: linear-Gaussian regression, Poisson-gamma, beta-binomial
    and a two-component mixture with known weights.

    Parameters
    ----------
    max_dim : int, default=64
        Largest number of parameters to include.
    families : iterable of str or None, default=None
        Subset of :data:`CALIBRATION_FAMILIES` names; None = all.
    dims : tuple of int, default=CALIBRATION_DIMS
        Dimensions to build (the ring uses ``max(d, 3)``).

    Returns
    -------
    cases : list of CalibrationCase
        Named ``"<family>_d<dim>"``, in family then dimension order.

    Examples
    --------
    >>> from evidence_select import log_evidence
    >>> from evidence_select.testing import calibration_cases
    >>> case = calibration_cases(2, families=["funnel"])[0]
    >>> case.name, case.dim, round(case.exact, 4)
    ('funnel_d2', 2, -4.5203)
    >>> result = log_evidence(case.model, case.X, case.y, method="exact")   # no data: X is None
    >>> result.log_evidence == case.exact
    True
    """
    names = list(CALIBRATION_FAMILIES) if families is None else list(families)
    unknown = [n for n in names if n not in CALIBRATION_FAMILIES]
    if unknown:
        raise ValueError(f"unknown calibration families {unknown}; choose from {list(CALIBRATION_FAMILIES)}")
    cases = []
    for family in names:
        for dim in dims:
            if dim > max_dim:
                continue
            model, X, y = CALIBRATION_FAMILIES[family](dim)
            exact = float(model.exact_log_evidence(X, y))
            cases.append(CalibrationCase(f"{family}_d{model.n_params}", family, model.n_params, model, X, y, exact))
    return cases
