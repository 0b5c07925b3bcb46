"""Automatic regulator control against OpenDSS's ``RegControl`` on the bundled IEEE feeders.

    python benchmarks/regulator_opendss.py          # float64 table (markdown)
    python benchmarks/regulator_opendss.py --f32    # the same in float32 (the default)

For every feeder and load multiplier (0.7, 1.0, 1.3), from neutral taps: OpenDSS's static
snapshot solve (``Set ControlMode=Static``, tolerance 1e-12; the cases of
tests/grid/test_regulator.py) against ``solve_with_regulators`` (15 rounds): the settled
tap numbers of each, OpenDSS's control iterations against our rounds that moved a tap (plus
the final one that found every control in band), the largest line-to-neutral voltage
difference (pu) and the time of one jitted solve after compilation (fastest of three,
ms, on the CPU). Needs dss-python (the
``opendss`` extra).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "grid"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--f32", action="store_true", help="float32 instead of float64")
    args = parser.parse_args()
    if not args.f32:
        jax.config.update("jax_enable_x64", True)
    from test_regulator import _opendss_static  # the tests' OpenDSS run, shared

    from jaxgrid.devices.regulator import load_regcontrols, solve_with_regulators
    from jaxgrid.grid.three_phase import BUNDLED, load_feeder3

    solve = jax.jit(solve_with_regulators)
    precision = "float32" if args.f32 else "float64"
    print(f"| feeder | load | OpenDSS taps | jaxgrid taps | iterations (OpenDSS / ours) "
          f"| max dV (pu) | solve (ms) |  ({precision})")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name in BUNDLED:
        feeder, settings = load_feeder3(name), load_regcontrols(name)
        neutral = feeder.replace(tap_pu=np.ones(feeder.n_regulator))
        for scale in (0.7, 1.0, 1.3):
            taps_ref, v_ref, iterations = _opendss_static(name, scale)
            out = jax.block_until_ready(solve(neutral, settings, scale))
            times = []
            for _ in range(3):  # the fastest of three, after compilation
                start = time.perf_counter()
                out = jax.block_until_ready(solve(neutral, settings, scale))
                times.append(1e3 * (time.perf_counter() - start))
            elapsed = min(times)
            vm_ref = np.abs(v_ref) / np.asarray(feeder.vbase_v)
            dv = np.max(np.abs(np.asarray(out.power_flow.vm_pu) - vm_ref))
            ours = np.asarray(out.tap_steps).tolist()
            rounds = int(out.rounds_moving) + int(bool(out.settled))
            settled = "" if bool(out.settled) else " (not settled)"
            print(
                f"| {name} | x{scale} | {taps_ref} | {ours}{settled} | {iterations} / {rounds} "
                f"| {dv:.1e} | {elapsed:.0f} |"
            )


if __name__ == "__main__":
    main()
