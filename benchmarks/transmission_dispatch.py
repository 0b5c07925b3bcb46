"""DC-OPF speed and accuracy: jaxgrid's batched interior point against HiGHS on case118.

    python benchmarks/transmission_dispatch.py            # B = 1, 64, 1024 (a few minutes)
    python benchmarks/transmission_dispatch.py --quick    # B = 1, 64
    python benchmarks/transmission_dispatch.py --out results.md

The instances are the tests' (``tests/dispatch/instances.py``): case118 with the six most
loaded non-bridge lines rated at 80 % of their unconstrained flow (several bind), loads
scaled bus by bus by U(0.85, 1.15), cost coefficients by U(0.8, 1.2), one unit in ten
switched off; drawn before timing. jaxgrid solves a batch with one jitted
``vmap(dcopf)`` (loads, costs and commitments batched, the network shared) on one XLA
device (sharding the batch over two host devices hung in XLA's CPU runtime, jaxlib 0.10,
every thread idle); the time is the median of repeated runs after compilation, compile
time apart. HiGHS (``highspy``) solves the same instances one after
another, written independently in ``tests/dispatch/highs_dcopf.py``; its time is the
median of ``Highs.run`` alone (model building excluded). Accuracy columns: the largest
relative cost difference and the largest LMP difference (currency/MWh) against HiGHS
over the batch, and the share of solves that report ``converged``.

With ``--powerzoojax PATH`` (a checkout of PowerZooJax, which is not on PyPI:
``git clone https://github.com/powerzoojax/PowerZooJax``), a second table compares its
ADMM DC-OPF (``powerzoojax.envs.grid.dc_opf``, float32, its fixed iteration counts) with
jaxgrid and HiGHS on the same instances with linear costs (ADMM's objective is linear:
``c1`` only): speed beside accuracy, and the largest line-limit violation in MW. Its setup
is built by its own ``prepare_dcopf`` from the same PTDF, limits and costs.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from timing import median_time  # benchmarks/timing.py (the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "dispatch"))  # the tests' reference and instances


def run(batches, repeats, highs_solves):
    import jax
    import numpy as np
    from highs_dcopf import solve
    from instances import draw, tightened

    from jaxgrid.dispatch import dcopf
    from jaxgrid.grid import network_from_matpower

    jax.config.update("jax_enable_x64", True)
    network = tightened(network_from_matpower("case118"))
    rng = np.random.default_rng(0)
    pd, poly, commitment = draw(network, rng, max(batches))
    refs = [
        solve(network, pd[i], cost_poly=poly[i], commitment=commitment[i])
        for i in range(max(batches))
    ]
    highs_s = float(np.median([r["seconds"] for r in refs[:highs_solves]]))
    rows = []
    variants = [("float64, 40 it.", np.float64, 40), ("float64, 20 it.", np.float64, 20)]
    variants.append(("float32, 20 it.", np.float32, 20))
    for label, dtype, iterations in variants:
        for batch in batches:
            args = (pd[:batch].astype(dtype), poly[:batch].astype(dtype), commitment[:batch])

            def build(dtype=dtype, iterations=iterations):
                return jax.jit(
                    jax.vmap(
                        lambda p, c, u: dcopf(
                            network, p, cost_poly=c, commitment=u, iterations=iterations
                        )
                    )
                )

            print(f"{label}, batch {batch}", file=sys.stderr, flush=True)
            with jax.enable_x64(dtype == np.float64):
                seconds, compile_s, out = median_time(build(), args, repeats)
            cost = np.asarray(out.cost, float)
            lmp = np.asarray(out.lmp, float)
            cost_err = max(
                abs(cost[i] - refs[i]["cost"]) / abs(refs[i]["cost"]) for i in range(batch)
            )
            lmp_err = max(np.abs(lmp[i] - refs[i]["lmp"]).max() for i in range(batch))
            converged = float(np.mean(np.asarray(out.converged)))
            rows.append(
                (
                    label,
                    batch,
                    batch / seconds,
                    compile_s,
                    cost_err,
                    lmp_err,
                    converged,
                )
            )
    return rows, 1.0 / highs_s


def run_linear(batches, repeats, pzj_path):
    """Linear costs: jaxgrid's interior point and PowerZooJax's ADMM against HiGHS (LP)."""
    import types

    import jax
    import numpy as np
    from highs_dcopf import solve
    from instances import draw, tightened

    from jaxgrid.dispatch import dcopf
    from jaxgrid.grid import network_from_matpower, ptdf

    sys.path.insert(0, str(pzj_path))
    from powerzoojax.envs.grid.dc_opf import dc_opf, prepare_dcopf

    jax.config.update("jax_enable_x64", True)
    network = tightened(network_from_matpower("case118"))
    pd, poly, commitment = draw(network, np.random.default_rng(1), max(batches))
    poly[:, :, 0] = 0.0  # linear costs: ADMM's objective
    refs = [
        solve(network, pd[i], cost_poly=poly[i], commitment=commitment[i])
        for i in range(max(batches))
    ]
    ref_cost = np.array([r["cost"] for r in refs])
    ref_lmp = np.stack([r["lmp"] for r in refs])
    highs_s = float(np.median([r["seconds"] for r in refs]))
    shift = np.asarray(ptdf(network), float)  # (n_branch, n_bus), MW per MW
    gen_at_bus = np.zeros((network.n_bus, network.n_gen))
    gen_at_bus[np.asarray(network.gen_bus), np.arange(network.n_gen)] = 1.0
    rate = np.asarray(network.rate_mva, float)
    limited = np.isfinite(rate)
    on0 = np.asarray(network.gen_in_service)
    # PowerZooJax reads 0 as "no limit" and puts 1e5 MW there
    cap = np.where(limited, rate, 0.0)

    def accuracy(cost, lmp, flows):
        cost_err = float(
            np.max(np.abs(cost - ref_cost[: len(cost)]) / np.abs(ref_cost[: len(cost)]))
        )
        lmp_err = float(np.max(np.abs(lmp - ref_lmp[: len(cost)])))
        over = np.maximum(np.abs(flows) - np.where(limited, rate, np.inf), 0.0)
        return cost_err, lmp_err, float(np.max(over))

    rows = []
    for batch in batches:
        args = (pd[:batch], poly[:batch], commitment[:batch])
        for label, dtype, iterations in (
            ("float64, 40 it.", np.float64, 40),
            ("float32, 20 it.", np.float32, 20),
        ):
            fn = jax.jit(
                jax.vmap(
                    lambda p, c, u, it=iterations: dcopf(
                        network, p, cost_poly=c, commitment=u, iterations=it
                    )
                )
            )
            with jax.enable_x64(dtype == np.float64):
                typed = tuple(a.astype(dtype) if a.dtype.kind == "f" else a for a in args)
                seconds, compile_s, out = median_time(fn, typed, repeats)
            acc = accuracy(
                np.asarray(out.cost, float),
                np.asarray(out.lmp, float),
                np.asarray(out.p_branch_mw, float),
            )
            rows.append((f"jaxgrid dcopf ({label})", batch, batch / seconds, compile_s, *acc))
        for iterations in (200, 1000):
            units = []
            for i in range(batch):  # ADMM's cost vector lives in its setup: one per instance
                case = types.SimpleNamespace(
                    PTDF=shift,
                    nodes_units_map=gen_at_bus,
                    line_cap=cap,
                    line_floor=-cap,
                    unit_cost_a=np.zeros(network.n_gen),
                    unit_cost_b=np.zeros(network.n_gen),
                    unit_cost_c=poly[i, :, 1],
                    unit_p_min=np.asarray(network.pmin_mw, float),
                    unit_p_max=np.asarray(network.pmax_mw, float),
                    n_units=network.n_gen,
                    n_lines=network.n_branch,
                    n_nodes=network.n_bus,
                )
                units.append(prepare_dcopf(case))
            setups = jax.tree_util.tree_map(lambda *xs: jax.numpy.stack(xs), *units)
            fn = jax.jit(
                jax.vmap(lambda s, p, u, it=iterations: dc_opf(s, p, commitment=u, max_iter=it))
            )
            with jax.enable_x64(False):
                typed = (
                    setups,
                    np.asarray(args[0], np.float32),
                    np.asarray(args[2] & on0, np.float32),
                )
                seconds, compile_s, out = median_time(fn, typed, repeats)
            pg = np.asarray(out.unit_power, float)
            on = args[2] & on0
            cost = np.sum(np.where(on, poly[:batch, :, 1] * pg + poly[:batch, :, 2], 0.0), axis=1)
            flows = pg @ (shift @ gen_at_bus).T - args[0] @ shift.T
            acc = accuracy(cost, np.asarray(out.lmp, float), flows)
            rows.append(
                (
                    f"PowerZooJax ADMM ({iterations} it., float32)",
                    batch,
                    batch / seconds,
                    compile_s,
                    *acc,
                )
            )
    return rows, 1.0 / highs_s


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="B = 1, 64 and few repeats")
    parser.add_argument("--out", help="also write the table to this markdown file")
    parser.add_argument("--powerzoojax", help="a PowerZooJax checkout: compare its ADMM DC-OPF")
    parser.add_argument("--linear-only", action="store_true", help="only the linear-cost table")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    batches = [1, 64] if args.quick else [1, 64, 1024]
    repeats = 2 if args.quick else 3
    lines = []
    if not args.linear_only:
        lines += _quadratic_table(batches, repeats, args.quick)
    if args.powerzoojax:
        lines += _linear_table(batches, repeats, args.powerzoojax)
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


def _linear_table(batches, repeats, pzj_path) -> list[str]:
    import jax

    rows, highs_rate = run_linear(batches, repeats, pzj_path)
    lines = [
        "",
        f"DC-OPF on case118 with linear costs (ADMM's objective; 6 lines tightened, random "
        f"loads, costs and commitments) on {jax.devices()[0].device_kind} "
        f"({os.cpu_count()} cores): accuracy against HiGHS (LP).",
        "",
        "| solver | batch | solves/s | compile s | max rel. cost error "
        "| max LMP error (currency/MWh) | max line overload (MW) |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, batch, rate, compile_s, cost_err, lmp_err, over in rows:
        lines.append(
            f"| {label} | {batch} | {rate:.3g} | {compile_s:.1f} | {cost_err:.1e} "
            f"| {lmp_err:.1e} | {over:.2g} |"
        )
    lines.append(
        f"| HiGHS {_highs_version()} (LP, one after another) | 1 | {highs_rate:.3g} | - "
        "| reference | reference | - |"
    )
    return lines


def _quadratic_table(batches, repeats, quick) -> list[str]:
    import jax

    rows, highs_rate = run(batches, repeats, 50 if quick else 200)
    lines = [
        f"DC-OPF on case118 (6 lines tightened, quadratic costs, random loads, costs and "
        f"commitments) on {jax.devices()[0].device_kind} ({os.cpu_count()} cores): solves/s, "
        f"median of >= {repeats} runs after compilation; accuracy against HiGHS.",
        "",
        "| solver | batch | solves/s | compile s | max rel. cost error "
        "| max LMP error (currency/MWh) | converged |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, batch, rate, compile_s, cost_err, lmp_err, conv in rows:
        lines.append(
            f"| jaxgrid dcopf ({label}) | {batch} | {rate:.3g} | {compile_s:.1f} "
            f"| {cost_err:.1e} | {lmp_err:.1e} | {conv:.0%} |"
        )
    lines.append(
        f"| HiGHS {_highs_version()} (QP, one after another) | 1 | {highs_rate:.3g} | - "
        "| reference | reference | - |"
    )
    return lines


def _highs_version() -> str:
    import highspy

    return f"{highspy.HIGHS_VERSION_MAJOR}.{highspy.HIGHS_VERSION_MINOR}"


if __name__ == "__main__":
    sys.exit(main())
