"""Smooth surrogates of clips and of rounding: exact at width 0 (values and gradients,
bit for bit), the documented error bound at a width, convergence to the exact model as
the width shrinks, and a derivative where the exact one is 0."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgrid.smooth import soft_clip, soft_min, soft_round, soft_sqrt_positive

X = np.linspace(-3.0, 3.0, 601)  # across both bounds of [-1, 2]
LOW, HIGH = -1.0, 2.0


def test_width_zero_is_the_exact_clip_bit_for_bit(float64):
    for dtype in (jnp.float32, jnp.float64):
        x = jnp.asarray(X, dtype)
        np.testing.assert_array_equal(soft_clip(x, LOW, HIGH, 0.0), jnp.clip(x, LOW, HIGH))
        np.testing.assert_array_equal(soft_min(x, HIGH, 0.0), jnp.minimum(x, HIGH))
        np.testing.assert_array_equal(soft_sqrt_positive(x, 0.0), jnp.sqrt(jnp.maximum(x, 0.0)))
    grad = jax.vmap(jax.grad(lambda x: soft_clip(x, LOW, HIGH, 0.0)))(X)
    exact = jax.vmap(jax.grad(lambda x: jnp.clip(x, LOW, HIGH)))(X)
    np.testing.assert_array_equal(grad, exact)
    # no NaN from the unused surrogate branch (a width of 0 would divide by 0)
    assert np.all(np.isfinite(jax.vmap(jax.grad(lambda x: soft_sqrt_positive(x, 0.0)))(X + 4)))


@pytest.mark.parametrize("width", [0.3, 0.1, 0.01])
def test_error_is_at_most_w_log2_and_shrinks_with_the_width(width, float64):
    x = jnp.asarray(X)
    error = jnp.abs(soft_clip(x, LOW, HIGH, width) - jnp.clip(x, LOW, HIGH))
    # w log(1 + exp(-d / w)) at distance d from a bound: w log 2 = 0.693 w at the bound
    assert float(jnp.max(error)) <= width * np.log(2.0) * (1 + 1e-6)
    assert float(jnp.max(error)) >= 0.69 * width
    far = jnp.minimum(jnp.abs(X - LOW), jnp.abs(X - HIGH)) >= 10 * width
    assert float(jnp.max(jnp.where(far, error, 0.0))) <= width * np.exp(-10.0)


def test_surrogate_stays_inside_the_bounds_and_increases(float64):
    y = soft_clip(jnp.linspace(-50.0, 50.0, 2001), LOW, HIGH, 0.5)
    assert float(jnp.min(y)) >= LOW and float(jnp.max(y)) <= HIGH
    assert bool(jnp.all(jnp.diff(y) >= 0))
    inner = soft_clip(jnp.linspace(-3.0, 4.0, 701), LOW, HIGH, 0.5)
    assert float(jnp.min(inner)) > LOW and float(jnp.max(inner)) < HIGH
    assert bool(jnp.all(jnp.diff(inner) > 0))
    assert float(jnp.max(soft_min(X, HIGH, 0.5) - jnp.minimum(X, HIGH))) <= 0.0


def test_derivative_on_the_clipped_side_is_nonzero_and_matches_differences(float64):
    x = jnp.float64(2.3)  # 0.3 above HIGH: the exact clip's derivative is 0
    w = 0.2
    f = lambda x: soft_clip(x, LOW, HIGH, w)  # noqa: E731
    analytic = float(jax.grad(f)(x))
    h = 1e-6
    numeric = float(f(x + h) - f(x - h)) / (2 * h)
    # d/dx = 1 - sigmoid((x - high) / w) - sigmoid((low - x) / w), by hand
    by_hand = 1 - 1 / (1 + np.exp(-0.3 / w)) - 1 / (1 + np.exp(3.3 / w))
    assert analytic == pytest.approx(by_hand, rel=1e-12)
    assert analytic == pytest.approx(numeric, rel=1e-8)
    assert analytic > 0.15
    g = jax.grad(lambda y: soft_sqrt_positive(y, w))(jnp.float64(-0.01))
    assert float(g) > 0


# -- soft_round ---------------------------------------------------------------------------

STEPS = np.linspace(-4.0, 4.0, 8001)  # every half-integer and integer of [-4, 4] on the grid


def test_soft_round_width_zero_is_jnp_round_bit_for_bit(float64):
    for dtype in (jnp.float32, jnp.float64):
        x = jnp.asarray(STEPS, dtype)
        np.testing.assert_array_equal(soft_round(x, 0.0), jnp.round(x))  # half to even
    grad = jax.vmap(jax.grad(lambda x: soft_round(x, 0.0)))(STEPS)
    np.testing.assert_array_equal(grad, jax.vmap(jax.grad(jnp.round))(STEPS))  # 0
    assert np.all(np.asarray(grad) == 0.0)


@pytest.mark.parametrize("width", [0.5, 0.2, 0.05])
def test_soft_round_error_bound_and_exact_integers(width, float64):
    x = jnp.asarray(STEPS)
    y = soft_round(x, width)
    # at distance h from the nearest half-integer: at most 1 / (1 + exp(2 h / w))
    h = np.abs(STEPS - np.floor(STEPS) - 0.5)
    error = np.abs(np.asarray(y) - np.round(STEPS))
    assert np.all(error <= 1 / (1 + np.exp(2 * h / width)) + 1e-12)
    far = h >= 5 * width
    assert np.all(error[far] <= np.exp(-10.0))
    # every integer exactly (a request of 0 moves nothing), within 1/2 of x everywhere
    ints = jnp.arange(-4.0, 5.0)
    np.testing.assert_array_equal(soft_round(ints, width), ints)
    assert float(jnp.max(jnp.abs(y - x))) <= 0.5
    # increasing, and continuous across each integer (the floor's jump is compensated)
    assert bool(jnp.all(jnp.diff(y) > 0))
    eps = 1e-9
    np.testing.assert_allclose(soft_round(ints - eps, width), ints, atol=1e-8)


def test_soft_round_error_shrinks_with_the_width(float64):
    x = jnp.asarray(STEPS)
    away = np.abs(STEPS - np.floor(STEPS) - 0.5) >= 0.1  # off the half-integers' jumps
    errors = [
        float(np.max(np.abs(np.asarray(soft_round(x, w)) - np.round(STEPS))[away]))
        for w in (0.2, 0.05, 0.01)
    ]
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-8  # 1 / (1 + exp(20))


def test_soft_round_derivative_matches_the_formula_and_differences(float64):
    """Between whole steps the exact derivative is 0; the surrogate's is
    ``sech^2(r / w) / (2 w tanh(1 / (2 w)))`` (``r`` the distance past the half-way
    point), as central differences say, and about ``2 exp(-1 / w) / w`` at an integer.
    At an integer the staircase is C1, not C2 (its curvature changes sign there), so the
    central difference is off by ``h f'' / 2`` rather than ``h^2``: a smaller ``h``."""
    for w in (0.5, 0.2):
        f = lambda x, w=w: soft_round(x, w)  # noqa: E731
        for x in (-1.3, 0.0, 0.25, 0.5, 2.9):
            analytic = float(jax.grad(f)(jnp.float64(x)))
            r = x - np.floor(x) - 0.5
            by_hand = 1 / np.cosh(r / w) ** 2 / (2 * w * np.tanh(0.5 / w))
            assert analytic == pytest.approx(by_hand, rel=1e-12)
            h = 1e-6 if x != round(x) else 1e-8
            numeric = float(f(jnp.float64(x + h)) - f(jnp.float64(x - h))) / (2 * h)
            assert analytic == pytest.approx(numeric, rel=1e-7)
            assert analytic > 0
        at_zero = float(jax.grad(f)(jnp.float64(0.0)))
        assert at_zero == pytest.approx(2 * np.exp(-1 / w) / w, rel=0.02)
