"""masked_apply: the value of ``jnp.where(mask, fn(*args), otherwise)``, with ``fn``
computed only for the masked elements of a batch, at any vmap depth."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgrid.masked import masked_apply

KEY = jax.random.PRNGKey(0)


def fn(x, scale):
    """A pytree out of a pytree in: what a reset returns."""
    return {"a": jnp.sin(x["a"]) * scale, "t": x["t"] + 1}


def reference(mask, otherwise, x, scale):
    new = fn(x, scale)
    return jax.tree_util.tree_map(
        lambda n, o: jnp.where(mask.reshape(mask.shape + (1,) * (n.ndim - mask.ndim)), n, o),
        new,
        otherwise,
    )


def batch(n, *lead):
    k1, k2, k3 = jax.random.split(jax.random.fold_in(KEY, n), 3)
    x = {"a": jax.random.normal(k1, (*lead, n, 3)), "t": jnp.arange(n * int(np.prod(lead or [1])))}
    x["t"] = x["t"].reshape(*lead, n)
    otherwise = {"a": jax.random.normal(k2, (*lead, n, 3)), "t": -jnp.ones((*lead, n), jnp.int32)}
    return x, otherwise, k3


@pytest.mark.parametrize("capacity", [None, 4, 0.25])
@pytest.mark.parametrize("n_set", [0, 1, 3, 40, 64])
def test_vmap_equals_the_select(n_set, capacity):
    n = 64
    x, otherwise, k = batch(n)
    mask = jnp.zeros(n, bool).at[jax.random.permutation(k, n)[:n_set]].set(True)
    apply = jax.vmap(lambda m, o, x: masked_apply(fn, m, o, x, 2.0, capacity=capacity))
    got = jax.jit(apply)(mask, otherwise, x)
    want = reference(mask, otherwise, x, 2.0)
    jax.tree_util.tree_map(np.testing.assert_allclose, got, want)


@pytest.mark.parametrize("capacity", [None, 4])
def test_a_batched_mask_over_shared_arguments_broadcasts_one_result(capacity):
    """Only the mask batched (an auto-reset from one key shared by every environment):
    each masked element gets ``fn``'s one result."""
    n = 8
    x, otherwise, _ = batch(n)
    one = jax.tree_util.tree_map(lambda v: v[0], x)
    mask = jnp.arange(n) % 3 == 0
    apply = jax.vmap(lambda m, o: masked_apply(fn, m, o, one, 2.0, capacity=capacity))
    got = jax.jit(apply)(mask, otherwise)
    want = reference(
        mask, otherwise, jax.tree_util.tree_map(lambda v: jnp.stack([v] * n), one), 2.0
    )
    jax.tree_util.tree_map(np.testing.assert_allclose, got, want)


def test_unbatched_is_a_cond():
    x, otherwise, _ = batch(1)
    x, otherwise = jax.tree_util.tree_map(lambda v: v[0], (x, otherwise))
    for mask in (True, False):
        got = jax.jit(lambda m: masked_apply(fn, m, otherwise, x, 2.0))(mask)
        jax.tree_util.tree_map(np.testing.assert_allclose, got, fn(x, 2.0) if mask else otherwise)


@pytest.mark.parametrize("capacity", [None, 4])
@pytest.mark.parametrize("scale_axes", ["shared", "outer", "inner"])
def test_nested_vmap_equals_the_select(scale_axes, capacity):
    m, n = 3, 32
    x, otherwise, k = batch(n, m)
    mask = jax.random.bernoulli(k, 0.05, (m, n)).at[2].set(True)  # few, and a full row
    scale = {
        "shared": jnp.asarray(2.0),
        "outer": jnp.array([1.0, 2.0, 3.0]),
        "inner": jnp.linspace(1.0, 2.0, n),
    }[scale_axes]
    inner_axis = 0 if scale_axes == "inner" else None
    outer_axis = 0 if scale_axes == "outer" else None
    apply = jax.vmap(
        jax.vmap(
            lambda m_, o, x_, s: masked_apply(fn, m_, o, x_, s), in_axes=(0, 0, 0, inner_axis)
        ),
        in_axes=(0, 0, 0, outer_axis),
    )
    got = jax.jit(apply)(mask, otherwise, x, scale)
    s = scale if scale_axes == "shared" else scale[:, None, None]
    s = s[None, :, 0] if scale_axes == "inner" else s
    want = reference(mask, otherwise, x, s)
    jax.tree_util.tree_map(np.testing.assert_allclose, got, want)


def count_calls(n, mask, *, capacity=None, nested=False):
    """How many elements ``fn`` was computed for (jax.debug.callback runs once per element)."""
    calls = []

    def counted(x, scale):  # under vmap the callback sees a batch (k, 3) or one row (3,)
        jax.debug.callback(lambda a: calls.append(np.size(a) // 3), x["a"])
        return fn(x, scale)

    x, otherwise, _ = batch(n)
    apply = jax.vmap(lambda m, o, x: masked_apply(counted, m, o, x, 2.0, capacity=capacity))
    if nested:
        apply = jax.vmap(apply)
        mask, otherwise, x = jax.tree_util.tree_map(lambda v: v[None], (mask, otherwise, x))
    jax.block_until_ready(jax.jit(apply)(mask, otherwise, x))
    return sum(calls)


def test_fn_runs_only_where_needed():
    n, capacity = 64, 4
    none, few, many = jnp.zeros(n, bool), jnp.zeros(n, bool).at[5].set(True), jnp.ones(n, bool)
    assert count_calls(n, none) == 0 and count_calls(n, none, capacity=capacity) == 0
    assert count_calls(n, few) == n  # by default the whole batch, then a select
    assert count_calls(n, few, capacity=capacity) == capacity  # one gathered round, padded
    assert count_calls(n, many, capacity=capacity) == n  # n / capacity rounds
    # the outer axis is merged, not turned into a select of both branches
    assert count_calls(n, none, nested=True) == 0
    assert count_calls(n, few, capacity=capacity, nested=True) == capacity


def test_a_share_of_the_batch_is_gathered_per_round():
    n = 64
    few = jnp.zeros(n, bool).at[jnp.array([3, 9, 50])].set(True)
    assert count_calls(n, few, capacity=0.25) == 16  # one round of a quarter of 64
    assert count_calls(n, few, capacity=1 / 128) == 3  # at least one a round
    assert count_calls(n, jnp.ones(n, bool), capacity=0.5) == n
    with pytest.raises(ValueError, match=r"share of the batch must be in \(0, 1\]"):
        count_calls(n, few, capacity=1.5)


def test_a_function_of_the_batch_size_gives_the_round():
    n = 64
    few = jnp.zeros(n, bool).at[jnp.array([3, 9, 50])].set(True)
    assert count_calls(n, few, capacity=lambda size: min(size // 4, 8)) == 8
    assert count_calls(n, few, capacity=lambda size: 0) == 3  # at least one a round
    assert count_calls(n, few, capacity=lambda size: 2 * size) == n  # at most the batch
    # merged batch of 64 and 3 pending: two rounds of two (the second padded)
    assert count_calls(n, few, capacity=lambda size: size // 32, nested=True) == 4


def test_spare_places_of_a_round_repeat_a_pending_element():
    """An iterative ``fn`` (a loop until each element's own count) gathered with room to
    spare runs as long as the pending elements need, not as long as the batch's last
    element (whose count is large and which is not masked)."""
    iterations = []

    def loop(limit):
        def body(c):
            jax.debug.callback(lambda: iterations.append(1))
            return c + 1

        return jax.lax.while_loop(lambda c: c < limit, body, jnp.zeros((), jnp.int32))

    limit = jnp.array([2, 0, 0, 1000], jnp.int32)
    mask = jnp.array([True, False, False, False])
    apply = jax.vmap(lambda m, o, x: masked_apply(loop, m, o, x, capacity=2))
    got = jax.block_until_ready(jax.jit(apply)(mask, -jnp.ones(4, jnp.int32), limit))
    np.testing.assert_array_equal(got, [2, -1, -1, -1])
    assert 0 < len(iterations) <= 2 * 2  # each iteration's callback once or per element


def test_gradient_is_the_selects():
    x, otherwise, k = batch(16)
    mask = jax.random.bernoulli(k, 0.5, (16,))

    def loss(f, scale, otherwise_a):
        o = {"a": otherwise_a, "t": otherwise["t"]}
        out = jax.vmap(f, in_axes=(0, 0, 0, None))(mask, o, x, scale)
        return jnp.sum(out["a"] ** 2)

    ours = jax.grad(loss, argnums=(1, 2))(
        lambda m, o, x_, s: masked_apply(fn, m, o, x_, s), 2.0, otherwise["a"]
    )
    want = jax.grad(loss, argnums=(1, 2))(reference, 2.0, otherwise["a"])
    assert float(jnp.abs(want[0])) > 0 and bool(jnp.any(want[1] != 0))
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), ours, want)


@pytest.mark.parametrize("capacity", [None, 2])
def test_fn_is_traced_once_in_a_batched_scan(capacity):
    # a scan batches its body until its carry's batching settles, running the batched
    # rule once per pass: fn's Python ran three times (tso118-v0's interior point)
    traces = []

    def fn(x, scale):
        traces.append(None)
        return jnp.sin(x) * scale

    def body(carry, _):
        return masked_apply(fn, carry > 1.0, carry, carry, 2.0, capacity=capacity), None

    def run(x):
        return jax.lax.scan(body, x, None, length=2)[0]

    x = jnp.arange(4.0)
    out = jax.jit(jax.vmap(run))(x)
    assert len(traces) == 1
    expected = np.asarray(x)
    for _ in range(2):
        expected = np.where(expected > 1.0, np.sin(expected) * 2.0, expected)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_fn_is_traced_once_when_differentiated():
    traces = []

    def fn(x, scale):
        traces.append(None)
        return jnp.sin(x) * scale

    def loss(x):
        return jnp.sum(jax.vmap(lambda v: masked_apply(fn, v > 1.0, v, v, 2.0))(x))

    x = jnp.arange(4.0)
    grad = jax.jit(jax.grad(loss))(x)
    assert len(traces) == 1
    np.testing.assert_allclose(np.asarray(grad), np.where(x > 1.0, 2.0 * np.cos(x), 1.0), rtol=1e-6)
