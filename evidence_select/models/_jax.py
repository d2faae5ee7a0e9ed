"""Automatic differentiation of a user's log-likelihood through JAX (an optional dependency).

The user writes the per-datum log-likelihood of one parameter set with ``jax.numpy``; here it is vectorised over
particles (``jax.vmap``), differentiated (``jax.grad``) and compiled (``jax.jit``), all in float64. Compiled code is
cached by JAX per function and per array shape; the particle and row counts are padded up to one of four sizes per
power of two (:func:`padded_size`), so the few shapes a stream meets (chunks, chunks plus mini-batches, the last
partial chunk) compile a few times, not once per size. Padded rows repeat a real row and carry zero weight; padded
particles repeat a real particle; both are cut from the results.
"""

import contextlib
import functools
import importlib.util

import numpy as np

__all__ = ["jax_installed", "jax_functions", "padded_size", "float64_context"]


def jax_installed():
    """Whether JAX can be imported (without importing it)."""
    return importlib.util.find_spec("jax") is not None


def float64_context():
    """A context in which JAX computes in float64 (JAX defaults to float32), or a null context without JAX."""
    if not jax_installed():
        return contextlib.nullcontext()
    import jax

    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is not None and hasattr(enable_x64, "__call__"):
        try:
            return enable_x64(True)
        except TypeError:  # an older JAX whose jax.enable_x64 is not a context manager
            pass
    from jax.experimental import enable_x64 as legacy_enable_x64

    return legacy_enable_x64()


def padded_size(n):
    """``n`` rounded up to a multiple of ``2^(bit_length(n) - 3)``: at most four sizes per power of two.

    Examples
    --------
    >>> from evidence_select.models._jax import padded_size
    >>> [padded_size(n) for n in (3, 80, 500, 1000)]
    [3, 80, 512, 1024]
    """
    step = 1 << max(int(n).bit_length() - 3, 0)
    return -(-int(n) // step) * step


def _pad(array, size, fill_from=0):
    """``array`` with its first axis extended to ``size`` by repeating entry ``fill_from``."""
    missing = size - len(array)
    if missing <= 0:
        return array
    return np.concatenate([array, np.repeat(array[fill_from:fill_from + 1], missing, axis=0)])


@functools.cache
def jax_functions():
    """The compiled functions, built on first use (importing JAX takes a second or two).

    Each takes ``(fn, density, vectorized)`` as static arguments (the user's function and how it is called) and
    ``(params, X, y[, weights])`` as arrays, and returns:

    - ``per_datum``: the ``(n_particles, n_rows)`` log-likelihood matrix;
    - ``grad``: the gradient, per particle and parameter, of ``sum_j weights[i, j] * log_lik[i, j]``;
    - ``value_and_grad``: those totals ``(n_particles,)`` and the same gradient.
    """
    import jax
    import jax.numpy as jnp

    def per_datum(fn, density, vectorized, params, X, y):
        n_particles = len(next(iter(params.values())))
        if vectorized:
            log_lik = fn(params, X) if density else fn(params, X, y)
        elif density:
            log_lik = jax.vmap(lambda p: fn(p, X))(params)
        else:
            log_lik = jax.vmap(lambda p: fn(p, X, y))(params)
        expected = (n_particles, X.shape[0])
        if jnp.shape(log_lik) != expected:
            per_set = f"{expected}" if vectorized else f"({X.shape[0]},)"
            got = jnp.shape(log_lik) if vectorized else jnp.shape(log_lik)[1:]
            raise ValueError(f"the log-likelihood function {_name(fn)} returned shape {tuple(got)} for "
                             f"{X.shape[0]} rows; it must return one value per row, shape {per_set}")
        return log_lik

    def totals(fn, density, vectorized, params, X, y, weights):
        # A zero weight (a padded row) counts nothing, even where the row's log-likelihood is -inf.
        weighted = jnp.where(weights == 0.0, 0.0, weights * per_datum(fn, density, vectorized, params, X, y))
        per_particle = jnp.sum(weighted, axis=1)
        return jnp.sum(per_particle), per_particle

    static = (0, 1, 2)
    return {
        "per_datum": jax.jit(per_datum, static_argnums=static),
        "grad": jax.jit(jax.grad(lambda *a: totals(*a)[0], argnums=3), static_argnums=static),
        "value_and_grad": jax.jit(jax.value_and_grad(totals, argnums=3, has_aux=True), static_argnums=static),
    }


def _name(fn):
    return getattr(fn, "__qualname__", None) or repr(fn)


def _padded_inputs(params, X, y, weights=None):
    """Particles and rows padded to :func:`padded_size`; weights zero on padded rows and particles."""
    n_particles, n_rows = len(next(iter(params.values()))), len(X)
    size_particles, size_rows = padded_size(n_particles), padded_size(n_rows)
    params = {name: _pad(value, size_particles) for name, value in params.items()}
    X = _pad(X, size_rows)
    y = None if y is None else _pad(np.asarray(y), size_rows)
    if weights is not None:
        padded = np.zeros((size_particles, size_rows))
        padded[:n_particles, :n_rows] = weights
        weights = padded
    return params, X, y, weights


def jax_per_datum(fn, density, vectorized, params, X, y):
    """The ``(n_particles, n_rows)`` log-likelihood matrix, compiled by JAX."""
    n_particles, n_rows = len(next(iter(params.values()))), len(X)
    with float64_context():
        out = jax_functions()["per_datum"](fn, density, vectorized, *_padded_inputs(params, X, y)[:3])
        return np.asarray(out, dtype=float)[:n_particles, :n_rows]


def jax_weighted_grad(fn, density, vectorized, params, X, y, weights, *, with_value=False):
    """Per-particle gradients (dict of ``(n_particles, *shape)``) of the weighted total log-likelihood, and the
    totals ``(n_particles,)`` when ``with_value``."""
    n_particles = len(next(iter(params.values())))
    with float64_context():
        inputs = _padded_inputs(params, X, y, weights)
        if with_value:
            (_, totals), grads = jax_functions()["value_and_grad"](fn, density, vectorized, *inputs)
            totals = np.asarray(totals, dtype=float)[:n_particles]
        else:
            grads = jax_functions()["grad"](fn, density, vectorized, *inputs)
        grads = {name: np.asarray(value, dtype=float)[:n_particles] for name, value in grads.items()}
    return (totals, grads) if with_value else grads
