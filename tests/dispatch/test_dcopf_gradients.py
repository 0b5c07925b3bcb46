"""Derivatives of the DC-OPF at its solution (implicit function theorem on the QP's KKT
conditions, not the interior point's iterations): equal to central finite differences in
float64 where the active set is stable, the envelope theorem's derivatives of the cost
(the LMPs, the line and reserve prices, which the solver computes as duals), forward
mode equal to reverse mode, and at a degenerate solution one of the two one-sided
derivatives.

The points are chosen so that no constraint is within a difference step of switching:
each test asserts that the flags of binding lines and units at a limit are the same at
both ends of every difference. The map from loads, ratings and reserve to the solution
is piecewise affine and the cost piecewise quadratic, so steps of 1e-3 relative to each
input lose nothing to truncation and little to the solver's tolerance."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import float64_leaves, full_only, sampled, x64
from instances import tightened

from jaxgrid.dispatch import dcopf, monitored_branches
from jaxgrid.grid import network_from_matpower

STEP = 1e-3  # relative to each input
RTOL = 1e-5


def _network(name):
    """``name`` with its most loaded lines rated below their unconstrained flow (case9:
    two lines, 85 %; case30: six, 80 %), float64."""
    if name == "case9":
        network = tightened(network_from_matpower("case9"), n_lines=2, factor=0.85)
    else:
        network = tightened(network_from_matpower(name))
    return float64_leaves(network)


# load scale, and a reserve above the headroom (short at its price) or below it (slack)
POINTS = {"case9": (1.1, 520.0), "case30": (0.9, 20.0)}


def _setup(name):
    network = _network(name)
    scale, reserve = POINTS[name]
    monitored = monitored_branches(network)
    args = (
        scale * network.pd_mw,
        network.cost_poly,
        network.rate_mva,
        jnp.asarray(reserve, jnp.float64),
    )
    return network, monitored, args


def _solve(network, monitored):
    def solve(pd, poly, rate, reserve):
        return dcopf(
            network, pd, cost_poly=poly, rate_mva=rate, reserve_mw=reserve, monitored=monitored
        )

    return solve


def _weighted(network, monitored):
    """A random weighting of dispatch, cost, LMPs and monitored flows (each divided by
    its typical size), and the result."""
    solve = _solve(network, monitored)
    key = jax.random.split(jax.random.PRNGKey(0), 3)
    w_pg = jax.random.normal(key[0], (network.n_gen,), jnp.float64)
    w_lmp = jax.random.normal(key[1], (network.n_bus,), jnp.float64)
    w_flow = jax.random.normal(key[2], (len(monitored),), jnp.float64)

    def f(*args):
        result = solve(*args)
        value = (
            jnp.sum(w_pg * result.pg_mw) / 100.0
            + result.cost / 1e4
            + jnp.sum(w_lmp * result.lmp) / 10.0
            + jnp.sum(w_flow * result.p_branch_mw[np.asarray(monitored)]) / 100.0
        )
        return value, result

    return f


def _active_set(result):
    return np.concatenate(
        [
            np.asarray(result.line_at_limit),
            np.asarray(result.gen_at_pmax),
            np.asarray(result.gen_at_pmin),
            np.asarray(result.shed_mw) > 1e-6,
            np.asarray(result.reserve_shortfall_mw)[None] > 1e-6,
        ]
    )


def _direction(i, x):
    """A random direction scaled by the input's size; 0 for unlimited ratings."""
    finite = jnp.isfinite(x)
    d = jax.random.normal(jax.random.PRNGKey(i + 1), jnp.shape(x), jnp.float64)
    return jnp.where(finite, d * (jnp.abs(jnp.where(finite, x, 0.0)) + 1e-3), 0.0)


@pytest.mark.parametrize("name", sampled(POINTS, keep=("case9",)))
def test_gradient_equals_central_differences(name):
    with x64():
        network, monitored, args = _setup(name)
        f = jax.jit(_weighted(network, monitored))
        _, result = f(*args)
        assert bool(result.converged)
        assert np.sum(np.asarray(result.line_at_limit)) >= 2  # congested
        assert np.ptp(np.asarray(result.lmp)) > 1.0  # prices differ by bus
        grads = jax.jit(jax.grad(lambda *a: f(*a)[0], argnums=(0, 1, 2, 3)))(*args)
        for i, (x, g) in enumerate(zip(args, grads)):
            d = _direction(i, x)
            up = [a + STEP * d if j == i else a for j, a in enumerate(args)]
            down = [a - STEP * d if j == i else a for j, a in enumerate(args)]
            (f_up, r_up), (f_down, r_down) = f(*up), f(*down)
            for r in (r_up, r_down):  # no constraint switched within the step
                np.testing.assert_array_equal(_active_set(r), _active_set(result))
            numeric = float(f_up - f_down) / (2 * STEP)
            analytic = float(jnp.sum(jnp.where(jnp.isfinite(x), g, 0.0) * d))
            # what the differences cannot resolve: the solver's tolerance on the value
            floor = 1e-12 * max(1.0, abs(float(f_up))) / STEP
            assert analytic == pytest.approx(numeric, rel=RTOL, abs=floor), (i, analytic, numeric)


@full_only
@pytest.mark.parametrize("name", list(POINTS))
def test_cost_derivatives_are_the_prices(name):
    """Envelope theorem: the cost's derivative in the load of a bus is its LMP, in a
    line's rating minus the magnitude of its shadow price, in the reserve requirement the
    reserve price. The prices are the interior point's duals; the derivatives come from
    the KKT system's solution, so the two are computed independently."""
    with x64():
        network, monitored, args = _setup(name)
        solve = _solve(network, monitored)
        result = jax.jit(solve)(*args)
        d_pd, d_rate, d_reserve = jax.jit(jax.grad(lambda *a: solve(*a).cost, argnums=(0, 2, 3)))(
            *args
        )
        np.testing.assert_allclose(d_pd, result.lmp, rtol=1e-8, atol=1e-8)
        lines = np.asarray(monitored)
        np.testing.assert_allclose(
            np.asarray(d_rate)[lines], -np.abs(np.asarray(result.line_price))[lines], atol=1e-8
        )
        assert float(d_reserve) == pytest.approx(float(result.reserve_price), abs=1e-8)
        if name == "case9":  # the reserve is short: its price is the shortfall's
            assert float(result.reserve_price) == pytest.approx(1000.0, rel=1e-9)


@full_only
def test_forward_mode_equals_reverse_mode_and_batches():
    """``jax.jvp`` (the tangent solve) equals ``jax.grad`` (its transpose), and the
    gradient of a batch under ``vmap`` equals each instance's."""
    with x64():
        network, monitored, args = _setup("case9")
        f = _weighted(network, monitored)

        def value(pd):
            return f(pd, *args[1:])[0]

        d = _direction(0, args[0])
        _, forward = jax.jvp(value, (args[0],), (d,))
        reverse = jax.grad(value)(args[0])
        assert float(forward) == pytest.approx(float(jnp.sum(reverse * d)), rel=1e-10)
        loads = jnp.stack([args[0], 1.02 * args[0]])
        batched = jax.jit(jax.vmap(jax.grad(value)))(loads)
        np.testing.assert_allclose(batched[0], reverse, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(batched[1], jax.grad(value)(loads[1]), rtol=1e-10, atol=1e-12)


@full_only
def test_degenerate_solution_gives_a_one_sided_derivative():
    """A line rated at exactly its unconstrained flow is at its limit with a zero price:
    the dispatch's derivative in the load jumps there. The derivative returned is that of
    one side (whichever of the limit's slack and price the solver left smaller is taken
    as 0); documented in the module docstring. The interior point's solution is about
    3e-4 MW off the kink (its barrier rounds the corner), so the one-sided differences
    take long steps (5 % of the load; the dispatch is affine on each side)."""
    with x64():
        network = _network("case9")
        free = dcopf(network, rate_mva=jnp.full(network.n_branch, jnp.inf))
        flow = np.abs(np.asarray(free.p_branch_mw))
        line = int(np.argmax(flow))
        rate = np.full(network.n_branch, np.inf)
        rate[line] = flow[line]
        limited = network.replace(rate_mva=jnp.asarray(rate))
        w = jax.random.normal(jax.random.PRNGKey(3), (network.n_gen,), jnp.float64)
        f = jax.jit(lambda pd: jnp.sum(w * dcopf(limited, pd, monitored=(line,)).pg_mw))
        pd = network.pd_mw
        d = _direction(0, pd)
        analytic = float(jnp.sum(jax.jit(jax.grad(f))(pd) * d))
        h = 0.05
        right = float(f(pd + h * d) - f(pd)) / h
        left = float(f(pd) - f(pd - h * d)) / h
        assert abs(right - left) > 0.1 * abs(right)  # a kink
        assert min(abs(analytic - right), abs(analytic - left)) <= 1e-3 * abs(right)
