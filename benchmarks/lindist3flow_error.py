"""LinDist3Flow's inherent error against the exact unbalanced power flow (float64).

    python benchmarks/lindist3flow_error.py [ieee13 ieee34 ...]

For every bundled IEEE feeder at 0.7, 1.0 and 1.3 times its load, without and with
single-phase PV on several phases (the PV of tests/grid/test_three_phase_opendss.py:
phase to ground, and phase to phase on the 3-wire IEEE 37, 0.2 kvar per kW), the
voltages of ``lindist3flow`` against ``unbalanced_power_flow`` (float64, 40 iterations)
on the same feeder with every load constant power (``constant_power_loads``: the model's
own assumption, so the difference is the linearisation alone). Line-to-neutral (LN)
errors over the grounded nodes (none on IEEE 37, whose voltages to ground only its line
capacitance fixes; the source bus left out), line-to-line (LL) over every phase pair; the last column is the
largest LN (LL on IEEE 37) error against the feeder's own OpenDSS load models (constant
Z, I and P as in its files). Prints a markdown table.
"""

from __future__ import annotations

import sys

import jax
import numpy as np

FEEDERS = ("ieee13", "ieee34", "ieee37", "ieee123")
SCALES = (0.7, 1.0, 1.3)
PV = {
    "ieee13": {"675.1": 300.0, "680.2": 150.0, "611.3": 100.0},
    "ieee34": {"890.1": 100.0, "848.2": 150.0, "860.3": 120.0},
    "ieee37": {},
    "ieee123": {"65.1": 200.0, "76.2": 150.0, "114.1": 80.0, "49.3": 120.0},
}
PV_LL = {"ieee13": {("671", 0): 200.0}, "ieee37": {("711", 0): 200.0, ("741", 1): 150.0, ("738", 2): 100.0}}  # fmt: skip
PV_KVAR = 0.2


def pv_arrays(name, feeder):
    """``p_gen_kw, q_gen_kvar, p_gen_ll_kw, q_gen_ll_kvar`` of the PV case."""
    p = np.zeros(feeder.n_node)
    for node, kw in PV[name].items():
        p[feeder.node_names.index(node)] = kw
    p_ll = np.zeros((feeder.n_bus, 3))
    for (bus, pair), kw in PV_LL.get(name, {}).items():
        p_ll[feeder.bus_names.index(bus), pair] = kw
    return p, PV_KVAR * p, p_ll, PV_KVAR * p_ll


def errors(name):
    from jaxgrid.grid.three_phase import (
        constant_power_loads,
        lindist3flow,
        lindist3flow_model,
        load_feeder3,
        unbalanced_power_flow,
    )

    feeder = load_feeder3(name)
    model = lindist3flow_model(feeder)
    grounded = np.asarray(model.grounded).copy()
    grounded[np.asarray(feeder.source_nodes)] = False  # the source bus: fixed, no error
    exact = jax.jit(unbalanced_power_flow)
    linear = jax.jit(lindist3flow)
    rows = []
    for scale in SCALES:
        for pv in (False, True):
            gen = pv_arrays(name, feeder) if pv else (None,) * 4
            lin = linear(model, scale, *gen)
            ref = exact(constant_power_loads(feeder), scale, *gen)
            own = exact(feeder, scale, *gen)
            assert bool(ref.converged) and bool(own.converged)
            ln = np.abs(np.asarray(lin.vm_pu) - np.asarray(ref.vm_pu))[grounded]
            present = np.asarray(ref.vll_pu) > 0
            ll = np.abs(np.asarray(lin.vll_pu) - np.asarray(ref.vll_pu))[present]
            if grounded.any():
                own_err = np.abs(np.asarray(lin.vm_pu) - np.asarray(own.vm_pu))[grounded].max()
            else:
                own_err = np.abs(np.asarray(lin.vll_pu) - np.asarray(own.vll_pu))[present].max()
            n_pv = len(PV[name]) + len(PV_LL.get(name, {}))
            rows.append((name, scale, n_pv if pv else 0, ln, ll, own_err))
    return rows


def fmt(values, how):
    return f"{how(values):.1e}" if values.size else "-"


def main(names) -> None:
    jax.config.update("jax_enable_x64", True)
    print(
        "| feeder | load | PV | max err LN (pu) | mean err LN (pu) | max err LL (pu) "
        "| mean err LL (pu) | max err vs own load models (pu) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for feeder, scale, n_pv, ln, ll, own in errors(name):
            print(
                f"| {feeder} | x{scale} | {n_pv or '-'} | {fmt(ln, np.max)} | {fmt(ln, np.mean)} "
                f"| {fmt(ll, np.max)} | {fmt(ll, np.mean)} | {own:.1e} |"
            )


if __name__ == "__main__":
    main(sys.argv[1:] or FEEDERS)
