"""Derivatives of the three-phase power flows at their fixed point (implicit function
theorem on the real and imaginary parts of the voltages), not through the iterations:
equal to central finite differences in float64 on IEEE 13 with respect to the load
phases' scales, the regulators' taps and a generator's power, and the same after few
and many iterations once converged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only, sampled, x64

from jaxgrid.grid.three_phase import load_feeder3
from jaxgrid.grid.three_phase.port_zbus import build_port_zbus, port_power_flow
from jaxgrid.grid.three_phase.upf import unbalanced_power_flow

# converged iteration counts, few and many (float64, IEEE 13 at 1.2x load: the port
# fixed point reaches 1e-13 pu with Anderson acceleration in 16, the Z-bus one in 40)
ITERATIONS = {"port": (16, 40), "upf": (40, 80)}
# difference steps relative to each input (load scales, taps, generator) and the
# relative error allowed. The Z-bus solve LU-factors, in the program, 1e6 S switches and
# 1e3-1e4 pu regulators beside 1e-2 S loads: its round-off moves the value by about
# 1e-11, which short steps measure (1e-6: 1.3e-3 relative off for the load scales), and
# the taps' differences stay 1e-5 off at every step from 1e-3 to 1e-4 (steps of 1e-2
# in the taps are 6e-2 off in both solvers: a kink within 1 % of the taps). Its derivatives are also checked against the port
# model's, which its float64 products leave free of that noise.
STEP = {"port": (1e-4, 1e-4, 1e-4), "upf": (1e-3, 1e-3, 1e-2)}
RTOL = {"port": (1e-5, 1e-5, 1e-5), "upf": (1e-5, 5e-5, 1e-5)}


def _problem():
    feeder = load_feeder3("ieee13")
    gen = feeder.node_names.index("675.1")
    zbus = build_port_zbus(feeder, gen_nodes=[gen])
    key = jax.random.split(jax.random.PRNGKey(0), 2)
    w_v = jax.random.normal(key[0], (feeder.n_node,), jnp.float64)
    w_i = jax.random.normal(key[1], (feeder.line_normamps_a.shape[0], 3), jnp.float64)
    return feeder, zbus, gen, w_v, w_i


def _scalar(solver, n_iter):
    """A weighted sum of node voltage magnitudes and angles, line currents, losses and
    the source's power, of the load scales, the taps and the generator's kW."""
    feeder, zbus, gen, w_v, w_i = _problem()

    def f(scale, tap, p_gen):
        if solver == "port":
            result = port_power_flow(
                zbus, feeder.replace(tap_pu=tap), scale, p_gen_kw=p_gen, n_iter=n_iter, tol_pu=1e-12
            )
        else:
            p_node = jnp.zeros(feeder.n_node, jnp.float64).at[gen].set(p_gen[0])
            result = unbalanced_power_flow(
                feeder.replace(tap_pu=tap), scale, p_gen_kw=p_node, n_iter=n_iter, tol_pu=1e-12
            )
        value = (
            jnp.sum(w_v * result.vm_pu)
            + jnp.sum(w_v * result.va_deg) / 100.0
            + jnp.sum(w_i * result.i_line_a) / 1e3
            + result.loss_kw / 100.0
            + result.q_source_kvar / 1e3
        )
        return value, result

    n_lp = feeder.load_p_w.shape[0]
    args = (
        jnp.full(n_lp, 1.2, jnp.float64),
        jnp.asarray(feeder.tap_pu, jnp.float64),
        jnp.array([150.0], jnp.float64),
    )
    return f, args


@pytest.mark.parametrize("solver", sampled(ITERATIONS, keep=("upf",)))
def test_gradient_equals_central_differences(solver):
    with x64():
        f, args = _scalar(solver, ITERATIONS[solver][0])
        f = jax.jit(f)
        _, result = f(*args)
        assert bool(result.converged)
        grads = jax.jit(jax.grad(lambda *a: f(*a)[0], argnums=(0, 1, 2)))(*args)
        for i, (x, g) in enumerate(zip(args, grads)):
            d = jax.random.normal(jax.random.PRNGKey(i + 1), x.shape, jnp.float64)
            d = d * jnp.abs(x)
            h = STEP[solver][i]
            up = [a + h * d if j == i else a for j, a in enumerate(args)]
            down = [a - h * d if j == i else a for j, a in enumerate(args)]
            numeric = float(f(*up)[0] - f(*down)[0]) / (2 * h)
            analytic = float(jnp.sum(g * d))
            assert analytic == pytest.approx(numeric, rel=RTOL[solver][i]), (i, analytic, numeric)


@full_only
def test_the_two_solvers_have_the_same_derivatives():
    """The Z-bus solver and the port solver model the same feeder (to 1e-9 pu in float64):
    their derivatives at the solution agree to 1e-7 relative."""
    with x64():
        grads = []
        for solver in ("upf", "port"):
            f, args = _scalar(solver, ITERATIONS[solver][0])
            grads.append(jax.jit(jax.grad(lambda *a, f=f: f(*a)[0], argnums=(0, 1, 2)))(*args))
        for upf, port in zip(*grads):
            upf, port = np.asarray(upf), np.asarray(port)
            assert np.max(np.abs(upf - port)) <= 1e-7 * np.max(np.abs(port))


@full_only
@pytest.mark.parametrize("solver", list(ITERATIONS))
def test_gradient_does_not_depend_on_the_iteration_count(solver):
    with x64():
        grads = []
        for n in ITERATIONS[solver]:
            f, args = _scalar(solver, n)
            grads.append(jax.jit(jax.grad(lambda *a, f=f: f(*a)[0], argnums=(0, 1)))(*args))
        for few, many in zip(*grads):
            few, many = np.asarray(few), np.asarray(many)
            assert np.max(np.abs(few - many)) <= 1e-10 * np.max(np.abs(many))
