"""Batched unbalanced power flow: jaxgrid's solvers against OpenDSS, side by side.

    python benchmarks/three_phase_speed.py [--batch 1024] [--quick] [--paired ROUNDS] [ieee13 ieee123 ...]

For each feeder, ``batch`` load situations, each load (OpenDSS ``Load``) at its own
multiplier drawn uniformly from 0.7-1.3 (fixed seed), the regulators at the feeder's
fixed taps:

- **OpenDSS** (``dss-python``, where installed): solve after solve on one engine, each
  load's kW and kvar set through the ``Loads`` interface before each solve ("per load"),
  and the same with one ``loadmult`` change instead ("loadmult"); solves/s over
  ``min(batch, 256)`` solves (``--quick``: 32).
``--paired ROUNDS`` times only the port solver against OpenDSS per load, alternated round by
round (64 OpenDSS solves, then one batched call), and reports the median and range of the
rounds' ratios: single runs of either on this shared machine move by up to a third.

- **jaxgrid**: ``jax.jit(jax.vmap(solver))`` over the batch, as users write it, the median
  of repeated calls (compilation timed apart): ``port_power_flow`` (the port Z-bus, its
  default 10 fixed iterations, float32), ``unbalanced_power_flow`` (an LU of the nodal
  matrix per solve, its default 40 iterations; float32) and ``lindist3flow`` (linear).
  Each returns the full result (voltages, line currents, unbalance, losses).

Accuracy beside speed: the largest voltage difference (pu) from OpenDSS's own solution
over the first members of the batch (OpenDSS at tolerance 1e-12), or "-" without OpenDSS.
FLOPs per solve of the port solver at its most iterations and the taps it was built at
(the benchmark's): ``(n_iter + 1) 8 d^2 + 32 d n_t + 32 n_t^2 + 8 (n + 3 l + 3 b)
(d + 2 n_t)`` real operations (``d`` devices, ``n_t`` tapped conductors, ``n`` nodes,
``l`` lines, ``b`` buses: the sweeps and the last currents' product, whose tap terms are
skipped at those taps, the taps' terms once, then every node's voltage, line phase
current and line-to-line voltage), printed per feeder.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from timing import median_time  # benchmarks/timing.py (the script's folder)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "grid"))
N_CHECK = 4  # members compared with OpenDSS


def load_multipliers(feeder, batch: int, seed: int = 0):
    """``(batch, n_load)`` multiplier of each OpenDSS load, and ``(batch, n_lp)`` the
    same expanded to the feeder's load phases."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per_load = rng.uniform(0.7, 1.3, (batch, len(feeder.load_names)))
    return per_load, per_load[:, np.asarray(feeder.load_id)]


def opendss_session(name: str):
    """``(engine, set_loads)``: an OpenDSS engine with the bundled ``name`` compiled at
    the feeder's fixed taps, and ``set_loads(row)``, which sets each of its loads to
    ``row`` (``(n_load,)`` multipliers, the feeder's load order) times its nominal kW
    and kvar."""
    import numpy as np

    from jaxgrid.grid.three_phase import bundled_master, load_feeder3, tap_commands
    from jaxgrid.grid.three_phase.opendss import dss_engine

    feeder = load_feeder3(name)
    engine = dss_engine()
    engine.Text.Command = "clear"
    engine.Text.Command = f'compile "{bundled_master(name)}"'
    taps = dict(zip(feeder.regulator_names, np.asarray(feeder.tap_pu).tolist()))
    for command in tap_commands(taps):
        engine.Text.Command = command
    loads = engine.ActiveCircuit.Loads
    names = [n.lower() for n in loads.AllNames]
    order = [names.index(n) + 1 for n in feeder.load_names]
    base = []
    for idx in order:
        loads.idx = idx
        base.append((loads.kW, loads.kvar))

    def set_loads(row):
        for k, idx in enumerate(order):
            loads.idx = idx
            loads.kW = base[k][0] * row[k]
            loads.kvar = base[k][1] * row[k]

    return engine, set_loads


def opendss_per_load(engine, set_loads, rows) -> float:
    """Seconds OpenDSS takes to solve ``rows`` (``(solves, n_load)`` multipliers) one
    after another, each load set before each solve, at its default tolerance."""
    engine.Text.Command = "set tolerance=1e-4"  # OpenDSS's default, for the timing
    engine.Text.Command = "set maxiterations=15"
    solution = engine.ActiveCircuit.Solution
    t0 = time.perf_counter()
    for row in rows:
        set_loads(row)
        solution.Solve()
    return time.perf_counter() - t0


def opendss_rates(name: str, per_load, solves: int):
    """OpenDSS solves/s per load and with ``loadmult``, and its voltages (pu, the feeder's
    node order) of the first ``N_CHECK`` members."""
    import numpy as np

    from jaxgrid.grid.three_phase import load_feeder3

    engine, set_loads = opendss_session(name)
    circuit = engine.ActiveCircuit
    vbase = np.asarray(load_feeder3(name).vbase_v)
    engine.Text.Command = "set tolerance=1e-12"
    engine.Text.Command = "set maxiterations=500"
    reference = []
    for b in range(min(N_CHECK, len(per_load))):
        set_loads(per_load[b])
        circuit.Solution.Solve()
        volts = np.asarray(circuit.AllBusVolts)
        reference.append(np.abs(volts[0::2] + 1j * volts[1::2]) / vbase)
    rate_per_load = solves / opendss_per_load(engine, set_loads, per_load[:solves])
    set_loads(np.ones(per_load.shape[1]))
    t0 = time.perf_counter()
    for b in range(solves):
        circuit.Solution.LoadMult = float(per_load[b, 0])
        circuit.Solution.Solve()
    rate_loadmult = solves / (time.perf_counter() - t0)
    return rate_per_load, rate_loadmult, np.array(reference)


def paired_rounds(name: str, per_load, per_lp, rounds: int, solves: int = 64):
    """``(OpenDSS solves/s, port solver solves/s, ratio)`` medians and the ratio's range
    over ``rounds`` rounds, each timing ``solves`` OpenDSS solves (each load set) and one
    call of ``jax.jit(jax.vmap(port_power_flow))`` over the batch, one after the other:
    a slow spell of this shared machine then moves both sides of a round's ratio."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxgrid.grid.three_phase import build_port_zbus, load_feeder3, port_power_flow

    feeder = load_feeder3(name)
    zbus = build_port_zbus(feeder)
    solve = jax.jit(jax.vmap(lambda s: port_power_flow(zbus, feeder, s)))
    scales = jnp.asarray(per_lp, jnp.float32)
    jax.block_until_ready(solve(scales))
    engine, set_loads = opendss_session(name)
    dss, ours = [], []
    for r in range(rounds):
        rows = per_load[np.arange(r * solves, (r + 1) * solves) % len(per_load)]
        dss.append(solves / opendss_per_load(engine, set_loads, rows))
        t0 = time.perf_counter()
        jax.block_until_ready(solve(scales))
        ours.append(len(per_lp) / (time.perf_counter() - t0))
    ratio = np.array(ours) / np.array(dss)
    return np.median(dss), np.median(ours), np.median(ratio), ratio.min(), ratio.max()


def jaxgrid_rows(name: str, per_lp, repeats: int):
    """``(solver, solves/s, compile s, converged share, vm (N_CHECK, n_node))`` rows."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxgrid.grid.three_phase import (
        build_port_zbus,
        lindist3flow,
        lindist3flow_model,
        load_feeder3,
        port_power_flow,
        unbalanced_power_flow,
    )

    feeder = load_feeder3(name)
    zbus = build_port_zbus(feeder)
    model = lindist3flow_model(feeder)
    solvers = {
        "port_power_flow (jaxgrid, port Z-bus)": lambda s: port_power_flow(zbus, feeder, s),
        "unbalanced_power_flow (jaxgrid, LU)": lambda s: unbalanced_power_flow(feeder, s),
        "lindist3flow (jaxgrid, linear)": lambda s: lindist3flow(model, s),
    }
    scales = jnp.asarray(per_lp, jnp.float32)
    rows = []
    for label, solve in solvers.items():
        fn = jax.jit(jax.vmap(solve))
        median_s, first_s, out = median_time(fn, (scales,), repeats)
        converged = getattr(out, "converged", None)
        share = float(np.mean(np.asarray(converged))) if converged is not None else None
        vm = np.asarray(out.vm_pu[:N_CHECK], np.float64)
        rows.append((label, len(per_lp) / median_s, first_s - median_s, share, vm))
    return rows, zbus, feeder


def port_flops(zbus, feeder) -> float:
    """Real FLOPs per solve of the port solver at its default iterations and its
    build's taps (module docstring)."""
    from jaxgrid.grid.three_phase.port_zbus import N_ITER

    n_iter = N_ITER["float32"]

    n_t, n, d = zbus.tap_port.shape[0], feeder.n_node, zbus.z_dd.shape[0]
    outputs = n + zbus.h_c.shape[0] + zbus.ll_c.shape[0]  # nodes, line phases, bus pairs
    taps_once = 32 * d * n_t + 32 * n_t * n_t
    return (n_iter + 1) * 8 * d * d + taps_once + 8 * outputs * (d + 2 * n_t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("feeders", nargs="*", default=["ieee13", "ieee123"])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="fewer OpenDSS solves and repeats")
    parser.add_argument(
        "--paired",
        type=int,
        metavar="ROUNDS",
        help="only the port solver against OpenDSS, their timed runs alternated ROUNDS times",
    )
    args = parser.parse_args()
    if args.paired:
        _paired_table(args.feeders, args.batch, args.paired)
        return
    import jax
    import numpy as np

    try:
        import dss  # noqa: F401

        have_dss = True
    except ImportError:
        have_dss = False
    device = jax.devices()[0].device_kind
    print(f"B = {args.batch} on {device} ({os.cpu_count()} cores); float32; median of repeats.\n")
    print(
        "| feeder | solver | solves/s | x OpenDSS per load | compile s | converged | max dV vs OpenDSS (pu) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.feeders:
        from jaxgrid.grid.three_phase import load_feeder3

        per_load, per_lp = load_multipliers(load_feeder3(name), args.batch)
        rows, zbus, feeder = jaxgrid_rows(name, per_lp, 3 if args.quick else 7)
        reference, rate = None, None
        if have_dss:
            solves = 32 if args.quick else min(args.batch, 256)
            rate, rate_mult, reference = opendss_rates(name, per_load, solves)
            print(f"| {name} | OpenDSS, each load set | {rate:.3g} | 1 | - | - | 0 |")
            print(f"| {name} | OpenDSS, loadmult only | {rate_mult:.3g} | - | - | - | - |")
        for label, solves_s, compile_s, share, vm in rows:
            ratio = f"{solves_s / rate:.2g}" if rate else "-"
            err = f"{np.max(np.abs(vm - reference)):.1e}" if reference is not None else "-"
            conv = "-" if share is None else f"{100 * share:.0f} %"
            print(
                f"| {name} | {label} | {solves_s:.3g} | {ratio} | {compile_s:.1f} | {conv} | {err} |"
            )
        print(
            f"| {name} | (port solver: {zbus.z_dd.shape[0]} devices, {zbus.n_port} ports of "
            f"{feeder.n_node} nodes, "
            f"{port_flops(zbus, feeder):.2g} FLOPs a solve) | | | | | |"
        )


def _paired_table(feeders, batch: int, rounds: int) -> None:
    from jaxgrid.grid.three_phase import load_feeder3

    print(f"B = {batch}; {rounds} rounds of 64 OpenDSS solves and one port_power_flow call.\n")
    print(
        "| feeder | OpenDSS per load, solves/s | port_power_flow, solves/s | ratio, median | ratio, range |"
    )
    print("|---|---|---|---|---|")
    for name in feeders:
        per_load, per_lp = load_multipliers(load_feeder3(name), batch)
        dss, ours, ratio, low, high = paired_rounds(name, per_load, per_lp, rounds)
        print(f"| {name} | {dss:.3g} | {ours:.3g} | {ratio:.1f} | {low:.1f}-{high:.1f} |")


if __name__ == "__main__":
    main()
