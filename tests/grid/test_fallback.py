"""distflow_with_fallback: the sweep where it converged, Newton from the sweep's last
iterate where it did not (more of it where it converges slowly), the same whichever way
the solves are batched."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ac_loadability, float64_leaves, full_only, x64

from jaxgrid.grid import case33bw, distflow
from jaxgrid.grid.distflow_newton import distflow_newton
from jaxgrid.grid.fallback import distflow_with_fallback

# light load, heavy load near the nose (solvable), beyond the nose (collapse), in a mix
LOADS = jnp.array([1.0, 3.5, 1.2, 5.0, 0.5, 3.4, 2.0, 3.6, 1.0, 3.55, 0.8])


def expected(feeder, p, q):
    """What the fallback promises, solve by solve: the sweep if it converged, else Newton."""
    swept = distflow(feeder, p, q, iterations=10)
    newton = distflow_newton(feeder, p, q, iterations=3, start=swept, max_iterations=8)
    return jax.tree_util.tree_map(lambda a, b: jnp.where(swept.converged, a, b), swept, newton)


def assert_same(result, reference):
    converged = np.asarray(reference.converged)
    np.testing.assert_array_equal(result.converged, converged)
    for name in ("vm_pu", "p_branch_mw", "loss_mw"):
        got, want = np.asarray(getattr(result, name)), np.asarray(getattr(reference, name))
        np.testing.assert_allclose(got[converged], want[converged], rtol=1e-6, atol=1e-6)


def loads(feeder):
    return LOADS[:, None] * feeder.p_load_mw, LOADS[:, None] * feeder.q_load_mvar


def test_the_mix_has_every_kind_of_solve():
    feeder = case33bw()
    p, q = loads(feeder)
    swept = jax.vmap(lambda a, b: distflow(feeder, a, b))(p, q)
    fallback = jax.vmap(lambda a, b: distflow_with_fallback(feeder, a, b))(p, q)
    assert np.any(swept.converged) and not np.all(swept.converged)
    assert np.sum(fallback.converged) > np.sum(swept.converged)  # Newton found more
    assert not np.all(fallback.converged)  # and 5x load stays a collapse


@full_only
def test_batched_as_solve_by_solve():
    feeder = case33bw()
    p, q = loads(feeder)
    reference = jax.jit(jax.vmap(lambda a, b: expected(feeder, a, b)))(p, q)
    assert_same(
        jax.jit(jax.vmap(lambda a, b: distflow_with_fallback(feeder, a, b)))(p, q), reference
    )
    single = jax.jit(lambda a, b: distflow_with_fallback(feeder, a, b))
    for i in range(len(LOADS)):
        one = single(p[i], q[i])
        assert bool(one.converged) == bool(reference.converged[i])
        if bool(one.converged):
            np.testing.assert_allclose(one.vm_pu, reference.vm_pu[i], atol=1e-6)


def test_nested_and_feeder_batches():
    feeder = case33bw()
    p, q = loads(feeder)
    reference = jax.jit(jax.vmap(lambda a, b: expected(feeder, a, b)))(p, q)
    # a batch of feeders (the params axis of a scenario sweep) with one load each
    feeders = jax.tree_util.tree_map(lambda a: jnp.stack([jnp.asarray(a)] * len(LOADS)), feeder)
    assert_same(jax.jit(jax.vmap(distflow_with_fallback))(feeders, p, q), reference)
    # vmap of vmap (environments x scenarios)
    nested = jax.jit(jax.vmap(jax.vmap(lambda a, b: distflow_with_fallback(feeder, a, b))))
    out = nested(jnp.stack([p, p[::-1]]), jnp.stack([q, q[::-1]]))
    assert_same(jax.tree_util.tree_map(lambda x: x[0], out), reference)
    flipped = jax.tree_util.tree_map(lambda x: x[::-1], reference)
    assert_same(jax.tree_util.tree_map(lambda x: x[1], out), flipped)


def test_gradients_are_those_of_the_chosen_solver():
    feeder = case33bw()
    solvable = np.asarray(LOADS) != 5.0  # a collapse has no voltages to differentiate
    p, q = (x[solvable] for x in loads(feeder))

    def total_voltage(solve, scale):
        result = jax.vmap(lambda a, b: solve(feeder, a * scale, b * scale))(p, q)
        return jnp.sum(result.vm_pu)

    got = jax.grad(total_voltage, argnums=1)(distflow_with_fallback, 1.0)
    want = jax.grad(total_voltage, argnums=1)(expected, 1.0)
    assert np.isfinite(got) and float(want) < 0  # more load, lower voltages
    np.testing.assert_allclose(got, want, rtol=1e-4)


@pytest.mark.parametrize(
    ("dtype", "scale", "in_three"),
    [("float32", 3.62, False), ("float32", 3.6189, True), ("float64", 3.61, False)],
)
def test_newton_goes_on_where_it_converges_slowly_near_the_nose(dtype, scale, in_three):
    """case33bw at ``scale`` times its load, just below the nose (pandapower's continuation
    solves up to 3.622; lowest voltage 0.44-0.46 pu), where the sweep does not converge.
    3 Newton iterations after it either leave the mismatch above the tolerance, or
    (``in_three``) reach it 2e-5 pu of voltage from the solution in float32; the fallback
    goes on and finds pandapower's voltages."""
    with x64() if dtype == "float64" else contextlib.nullcontext():
        feeder = float64_leaves(case33bw()) if dtype == "float64" else case33bw()
        p, q = scale * feeder.p_load_mw, scale * feeder.q_load_mvar
        swept = distflow(feeder, p, q, iterations=10)
        three = distflow_newton(feeder, p, q, iterations=3, start=swept)
        assert not bool(swept.converged) and bool(three.converged) == in_three
        result = distflow_with_fallback(feeder, p, q)
        assert bool(result.converged)
    share, net = ac_loadability(jax.device_get(case33bw()), np.asarray(p), np.asarray(q))
    assert share == 1.0
    atol = 5e-6 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(result.vm_pu, net.res_bus.vm_pu.to_numpy(), atol=atol)
