"""Seconds from ``import jaxgrid`` to an environment in hand: ``jaxgrid.make(name)`` in a
fresh Python process per run, as a user's script or notebook first meets it.

    python benchmarks/make_time.py [--envs NAME ...] [--runs N] [--out FILE]

Each run is a new process with JAX's persistent compilation cache off, so whatever
``make`` computes with JAX (ratings, screenings, matrices built from the network) is
compiled in it. Median over ``--runs`` processes (default 3) of the import and of the
``make`` alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from timing import add_row, emit_table

ONE_RUN = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import jaxgrid
t1 = time.perf_counter()
jaxgrid.make(sys.argv[1])
t2 = time.perf_counter()
print(json.dumps([t1 - t0, t2 - t1]))
"""


def measure(name: str, runs: int) -> tuple[float, float]:
    """``(import s, make s)``: medians over ``runs`` fresh processes."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    times = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", ONE_RUN, name], capture_output=True, text=True, env=env
        )
        if out.returncode != 0:
            raise RuntimeError(f"{name}: {out.stderr.strip().splitlines()[-1]}")
        times.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = np.median(np.asarray(times), axis=0)
    return float(first), float(second)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="*", help="only these environments")
    parser.add_argument("--runs", type=int, default=3, help="processes per environment")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    import jaxgrid

    lines = [
        f"Seconds in a fresh process ({os.cpu_count()} cores), median of {args.runs} "
        "processes, JAX's persistent compilation cache off.",
        "",
        "| environment | import jaxgrid s | make s |",
        "|---|---|---|",
    ]
    for name in args.envs or jaxgrid.list_envs():
        imported, made = measure(name, args.runs)
        add_row(lines, f"| {name} | {imported:.1f} | {made:.1f} |")
    emit_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
