"""Derivatives of the AC power flow at its solution (implicit function theorem): equal to
central finite differences in float64 for both methods, with and without reactive limits,
and independent of the iteration count once the solve has converged.

The solves are run to a mismatch of 1e-13 pu, so that the finite differences (steps of
1e-6 relative to each input) are not blurred by where a looser tolerance stops the
iterations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import float64_leaves, full_only, sampled, x64

from jaxgrid.grid import network_from_matpower
from jaxgrid.grid.acpf import acpf

CASE = "jaxgrid/grid/cases/transmission/case14.m"
TOL = 1e-13
ITERATIONS = {"fast_decoupled": (40, 80), "newton": (8, 16)}


def _problem():
    """case14 at 1.2x load (float64) and a random weighting of the outputs."""
    network = network_from_matpower(CASE)
    network = float64_leaves(network)
    w = jax.random.normal(jax.random.PRNGKey(0), (3, network.n_bus), jnp.float64)
    return network, w


def _scalar(network, w, method, iterations, q_limits=False):
    """A weighted sum of voltages, angles, flows, losses and reactive outputs, of the
    loads, the dispatch, the voltage setpoints and the branch resistances."""

    def f(p_mw, pg_mw, vg_pu, r_pu):
        result = acpf(
            network.replace(r_pu=r_pu),
            p_mw,
            1.2 * network.qd_mvar,
            pg_mw=pg_mw,
            vg_pu=vg_pu,
            method=method,
            iterations=iterations,
            tol=TOL,
            enforce_q_limits=q_limits,
        )
        return (
            jnp.sum(w[0] * result.vm_pu)
            + jnp.sum(w[1] * result.va_deg) / 50.0
            + jnp.sum(w[2] * result.q_mvar) / 50.0
            + result.loss_mw
            + jnp.sum(result.p_from_mw[:4]) / 10.0
            + jnp.sum(result.gen_q_mvar) / 10.0
            + jnp.sum(result.gen_p_mw) / 100.0
        ), result

    return f


def _args(network):
    return (1.2 * network.pd_mw, 1.2 * network.pg_mw, network.vg_pu, network.r_pu)


@pytest.mark.parametrize(
    "method, q_limits",
    sampled(
        [("fast_decoupled", False), ("newton", False), ("fast_decoupled", True)],
        keep=[("newton", False)],
    ),
)
def test_gradient_equals_central_differences(method, q_limits):
    with x64():
        network, w = _problem()
        f = jax.jit(_scalar(network, w, method, ITERATIONS[method][0], q_limits))
        args = _args(network)
        value, result = f(*args)
        assert bool(result.converged)
        if q_limits:  # a generator held at its limit: a PV bus turned PQ is differentiated
            assert bool(jnp.any(result.gen_at_q_limit))
        grads = jax.jit(jax.grad(lambda *a: f(*a)[0], argnums=(0, 1, 2, 3)))(*args)
        for i, (x, g) in enumerate(zip(args, grads)):
            d = jax.random.normal(jax.random.PRNGKey(i + 1), x.shape, jnp.float64)
            d = d * (jnp.abs(x) + 1e-3)
            h = 1e-6
            up = [a + h * d if j == i else a for j, a in enumerate(args)]
            down = [a - h * d if j == i else a for j, a in enumerate(args)]
            numeric = float(f(*up)[0] - f(*down)[0]) / (2 * h)
            analytic = float(jnp.sum(g * d))
            assert analytic == pytest.approx(numeric, rel=1e-6), (i, analytic, numeric)


@pytest.mark.parametrize("method", list(ITERATIONS))
def test_gradient_does_not_depend_on_the_iteration_count(method):
    with x64():
        network, w = _problem()
        grads = []
        for n in ITERATIONS[method]:
            f = _scalar(network, w, method, n)
            value = lambda *a, f=f: f(*a)[0]  # noqa: E731
            grads.append(jax.jit(jax.grad(value, argnums=(0, 3)))(*_args(network)))
        for few, many in zip(*grads):
            few, many = np.asarray(few), np.asarray(many)
            assert np.max(np.abs(few - many)) <= 1e-12 * np.max(np.abs(many))


@full_only
def test_forward_mode_equals_reverse_mode():
    """``jax.jvp`` (through ``custom_root``'s tangent solve) and ``jax.grad`` (its
    transpose) agree: both are the implicit derivative."""
    with x64():
        network, w = _problem()
        f = _scalar(network, w, "fast_decoupled", ITERATIONS["fast_decoupled"][0])
        args = _args(network)
        d = jax.random.normal(jax.random.PRNGKey(9), args[0].shape, jnp.float64)
        _, forward = jax.jvp(lambda p: f(p, *args[1:])[0], (args[0],), (d,))
        reverse = jnp.sum(jax.grad(lambda p: f(p, *args[1:])[0])(args[0]) * d)
        assert float(forward) == pytest.approx(float(reverse), rel=1e-10)
