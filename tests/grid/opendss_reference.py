"""OpenDSS's own solution of a bundled IEEE feeder (``dss-python``): the reference the
three-phase solvers' tests compare with.

Compiles the bundled master, fixes the regulator taps to the feeder's (``RegControl``s
off), tightens OpenDSS's tolerance to 1e-12, sets ``loadmult`` and, for the PV cases, adds
single-phase constant-power ``Generator``s on several phases, phase to ground and phase
to phase (``model=1`` with a 0.5-1.5 pu band, so they stay constant power).
"""

import numpy as np

from jaxgrid.grid.three_phase import bundled_master, tap_commands
from jaxgrid.grid.three_phase.opendss import dss_engine

# single-phase PV (node -> kW) phase to ground on several phases, and (bus, phase pair
# ab/bc/ca -> kW) between two phases: only those on the 3-wire delta IEEE 37, where a
# phase-to-ground source has no return path but the line capacitances
PV = {
    "ieee13": {"675.1": 300.0, "680.2": 150.0, "611.3": 100.0},
    "ieee34": {"890.1": 100.0, "848.2": 150.0, "860.3": 120.0},
    "ieee37": {},
    "ieee123": {"65.1": 200.0, "76.2": 150.0, "114.1": 80.0, "49.3": 120.0},
}
PV_LL = {
    "ieee13": {("671", 1): 200.0},
    "ieee34": {},
    "ieee37": {("711", 0): 200.0, ("741", 1): 150.0, ("738", 2): 100.0},
    "ieee123": {},
}
PAIRS = ((1, 2), (2, 3), (3, 1))
PV_KVAR = 0.2  # kvar per kW (generation of reactive power)


def opendss_solution(name, feeder, scale, pv, commands=()):
    """OpenDSS's node voltages (V, the feeder's node order), losses (kW), source power
    (kW, kvar) and line currents (A, first terminal, by phase); ``commands`` run after
    the compile (as ``from_opendss``'s)."""
    engine = dss_engine()
    taps = dict(zip(feeder.regulator_names, np.asarray(feeder.tap_pu).tolist()))
    engine.Text.Command = "clear"
    engine.Text.Command = f'compile "{bundled_master(name)}"'
    for command in commands:
        engine.Text.Command = command
    for command in tap_commands(taps):
        engine.Text.Command = command
    engine.Text.Command = "set tolerance=1e-12"
    engine.Text.Command = "set maxiterations=500"
    engine.Text.Command = f"set loadmult={scale}"
    vbase = dict(zip(feeder.node_names, np.asarray(feeder.vbase_v)))
    if pv:
        for k, (node, kw) in enumerate(PV[name].items()):
            engine.Text.Command = (
                f"new generator.pv{k} bus1={node} phases=1 kV={vbase[node] / 1e3} "
                f"kW={kw} kvar={PV_KVAR * kw} model=1 vminpu=0.5 vmaxpu=1.5"
            )
        for k, ((bus, pair), kw) in enumerate(PV_LL[name].items()):
            a, b = PAIRS[pair]
            kv = np.sqrt(3) * vbase[f"{bus}.{a}"] / 1e3
            engine.Text.Command = (
                f"new generator.pvll{k} bus1={bus}.{a}.{b} phases=1 kV={kv} "
                f"kW={kw} kvar={PV_KVAR * kw} model=1 vminpu=0.5 vmaxpu=1.5"
            )
    engine.Text.Command = "solve"
    circuit = engine.ActiveCircuit
    assert circuit.Solution.Converged
    names = [n.lower() for n in circuit.AllNodeNames]
    assert names == list(feeder.node_names)
    volts = np.asarray(circuit.AllBusVolts)
    currents = np.zeros((feeder.n_line, 3))
    for k, e in enumerate(np.asarray(feeder.line_elem)):
        circuit.SetActiveElement(feeder.element_names[e])
        mag = np.asarray(circuit.ActiveCktElement.CurrentsMagAng)[0::2]
        for phase in range(3):
            pos = int(feeder.line_cond[k, phase])
            if pos >= 0:
                currents[k, phase] = mag[pos]
    power = circuit.TotalPower
    return (
        volts[0::2] + 1j * volts[1::2],
        circuit.Losses[0] / 1e3,
        (-power[0], -power[1]),
        currents,
    )


def pv_arrays(name, feeder):
    """``p_gen_kw, q_gen_kvar, p_gen_ll_kw, q_gen_ll_kvar`` of the PV cases."""
    p = np.zeros(feeder.n_node)
    for node, kw in PV[name].items():
        p[feeder.node_names.index(node)] = kw
    p_ll = np.zeros((feeder.n_bus, 3))
    for (bus, pair), kw in PV_LL[name].items():
        p_ll[feeder.bus_names.index(bus), pair] = kw
    return p, PV_KVAR * p, p_ll, PV_KVAR * p_ll


def line_to_line(feeder, v):
    """``(n_bus, 3)`` line-to-line voltages ab, bc, ca of node voltages ``v`` (V), 0
    where a bus lacks one of the pair's phases, and the ``(n_bus, 3)`` mask of the pairs
    it has."""
    nodes = np.asarray(feeder.bus_nodes)
    present = nodes >= 0
    v_bus = np.where(present, v[np.maximum(nodes, 0)], 0)
    first, second = [0, 1, 2], [1, 2, 0]
    pair = present[:, first] & present[:, second]
    return np.where(pair, v_bus[:, first] - v_bus[:, second], 0), pair
