"""The public power flows (and the network computations environments build with)
called eagerly, as a notebook calls them, run as one compiled
program: XLA compiles one program for the call (none where the persistent compilation
cache already holds it), where running JAX operation by operation compiled one per
operation (dozens)."""

import jax
import jax.monitoring
import pytest

from jaxgrid.grid import (
    acpf,
    dcpf,
    distflow,
    distflow_newton,
    distflow_with_fallback,
    fast_decoupled_matrices,
    lindistflow,
    load_feeder,
    network_from_matpower,
)
from jaxgrid.grid.three_phase import load_feeder3, unbalanced_power_flow

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


def _feeder_call(solve, **options):
    def call():
        feeder = load_feeder("case33bw")
        return solve(feeder, feeder.p_load_mw, feeder.q_load_mvar, **options)

    return call


def _full_output_cost(network):
    return network.generation_cost(network.pmax_mw)


CALLS = {
    "acpf": lambda: acpf(network_from_matpower("case14"), method="newton"),
    "dcpf": lambda: dcpf(network_from_matpower("case14")),
    "distflow": _feeder_call(distflow, iterations=5),
    "lindistflow": _feeder_call(lindistflow),
    "distflow_newton": _feeder_call(distflow_newton),
    "distflow_with_fallback": _feeder_call(distflow_with_fallback),
    "unbalanced_power_flow": lambda: unbalanced_power_flow(load_feeder3("ieee13"), 1.3),
    "fast_decoupled_matrices": lambda: fast_decoupled_matrices(network_from_matpower("case14")),
    "generation_cost": lambda: _full_output_cost(network_from_matpower("case14")),
}


@pytest.mark.parametrize("name", CALLS)
def test_an_eager_call_compiles_one_program(name):
    compiles = []

    def listener(event, seconds, **kwargs):
        if event == BACKEND_COMPILE:
            compiles.append(seconds)

    jax.clear_caches()  # other tests' programs and operations compiled in this process
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        jax.block_until_ready(CALLS[name]())
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert len(compiles) <= 1, f"{name}: {len(compiles)} programs compiled"
