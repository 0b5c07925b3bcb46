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
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "dispatch"))  # the tests' reference and instances


def _median_time(fn, args, repeats, min_time=1.0):
    import jax
    import numpy as np

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    compile_s = time.perf_counter() - t0
    times = []
    start = time.perf_counter()
    while len(times) < repeats or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), compile_s, out


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
                seconds, compile_s, out = _median_time(build(), args, repeats)
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
    repeats = 2 if args.quick else 3
    rows, highs_rate = run(batches, repeats, 50 if args.quick else 200)
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
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


def _highs_version() -> str:
    import highspy

    return f"{highspy.HIGHS_VERSION_MAJOR}.{highspy.HIGHS_VERSION_MINOR}"


if __name__ == "__main__":
    sys.exit(main())
