"""Batched AC power flow on meshed networks: jaxgrid's acpf against pandapower and
lightsim2grid, side by side in one run.

    python benchmarks/transmission.py            # case14, case118, case300; B = 1, 64, 1024
    python benchmarks/transmission.py --quick    # B = 1, 64, fewer repeats
    python benchmarks/transmission.py --out results.md

Loads are the case's scaled bus by bus by U(0.9, 1.1), drawn before timing. jaxgrid solves
a batch with one jitted ``vmap(acpf)`` over loads as users write it (the network shared,
the fast-decoupled matrices precomputed once per network), Newton-Raphson and
fast-decoupled, float32 and float64; the time is the median of repeated runs after
compilation, compile time apart. lightsim2grid (its C++ Newton-Raphson with KLU, on
PYPOWER's ``Y_bus`` and ``S_bus`` of the same tables) and pandapower (``runpp`` on the net
``from_ppc`` builds from the same file, tolerance 1e-8 MVA) solve the instances one after
another. Accuracy: the largest ``|Vm|`` difference from lightsim2grid's float64 solution
over the batch, and the share of solves that report ``converged``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

from timing import median_time  # benchmarks/timing.py (the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "grid"))  # the tests' references

CASES = ("case14", "case118", "case300")


def _one_after_another(solve, pd, qd):
    for p, q in zip(pd, qd, strict=True):
        solve(p, q)


def _loads(network, batch, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.9, 1.1, (batch, network.n_bus))
    return scale * np.asarray(network.pd_mw), scale * np.asarray(network.qd_mvar)


def _lightsim2grid_solver(name):
    """``solve(pd, qd) -> V`` of lightsim2grid's KLU Newton-Raphson on the case's tables."""
    import numpy as np
    from lightsim2grid.solver import KLUSolver
    from pandapower.pypower.makeSbus import makeSbus
    from test_acpf import pypower_problem

    base, bus, gen, y_bus, v0, ref, pv, pq, weights = pypower_problem(name)
    solver = KLUSolver()

    def solve(pd, qd):
        b = bus.copy()
        b[:, 2], b[:, 3] = pd, qd
        s_bus = makeSbus(base, b, gen).astype(complex)
        solver.reset()
        ok = solver.compute_pf(y_bus, v0.copy(), s_bus, ref, weights, pv, pq, 20, 1e-8)
        return np.array(solver.get_V(), copy=True) if ok else None

    return solve


def _pandapower_solver(name):
    import numpy as np
    import pandapower as pp
    from pandapower.converter.pypower.from_ppc import from_ppc

    from jaxgrid.grid.matpower import load_case

    mpc = load_case(ROOT / "jaxgrid/grid/cases/transmission" / f"{name}.m")
    bus = np.asarray(mpc["bus"], float).copy()
    bus[bus[:, 9] <= 0, 9] = 1.0
    ppc = {"version": "2", "baseMVA": float(mpc["baseMVA"]), "bus": bus,
           "branch": np.asarray(mpc["branch"], float), "gen": np.asarray(mpc["gen"], float)}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = from_ppc(ppc, f_hz=60)
    p0, q0 = net.load.p_mw.to_numpy().copy(), net.load.q_mvar.to_numpy().copy()

    def solve(scale):
        net.load.p_mw, net.load.q_mvar = p0 * scale, q0 * scale
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp.runpp(net, tolerance_mva=1e-8, calculate_voltage_angles=True)

    return solve


def run(batches, repeats):
    import jax
    import numpy as np

    from jaxgrid.grid import acpf, fast_decoupled_matrices, network_from_matpower

    rows = []
    for name in CASES:
        print(name, file=sys.stderr, flush=True)
        ls_solve = _lightsim2grid_solver(name)
        with jax.enable_x64(True):
            network64 = network_from_matpower(name)
            pd, qd = _loads(network64, max(batches))
        reference = [ls_solve(pd[i], qd[i]) for i in range(max(batches))]
        ref_vm = np.stack([np.abs(v) if v is not None else np.full(len(pd[0]), np.nan)
                           for v in reference])  # fmt: skip
        n_ls = min(200, max(batches))
        ls_rate = (
            n_ls / median_time(_one_after_another, (ls_solve, pd[:n_ls], qd[:n_ls]), repeats)[0]
        )
        pp_rate = 1.0 / median_time(_pandapower_solver(name), (1.0,), 3, min_time=0.5)[0]
        rows.append((name, "lightsim2grid NR (KLU), one after another", 1, ls_rate, None, 0.0, 1.0))
        rows.append((name, "pandapower runpp (NR), one after another", 1, pp_rate, None, None, 1.0))
        for method in ("fast_decoupled", "newton"):
            for wide in (False, True):
                with jax.enable_x64(wide):
                    network = network_from_matpower(name)
                    matrices = (
                        fast_decoupled_matrices(network) if method == "fast_decoupled" else None
                    )
                    dtype = np.float64 if wide else np.float32

                    def solve(p, q, network=network, matrices=matrices, method=method):
                        return acpf(network, p, q, method=method, matrices=matrices)

                    fn = jax.jit(jax.vmap(solve))
                    # Newton's dense factorisation per solve: its rate at 64 is its rate
                    for batch in [b for b in batches if method != "newton" or b <= 64]:
                        p, q = pd[:batch].astype(dtype), qd[:batch].astype(dtype)
                        t0 = time.perf_counter()
                        out = jax.block_until_ready(fn(p, q))
                        compile_s = time.perf_counter() - t0
                        seconds = median_time(fn, (p, q), repeats)[0]
                        err = float(
                            np.nanmax(np.abs(np.asarray(out.vm_pu, float) - ref_vm[:batch]))
                        )
                        conv = float(np.mean(np.asarray(out.converged)))
                        label = f"jaxgrid acpf {method.replace('_', '-')} ({'float64' if wide else 'float32'})"
                        rows.append((name, label, batch, batch / seconds, compile_s, err, conv))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="B = 1, 64 and few repeats")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import jax

    batches = [1, 64] if args.quick else [1, 64, 1024]
    rows = run(batches, 2 if args.quick else 3)
    lines = [
        f"AC power flow, loads scaled per bus by U(0.9, 1.1), on {jax.devices()[0].device_kind} "
        f"({os.cpu_count()} cores): solves/s, median after compilation; accuracy against "
        "lightsim2grid's float64 Newton-Raphson.",
        "",
        "| case | solver | batch | solves/s | compile s | max abs. Vm error (pu) | converged |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, label, batch, rate, compile_s, err, conv in rows:
        c = "-" if compile_s is None else f"{compile_s:.1f}"
        e = (
            "reference"
            if err == 0.0 and "lightsim" in label
            else ("-" if err is None else f"{err:.1e}")
        )
        lines.append(f"| {name} | {label} | {batch} | {rate:.3g} | {c} | {e} | {conv:.0%} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
