"""The softmax's compiled (numba) kernels against plain numpy implementations of the same math.

The references below are written from the model's definition (``models/_logistic.py``'s docstring), not from the
kernels: logits ``W x + b`` for every class (not the kernels' differences to the last class), a log-sum-exp by
scipy, probabilities from it, and the gradient ``sum_j w_j (onehot(y_j) - p_j) [x_j, 1]`` laid out as theta.
Shapes include one row, one particle, two classes, no intercepts, more rows than one of the kernels' blocks, and
non-contiguous inputs; parameters include particles whose logits leave ``[-80, 80]`` (the kernels' shifted path).
"""

import os

import numpy as np
import pytest
from scipy.special import logsumexp

from evidence_select.models import SoftmaxRegressionModel

from ._fresh_process import assert_a_second_process_loads_the_cache, run_python

# (n_particles, n_rows, n_classes, n_features, fit_intercept): edge shapes, binary problems, a shape with more
# rows than a block (8192 // (2 K + d + 2) = 409 rows for K = 4, d = 10), feature counts on and off the kernels'
# tile of four.
SHAPES = [(1, 1, 2, 1, True), (1, 9, 3, 2, False), (4, 1, 2, 3, True), (3, 40, 2, 5, True), (6, 2000, 4, 10, True),
          (5, 30, 7, 4, False), (2, 50, 5, 8, True)]
SHAPE_IDS = ["M{}-n{}-K{}-d{}-b{:d}".format(*shape) for shape in SHAPES]
F32 = np.finfo(np.float32).eps


# -- numpy references -------------------------------------------------------------------------------------------
def reference_logits(theta, X, K, fit_intercept):
    """``(M, n, K)``."""
    M, d = len(theta), X.shape[1]
    W = theta[:, : K * d].reshape(M, K, d)
    logits = np.einsum("mkd,nd->mnk", W, X)
    if fit_intercept:
        logits += theta[:, None, K * d:]
    return logits


def reference_log_likelihood(theta, X, y, K, fit_intercept):
    logits = reference_logits(theta, X, K, fit_intercept)
    return logits[:, np.arange(len(X)), y] - logsumexp(logits, axis=2)


def reference_gradient(theta, X, y, weights, K, fit_intercept):
    """The gradient of ``sum_j w_mj log p(y_j | x_j, theta_m)``, ``weights`` broadcast to ``(M, n)``."""
    M, n = len(theta), len(X)
    logits = reference_logits(theta, X, K, fit_intercept)
    proba = np.exp(logits - logsumexp(logits, axis=2, keepdims=True))
    residual = np.eye(K)[y][None] - proba  # (M, n, K)
    residual *= np.broadcast_to(weights, (M, n))[:, :, None]
    grad = [np.einsum("mnk,nd->mkd", residual, X).reshape(M, -1)]
    if fit_intercept:
        grad.append(residual.sum(axis=1))
    return np.hstack(grad)


def gradient_scale(X, weights, n_particles, fit_intercept):
    """Per particle and parameter, ``sum_j |w_j| |a_ji|`` with ``a = [x, 1]``: the size of the sum the gradient's
    entry is (its residuals are at most 1 in size)."""
    design = np.hstack([np.abs(X), np.ones((len(X), int(fit_intercept)))])
    per_column = np.abs(np.broadcast_to(weights, (n_particles, len(X)))) @ design  # (M, d [+ 1])
    n_classes = None  # the layout repeats the columns per class: W row by row, then b per class
    return per_column, n_classes


def _layout_scale(X, weights, n_particles, K, fit_intercept):
    per_column, _ = gradient_scale(X, weights, n_particles, fit_intercept)
    d = X.shape[1]
    parts = [np.tile(per_column[:, :d], (1, K))]
    if fit_intercept:
        parts.append(np.repeat(per_column[:, d:], K, axis=1))
    return np.hstack(parts)


def _case(shape, seed=0):
    M, n, K, d, fit_intercept = shape
    rng = np.random.default_rng(seed)
    model = SoftmaxRegressionModel(d, K, fit_intercept=fit_intercept)
    theta = model.sample_prior(rng, M)
    theta[1::3] *= 40.0  # logits far outside [-80, 80]: the shifted path, probabilities of 0 and 1
    X = rng.normal(size=(n, d))
    X[::4] *= 5.0
    y = rng.integers(0, K, size=n)
    return model, theta, X, y, rng


def _weights(kind, M, n, rng):
    return {"scalar": 0.7, "rows": rng.uniform(0.1, 2.0, size=n),
            "particles x rows": rng.uniform(0.1, 2.0, size=(M, n))}[kind]


# Single precision: each logit is rounded to float32 (a relative error of eps, so an absolute one of eps |z|), and
# so is each residual and each block's sum; a gradient entry is then off by a few eps times its rows' absolute
# total, times the logits' size where probabilities are neither 0 nor 1. 64 eps (8e-6) of the absolute total
# covers logits up to ~50 at the decision boundary. Double precision (the fused pass): 1e-12.
GRADIENT_TOLERANCE = 64 * F32
EXACT_GRADIENT_TOLERANCE = 1e-12


def _gradient_error(grad, expected, scale):
    return np.max(np.abs(grad - expected) / np.maximum(scale, 1e-300)) if grad.size else 0.0


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_log_likelihood_matches_the_numpy_reference(shape):
    model, theta, X, y, _ = _case(shape)
    expected = reference_log_likelihood(theta, X, y, shape[2], shape[4])
    np.testing.assert_allclose(model.log_likelihood(theta, X, y), expected, rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(model.log_likelihood_sum(theta, X, y), expected.sum(axis=1), rtol=1e-13, atol=1e-11)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("weights_kind", ["scalar", "rows", "particles x rows"])
def test_gradients_match_the_numpy_reference(shape, weights_kind):
    model, theta, X, y, rng = _case(shape, seed=1)
    M, n, K, _, fit_intercept = shape
    weights = _weights(weights_kind, M, n, rng)
    expected = reference_gradient(theta, X, y, weights, K, fit_intercept)
    scale = _layout_scale(X, weights, M, K, fit_intercept)
    assert _gradient_error(model.grad_log_likelihood(theta, X, y, weights), expected, scale) < GRADIENT_TOLERANCE
    total, grad = model.log_likelihood_and_grad(theta, X, y, weights)
    assert _gradient_error(grad, expected, scale) < EXACT_GRADIENT_TOLERANCE
    expected_total = np.sum(np.broadcast_to(weights, (M, n)) * reference_log_likelihood(theta, X, y, K, fit_intercept),
                            axis=1)
    np.testing.assert_allclose(total, expected_total, rtol=1e-13, atol=1e-11)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_fused_log_likelihood_is_the_same_bits_as_the_log_likelihood_kernel(shape):
    """An exact HMC move and the annealing weights see one target, whatever the row weights."""
    model, theta, X, y, rng = _case(shape, seed=4)
    M, n = shape[:2]
    expected = model.log_likelihood(theta, X, y)
    from evidence_select.models import _compiled_softmax as kernels

    for row_weights in (np.full((1, n), 0.3), rng.uniform(0.1, 2.0, size=(M, n))):
        log_lik, grad = np.empty((M, n)), np.empty(theta.shape)
        kernels.softmax_log_likelihood_and_gradient(theta, X, y, row_weights, shape[2], shape[4], log_lik, grad)
        np.testing.assert_array_equal(log_lik, expected)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_a_particle_gets_the_same_bits_alone_or_among_others(shape):
    """Which particles share a call (n_jobs, backends, group splits) never changes a particle's kernel results.

    The fused call's weighted total is numpy's product of the rows with their weights (``weighted_total``, shared
    by every model), outside the kernels: a BLAS product, whose order of summation may depend on the number of
    particles, so it is compared to rounding.
    """
    model, theta, X, y, rng = _case(shape, seed=5)
    weights = rng.uniform(0.1, 2.0, size=len(X))
    together = [model.log_likelihood(theta, X, y), model.grad_log_likelihood(theta, X, y, weights),
                *model.log_likelihood_and_grad(theta, X, y, weights)]
    for m in range(len(theta)):
        one = theta[m:m + 1]
        alone = [model.log_likelihood(one, X, y), model.grad_log_likelihood(one, X, y, weights),
                 *model.log_likelihood_and_grad(one, X, y, weights)]
        np.testing.assert_array_equal(alone[0][0], together[0][m])
        np.testing.assert_array_equal(alone[1][0], together[1][m])
        np.testing.assert_allclose(alone[2][0], together[2][m], rtol=1e-14)
        np.testing.assert_array_equal(alone[3][0], together[3][m])


@pytest.mark.parametrize("dtype, tolerance", [(np.float32, 4 * F32), (np.float64, 1e-14)])
def test_unshifted_exponentials_equal_the_shifted_ones(dtype, tolerance):
    """Below the Hoelder bound the kernels skip the max shift; both give the same probabilities and log
    normalisers to rounding."""
    from evidence_select.models import _compiled_softmax as kernels

    rng = np.random.default_rng(5)
    logits = rng.uniform(-79.0, 79.0, size=(3, 200)).astype(dtype)
    results = []
    for safe in (True, False):
        z, top, total = logits.copy(), np.empty(200, dtype), np.empty(200, dtype)
        kernels._exponentials(z, top, total, 200, safe)
        proba = np.vstack([z, np.exp(-top.astype(float))[None]]) / total
        results.append((proba, top + np.log(total.astype(float))))
    full = np.vstack([logits.astype(float), np.zeros((1, 200))])
    # Log normalisers near 0 (one class far ahead) are compared absolutely: log(total) is off by its rounding.
    np.testing.assert_allclose(results[0][1], logsumexp(full, axis=0), rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(results[1][1], logsumexp(full, axis=0), rtol=tolerance, atol=tolerance)
    # Shifting rounds z - top to eps |top| (|top| < 80) absolutely, so probabilities relatively; those below the
    # floor's exp(-80) = 1.8e-35 are floored there by the shifted path.
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=80 * tolerance, atol=2e-35)
    assert kernels._logits_are_safe(np.array([[1.0, 2.0, 3.0]]), np.array([20.0, 20.0]))  # 3 + 20 + 40 <= 80
    assert not kernels._logits_are_safe(np.array([[1.0, 2.0, 21.0]]), np.array([20.0, 20.0]))
    assert not kernels._logits_are_safe(np.array([[1.0, 2.0, 3.0]]), np.array([np.nan, 20.0]))


def test_huge_logits_give_finite_log_likelihoods_and_gradients():
    """Logits of 1e4: the shifted path, probabilities of exactly 0 and 1, log-probabilities of -1e4 and 0."""
    model = SoftmaxRegressionModel(2, 3)
    theta = np.array([[1e4, -1e4, -1e4, 1e4, 0.0, 0.0, 0.0, 0.0, 0.0],
                      [-1e4, 1e4, 1e4, 1e4, 3e3, -3e3, 1.0, 2.0, 3.0]])
    X = np.array([[1.0, 0.5], [-1.0, 2.0], [0.0, 0.0]])
    y = np.array([0, 1, 2])
    expected = reference_log_likelihood(theta, X, y, 3, True)
    np.testing.assert_allclose(model.log_likelihood(theta, X, y), expected, rtol=1e-13)
    weights = np.array([1.0, 0.5, 2.0])
    expected_grad = reference_gradient(theta, X, y, weights, 3, True)
    np.testing.assert_allclose(model.grad_log_likelihood(theta, X, y, weights), expected_grad, atol=1e-6)
    np.testing.assert_allclose(model.log_likelihood_and_grad(theta, X, y, weights)[1], expected_grad, atol=1e-12)


def test_kernels_take_non_contiguous_inputs():
    """Strided views (every other particle, a column slice, reversed rows) and Fortran order, straight into the
    kernels as well as through the model."""
    from evidence_select.models import _compiled_softmax as kernels

    model, theta, X, y, rng = _case((8, 300, 4, 3, True), seed=3)
    theta_view = np.asfortranarray(theta)[::2]
    X_view = np.hstack([X, rng.normal(size=(300, 3))])[::-1, :3][::-1]
    y_view = np.repeat(y, 2)[::2]
    weights = rng.uniform(0.1, 2.0, size=(4, 300)).T.copy().T
    assert not (theta_view.flags.c_contiguous or X_view.flags.c_contiguous or weights.flags.c_contiguous
                or y_view.flags.c_contiguous)
    expected_grad = reference_gradient(theta[::2], X, y, weights, 4, True)
    expected_log_lik = reference_log_likelihood(theta[::2], X, y, 4, True)
    scale = _layout_scale(X, weights, 4, 4, True)
    assert _gradient_error(model.grad_log_likelihood(theta_view, X_view, y_view, weights), expected_grad,
                           scale) < GRADIENT_TOLERANCE
    np.testing.assert_allclose(model.log_likelihood(theta_view, X_view, y_view), expected_log_lik, rtol=1e-13,
                               atol=1e-12)
    out = np.empty((4, model.n_params))
    kernels.softmax_gradient(theta_view, X_view, y_view, weights, 4, True, out)
    assert _gradient_error(out, expected_grad, scale) < GRADIENT_TOLERANCE
    per_row = np.empty((4, 300))
    kernels.softmax_log_likelihood(theta_view, X_view, y_view, 4, True, per_row)
    np.testing.assert_allclose(per_row, expected_log_lik, rtol=1e-13, atol=1e-12)


def test_no_rows_give_zero_likelihood_terms():
    model, theta, _, _, _ = _case((3, 5, 3, 2, True))
    X, y = np.empty((0, 2)), np.empty(0, dtype=int)
    np.testing.assert_array_equal(model.log_likelihood_sum(theta, X, y), np.zeros(3))
    assert model.log_likelihood(theta, X, y).shape == (3, 0)
    np.testing.assert_array_equal(model.grad_log_likelihood(theta, X, y, 1.0), np.zeros(theta.shape))
    total, grad = model.log_likelihood_and_grad(theta, X, y, 1.0)
    np.testing.assert_array_equal(total, np.zeros(3))
    np.testing.assert_array_equal(grad, np.zeros(theta.shape))


def test_non_finite_parameters_reach_the_results():
    """NaN is never turned into a number (the engine's divergence checks rely on it), and stays in its particle."""
    model, theta, X, y, _ = _case((3, 20, 3, 2, True))
    theta[1, 3] = np.nan
    for result in (model.log_likelihood(theta, X, y), model.grad_log_likelihood(theta, X, y, 1.0),
                   *model.log_likelihood_and_grad(theta, X, y, 1.0)):
        assert np.any(np.isnan(result[1]))
        assert np.all(np.isfinite(result[[0, 2]]))


def test_bad_inputs_raise_instead_of_reading_out_of_bounds():
    model, theta, X, y, _ = _case((3, 20, 3, 2, True))
    for codes in (np.where(y == 0, 3, y), np.where(y == 0, -1, y)):
        with pytest.raises(ValueError, match="class codes"):
            model.log_likelihood(theta, X, codes)
        with pytest.raises(ValueError, match="class codes"):
            model.grad_log_likelihood(theta, X, codes, 1.0)
    with pytest.raises(ValueError, match="theta must have shape"):
        model.grad_log_likelihood(theta[:, :-1], X, y, 1.0)
    with pytest.raises(ValueError, match="X must have shape"):
        model.log_likelihood(theta, X[:, :1], y)
    with pytest.raises(ValueError, match="y must have shape"):
        model.log_likelihood(theta, X, y[:-1])


def test_read_only_inputs_run_the_compiled_code_without_compiling_again():
    """numba types read-only arrays apart from writable ones; the model hands the kernels writable arrays, so
    read-only inputs (broadcast weights, memory maps) add no compiled signature."""
    from evidence_select.models import _compiled_softmax as kernels

    model, theta, X, y, _ = _case((4, 50, 4, 3, True))

    def every_call(theta, X, y, weights):
        return [model.grad_log_likelihood(theta, X, y, weights), model.log_likelihood(theta, X, y),
                *model.log_likelihood_and_grad(theta, X, y, weights), model.curvature_ratio(theta, X)]

    read_only_weights = (np.broadcast_to(1.0, (4, 50)), np.broadcast_to(1.0, (50,)))
    expected = [every_call(theta, X, y, np.array(weights)) for weights in read_only_weights]
    signatures = {name: len(getattr(kernels, name).signatures) for name in kernels.__all__}
    for array in (theta, X, y):
        array.setflags(write=False)
    for weights, results in zip(read_only_weights, expected):
        got = every_call(theta, X, y, weights)
        for index in (0, 1, 3, 4):  # the kernels' results; the weighted total is numpy's product with the weights
            np.testing.assert_array_equal(got[index], results[index])
        np.testing.assert_allclose(got[2], results[2], rtol=1e-14)
    assert {name: len(getattr(kernels, name).signatures) for name in kernels.__all__} == signatures


def test_exponentials_match_numpy_on_the_unshifted_logits_range_and_keep_nan():
    """Both precisions on ``[-80, 80]`` (the mixture's tests cover ``exp_accurate`` on ``[-80, 0]``)."""
    from evidence_select.models._compiled_exp import exp_accurate, exp_single

    positive = np.linspace(0.0, 80.0, 4001)
    assert np.max(np.abs(np.array([exp_accurate(x) for x in positive]) / np.exp(positive) - 1.0)) < 1e-14

    points = np.concatenate([np.linspace(-80.0, 80.0, 8001), -np.logspace(-12, np.log10(80.0), 500),
                             [0.0, -80.0, 80.0]]).astype(np.float32)
    expected = np.exp(points.astype(np.float64))
    got = np.array([exp_single(x) for x in points], dtype=np.float64)
    assert np.max(np.abs(got / expected - 1.0)) < 2 * F32
    assert np.isnan(exp_single(np.float32(np.nan)))


def test_importing_the_package_imports_no_numba_and_compiles_nothing():
    """numba and the kernels' module load on a likelihood's first call, not on import, on building models, or on
    their probabilities (numpy)."""
    out = run_python("""
        import sys
        import numpy as np
        from evidence_select import BayesianLogisticClassifier
        from evidence_select.models import SoftmaxRegressionModel
        BayesianLogisticClassifier().get_params()
        model = SoftmaxRegressionModel(3, 2)
        theta = model.sample_prior(np.random.default_rng(0), 2)
        model.log_proba(theta, np.ones((4, 3)))
        print(sorted(name for name in sys.modules if name.split('.')[0] in ('numba', 'llvmlite')
                     or '._compiled_' in name))
    """, dict(os.environ))
    assert out.strip() == "[]"


@pytest.mark.slow
@pytest.mark.first_processes("softmax")
def test_a_second_process_loads_the_kernels_from_the_cache(first_processes):
    """With an empty cache directory the first process compiles (cache misses) and writes index and code files;
    a second process loads every kernel from them (hits, no miss) and gets the same bits.

    The first process (``_fresh_process.SOFTMAX_PROCESS``, shared with the cache-order test below) compiles the
    log-likelihood first, alone, then the others."""
    assert_a_second_process_loads_the_cache(*first_processes, n_kernels=3)


@pytest.mark.slow
@pytest.mark.first_processes("softmax", "mixture")
def test_the_kernels_bits_do_not_depend_on_which_model_compiled_first(first_processes):
    """Two fresh caches: one where a mixture's kernel (sharing the exponentials) compiles before the softmax's, one
    where the softmax's compiles alone. The softmax log-likelihood has the same bits in both (it did not while the
    exponentials were linked in as a process had first compiled them).

    The two processes are the ones the second-process tests start from (``_fresh_process``): each computes these
    bits before it compiles any other kernel."""
    alone, mixture_first = first_processes
    assert mixture_first.output["log_likelihood"] == alone.output["log_likelihood"]
