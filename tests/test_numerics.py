import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import x64

from jaxgrid.numerics import gauss_jordan_inverse, small_inverse, sum_last_axis, transpose_once


def _spread_values(dtype):
    """Values over many orders of magnitude and both signs: an inexact product rounds them."""
    rng = np.random.default_rng(0)
    exponents = rng.integers(-30, 30, (5, 26, 6)).astype(np.float64)
    return np.asarray(rng.standard_normal((5, 26, 6)) * 10.0**exponents, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transpose_once_is_exact(dtype):
    with x64():
        x = _spread_values(dtype)
        out = jax.jit(transpose_once)(x)
        assert out.dtype == x.dtype
        np.testing.assert_array_equal(out, np.swapaxes(x, -1, -2))


def test_sum_last_axis_matches_numpy():
    x = np.random.default_rng(1).uniform(0, 1000, (7, 26, 26)).astype(np.float32)
    np.testing.assert_allclose(jax.jit(sum_last_axis)(x), x.sum(-1), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.complex128, np.float64])
def test_gauss_jordan_inverse_equals_numpy_where_pivoting_is_needed(dtype):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 18, 18))
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.normal(size=a.shape)
    a[:, 0, 0] = 0.0  # no inverse without a row swap
    with x64():
        inverse = jax.jit(jax.vmap(gauss_jordan_inverse))(jnp.asarray(a, dtype))
    np.testing.assert_allclose(np.asarray(inverse), np.linalg.inv(a), rtol=1e-10, atol=1e-12)


def test_small_inverse_calls_no_lapack_on_a_cpu():
    a = np.eye(18) + 0.1 * np.random.default_rng(1).normal(size=(8, 18, 18))
    a = jnp.asarray(a, jnp.complex64)
    batched = jax.jit(jax.vmap(small_inverse))
    assert "lapack" not in batched.lower(a).as_text()
    np.testing.assert_allclose(np.asarray(batched(a)), np.linalg.inv(np.asarray(a)), atol=1e-5)
