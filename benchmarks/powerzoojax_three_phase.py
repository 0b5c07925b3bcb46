"""PowerZooJax's three-phase power flow side by side with jaxgrid's: speed at a batch of
load scenarios, and accuracy on IEEE 123 against OpenDSS.

    python benchmarks/powerzoojax_three_phase.py --powerzoojax /tmp/pzj [--batch 1024]
        [--paired ROUNDS]

PowerZooJax (PZJ, MIT, not on PyPI) is read from a checkout at ``--powerzoojax``; this
script imports it and calls it, it copies none of it. What is called:

- ``powerzoojax.tasks.ders.make_ders_3phase_eval()``: PZJ's own construction of its
  three-phase case123 (``DistGrid3PhParams``: the BIBC/BCBV/DLF topology, the per-phase
  loads in pu of 10 MVA, ``bfs_max_iter``/``bfs_tol``) — the case as it ships;
- ``powerzoojax.envs.grid.bfs_3phase_power_flow.bfs_3phase_power_flow``: its sweep,
  ``V = V_ref + DLF @ I(V)`` in a ``lax.while_loop`` until ``max |dV| < tol``.

Speed: the ``batch`` members each scale PZJ's per-phase load vector (``(339,)``, bus by
phase) by its own multipliers, uniform in 0.7-1.3 per entry (seed 0, drawn before timing);
``jax.jit(jax.vmap(...))``, float32 as PZJ ships, median of ``repeats`` calls after a first
(compiling) call. jaxgrid's ``port_power_flow`` on the bundled IEEE 123 (at most 10
sweeps, ending once settled; float32) runs the same way in the same process, one
multiplier per load phase.

Accuracy: PZJ's case123 at base load against OpenDSS (``dss-python``) on jaxgrid's bundled
IEEE 123 (``bundled_master("ieee123")``) with every regulator at the neutral tap (1.0)
and its control off — PZJ's case has no regulator, so neutral is the tap it assumes —
capacitors and load models as in the IEEE files, OpenDSS tolerance 1e-12. PZJ's buses are
numbered 1-114; they are matched to OpenDSS's by walking both trees from the substation
(PZJ bus 1 = OpenDSS bus 149; :func:`bus_map`): a PZJ line matches the OpenDSS line from
the matched bus with the same conductor (``r / x`` of one diagonal entry of its phase
matrix) and the same nominal load at its far end, and of several the one whose series
resistance (ohm) equals PZJ's ``r``; switches and regulators (zero length) join their two
buses, and a PZJ bus takes the name of the bus its line reaches. The result: PZJ 1 ->
149, PZJ 2-61 -> 1-60 (PZJ 61 is 60 with 160 and 160r, joined by switch 4 and regulator
4), PZJ 62-114 -> 62-114. OpenDSS's 61 (the stub to transformer XFM1 and 610), the
open ends 151, 250, 300, 450 and the switch and regulator buses have no PZJ bus. Two PZJ
lines are longer or shorter than the bundled OpenDSS file's: 80-81 475 ft (OpenDSS 175
ft) and 89-90 225 ft (OpenDSS 250 ft). Compared: ``|V|`` (pu of 2401.8 V) of every phase
node that OpenDSS has on a matched bus (229 nodes on 114 buses).

Where PZJ's model differs (read from its code, commit 3285b39):
- ``make_ders_3phase_eval`` builds each line's 3x3 impedance as ``(r + jx) * I3``
  (balanced and diagonal: no mutual coupling, every line three-phase, single-phase
  laterals included) from one scalar ``r, x`` per line: the self impedance of one phase;
- those ``r, x`` are ohms (``0.4576 ohm/mile * 400 ft`` on line 149-1) used as pu of
  10 MVA at 4.16 kV (Zbase 1.7306 ohm): impedances 1.73 times too large;
- the case table's loads are pu of 10 MVA (0.004 on bus 1 = 40 kW), read as MW and
  divided by ``base_mva`` again: PZJ's loads are a tenth of IEEE 123's (349 kW, not
  3490 kW);
- every load is constant power, phase to ground; IEEE 123 has 17 constant-impedance and
  15 constant-current loads of 91 and 7 delta loads; PZJ has no capacitors (IEEE 123: 600
  kvar at 83, 50 kvar at 88, 90, 92), no line charging, no regulators; its slack is bus
  149 at exactly 1.0 pu, balanced;
- 114 of OpenDSS's 132 buses (above).
The ``consistent units`` row is a diagnostic, not PZJ as it ships: PZJ's own solver and
topology builder on the same case with loads at the table's values (pu) and ``r, x``
divided by Zbase — what remains is the diagonal impedance and load model error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from timing import median_time  # benchmarks/timing.py (the script's folder)

SEED = 0
LOW, HIGH = 0.7, 1.3
ZBASE_OHM = 4.16**2 / 10.0  # PZJ case123: 4.16 kV, 10 MVA
PHASES = "abc"


def _import_powerzoojax(pzj_path) -> None:
    path = str(Path(pzj_path).resolve())
    if path not in sys.path:
        sys.path.insert(0, path)


def _pzj_case123(pzj_path):
    """PZJ's case123 as its own DERs-3phase factory builds it: ``(params, case)``."""
    _import_powerzoojax(pzj_path)
    from powerzoojax.case import create_case123
    from powerzoojax.tasks.ders import make_ders_3phase_eval

    case = create_case123()
    _, params = make_ders_3phase_eval(case)
    return params, case


def _multipliers(batch: int, shape) -> np.ndarray:
    """``(batch, *shape)`` load multipliers, uniform in [0.7, 1.3], float32."""
    rng = np.random.default_rng(SEED)
    return rng.uniform(LOW, HIGH, (batch, *shape)).astype(np.float32)


def _consistent_units(case):
    """The diagnostic case: PZJ's topology builder on its case123 with ``r, x`` divided
    by Zbase (1.7306 ohm) and the table's loads taken as the pu they are. Returns
    ``(topo, p_pu, q_pu)``, the loads ``(3 * (n_nodes - 1),)`` bus by phase a, b, c."""
    from powerzoojax.envs.grid.bfs_3phase_power_flow import build_3phase_topology

    z = (np.asarray(case.line_r, float) + 1j * np.asarray(case.line_x, float)) / ZBASE_OHM
    topo = build_3phase_topology(
        int(case.n_nodes),
        np.asarray(case.line_from_idx),
        np.asarray(case.line_to_idx),
        z[:, None, None] * np.eye(3),
    )
    p = np.stack([np.asarray(getattr(case, f"node_pd_{ph}"))[1:] for ph in PHASES], axis=1)
    q = np.stack([np.asarray(getattr(case, f"node_qd_{ph}"))[1:] for ph in PHASES], axis=1)
    return topo, p.reshape(-1).astype(np.float32), q.reshape(-1).astype(np.float32)


def powerzoojax_rate(
    pzj_path, batch: int = 1024, repeats: int = 7, consistent_units: bool = False
) -> dict:
    """PZJ's three-phase sweep on its case123, ``batch`` load scenarios per call (with
    ``consistent_units``, on the diagnostic case of :func:`_consistent_units`, whose
    ten times larger loads take more iterations).

    With ``repeats`` 0, the compiled call and its input instead (:func:`paired_rounds`).

    Returns a dict: ``solves_per_s`` (batch / median seconds of a call), ``median_s``,
    ``compile_s`` (first call: compilation and one run), ``max_iter`` and ``tol`` (PZJ's
    shipped ``bfs_max_iter`` and ``bfs_tol``, max |dV| in pu), ``iterations`` (min, max)
    over the batch, ``converged`` (fraction of the batch), ``batch`` and ``dtype``.
    """
    import jax
    import jax.numpy as jnp

    params, case = _pzj_case123(pzj_path)  # puts PZJ on sys.path
    from powerzoojax.envs.grid.bfs_3phase_power_flow import bfs_3phase_power_flow

    topo, p0, q0 = params.topo, params.load_P_3ph[0], params.load_Q_3ph[0]
    if consistent_units:
        topo, p0, q0 = _consistent_units(case)
    mult = jnp.asarray(_multipliers(batch, p0.shape))
    max_iter, tol = int(params.bfs_max_iter), float(params.bfs_tol)

    def one(m):
        res = bfs_3phase_power_flow(topo, p0 * m, q0 * m, max_iter, tol)
        return res.v_mag, res.iterations, res.converged

    solve = jax.jit(jax.vmap(one))
    if repeats == 0:  # the prepared call, for paired rounds
        return solve, mult
    median_s, first_s, (v, iters, conv) = median_time(solve, (mult,), repeats, min_time=0.0)
    iters = np.asarray(iters)
    return {
        "batch": batch,
        "solves_per_s": batch / median_s,
        "median_s": median_s,
        "compile_s": first_s,
        "max_iter": max_iter,
        "tol": tol,
        "iterations": (int(iters.min()), int(iters.max())),
        "converged": float(np.mean(np.asarray(conv))),
        "dtype": str(v.dtype),
    }


def jaxgrid_rate(batch: int = 1024, repeats: int = 7) -> dict:
    """jaxgrid's ``port_power_flow`` on the bundled IEEE 123 at its published taps, one
    multiplier per load phase (uniform 0.7-1.3, seed 0): the same keys as
    :func:`powerzoojax_rate` (``max_iter`` is its most sweeps, ``tol`` its float32
    convergence tolerance, ``iterations`` the sweeps run over the batch: they end once
    settled); with ``repeats`` 0, the compiled call and its input."""
    import jax
    import jax.numpy as jnp

    from jaxgrid.grid.three_phase import build_port_zbus, load_feeder3, port_power_flow
    from jaxgrid.grid.three_phase.port_zbus import N_ITER

    n_iter = N_ITER["float32"]
    feeder = load_feeder3("ieee123")
    zbus = build_port_zbus(feeder)
    mult = jnp.asarray(_multipliers(batch, (feeder.n_load_phase,)))

    def one(m):
        res = port_power_flow(zbus, feeder, m)
        return res.vm_pu, res.iterations, res.converged

    solve = jax.jit(jax.vmap(one))
    if repeats == 0:  # the prepared call, for paired rounds
        return solve, mult
    median_s, first_s, (v, iters, conv) = median_time(solve, (mult,), repeats, min_time=0.0)
    iters = np.asarray(iters)
    return {
        "batch": batch,
        "solves_per_s": batch / median_s,
        "median_s": median_s,
        "compile_s": first_s,
        "max_iter": n_iter,
        "tol": 1e-5,
        "iterations": (int(iters.min()), int(iters.max())),
        "converged": float(np.mean(np.asarray(conv))),
        "dtype": str(v.dtype),
    }


def paired_rounds(pzj_path, batch: int, rounds: int) -> dict:
    """Per solver, the median solves/s over ``rounds`` rounds in which each of the three
    calls runs once, one after the other, and jaxgrid's ratio to each PowerZooJax row
    (median and range of the rounds' ratios): a slow spell of this shared machine then
    moves both sides of a round's ratio alike (single runs moved by a third here)."""
    import time

    import jax

    calls = {
        "shipped": powerzoojax_rate(pzj_path, batch, 0),
        "consistent": powerzoojax_rate(pzj_path, batch, 0, consistent_units=True),
        "jaxgrid": jaxgrid_rate(batch, 0),
    }
    for solve, mult in calls.values():
        jax.block_until_ready(solve(mult))  # compile
    rates = {name: [] for name in calls}
    for _ in range(rounds):
        for name, (solve, mult) in calls.items():
            t0 = time.perf_counter()
            jax.block_until_ready(solve(mult))
            rates[name].append(batch / (time.perf_counter() - t0))
    ours = np.array(rates["jaxgrid"])
    out = {name: float(np.median(r)) for name, r in rates.items()}
    for name in ("shipped", "consistent"):
        ratio = ours / np.array(rates[name])
        out[f"ratio_{name}"] = (float(np.median(ratio)), float(ratio.min()), float(ratio.max()))
    return out


def _opendss_ieee123() -> dict:
    """OpenDSS's solution of the bundled IEEE 123 at neutral taps, controls off.

    Returns ``{"v_pu": {bus: {phase 0-2: complex pu}}, "lines": [(bus1, bus2, r_diag,
    x_diag)], "joins": [(bus1, bus2)], "load_kw": {bus: kW}}``: ``r_diag``/``x_diag``
    the ``(phases,)`` diagonal of the line's series impedance, ohm; ``joins`` the
    switches and regulators; ``load_kw`` each bus's nominal load.
    """
    from jaxgrid.grid.three_phase import bundled_master, load_feeder3, tap_commands
    from jaxgrid.grid.three_phase.opendss import dss_engine

    regulators = load_feeder3("ieee123").regulator_names
    dss = dss_engine()
    dss.Text.Command = "clear"
    dss.Text.Command = f'compile "{bundled_master("ieee123")}"'
    for command in tap_commands(dict.fromkeys(regulators, 1.0)):
        dss.Text.Command = command
    dss.Text.Command = "set tolerance=1e-12"
    dss.Text.Command = "set maxiterations=500"
    dss.Text.Command = "solve"
    circuit = dss.ActiveCircuit
    assert circuit.Solution.Converged, "OpenDSS did not converge"

    def bus(name):
        return name.split(".")[0].lower()

    v_pu = {}
    for name in circuit.AllBusNames:
        circuit.SetActiveBus(name)
        b = circuit.ActiveBus
        volts = np.asarray(b.Voltages)
        base = b.kVBase * 1e3
        v_pu[name.lower()] = {
            int(n) - 1: complex(volts[2 * k], volts[2 * k + 1]) / base
            for k, n in enumerate(b.Nodes)
            if 1 <= n <= 3
        }
    lines, joins = [], []
    lines_if = circuit.Lines
    k = lines_if.First
    while k:
        b1, b2 = bus(lines_if.Bus1), bus(lines_if.Bus2)
        if lines_if.IsSwitch:
            joins.append((b1, b2))
        else:
            n = lines_if.Phases
            scale = lines_if.Length
            r = np.diag(np.reshape(lines_if.Rmatrix, (n, n))) * scale
            x = np.diag(np.reshape(lines_if.Xmatrix, (n, n))) * scale
            lines.append((b1, b2, r, x))
        k = lines_if.Next
    xf = circuit.Transformers
    k = xf.First
    while k:
        if xf.Name.startswith("reg"):
            b1, b2 = (bus(n) for n in circuit.ActiveCktElement.BusNames[:2])
            joins.append((b1, b2))
        k = xf.Next
    load_kw = {}
    loads_if = circuit.Loads
    k = loads_if.First
    while k:
        b = bus(circuit.ActiveCktElement.BusNames[0])
        load_kw[b] = load_kw.get(b, 0.0) + loads_if.kW
        k = loads_if.Next
    return {"v_pu": v_pu, "lines": lines, "joins": joins, "load_kw": load_kw}


def bus_map(case, lines, joins, load_kw, root="149") -> tuple:
    """OpenDSS bus name of each PZJ bus (index 0 .. n_nodes-1), matched by walking both
    trees from ``root`` (see the module docstring), and the PZJ lines whose length
    differs from OpenDSS's: ``(names, [(PZJ line id, PZJ length / OpenDSS length)])``.

    A PZJ line matches the unused OpenDSS line at the matched bus with the same
    conductor (``r / x`` of one phase within 0.1 %) and the same nominal load at the far
    bus (PZJ's table pu times 1e4 kW, within 0.5 kW); of several, the one whose series
    resistance equals PZJ's ``r`` within 0.01 %; a single one is taken even where the
    lengths differ (and listed). Raises where a PZJ line matches none or several."""
    group = {}

    def find(b):
        group.setdefault(b, b)
        while group[b] != b:
            b = group[b]
        return b

    for a, b in joins:
        group[find(a)] = find(b)
    incident = {}
    for k, (a, b, _, _) in enumerate(lines):
        incident.setdefault(find(a), []).append((k, b))
        incident.setdefault(find(b), []).append((k, a))
    frm = np.asarray(case.line_from_idx)
    to = np.asarray(case.line_to_idx)
    r, x = np.asarray(case.line_r, float), np.asarray(case.line_x, float)
    # PZJ's table loads are pu of its 10 MVA base: kW = 1e4 * pu
    pzj_kw = 1e4 * np.asarray(case.node_pd, float)
    names = [None] * int(case.n_nodes)
    names[0] = root
    differ = []  # (PZJ line, PZJ r / OpenDSS r) where only the length differs
    used, frontier = set(), [0]
    while frontier:
        u = frontier.pop()
        for k in np.flatnonzero((frm == u) | (to == u)):
            v = int(to[k] if frm[k] == u else frm[k])
            if names[v] is not None:
                continue
            # same conductor (r/x of one phase) and the same load at the far bus ...
            same = [
                (j, far, lines[j][2][np.argmin(np.abs(lines[j][2] / lines[j][3] - r[k] / x[k]))])
                for j, far in incident.get(find(names[u]), [])
                if j not in used
                and np.min(np.abs(lines[j][2] / lines[j][3] - r[k] / x[k])) < 1e-3 * r[k] / x[k]
                and abs(load_kw.get(far, 0.0) - pzj_kw[v]) < 0.5
            ]
            # ... and the same length (series resistance), unless only one line fits
            hits = [h for h in same if abs(h[2] - r[k]) < 1e-4 * r[k]]
            if not hits and len(same) == 1:
                hits = same
                differ.append((int(k) + 1, float(r[k] / same[0][2])))
            if len(hits) != 1:
                raise ValueError(f"PZJ line {k + 1} matches {len(hits)} OpenDSS lines")
            used.add(hits[0][0])
            names[v] = hits[0][1]
            frontier.append(v)
    return names, differ


def _errors(v_model, names, v_ref) -> dict:
    """|V| differences (pu) of ``v_model`` (``(n_nodes, 3)`` magnitudes) against OpenDSS
    over every phase node OpenDSS has on the matched buses."""
    diff = {p: [] for p in range(3)}
    worst = (0.0, "")
    for i, name in enumerate(names):
        for p, vref in v_ref[name].items():
            d = abs(float(v_model[i, p]) - abs(vref))
            diff[p].append(d)
            if d > worst[0]:
                worst = (d, f"{name}.{PHASES[p]}")
    every = np.concatenate([np.asarray(d) for d in diff.values()])
    return {
        "max_pu": float(every.max()),
        "mean_pu": float(every.mean()),
        "max_at": worst[1],
        "max_by_phase_pu": tuple(float(np.max(diff[p])) for p in range(3)),
        "mean_by_phase_pu": tuple(float(np.mean(diff[p])) for p in range(3)),
        "n_phase_nodes": int(every.size),
    }


def _pzj_vm(topo, p, q, max_iter, tol, v_ref_mag=1.0) -> tuple:
    """PZJ's sweep: ``(n_nodes, 3)`` magnitudes (slack row first), iterations, converged."""
    from powerzoojax.envs.grid.bfs_3phase_power_flow import bfs_3phase_power_flow

    res = bfs_3phase_power_flow(topo, p, q, max_iter, tol)
    vm = np.asarray(res.v_mag).reshape(-1, 3)
    vm = np.vstack([np.full((1, 3), v_ref_mag), vm])
    return vm, int(res.iterations), bool(res.converged)


def powerzoojax_accuracy(pzj_path) -> dict:
    """PZJ's case123 at base load against OpenDSS's IEEE 123 (neutral taps).

    Returns a dict with ``shipped`` and ``consistent_units`` (each: ``max_pu``,
    ``mean_pu``, ``max_at``, ``max_by_phase_pu``/``mean_by_phase_pu`` over phases a, b,
    c, ``n_phase_nodes``, ``iterations``, ``converged``, ``min_vm_pu``), ``opendss``
    (``min_vm_pu`` over the compared nodes), ``jaxgrid`` (``port_power_flow`` at neutral
    taps, float32, on the same nodes), ``n_buses`` matched, ``missing`` (OpenDSS buses
    with no PZJ bus), ``bus_names`` (OpenDSS name of each PZJ bus 1-114) and
    ``length_differs`` (PZJ lines whose length differs from OpenDSS's, see
    :func:`bus_map`).
    """
    params, case = _pzj_case123(pzj_path)
    ref = _opendss_ieee123()
    names, differ = bus_map(case, ref["lines"], ref["joins"], ref["load_kw"])
    v_ref = ref["v_pu"]
    max_iter, tol = int(params.bfs_max_iter), float(params.bfs_tol)

    vm, it, conv = _pzj_vm(params.topo, params.load_P_3ph[0], params.load_Q_3ph[0], max_iter, tol)
    shipped = {**_errors(vm, names, v_ref), "iterations": it, "converged": conv}
    shipped["min_vm_pu"] = _min_vm(vm, names, v_ref)

    # diagnostic: the same solver and case, loads and impedances in consistent pu
    topo, p, q = _consistent_units(case)
    vm2, it2, conv2 = _pzj_vm(topo, p, q, max_iter, tol)
    units = {**_errors(vm2, names, v_ref), "iterations": it2, "converged": conv2}
    units["min_vm_pu"] = _min_vm(vm2, names, v_ref)

    vm_ref = np.zeros((len(names), 3))
    for i, name in enumerate(names):
        for ph, v in v_ref[name].items():
            vm_ref[i, ph] = abs(v)
    return {
        "shipped": shipped,
        "consistent_units": units,
        "opendss": {"min_vm_pu": _min_vm(vm_ref, names, v_ref)},
        "jaxgrid": _jaxgrid_accuracy(names, v_ref),
        "n_buses": len(names),
        "missing": sorted(set(v_ref) - set(names)),
        "bus_names": names,
        "length_differs": differ,
    }


def _min_vm(vm, names, v_ref) -> float:
    return float(min(vm[i, p] for i, name in enumerate(names) for p in v_ref[name]))


def _jaxgrid_accuracy(names, v_ref) -> dict:
    """jaxgrid's ``port_power_flow`` (float32, 10 iterations) at neutral taps, on the
    same phase nodes."""
    import jax.numpy as jnp

    from jaxgrid.grid.three_phase import build_port_zbus, load_feeder3, port_power_flow

    feeder = load_feeder3("ieee123")
    feeder = feeder.replace(tap_pu=jnp.ones_like(feeder.tap_pu))
    res = port_power_flow(build_port_zbus(feeder), feeder)
    vm = np.asarray(res.vm_pu)
    index = {name: k for k, name in enumerate(feeder.node_names)}
    vm_bus = np.zeros((len(names), 3))
    for i, name in enumerate(names):
        for p in v_ref[name]:
            vm_bus[i, p] = vm[index[f"{name}.{p + 1}"]]
    out = _errors(vm_bus, names, v_ref)
    out["converged"] = bool(res.converged)
    out["min_vm_pu"] = _min_vm(vm_bus, names, v_ref)
    return out


def _runs(names) -> str:
    """``names`` (OpenDSS bus of each PZJ bus) as runs of consecutive numbers."""
    out, k = [], 0
    while k < len(names):
        if not names[k].isdigit():
            out.append(f"{k + 1} -> {names[k]}")
            k += 1
            continue
        end = k
        while (
            end + 1 < len(names)
            and names[end + 1].isdigit()
            and int(names[end + 1]) - (end + 1) == int(names[k]) - k
        ):
            end += 1
        out.append(
            f"{k + 1} -> {names[k]}"
            if end == k
            else f"{k + 1}-{end + 1} -> {names[k]}-{names[end]}"
        )
        k = end + 1
    return ", ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--powerzoojax", required=True, help="PowerZooJax checkout")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-accuracy", action="store_true", help="speed only (no OpenDSS)")
    parser.add_argument(
        "--paired", type=int, metavar="ROUNDS", help="speed only, the three calls alternated"
    )
    args = parser.parse_args()
    import jax

    if args.paired:
        r = paired_rounds(args.powerzoojax, args.batch, args.paired)
        print(f"Batch {args.batch}, {args.paired} rounds of one call each, median solves/s.\n")
        print("| PowerZooJax as shipped | consistent units | jaxgrid port_power_flow |", end="")
        print(" jaxgrid / shipped | jaxgrid / consistent |")
        print("|---|---|---|---|---|")
        cells = [f"{r[k]:.3g}" for k in ("shipped", "consistent", "jaxgrid")]
        cells += [
            f"{m:.2f} ({lo:.2f}-{hi:.2f})"
            for m, lo, hi in (r["ratio_shipped"], r["ratio_consistent"])
        ]
        print("| " + " | ".join(cells) + " |")
        return

    rates = {
        "PowerZooJax bfs_3phase_power_flow, case123 as shipped": powerzoojax_rate(
            args.powerzoojax, args.batch, args.repeats
        ),
        "PowerZooJax, consistent units (diagnostic)": powerzoojax_rate(
            args.powerzoojax, args.batch, args.repeats, consistent_units=True
        ),
        "jaxgrid port_power_flow, IEEE 123": jaxgrid_rate(args.batch, args.repeats),
    }
    print(
        f"Three-phase power flow solves/s on {jax.default_backend()}, batch {args.batch}, "
        f"median of {args.repeats} calls after compilation (first call: compile + 1 run)."
    )
    print()
    print("| solver | dtype | iterations (setting) | solves/s | first call s | converged |")
    print("|---|---|---|---|---|---|")
    for label, r in rates.items():
        lo, hi = r["iterations"]
        setting = (
            f"while_loop, max {r['max_iter']}, tol {r['tol']:g}"
            if label.startswith("PowerZooJax")
            else f"while_loop, max {r['max_iter']}, until settled"
        )
        print(
            f"| {label} | {r['dtype']} | {lo}-{hi} ({setting}) | {r['solves_per_s']:.3g} "
            f"| {r['compile_s']:.2f} | {r['converged']:.0%} |"
        )
    if args.no_accuracy:
        return
    acc = powerzoojax_accuracy(args.powerzoojax)
    print()
    print(
        f"|V| against OpenDSS, IEEE 123 at base load, regulators at neutral taps (control "
        f"off), over {acc['shipped']['n_phase_nodes']} phase nodes of {acc['n_buses']} "
        f"matched buses (pu):"
    )
    print()
    print("| model | max | at | mean | max a / b / c | min |V| | iterations |")
    print("|---|---|---|---|---|---|---|")
    rows = {
        "PowerZooJax case123 as shipped (float32)": acc["shipped"],
        "PowerZooJax solver, consistent units (diagnostic)": acc["consistent_units"],
        "jaxgrid port_power_flow (float32)": acc["jaxgrid"],
    }
    for label, e in rows.items():
        by = " / ".join(f"{d:.3g}" for d in e["max_by_phase_pu"])
        print(
            f"| {label} | {e['max_pu']:.3g} | {e['max_at']} | {e['mean_pu']:.3g} | {by} "
            f"| {e['min_vm_pu']:.4f} | {e.get('iterations', 10)} |"
        )
    print(f"| OpenDSS | - | - | - | - | {acc['opendss']['min_vm_pu']:.4f} | - |")
    print()
    print("OpenDSS buses without a PowerZooJax bus: " + ", ".join(acc["missing"]))
    print("PowerZooJax bus -> OpenDSS bus: " + _runs(acc["bus_names"]))
    for line, ratio in acc["length_differs"]:
        print(f"PowerZooJax line {line}: length {ratio:.3f} times OpenDSS's")


if __name__ == "__main__":
    main()
