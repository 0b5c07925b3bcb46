"""AC optimal power flow speed and accuracy: jaxgrid's ``acopf`` against pandapower.

    python benchmarks/transmission_acopf.py            # speed table + accuracy table
    python benchmarks/transmission_acopf.py --quick    # case9 and case30, smaller batches

Speed: solves per second of random load scenarios (every bus's load scaled by
U(0.8, 1.0), drawn before timing; above 1.0 some of case30's scenarios have no solution)
on MATPOWER's case9, case30 and case118. jaxgrid solves one scenario (batch 1) or 64 at
once (``jax.vmap``), jitted, float64 and float32; median of repeated runs after
compilation, compile time apart. pandapower's ``runopp`` solves the same scenarios one
after the other on ``pandapower.networks.caseN`` (its own conversion of the case: the
optimum differs from MATPOWER's by 0.03-0.3 %), and so does PYPOWER's ``opf`` (the solver
inside ``runopp``) on the file's own tables, without pandapower's conversions around it.

Accuracy: against PYPOWER's ``opf`` on the same tables at MIPS tolerances of 1e-9 (as in
``tests/dispatch/test_acopf.py``, which explains the choice): relative cost error,
largest LMP error, largest voltage error, largest power balance error, iterations.

BLAS runs on one thread (``--blas-threads``): on a shared 2-core machine OpenBLAS's
spinning threads contend with XLA's and with each other, and a 580x580 LU then takes
20x longer. The setting applies to pandapower as well.
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
sys.path.insert(0, str(ROOT / "tests" / "dispatch"))  # the tests' PYPOWER reference
CASE_DIR = ROOT / "jaxgrid/grid/cases/transmission"


def _scenarios(network, batch, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.8, 1.0, (batch, network.n_bus))
    return scale * np.asarray(network.pd_mw), scale * np.asarray(network.qd_mvar), scale


def jaxgrid_speed(case, batches, repeats):
    import jax
    import numpy as np

    from jaxgrid.dispatch import acopf
    from jaxgrid.grid import network_from_matpower

    network = network_from_matpower(case)
    rows = []
    for dtype in (np.float64, np.float32):
        for batch in batches:
            p, q, _ = _scenarios(network, batch)
            p, q = p.astype(dtype), q.astype(dtype)
            if batch == 1:
                fn = jax.jit(lambda p, q: acopf(network, p, q))
                args = (p[0], q[0])
            else:
                fn = jax.jit(jax.vmap(lambda p, q: acopf(network, p, q)))
                args = (p, q)
            seconds, compile_s, out = median_time(
                fn, args, repeats if batch > 1 else 3 * repeats, min_time=2.0
            )
            iterations = np.atleast_1d(np.asarray(out.iterations))
            converged = float(np.mean(np.asarray(out.converged)))
            name = f"jaxgrid acopf, {np.dtype(dtype).name}"
            rows.append(
                (case, name, batch, batch / seconds, seconds, iterations, converged, compile_s)
            )
    return rows


def pandapower_speed(case, solves):
    import numpy as np
    import pandapower as pp
    import pandapower.networks as pn
    import pandapower.pypower.idx_bus as idx_bus
    from pypower_acopf import matpower_tables, pypower_opf  # imports numpy: after BLAS setup

    from jaxgrid.grid import network_from_matpower

    network = network_from_matpower(case)
    _, _, scale = _scenarios(network, solves)
    rows = []

    net = getattr(pn, case)()  # buses 0..n-1 in the MATPOWER file's row order
    assert len(net.bus) == network.n_bus and list(net.bus.index) == list(range(network.n_bus))
    load_bus = net.load.bus.to_numpy()
    base_p, base_q = net.load.p_mw.to_numpy().copy(), net.load.q_mvar.to_numpy().copy()
    times, converged, costs = [], 0, []
    for k in range(solves):
        net.load["p_mw"] = base_p * scale[k, load_bus]
        net.load["q_mvar"] = base_q * scale[k, load_bus]
        t0 = time.perf_counter()
        try:
            pp.runopp(net, numba=False)
            converged += 1
            costs.append(float(net.res_cost))
        except pp.optimal_powerflow.OPFNotConverged:
            pass
        times.append(time.perf_counter() - t0)
    seconds = float(np.median(times))
    rows.append(
        (
            case,
            "pandapower runopp (pandapower.networks)",
            1,
            1 / seconds,
            seconds,
            None,
            converged / solves,
            None,
        )
    )

    ppc = matpower_tables(f"{CASE_DIR}/{case}.m")
    times, converged, iterations = [], 0, []
    for k in range(solves):
        case_k = {**ppc, "bus": ppc["bus"].copy()}
        case_k["bus"][:, idx_bus.PD] *= scale[k]
        case_k["bus"][:, idx_bus.QD] *= scale[k]
        t0 = time.perf_counter()
        res = pypower_opf(case_k, tol=1e-6)
        times.append(time.perf_counter() - t0)
        converged += bool(res["success"])
        iterations.append(res["iterations"])
    seconds = float(np.median(times))
    rows.append(
        (
            case,
            "PYPOWER opf in pandapower (same tables)",
            1,
            1 / seconds,
            seconds,
            np.asarray(iterations),
            converged / solves,
            None,
        )
    )
    return rows


def accuracy(cases):
    import jax
    import numpy as np
    import pandapower.pypower.idx_bus as idx_bus
    from pypower_acopf import matpower_tables, pypower_opf

    from jaxgrid.dispatch import acopf
    from jaxgrid.grid import network_from_matpower

    rows = []
    for case in cases:
        ref = pypower_opf(matpower_tables(f"{CASE_DIR}/{case}.m"))
        network = network_from_matpower(case)
        for dtype in (np.float64, np.float32):
            p, q = np.asarray(network.pd_mw, dtype), np.asarray(network.qd_mvar, dtype)
            res = jax.jit(lambda p, q, network=network: acopf(network, p, q))(p, q)
            rows.append(
                (
                    case,
                    np.dtype(dtype).name,
                    bool(res.converged),
                    abs(float(res.cost) - ref["f"]) / ref["f"],
                    float(np.max(np.abs(np.asarray(res.lmp) - ref["bus"][:, idx_bus.LAM_P]))),
                    float(np.max(np.abs(np.asarray(res.vm_pu) - ref["bus"][:, idx_bus.VM]))),
                    max(float(res.p_mismatch_mw), float(res.q_mismatch_mvar)),
                    max(
                        float(res.voltage_violation_pu),
                        float(res.flow_violation_mva),
                        float(res.pg_violation_mw),
                        float(res.qg_violation_mvar),
                    ),
                    int(res.iterations),
                    int(ref["iterations"]),
                )
            )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="case9 and case30, batch 1 and 8")
    parser.add_argument("--blas-threads", default="1", help="OpenBLAS/MKL threads (default 1)")
    parser.add_argument("--out", help="also write the tables to this markdown file")
    args = parser.parse_args(argv)
    if "numpy" in sys.modules:
        raise RuntimeError("set the BLAS threads before importing numpy")
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, args.blas_threads)
    warnings.simplefilter("ignore")
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)  # float64 is the reference; float32 rows too

    cases = ["case9", "case30"] if args.quick else ["case9", "case30", "case118"]
    batches = [1, 8] if args.quick else [1, 64]
    repeats = 3 if args.quick else 5
    solves = 10 if args.quick else 30
    rows = []
    for case in cases:
        rows += jaxgrid_speed(case, batches, repeats)
        rows += pandapower_speed(case, solves)
    import importlib.util

    numba = "yes" if importlib.util.find_spec("numba") else "no"
    lines = [
        f"AC-OPF solves/s on {jax.devices()[0].device_kind} ({os.cpu_count()} cores), "
        f"BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}, numba for pandapower: {numba}; "
        f"jaxgrid: median of >= {repeats} runs (and >= 2 s) after compilation; "
        f"pandapower: median of {solves} solves. Loads: every bus x U(0.8, 1.0).",
        "",
        "| case | solver | batch | solves/s | s per batch | iterations (median, max) "
        "| converged | compile s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case, name, batch, rate, seconds, iterations, converged, compile_s in rows:
        its = "-" if iterations is None else f"{np.median(iterations):.0f}, {np.max(iterations)}"
        comp = "-" if compile_s is None else f"{compile_s:.1f}"
        lines.append(
            f"| {case} | {name} | {batch} | {rate:.3g} | {seconds:.3g} | {its} "
            f"| {converged:.0%} | {comp} |"
        )
    lines += [
        "",
        "Against PYPOWER's opf on the same tables (MIPS tolerances 1e-9), at the case's load:",
        "",
        "| case | dtype | converged | cost rel. error | max LMP error (/MWh) | max vm error (pu) "
        "| max P/Q mismatch (MW, Mvar) | max limit violation | iterations (jaxgrid, PYPOWER) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    acc_cases = cases if args.quick else ["case5", "case9", "case14", "case30", "case57", "case118"]
    for case, dt, conv, cost, lmp, vm, mis, viol, its, ref_its in accuracy(acc_cases):
        lines.append(
            f"| {case} | {dt} | {'yes' if conv else 'no'} | {cost:.1e} | {lmp:.1e} | {vm:.1e} "
            f"| {mis:.1e} | {viol:.1e} | {its}, {ref_its} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
