"""Power flow speed and accuracy: jaxgrid's LinDistFlow and DistFlow against pandapower.

    python benchmarks/powerflow.py            # speed table (markdown) + accuracy table
    python benchmarks/powerflow.py --quick    # smaller batches, fewer repeats

Speed: batched, jitted solves per second of random load scenarios (every bus scaled by
U(0.5, 1.5), drawn before timing), median of repeated runs after compilation, compile
time reported apart; on one XLA device and with the batch sharded over all local
devices. Solvers: LinDistFlow, the DistFlow sweep, DistFlow by Newton-Raphson (6
iterations from LinDistFlow) and the sweep with the Newton fallback the environments
use; on case33bw the fallback also runs a batch where one solve in five is at 3.5x the
base load, near the nose of the PV curve, where the sweep does not converge. On a CPU the script first asks XLA for one host device per core
(``--xla_force_host_platform_device_count``), which must happen before JAX starts.
pandapower's Newton-Raphson ``runpp`` solves the same kind of scenarios one by one.

Accuracy: the largest voltage error of LinDistFlow and of DistFlow (10 iterations,
float32) against pandapower's AC power flow, per feeder and load level.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

from timing import median_time  # benchmarks/timing.py (the script's folder)


def _setup_devices() -> None:
    if "jax" in sys.modules:
        raise RuntimeError("set up devices before importing jax")
    n = os.cpu_count() or 1
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def speed(cases, batches, repeats):
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import jaxgrid.grid as grid

    devices = jax.devices()
    mesh = Mesh(devices, ("batch",))
    sharded = NamedSharding(mesh, PartitionSpec("batch"))
    solvers = {
        "lindistflow": lambda f: jax.vmap(lambda p, q: grid.lindistflow(f, p, q)),
        "distflow (10 it.)": lambda f: jax.vmap(lambda p, q: grid.distflow(f, p, q, iterations=10)),
        "distflow_newton (6 it.)": lambda f: jax.vmap(
            lambda p, q: grid.distflow_newton(f, p, q, iterations=6)
        ),
        "distflow_with_fallback": lambda f: jax.vmap(
            lambda p, q: grid.distflow_with_fallback(f, p, q)
        ),
    }
    rows = []
    for case in cases:
        feeder = grid.load_bundled(case)
        for batch in batches:
            key = jax.random.PRNGKey(batch)
            scale = jax.random.uniform(key, (batch, feeder.n_bus), minval=0.5, maxval=1.5)
            runs = [(name, build, scale) for name, build in solvers.items()]
            if case == "case33bw":  # the fallback with one solve in five near the nose
                heavy = jnp.where(jnp.arange(batch)[:, None] % 5 == 0, 3.5, scale)
                fallback = solvers["distflow_with_fallback"]
                runs.append(("distflow_with_fallback, 1 in 5 at 3.5x load", fallback, heavy))
            for name, build, s in runs:
                p = (s * jnp.asarray(feeder.p_load_mw)).astype(jnp.float32)
                q = (s * jnp.asarray(feeder.q_load_mvar)).astype(jnp.float32)
                one = jax.jit(build(feeder))
                seconds, compile_s, _ = median_time(one, (p, q), repeats, min_time=2.0)
                rate_1 = batch / seconds
                rate_all = None
                if len(devices) > 1 and batch % len(devices) == 0:
                    ps, qs = jax.device_put(p, sharded), jax.device_put(q, sharded)
                    seconds, _, _ = median_time(
                        jax.jit(build(feeder)), (ps, qs), repeats, min_time=2.0
                    )
                    rate_all = batch / seconds
                rows.append((case, name, batch, rate_1, rate_all, compile_s))
    return rows, len(devices)


def pandapower_speed(case: str, solves: int):
    import numpy as np
    import pandapower as pp

    import jaxgrid.grid as grid

    feeder = grid.load_bundled(case)
    rng = np.random.default_rng(0)
    net = grid.to_pandapower(feeder)
    base_p, base_q = net.load.p_mw.to_numpy().copy(), net.load.q_mvar.to_numpy().copy()
    try:
        import numba  # noqa: F401

        uses_numba = "yes"
    except ImportError:
        uses_numba = "no"
    times = []
    for _ in range(solves):
        s = rng.uniform(0.5, 1.5, len(base_p))
        net.load["p_mw"], net.load["q_mvar"] = base_p * s, base_q * s
        t0 = time.perf_counter()
        pp.runpp(net, numba=uses_numba == "yes")
        times.append(time.perf_counter() - t0)
    return 1.0 / float(np.median(times)), uses_numba


def accuracy(cases, loads):
    import numpy as np
    import pandapower as pp

    import jaxgrid.grid as grid

    rows = []
    for case in cases:
        feeder = grid.load_bundled(case)
        for s in loads:
            p, q = s * np.asarray(feeder.p_load_mw), s * np.asarray(feeder.q_load_mvar)
            net = grid.to_pandapower(feeder, p, q)
            pp.runpp(net, tolerance_mva=1e-9, numba=False)
            vm_ac = net.res_bus.vm_pu.to_numpy()
            lin = grid.lindistflow(feeder, p.astype(np.float32), q.astype(np.float32))
            dist = grid.distflow(feeder, p.astype(np.float32), q.astype(np.float32), iterations=10)
            rows.append(
                (
                    case,
                    s,
                    float(np.abs(np.asarray(lin.vm_pu) - vm_ac).max()),
                    float(np.abs(np.asarray(dist.vm_pu) - vm_ac).max()),
                    float(vm_ac.min()),
                )
            )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small batches and few repeats")
    parser.add_argument("--out", help="also write the tables to this markdown file")
    args = parser.parse_args(argv)
    _setup_devices()
    warnings.simplefilter("ignore")
    import jax

    batches = [1, 1024] if args.quick else [1, 256, 1024, 4096]
    repeats = 5 if args.quick else 30
    cases = ["case33bw"] if args.quick else ["case33bw", "case69", "case141"]
    rows, n_dev = speed(cases, batches, repeats)
    lines = [
        f"Power flow solves/s on {jax.devices()[0].device_kind} ({os.cpu_count()} cores), "
        f"float32, median of >= {repeats} runs (and >= 2 s) after compilation.",
        "",
        f"| feeder | solver | batch | solves/s, 1 device | solves/s, {n_dev} devices | compile s |",
        "|---|---|---|---|---|---|",
    ]
    for case, name, batch, r1, rall, c in rows:
        all_cell = f"{rall:.3g}" if rall else "-"
        lines.append(f"| {case} | {name} | {batch} | {r1:.3g} | {all_cell} | {c:.2f} |")
    for case in cases:
        rate, numba = pandapower_speed(case, 10 if args.quick else 40)
        lines.append(f"| {case} | pandapower runpp (numba: {numba}) | 1 | {rate:.3g} | - | - |")
    lines += [
        "",
        "Largest |vm - vm_AC| (pu) against pandapower's Newton-Raphson AC power flow, float32:",
        "",
        "| feeder | load | LinDistFlow | DistFlow (10 it.) | min vm_AC (pu) |",
        "|---|---|---|---|---|",
    ]
    for case, s, lin, dist, vmin in accuracy(
        ["case33bw", "case69", "case141"], [0.5, 1.0, 1.5, 2.0]
    ):
        lines.append(f"| {case} | x{s:g} | {lin:.2g} | {dist:.2g} | {vmin:.4f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
