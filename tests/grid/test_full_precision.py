"""Every power-flow solver, sensitivity and dispatch traces its matrix products at full
precision, gradients included: XLA's GPU backend otherwise runs float32 products in TF32,
which on an H200 failed 1-3 % of ``voltage33-v0``'s no-control and droop power flows that
never fail on a CPU (``jaxgrid.numerics.full_precision``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgrid.dispatch.acopf import acopf
from jaxgrid.dispatch.dcopf import dcopf
from jaxgrid.grid import case33bw, distflow, lindistflow, network_from_matpower
from jaxgrid.grid.acpf import acpf, fast_decoupled_matrices
from jaxgrid.grid.angles import voltage_angles
from jaxgrid.grid.dcpf import dcpf
from jaxgrid.grid.distflow_newton import distflow_newton
from jaxgrid.grid.fallback import distflow_with_fallback
from jaxgrid.grid.limits import branch_loading
from jaxgrid.grid.sensitivity import lodf, ptdf
from jaxgrid.grid.solvers import DISTFLOW, solve_feeder, solve_feeder_by_newton
from jaxgrid.grid.three_phase import load_feeder3
from jaxgrid.grid.three_phase.lindist3flow import lindist3flow, lindist3flow_model
from jaxgrid.grid.three_phase.port_zbus import build_port_zbus, port_power_flow
from jaxgrid.grid.three_phase.upf import unbalanced_power_flow
from jaxgrid.testing import products_below_full_precision


def _feeder_cases():
    feeder = case33bw()
    p, q = np.asarray(feeder.p_load_mw), np.asarray(feeder.q_load_mvar)

    def with_derived(solve):
        def run(scale):
            flow = solve(feeder, scale * p, scale * q)
            return (
                jnp.sum(flow.vm_pu)
                + jnp.sum(voltage_angles(feeder, flow))
                + jnp.sum(branch_loading(feeder, flow))
            )

        return run

    return {
        "lindistflow": with_derived(lindistflow),
        "distflow": with_derived(distflow),
        "distflow_newton": with_derived(distflow_newton),
        "distflow_with_fallback": with_derived(distflow_with_fallback),
        "solve_feeder": with_derived(lambda f, a, b: solve_feeder(f, a, b, DISTFLOW, 20)),
        "solve_feeder_by_newton": with_derived(
            lambda f, a, b: solve_feeder_by_newton(f, a, b, DISTFLOW)
        ),
    }


def _transmission_cases():
    network = network_from_matpower("case14")
    pd, qd = np.asarray(network.pd_mw), np.asarray(network.qd_mvar)
    return {
        "dcpf": lambda s: jnp.sum(dcpf(network, pd_mw=s * pd).p_branch_mw),
        "ptdf_lodf": lambda s: s * (jnp.sum(ptdf(network)) + jnp.sum(lodf(network)[0])),
        "acpf": lambda s: jnp.sum(acpf(network, s * pd, s * qd).vm_pu),
        "acpf_fast_decoupled": lambda s: jnp.sum(
            acpf(network, s * pd, s * qd, matrices=fast_decoupled_matrices(network)).vm_pu
        ),
        "dcopf": lambda s: jnp.sum(dcopf(network, s * pd).lmp),
        "acopf": lambda s: acopf(network, s * pd, s * qd).cost,
    }


def _three_phase_cases():
    feeder = load_feeder3("ieee13")
    zbus = build_port_zbus(feeder)
    model = lindist3flow_model(feeder)
    return {
        "port_power_flow": lambda s: jnp.sum(port_power_flow(zbus, feeder, s).vm_pu),
        "unbalanced_power_flow": lambda s: jnp.sum(unbalanced_power_flow(feeder, s).vm_pu),
        "lindist3flow": lambda s: jnp.sum(lindist3flow(model, s).vm_pu),
    }


# solvers without reverse-mode gradients (a bounded while loop)
NOT_DIFFERENTIABLE = {"acpf", "acpf_fast_decoupled", "acopf"}
CASES = {
    "feeder": _feeder_cases,
    "transmission": _transmission_cases,
    "three_phase": _three_phase_cases,
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_solvers_and_their_gradients_trace_products_at_full_precision(family):
    for name, run in CASES[family]().items():
        programs = [("solve", run)]
        if name not in NOT_DIFFERENTIABLE:
            programs.append(("gradient", jax.grad(run)))
        for what, fn in programs:
            jaxpr = jax.make_jaxpr(fn)(1.0).jaxpr
            assert products_below_full_precision(jaxpr) == [], f"{name} ({what})"


def test_full_precision_covers_only_what_it_wraps():
    from jaxgrid.numerics import full_precision

    a = jnp.ones((3, 3))
    inside = jax.make_jaxpr(full_precision(lambda x: x @ x))(a).jaxpr
    outside = jax.make_jaxpr(lambda x: full_precision(lambda y: y @ y)(x) @ x)(a).jaxpr
    assert products_below_full_precision(inside) == []
    assert products_below_full_precision(outside) == ["float32[3,3] x float32[3,3]"]
