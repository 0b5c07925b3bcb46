"""Accuracy of the unbalanced power flow against OpenDSS on the bundled IEEE feeders.

    python benchmarks/three_phase_opendss.py          # float64 table (markdown)
    python benchmarks/three_phase_opendss.py --f32    # the same in float32 (the default)

For every feeder, load multiplier (0.7, 1.0, 1.3) and with/without single-phase PV on
several phases, phase to ground and phase to phase (the cases of tests/grid/test_three_phase_opendss.py): OpenDSS
(dss-python) at the bundled feeder's fixed taps with its tolerance at 1e-12, against
``unbalanced_power_flow`` (its default 40 iterations); the largest line-to-neutral magnitude error
(pu), line-to-line magnitude error (pu), angle error (degrees) and the relative loss
error. Needs dss-python (the ``opendss`` extra).
"""

from __future__ import annotations

import argparse
import sys
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
    from test_three_phase_opendss import (  # the tests' OpenDSS runs, shared
        PV,
        PV_LL,
        _line_to_line,
        _opendss_solution,
        _pv_arrays,
    )

    from jaxgrid.grid.three_phase import BUNDLED, load_feeder3, unbalanced_power_flow

    solve = jax.jit(unbalanced_power_flow)
    precision = "float32" if args.f32 else "float64"
    print(f"| feeder | load | PV | max dV LN (pu) | max dV LL (pu) | max dangle (deg) "
          f"| loss rel. error | converged |  ({precision})")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name in BUNDLED:
        feeder = load_feeder3(name)
        for scale in (0.7, 1.0, 1.3):
            for pv in (False, True):
                v_ref, loss_ref, _, _ = _opendss_solution(name, feeder, scale, pv)
                gen = _pv_arrays(name, feeder) if pv else (None,) * 4
                result = jax.device_get(solve(feeder, scale, *gen))
                vbase = np.asarray(feeder.vbase_v)
                v = np.asarray(result.v_volt, complex)
                d_ln = np.max(np.abs(np.abs(v) - np.abs(v_ref)) / vbase)
                ll, pair = _line_to_line(feeder, v)
                ll_ref, _ = _line_to_line(feeder, v_ref)
                base = np.sqrt(3) * vbase[np.max(np.asarray(feeder.bus_nodes), axis=1)]
                d_ll = np.max(
                    np.where(pair, np.abs(np.abs(ll) - np.abs(ll_ref)), 0) / base[:, None]
                )
                d_va = np.max(np.abs(np.angle(v / v_ref, deg=True)))
                d_loss = abs(float(result.loss_kw) - loss_ref) / loss_ref
                pv_text = f"{len(PV[name])} LN + {len(PV_LL[name])} LL" if pv else "-"
                print(f"| {name} | x{scale} | {pv_text} | {d_ln:.1e} | {d_ll:.1e} | {d_va:.1e} "
                      f"| {d_loss:.1e} | {bool(result.converged)} |")  # fmt: skip


if __name__ == "__main__":
    main()
