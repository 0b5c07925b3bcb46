"""DC-OPF gradients: at the solution (implicit function theorem on the KKT conditions,
the default) against backpropagation through the interior point's iterations (what the
solver did before), accuracy and cost.

    python benchmarks/dcopf_gradient.py                # case9, case30, case118
    python benchmarks/dcopf_gradient.py --out table.md

The instances are the gradient tests' (``tests/dispatch/test_dcopf_gradients.py``):
case9 with two lines rated at 85 % of their unconstrained flow at 1.1x load, case30 and
case118 with six at 80 % (case30 at 0.9x load), quadratic costs, float64. The scalar is
a random weighting of dispatch, cost, LMPs and monitored flows; its gradient with
respect to loads and cost coefficients (one jitted ``jax.value_and_grad``, one solve) is
compared with central differences (steps of 1e-3 relative to each input, along a random
direction; the active set is the same at both ends). "unrolled" replaces the solver's
``_at_solution`` by its ``_interior_point`` (the same forward program without
``custom_root``), which is the code before the change. Times: median of repeated calls
after compilation, compile (first call) apart.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from timing import median_time  # benchmarks/timing.py (the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "dispatch"), str(ROOT / "tests")]

POINTS = {"case9": (1.1, 2, 0.85), "case30": (0.9, 6, 0.8), "case118": (1.0, 6, 0.8)}
STEP = 1e-3


def run(cases, repeats):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from instances import tightened

    from jaxgrid.dispatch import dcopf, monitored_branches
    from jaxgrid.grid import network_from_matpower

    jax.config.update("jax_enable_x64", True)
    module = sys.modules["jaxgrid.dispatch.dcopf"]
    implicit = module._at_solution
    rows = []
    for name in cases:
        scale, n_lines, factor = POINTS[name]
        network = tightened(network_from_matpower(name), n_lines=n_lines, factor=factor)
        monitored = monitored_branches(network)
        key = jax.random.split(jax.random.PRNGKey(0), 3)
        w_pg = jax.random.normal(key[0], (network.n_gen,))
        w_lmp = jax.random.normal(key[1], (network.n_bus,))
        w_flow = jax.random.normal(key[2], (len(monitored),))

        def f(pd, poly, network=network, monitored=monitored, w=(w_pg, w_lmp, w_flow)):
            r = dcopf(network, pd, cost_poly=poly, monitored=monitored)
            return (
                jnp.sum(w[0] * r.pg_mw) / 100.0
                + r.cost / 1e4
                + jnp.sum(w[1] * r.lmp) / 10.0
                + jnp.sum(w[2] * r.p_branch_mw[np.asarray(monitored)]) / 100.0
            )

        args = (scale * jnp.asarray(network.pd_mw), jnp.asarray(network.cost_poly))
        value = jax.jit(f)
        numeric = []
        for i, x in enumerate(args):
            d = jax.random.normal(jax.random.PRNGKey(i + 1), x.shape) * (jnp.abs(x) + 1e-3)
            up = [a + STEP * d if j == i else a for j, a in enumerate(args)]
            down = [a - STEP * d if j == i else a for j, a in enumerate(args)]
            numeric.append((d, float(value(*up) - value(*down)) / (2 * STEP)))
        solve_s = median_time(value, args, repeats)[0]
        for label, solver in (("implicit", implicit), ("unrolled", module._interior_point)):
            module._at_solution = solver
            try:
                grad = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))
                seconds, first, (_, grads) = median_time(grad, args, repeats)
            finally:
                module._at_solution = implicit
            errors = [abs(float(jnp.sum(g * d)) - n) / abs(n) for g, (d, n) in zip(grads, numeric)]
            rows.append((name, label, errors[0], errors[1], seconds, solve_s, first))
    return rows


def table(rows) -> str:
    lines = [
        "| case | gradient | rel. error d/d pd | rel. error d/d cost_poly "
        "| value+grad, ms | value alone, ms | compile+first, s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, label, e_pd, e_poly, s, solve_s, first in rows:
        lines.append(
            f"| {name} | {label} | {e_pd:.1e} | {e_poly:.1e} | {1e3 * s:.2f} "
            f"| {1e3 * solve_s:.2f} | {first:.1f} |"
        )
    return "\n".join(lines)


def main(run=run, cases=tuple(POINTS), doc=__doc__):
    """The command line of this script and of ``acopf_gradient.py``: ``run(cases,
    repeats)``'s rows as a table, printed and with ``--out`` written."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(cases), choices=list(cases))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = table(run(args.cases, args.repeats))
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
