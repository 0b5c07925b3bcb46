"""AC-OPF gradients at the solution (implicit function theorem on the KKT conditions):
accuracy against central differences and cost against the solve alone.

    python benchmarks/acopf_gradient.py                # case9, case30
    python benchmarks/acopf_gradient.py --out table.md

The instances are the gradient tests' (``tests/dispatch/test_acopf_gradients.py``):
case9 with branch 6 rated at 130 MVA (a flow limit and two voltage limits bind), case30
with its own ratings, float64. The scalar is the tests' random weighting of every
differentiated output (voltages, dispatch, flows, cost, LMPs, reactive and flow prices);
its gradient with respect to loads and cost coefficients (one jitted
``jax.value_and_grad``, one solve) is compared with central differences along a random
direction (steps of 1e-4 relative to each input, the solver's tolerance at 1e-12 so
that its round-off does not swamp the differences; the active set is the same at both
ends). Times: median of repeated calls after compilation, compile (first call) apart;
"value alone" is the weighted scalar without a gradient, at the default tolerance.
"""

from __future__ import annotations

import sys
from pathlib import Path

from timing import median_time  # benchmarks/timing.py (the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "dispatch"), str(ROOT / "tests")]

CASES = ("case9", "case30")


def run(cases, repeats):
    import jax
    import jax.numpy as jnp
    import test_acopf_gradients as points

    jax.config.update("jax_enable_x64", True)
    rows = []
    for name in cases:
        network = points._network(name)
        args = points._args(network)
        errors = []
        f = jax.jit(points._weighted(network))
        grads = jax.jit(jax.grad(lambda *a, f=f: f(*a)[0], argnums=(0, 2)))(*args)
        for i, g in zip((0, 2), grads):
            d = points._direction(i, args[i])
            up = [a + points.STEP * d if j == i else a for j, a in enumerate(args)]
            down = [a - points.STEP * d if j == i else a for j, a in enumerate(args)]
            numeric = float(f(*up)[0] - f(*down)[0]) / (2 * points.STEP)
            errors.append(abs(float(jnp.sum(g * d)) - numeric) / abs(numeric))
        weighted = points._weighted(network, tol=None)  # the default tolerance
        value = jax.jit(lambda *a, w=weighted: w(*a)[0])
        solve_s = median_time(value, args, repeats)[0]
        both = jax.jit(jax.value_and_grad(lambda *a, w=weighted: w(*a)[0], argnums=(0, 2)))
        seconds, first, _ = median_time(both, args, repeats)
        rows.append((name, "implicit", errors[0], errors[1], seconds, solve_s, first))
    return rows


if __name__ == "__main__":
    from dcopf_gradient import main  # the same table and command line

    main(run, CASES, __doc__)
