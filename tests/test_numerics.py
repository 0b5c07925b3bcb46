import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import jaxpr_equations, x64

from jaxgrid.data.profiles import Profiles, feeder_loads
from jaxgrid.grid import case33bw
from jaxgrid.numerics import (
    MAX_RANDOM_RANGE,
    gauss_jordan_inverse,
    index_from_bits,
    inverse_index,
    median,
    one_hot_take,
    order_statistic,
    positive_definite_solve,
    skip_zero,
    small_inverse,
    standard_normals,
    sum_last_axis,
    transpose_once,
    unit_floats,
)


def _spread_values(dtype):
    """Values over many orders of magnitude and both signs: an inexact product rounds them."""
    rng = np.random.default_rng(0)
    exponents = rng.integers(-30, 30, (5, 26, 6)).astype(np.float64)
    return np.asarray(rng.standard_normal((5, 26, 6)) * 10.0**exponents, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_hot_take_is_indexing_exactly(dtype):
    with x64():
        values = _spread_values(dtype)[:, 0, :]  # (batch 5, 6 columns), both signs
        index = jnp.array([0, 5, 5, 2, 1, 0, 3])
        out = jax.jit(jax.vmap(one_hot_take, in_axes=(0, None)))(values, index)
        assert out.dtype == values.dtype
        np.testing.assert_array_equal(out, values[:, np.asarray(index)])


def test_profile_lookups_trace_no_gather_under_vmap():
    # each bus's value of its profile column: a gather is run element by element on a
    # CPU and was written batch-minor under vmap (dso33-v0 steps 1.08x faster without)
    feeder = case33bw()
    profiles = Profiles(
        load=jax.random.uniform(jax.random.PRNGKey(0), (96, 3)),
        pv=jnp.zeros((96, 1)),
        wind=jnp.zeros((96, 1)),
        price=jnp.zeros((96, 1)),
        days=jnp.arange(2),
        held_out=jnp.arange(2, 3),
    )
    load_profile = jnp.arange(feeder.n_bus) % 3
    rows = jnp.array([0, 17, 95, 130])

    def loads(row):
        return feeder_loads(profiles, row, load_profile, 1.5, feeder)

    p, q = jax.vmap(loads)(rows)
    table = np.asarray(profiles.load)[np.asarray(rows) % 96][:, np.asarray(load_profile)]
    np.testing.assert_allclose(p, 1.5 * table * np.asarray(feeder.p_load_mw), rtol=1e-6)
    np.testing.assert_allclose(q, 1.5 * table * np.asarray(feeder.q_load_mvar), rtol=1e-6)
    jaxpr = jax.make_jaxpr(jax.vmap(loads))(rows)
    gathers = [e for e in jaxpr_equations(jaxpr.jaxpr) if e.primitive.name == "gather"]
    assert all(e.outvars[0].aval.shape[-1] != feeder.n_bus for e in gathers)


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


@pytest.mark.parametrize("n", [1, 5, 18])
def test_positive_definite_solve_equals_numpy(n):
    """Badly scaled positive definite systems (a product ``E D E'`` with weights over
    eight orders of magnitude, as the binding lines' Newton matrices are) and several
    right-hand sides, float64: numpy's LU solve to round-off, and no LAPACK call."""
    rng = np.random.default_rng(n)
    e = rng.normal(size=(6, n, 40))
    a = np.einsum("bik,bk,bjk->bij", e, 10.0 ** rng.uniform(-4, 4, (6, 40)), e)
    b = rng.normal(size=(6, n))
    with x64():
        solve = jax.jit(jax.vmap(positive_definite_solve))
        assert "lapack" not in solve.lower(a, b).as_text()
        x = np.asarray(solve(a, b))
    np.testing.assert_allclose(x, np.linalg.solve(a, b[..., None])[..., 0], rtol=1e-9)


def test_positive_definite_solve_is_not_finite_on_a_singular_matrix():
    """A zero pivot is the caller's to test (the binding lines drop such a direction)."""
    a = np.zeros((3, 3), np.float32)
    a[0, 0] = 1.0
    x = np.asarray(jax.jit(positive_definite_solve)(a, np.ones(3, np.float32)))
    assert not np.all(np.isfinite(x))


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


def _product(a, x):
    return {"y": a @ x}


def test_skip_zero_is_fn_or_zeros_and_never_broadcasts_fn_operands():
    """``fn`` where ``pred``, zeros elsewhere, in each of ``vmap``'s two cases, each one
    decision for the batch (a ``cond``). A plain ``lax.cond`` under ``vmap`` with a
    batched predicate broadcasts the unbatched ``(2, 3)`` matrix to every member
    (``(4, 2, 3)``): the check fails for it."""
    a = jnp.arange(6.0).reshape(2, 3)
    xs = jnp.arange(12.0).reshape(4, 3)
    expected = xs @ a.T
    for pred in (True, False):
        np.testing.assert_array_equal(
            skip_zero(jnp.asarray(pred), _product, a, xs[0])["y"], expected[0] * pred
        )
    shared = jax.vmap(skip_zero, in_axes=(None, None, None, 0))
    for pred in (True, False):
        np.testing.assert_array_equal(
            shared(jnp.asarray(pred), _product, a, xs)["y"], expected * pred
        )
    member = jnp.array([True, False, False, True])
    own = jax.vmap(skip_zero, in_axes=(0, None, None, 0))
    np.testing.assert_array_equal(own(member, _product, a, xs)["y"], expected * member[:, None])

    def shapes(f, *args):
        """``(primitive, output shapes)`` of every equation ``f`` traces."""
        eqns = jaxpr_equations(jax.make_jaxpr(f)(*args).jaxpr)
        return [(e.primitive.name, [tuple(v.aval.shape) for v in e.outvars]) for e in eqns]

    unbatched = shapes(lambda p, x: shared(p, _product, a, x), jnp.asarray(True), xs)
    assert "cond" in [name for name, _ in unbatched]  # one decision: fn is skipped
    batched = shapes(lambda p, x: own(p, _product, a, x), member, xs)
    assert "cond" in [name for name, _ in batched]  # skipped where no member needs it
    none = jnp.zeros(4, bool)
    np.testing.assert_array_equal(own(none, _product, a, xs)["y"], np.zeros((4, 2)))
    for found in (unbatched, batched):
        assert all((4, 2, 3) not in outs for _, outs in found)
    plain = jax.vmap(lambda p, x: jax.lax.cond(p, lambda v: a @ v, lambda v: jnp.zeros(2), x))
    assert any((4, 2, 3) in outs for _, outs in shapes(plain, member, xs))


def test_skip_zero_takes_pytrees_batched_in_part():
    a = {"m": jnp.arange(6.0).reshape(2, 3), "s": jnp.array(2.0)}
    xs = jnp.arange(12.0).reshape(4, 3)

    def scaled(params, x):
        return {"y": params["s"] * (params["m"] @ x)}

    for pred in (jnp.asarray(True), jnp.array([True, False, True, False])):
        in_axes = (0 if pred.ndim else None, None, None, 0)
        out = jax.vmap(skip_zero, in_axes=in_axes)(pred, scaled, a, xs)["y"]
        keep = pred[:, None] if pred.ndim else pred
        np.testing.assert_array_equal(out, 2.0 * (xs @ a["m"].T) * keep)


def _tap_like(t, c):
    """Zero at ``t == 1``, with the derivative ``c`` there (as a tap term at ``t0``)."""
    return c * (t - 1.0)


def test_skip_zero_has_the_derivatives_of_fn_also_where_fn_is_zero():
    """A term that vanishes at a point (the tap terms at ``t0``) keeps its derivative
    there: forward and reverse, unbatched and under ``vmap`` with a batched and an
    unbatched condition."""
    c = jnp.array([2.0, -3.0])
    for t in (jnp.array(1.0), jnp.array(1.5)):

        def total(t):
            return jnp.sum(skip_zero(t != 1.0, _tap_like, t, c))

        np.testing.assert_allclose(jax.grad(total)(t), -1.0)
        np.testing.assert_allclose(jax.jvp(total, (t,), (jnp.array(1.0),))[1], -1.0)
    ts = jnp.array([1.0, 1.5, 1.0])
    own = jax.vmap(lambda t: jnp.sum(skip_zero(t != 1.0, _tap_like, t, c)))
    np.testing.assert_allclose(jax.grad(lambda ts: jnp.sum(own(ts)))(ts), [-1.0] * 3)
    shared = jax.vmap(lambda x, t: skip_zero(t != 1.0, _tap_like, t, x), in_axes=(0, None))
    cs = jnp.stack([c, 2 * c])
    np.testing.assert_allclose(jax.grad(lambda t: jnp.sum(shared(cs, t)))(1.0), -3.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_order_statistics_and_median_are_numpys_bit_for_bit(dtype):
    """The bisection on the values' bits (``median`` above 32 values) picks numpy's
    sorted entries exactly: negative values, signed zeros, ties, infinities."""
    rng = np.random.default_rng(7)
    values = rng.normal(size=(40, 101))
    values[:5, :30] = 0.0
    values[5:10, :30] = -0.0
    values[10:15] = np.round(values[10:15])  # ties
    values[15, :3] = [np.inf, -np.inf, -np.inf]
    values[16:20] *= 1e-30  # tiny but normal: XLA flushes subnormal arithmetic to zero
    with x64() if dtype == "float64" else contextlib.nullcontext():
        x = jnp.asarray(values, dtype)
        ordered = np.sort(np.asarray(x), axis=-1)
        for rank in (0, 17, 50, 100):
            got = np.asarray(jax.jit(order_statistic, static_argnums=1)(x, rank))
            np.testing.assert_array_equal(got, ordered[:, rank])
        for n in (33, 64, 100, 101):
            ordered = np.sort(np.asarray(x[:, :n]), axis=-1)
            want = (ordered[:, (n - 1) // 2] + ordered[:, n // 2]) * np.asarray(0.5, dtype)
            np.testing.assert_array_equal(np.asarray(jax.jit(median)(x[:, :n])), want)


@pytest.mark.parametrize("n", [1, 2, 7, 292, 1000, MAX_RANDOM_RANGE - 1])
def test_index_from_bits_is_the_high_word_of_the_bits_times_n(n):
    """Each index is ``floor(bits * n / 2**32)`` of 32 random bits, in Python's exact
    integers (the uint32 halves must not overflow at the largest range), and every index
    of a small range is drawn."""
    bits = jax.random.bits(jax.random.PRNGKey(n), (2000,), jnp.uint32)
    drawn = np.asarray(jax.jit(lambda b: index_from_bits(b, n))(bits))
    expected = [(int(b) * n) >> 32 for b in np.asarray(bits)]
    np.testing.assert_array_equal(drawn, expected)
    assert drawn.dtype == np.uint32 and drawn.max() < n
    if n <= 7:
        assert set(drawn.tolist()) == set(range(n))


def test_index_from_bits_refuses_an_empty_or_too_large_range():
    bits = jnp.zeros((), jnp.uint32)
    for n in (0, MAX_RANDOM_RANGE):
        with pytest.raises(ValueError, match="an index is drawn from 1 to 65535 values"):
            index_from_bits(bits, n)


def test_inverse_index_points_each_target_back_to_its_position():
    """Against a Python dict: entries >= n (padding) point nowhere, targets no entry
    points to get ``fill``; under jit with the index traced."""
    rng = np.random.default_rng(3)
    n = 11
    index = np.concatenate([rng.permutation(n)[:8], [n, n, n + 2]])
    rng.shuffle(index)
    expected = np.full(n, -7)
    for i, target in enumerate(index):
        if target < n:
            expected[target] = i
    got = jax.jit(lambda idx: inverse_index(idx, n, fill=-7))(jnp.asarray(index))
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(got, expected)


def test_floats_from_bits_are_jax_random_s_from_the_same_key():
    """One draw of bits serves several kinds of random numbers: the floats made from it
    are ``jax.random.uniform``'s and ``jax.random.normal``'s of the key, bit for bit."""
    for seed in range(3):
        key = jax.random.PRNGKey(seed)
        bits = jax.random.bits(key, (4096,), jnp.uint32)
        uniform, normal = jax.jit(lambda b: (unit_floats(b), standard_normals(b)))(bits)
        np.testing.assert_array_equal(uniform, jax.random.uniform(key, (4096,)))
        np.testing.assert_array_equal(normal, jax.random.normal(key, (4096,)))
    assert 0.0 <= float(jnp.min(uniform)) and float(jnp.max(uniform)) < 1.0
