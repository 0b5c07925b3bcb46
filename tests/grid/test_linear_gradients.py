"""Derivatives of the linear power flows (LinDistFlow, the DC power flow, LinDist3Flow):
``jax.grad`` of a random weighting of every float output equals central finite
differences in float64, with respect to the loads and to the branch parameters.

These solvers are closed-form (matrix products and one linear solve), so JAX
differentiates them exactly; the test guards the square roots and floors between
(``sqrt(max(v, 0))``, ``max(v_from, V_FLOOR)``) and the DC power flow's masked solve,
whose derivatives are taken at points away from their kinks.
"""

import jax
import jax.numpy as jnp
from conftest import float64_leaves, x64

from jaxgrid.grid import case33bw, dcpf, lindistflow, network_from_matpower
from jaxgrid.grid.three_phase import lindist3flow, lindist3flow_model, load_feeder3

EPS = 1e-6
REL_TOL = 1e-6


def _weighted(outputs_of):
    """A fixed random weighting of the float leaves ``outputs_of(x)`` returns."""

    def scalar(x):
        leaves = [
            y
            for y in jax.tree_util.tree_leaves(outputs_of(x))
            if jnp.issubdtype(y.dtype, jnp.floating)
        ]
        keys = jax.random.split(jax.random.PRNGKey(7), len(leaves))
        return sum(
            jnp.sum(jax.random.normal(k, y.shape, y.dtype) * y) for k, y in zip(keys, leaves)
        )

    return jax.jit(scalar)


def _check(scalar, x):
    """The gradient of ``scalar`` at ``x`` against central differences along random
    directions, each scaled to the entries' size."""
    grad = jax.grad(scalar)(x)
    for seed in range(3):
        d = jax.random.normal(jax.random.PRNGKey(seed), x.shape, jnp.float64) * (jnp.abs(x) + 1e-3)
        analytic = float(jnp.sum(grad * d))
        numeric = float(scalar(x + EPS * d) - scalar(x - EPS * d)) / (2 * EPS)
        assert abs(numeric) > 1e-6, "the direction moves nothing"
        assert abs(analytic - numeric) <= REL_TOL * abs(numeric) + 1e-8, (analytic, numeric)


def test_lindistflow_gradients_in_loads_and_impedances():
    with x64():
        feeder = float64_leaves(case33bw())
        p, q = 1.2 * feeder.p_load_mw, 1.2 * feeder.q_load_mvar
        _check(_weighted(lambda pq: lindistflow(feeder, pq[0], pq[1])), jnp.stack([p, q]))
        _check(
            _weighted(lambda rx: lindistflow(feeder.replace(r_pu=rx[0], x_pu=rx[1]), p, q)),
            jnp.stack([feeder.r_pu, feeder.x_pu]),
        )


def test_dc_power_flow_gradients_in_injections_and_reactances():
    with x64():
        network = float64_leaves(network_from_matpower("case14"))
        _check(_weighted(lambda pd: dcpf(network, pd_mw=pd)), network.pd_mw)
        _check(_weighted(lambda pg: dcpf(network, pg_mw=pg)), network.pg_mw)
        _check(_weighted(lambda x: dcpf(network.replace(x_pu=x))), network.x_pu)


def test_lindist3flow_gradients_in_load_scale_and_injections():
    with x64():
        model = float64_leaves(lindist3flow_model(load_feeder3("ieee13")))
        n_lp = model.load_p_kw.shape[-1]
        scale = jnp.linspace(0.8, 1.2, n_lp)
        _check(_weighted(lambda s: lindist3flow(model, s)), scale)
        pv = jnp.full(model.n_node, 20.0)
        _check(_weighted(lambda g: lindist3flow(model, scale, g, 0.3 * g)), pv)
