"""The quadratic shift is an exact volume-preserving bijection that straightens thin curved ridges.

Tolerances: inverses and Jacobians to rounding (1e-9) and finite differences
(1e-5); the KL bounds are explained where they are asserted.
"""

import numpy as np
import pytest
from scipy.stats import special_ortho_group

from evidence_select.backends._gaussianize import (GaussianizationSettings, fit_gaussianization,
                                                gaussianization_log_density)
from evidence_select.backends._quadratic_shift import (fit_quadratic_shift, quadratic_shift_forward,
                                                    quadratic_shift_inverse)
from evidence_select.utils._whitening import whitening

_THICKNESS = 0.1


def _rotated_bananas(rng, n, d, rotation):
    """``d / 2`` pairs ``b = a^2 - 1 + 0.1 eps`` rotated by ``rotation``, and their exact log density."""
    a = rng.standard_normal((n, d // 2))
    b = a**2 - 1.0 + _THICKNESS * rng.standard_normal((n, d // 2))
    log_p = np.sum(-0.5 * a**2 - 0.5 * ((b - a**2 + 1.0) / _THICKNESS) ** 2 - np.log(2.0 * np.pi * _THICKNESS),
                   axis=1)
    phi = np.empty((n, d))
    phi[:, 0::2], phi[:, 1::2] = a, b
    return phi @ rotation.T, log_p


def _whitened(x):
    mean, chol = whitening(x)
    return np.linalg.solve(chol, (x - mean).T).T


@pytest.fixture(scope="module")
def fitted_shift():
    rng = np.random.default_rng(0)
    x, _ = _rotated_bananas(rng, 4000, 6, special_ortho_group.rvs(6, random_state=1))
    z = _whitened(x)
    return fit_quadratic_shift(rng, z, max_pairs=3), z


def test_finds_one_conditioning_direction_per_pair(fitted_shift):
    shift, _ = fitted_shift
    assert shift.directions.shape == (6, 3)
    # The shift never moves z along a conditioning direction: that is what makes it triangular.
    np.testing.assert_allclose(shift.coef @ shift.directions, 0.0, atol=1e-10)


def test_inverse_is_exact_and_jacobian_is_the_whitening(fitted_shift):
    shift, z = fitted_shift
    out, log_det = quadratic_shift_forward(shift, z[:200])
    back, log_det_back = quadratic_shift_inverse(shift, out)
    np.testing.assert_allclose(back, z[:200], atol=1e-9)
    np.testing.assert_allclose(log_det, log_det_back, rtol=0, atol=1e-12)
    h = 1e-6
    for point in z[:5]:
        jac = np.stack([(quadratic_shift_forward(shift, (point + h * e)[None])[0][0]
                         - quadratic_shift_forward(shift, (point - h * e)[None])[0][0]) / (2 * h)
                        for e in np.eye(6)], axis=1)
        assert abs(np.linalg.slogdet(jac)[1] - log_det[0]) < 1e-5


def test_nothing_to_straighten_in_gaussian_samples():
    rng = np.random.default_rng(3)
    assert fit_quadratic_shift(rng, rng.standard_normal((4000, 8)), max_pairs=4) is None
    assert fit_quadratic_shift(rng, rng.standard_normal((4000, 1)), max_pairs=4) is None


@pytest.mark.slow
def test_straightens_rotated_thin_bananas_in_sixteen_dimensions():
    # Eight thin bananas (thickness 0.1 against a bend of ~3), randomly rotated: marginal spline layers alone
    # stay several nats from them (KL about 0.8 nat per pair); with the shift the fit is within 0.1 nat in all.
    # With the conditioning directions left as the gradient search leaves them (no Gauss-Newton refinement)
    # this rises to ~2 nats: the residual of a thin ridge is very sensitive to its direction.
    d = 16
    rotation = special_ortho_group.rvs(d, random_state=0)
    rng = np.random.default_rng(0)
    x, _ = _rotated_bananas(rng, 8000, d, rotation)
    test, log_p = _rotated_bananas(np.random.default_rng(1), 4000, d, rotation)
    flow = fit_gaussianization(rng, x)
    assert flow.shift is not None and flow.shift.directions.shape[1] == d // 2
    assert np.mean(log_p - gaussianization_log_density(flow, test)) < 0.1
    layers_only = fit_gaussianization(rng, x, GaussianizationSettings(max_curved_pairs=0))
    assert np.mean(log_p - gaussianization_log_density(layers_only, test)) > 2.0


def test_least_squares_matches_lstsq_also_where_the_design_is_rank_deficient():
    from evidence_select.backends._quadratic_shift import _features, _least_squares

    rng = np.random.default_rng(0)
    z = rng.standard_normal((3000, 6))
    design = np.column_stack([_features(z[:, 0]), z[:, 0, None] * z[:, 1:]])
    y = rng.standard_normal((3000, 2))
    assert np.allclose(_least_squares(design, y), np.linalg.lstsq(design, y, rcond=None)[0], rtol=0, atol=1e-12)
    # A repeated column: the Gram matrix is singular, and lstsq's minimum-norm solution is returned.
    repeated = np.column_stack([design, design[:, 1]])
    expected = np.linalg.lstsq(repeated, y[:, 0], rcond=None)[0]
    assert np.allclose(_least_squares(repeated, y[:, 0]), expected, rtol=0, atol=1e-10)
