"""float32 against float64 voltages of the unbalanced power flow at environment-like
operating points: the measurement behind which feeders carry a voltage control env.

    python benchmarks/three_phase_float32.py [--port] [ieee13 ieee123 ...]

``--port`` measures :func:`~jaxgrid.grid.three_phase.port_zbus.port_power_flow` (the
network inverted on the host in float64) instead of ``unbalanced_power_flow``.

Each feeder at 0.3, 0.7, 1.0 and 1.3 times its load, without PV and with PV of twice the
load spread over every load node (phase to ground); per case the largest float32 error
of a load node's line-to-neutral voltage (pu), of any node's (and where), of the
line-to-line voltages, and both losses (kW).
"""

from __future__ import annotations

import sys


def solve_all(name: str, port: bool) -> list:
    import numpy as np

    from jaxgrid.grid.three_phase import (
        build_port_zbus,
        load_feeder3,
        port_power_flow,
        unbalanced_power_flow,
    )

    feeder = load_feeder3(name)
    ends = np.concatenate([np.asarray(feeder.load_node_from), np.asarray(feeder.load_node_to)])
    load_nodes = np.unique(ends[ends < feeder.n_node])
    total_kw = np.asarray(feeder.load_p_w).sum() / 1e3
    zbus = build_port_zbus(feeder, gen_nodes=load_nodes) if port else None
    out = []
    for scale in (0.3, 0.7, 1.0, 1.3):
        for pv in (0.0, 1.0):
            p_gen = np.zeros(feeder.n_node)
            p_gen[load_nodes] = 2 * pv * scale * total_kw / len(load_nodes)
            if port:
                res = port_power_flow(zbus, feeder, scale, p_gen[load_nodes])
            else:
                res = unbalanced_power_flow(feeder, scale, p_gen)
            out.append(
                (scale, pv, np.asarray(res.vm_pu), np.asarray(res.vll_pu), float(res.loss_kw))
            )
    return feeder, load_nodes, out


def main(names, port: bool) -> None:
    import jax
    import numpy as np

    results32 = {n: solve_all(n, port) for n in names}
    jax.config.update("jax_enable_x64", True)
    print(
        "| feeder | load | PV | max dV load nodes (pu) | max dV any node (pu) | max dV LL (pu) | loss f32 / f64 (kW) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in names:
        feeder, load_nodes, r32 = results32[name]
        _, _, r64 = solve_all(name, port=False)
        for (scale, pv, vm32, vll32, loss32), (_, _, vm64, vll64, loss64) in zip(r32, r64):
            err = np.abs(vm32 - vm64)
            ll = np.abs(vll32 - vll64)[vll64 > 0]
            worst = feeder.node_names[int(err.argmax())]
            print(
                f"| {name} | x{scale} | {'2x load' if pv else '-'} | {err[load_nodes].max():.1e} | "
                f"{err.max():.1e} ({worst}) | {ll.max():.1e} | {loss32:.1f} / {loss64:.1f} |"
            )


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--port"]
    main(args or ["ieee13", "ieee123"], port="--port" in sys.argv)
