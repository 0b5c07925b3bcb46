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


def test_arctan2_matches_float64_numpy_everywhere():
    """Every octant, both zeros' signs of y, the axes, tiny and huge ratios: float32
    within 3e-7 rad of float64's arctan2 (the float32 inputs' own rounding moves an
    angle by up to 6e-8 rad)."""
    from jaxgrid.numerics import arctan2

    rng = np.random.default_rng(0)
    theta = np.concatenate([np.linspace(-np.pi, np.pi, 200001), rng.uniform(-np.pi, np.pi, 1000)])
    r = np.exp(rng.uniform(-30, 30, theta.shape))
    y, x = (r * np.sin(theta)).astype(np.float32), (r * np.cos(theta)).astype(np.float32)
    extra_y = np.array([0.0, -0.0, 1.0, -1.0, 0.0, 1e-30, 1.0, 3.0], np.float32)
    extra_x = np.array([1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 1e-30, -3.0], np.float32)
    y, x = np.concatenate([y, extra_y]), np.concatenate([x, extra_x])
    got = np.asarray(jax.jit(arctan2)(y, x), np.float64)
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    assert got.dtype == np.float64 and np.all(np.isfinite(got))
    assert np.max(np.abs(got - want)) < 3e-7
    assert np.max(np.abs(got - want)) > 0  # float32 arithmetic, not a float64 fallback


def test_arctan2_derivative_is_exact():
    from jaxgrid.numerics import arctan2

    y, x = jnp.float32(0.3), jnp.float32(-1.7)
    dy, dx = jax.grad(arctan2, argnums=(0, 1))(y, x)
    r2 = 0.3**2 + 1.7**2
    assert float(dy) == pytest.approx(-1.7 / r2, rel=1e-6)
    assert float(dx) == pytest.approx(-0.3 / r2, rel=1e-6)
    assert jax.grad(arctan2)(jnp.float32(0.0), jnp.float32(0.0)) == 0.0
