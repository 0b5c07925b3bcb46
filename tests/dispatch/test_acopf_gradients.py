"""Derivatives of the AC-OPF at its solution (implicit function theorem on the KKT
conditions, not the interior point's iterations, which run in a ``while_loop`` that
reverse mode cannot differentiate): equal to central finite differences in float64
where the active set is stable, the cost's derivatives in the loads and ratings equal to
the LMPs, reactive prices and flow prices (envelope theorem: the prices are the solver's
multipliers, the derivatives come from the KKT system's solution, so the two are
computed independently), and a ``vmap`` batch's gradients equal to each instance's.

The points are chosen so that no constraint is within a difference step of switching
and none is near a kink: each test asserts that the voltages, dispatch and flows at a
limit are the same at both ends of every difference. case9 has branch 8-2 (134.6 MVA at
the optimum without a binding limit) rated at 130 MVA, so its from end binds beside the
voltage limits of buses 6 and 8; case30 has its own ratings,
two of which bind, and bus 29 at its voltage limit. The differences take steps of 1e-4
relative to each input with the solver's tolerance at 1e-12: the solution is smooth, so
truncation stays below 1e-6, while at the default 1e-9 the differences of the weakly
determined voltages and reactive outputs were off by 1e-5 (measured on case9).
Generator limits are left out: none binds at these points, so their derivative is 0 and
the differences measure only the barrier's remnant.

Both tests run under the validation command only (72 and 53 s on a cold 2-core machine;
the default suite checks the DC-OPF's gradients)::

    JAXGRID_VALIDATE=full python -m pytest tests/dispatch/test_acopf_gradients.py
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import float64_leaves, full_only, x64

from jaxgrid.dispatch import acopf
from jaxgrid.grid import network_from_matpower

CASES = ["case9", "case30"]
STEP = 1e-4  # relative to each input
RTOL = 1e-5
TOL = 1e-12  # the solver's, so that its round-off stays below what the differences resolve
INPUTS = ("pd_mw", "qd_mvar", "cost_poly", "rate_mva", "vmax_pu")


def _network(name):
    """``name`` in float64; case9 with its most loaded line, branch 6 (8-2, 134.6 MVA
    at the optimum without a binding limit), rated at 130 MVA."""
    network = network_from_matpower(name)
    network = float64_leaves(network)
    if name == "case9":
        network = network.replace(rate_mva=network.rate_mva.at[6].set(130.0))
    return network


def _args(network):
    """The differentiated inputs at the network's values, in the order of ``INPUTS``."""
    return tuple(jnp.asarray(getattr(network, name)) for name in INPUTS)


def _solve(network, tol=TOL):
    def solve(pd_mw, qd_mvar, cost_poly, rate_mva, vmax_pu):
        edited = network.replace(cost_poly=cost_poly, rate_mva=rate_mva, vmax_pu=vmax_pu)
        return acopf(edited, pd_mw, qd_mvar, tol=tol)

    return solve


def _weighted(network, tol=TOL):
    """A random weighting of every differentiated output (each divided by its typical
    size), and the result."""
    solve = _solve(network, tol)
    fields = {
        "vm_pu": 1.0,
        "va_deg": 10.0,
        "pg_mw": 100.0,
        "qg_mvar": 100.0,
        "p_from_mw": 100.0,
        "q_from_mvar": 100.0,
        "p_to_mw": 100.0,
        "q_to_mvar": 100.0,
        "cost": 1e4,
        "lmp": 10.0,
        "q_price": 1.0,
        "mu_flow_from": 1.0,
        "mu_flow_to": 1.0,
    }
    result = solve(*_args(network))
    keys = jax.random.split(jax.random.PRNGKey(0), len(fields))
    weights = {
        name: jax.random.normal(key, jnp.shape(getattr(result, name)), jnp.float64) / size
        for key, (name, size) in zip(keys, fields.items())
    }

    def f(*args):
        result = solve(*args)
        value = sum(jnp.sum(w * getattr(result, name)) for name, w in weights.items())
        return value, result

    return f


def _active_set(network, result, args):
    """Which voltages, outputs and flows are at a limit (within 1e-6 of it, relative)."""
    _, _, _, rate, vmax = (np.asarray(a) for a in args)
    vmin = np.asarray(network.vmin_pu)
    pmin, pmax, qmin, qmax = (
        np.asarray(getattr(network, n)) for n in ("pmin_mw", "pmax_mw", "qmin_mvar", "qmax_mvar")
    )
    vm, pg, qg = (np.asarray(getattr(result, n)) for n in ("vm_pu", "pg_mw", "qg_mvar"))
    s = np.maximum(
        np.hypot(result.p_from_mw, result.q_from_mvar), np.hypot(result.p_to_mw, result.q_to_mvar)
    )

    def at(value, limit):
        return np.abs(value - limit) <= 1e-6 * (
            1.0 + np.abs(np.where(np.isfinite(limit), limit, 0))
        )

    return np.concatenate(
        [
            at(vm, vmax),
            at(vm, vmin),
            at(pg, pmax),
            at(pg, pmin),
            at(qg, qmax),
            at(qg, qmin),
            at(s, rate),
        ]
    )


def _direction(i, x):
    """A random direction scaled by the input's size; 0 for unlimited ratings."""
    finite = jnp.isfinite(x)
    d = jax.random.normal(jax.random.PRNGKey(i + 1), jnp.shape(x), jnp.float64)
    return jnp.where(finite, d * (jnp.abs(jnp.where(finite, x, 0.0)) + 1e-3), 0.0)


@full_only
@pytest.mark.parametrize("name", CASES)
def test_gradient_equals_central_differences(name):
    with x64():
        network = _network(name)
        args = _args(network)
        f = jax.jit(_weighted(network))
        _, result = f(*args)
        assert bool(result.converged)
        active = _active_set(network, result, args)
        assert np.any(np.asarray(result.mu_flow_from) + np.asarray(result.mu_flow_to) > 1e-3)
        grads = jax.jit(jax.grad(lambda *a: f(*a)[0], argnums=tuple(range(len(args)))))(*args)
        for i, (x, g) in enumerate(zip(args, grads)):
            d = _direction(i, x)
            up = [a + STEP * d if j == i else a for j, a in enumerate(args)]
            down = [a - STEP * d if j == i else a for j, a in enumerate(args)]
            (f_up, r_up), (f_down, r_down) = f(*up), f(*down)
            for r, a in ((r_up, up), (r_down, down)):  # no constraint switched within the step
                assert bool(r.converged)
                np.testing.assert_array_equal(_active_set(network, r, a), active)
            numeric = float(f_up - f_down) / (2 * STEP)
            analytic = float(jnp.sum(jnp.where(jnp.isfinite(x), g, 0.0) * d))
            # what the differences cannot resolve: the solver's tolerance on the value
            floor = TOL * max(1.0, abs(float(f_up))) / STEP
            assert analytic == pytest.approx(numeric, rel=RTOL, abs=floor), (
                INPUTS[i],
                analytic,
                numeric,
            )


@full_only
def test_cost_derivatives_are_the_prices_and_batch():
    """Envelope theorem on case9: the cost's derivative in the active load of a bus is
    its LMP, in the reactive load its reactive price, in a branch's rating minus the
    shadow prices of its two ends (1e-6 relative to the largest price). The gradients of
    a ``vmap`` batch of two load levels equal each level's alone."""
    with x64():
        network = _network("case9")
        solve = _solve(network, tol=None)  # the default tolerance: what a caller gets
        args = _args(network)

        def cost(pd_mw, qd_mvar, rate_mva):
            result = solve(pd_mw, qd_mvar, args[2], rate_mva, *args[4:])
            return result.cost, result

        gradient = jax.value_and_grad(cost, argnums=(0, 1, 2), has_aux=True)
        (_, result), (d_pd, d_qd, d_rate) = jax.jit(gradient)(args[0], args[1], args[3])
        assert bool(result.converged)
        lmp, q_price = np.asarray(result.lmp), np.asarray(result.q_price)
        flow_price = np.asarray(result.mu_flow_from + result.mu_flow_to)
        assert np.max(flow_price) > 1.0  # the rated line binds
        atol = 1e-6 * np.max(np.abs(lmp))
        np.testing.assert_allclose(d_pd, lmp, rtol=1e-6, atol=atol)
        np.testing.assert_allclose(d_qd, q_price, rtol=1e-6, atol=atol)
        limited = np.isfinite(np.asarray(args[3]))
        np.testing.assert_allclose(np.asarray(d_rate)[limited], -flow_price[limited], atol=atol)

        scale = jnp.array([1.0, 1.02])[:, None]
        batch = jax.jit(jax.vmap(gradient, in_axes=(0, 0, None)))(
            scale * args[0], scale * args[1], args[3]
        )
        (_, batch_result), batch_grads = batch
        np.testing.assert_array_equal(np.asarray(batch_result.converged), [True, True])
        for k in range(2):
            (_, alone), grads = jax.jit(gradient)(scale[k] * args[0], scale[k] * args[1], args[3])
            for g_batch, g_alone in zip(batch_grads, grads):
                np.testing.assert_allclose(g_batch[k], g_alone, rtol=1e-9, atol=1e-9 * atol)
