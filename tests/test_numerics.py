import jax
import numpy as np
import pytest
from conftest import x64

from jaxgrid.numerics import sum_last_axis, transpose_once


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
