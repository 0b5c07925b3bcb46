"""DistFlow by the sweep, and by Newton-Raphson only where the sweep did not converge.

The sweep (:func:`~jaxgrid.grid.distflow.distflow`) is cheap and converges on almost
every operating point an environment visits; near the nose of the PV curve it slows
down or diverges, while Newton (:func:`~jaxgrid.grid.distflow_newton.distflow_newton`)
still finds the solution but costs several sweeps' worth per solve. Running Newton for
every solve would make every feeder environment pay for the few hard ones.

Under ``jax.vmap`` (``vmap(env.step)``, ``step_batch``) a per-solve ``lax.cond`` would
compute both branches for the whole batch, so this module gives the batched solve its
own rule (``jax.custom_batching.custom_vmap``): the solves the sweep left unconverged
are gathered, :data:`CAPACITY` at a time, and solved by Newton; a batch where every
sweep converged costs no Newton at all. Measured on case33bw at 4096 solves (2-core CPU,
``voltage33-v0`` operating points): one Newton round costs about as much for 1 pending
solve as for its whole capacity, and sweeps leave a few solves just above their
tolerance in most large batches, so the capacity is small and fixed: with 64, a batch
where 0.1 % of the solves need Newton runs at 70-75 % of the sweep's speed (a quarter of
the batch per round: 17 %) and one where 19 % do at 20 % (a quarter: 16 %). The rounds
sit behind a ``lax.cond`` on whether any solve is pending: a while loop that never runs
still cost about 140 us a call at batch 1 on case141. Unbatched (a jitted
single environment) it is a ``lax.cond``. The result is the same as running Newton on
exactly the unconverged solves, whichever way it is batched (a test checks this).

Not differentiable (``custom_vmap`` has no autodiff rule); differentiate
:func:`~jaxgrid.grid.distflow.distflow` or the Newton solver directly.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from jaxgrid.grid.distflow import distflow
from jaxgrid.grid.distflow_newton import distflow_newton
from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.result import PowerFlowResult

CAPACITY = 64  # solves of a batch Newton takes per round (fewer when the batch is smaller)


def distflow_with_fallback(
    feeder: Feeder, p_mw, q_mvar, sweeps: int = 10, newton_iterations: int = 3
) -> PowerFlowResult:
    """Solve DistFlow for bus loads ``p_mw``, ``q_mvar`` ``(n_bus,)`` (positive = consumption):
    ``sweeps`` sweeps, then, where they did not converge, ``newton_iterations`` of
    Newton-Raphson from the sweep's last iterate. ``converged`` is False only where Newton
    did not converge either: on the 300 hard points of ``voltage33-v0`` measured
    (:mod:`jaxgrid.grid.distflow_newton`), exactly those without an AC solution; 2 Newton
    iterations after 10 sweeps found every solvable one."""
    swept = distflow(feeder, p_mw, q_mvar, iterations=sweeps)
    return _newton_where_unconverged(int(newton_iterations))(feeder, p_mw, q_mvar, swept)


@functools.cache
def _newton_where_unconverged(iterations: int):
    """``f(feeder, p, q, swept)``: ``swept`` where it converged, else Newton's solve."""

    def newton(feeder, p, q, swept):
        return distflow_newton(feeder, p, q, iterations=iterations, start=swept)

    @custom_vmap
    def fallback(feeder, p, q, swept):
        return jax.lax.cond(swept.converged, lambda: swept, lambda: newton(feeder, p, q, swept))

    @fallback.def_vmap
    def batched(axis_size, in_batched, feeder, p, q, swept):
        feeder_b, p_b, q_b, swept_b = in_batched
        swept = jax.tree_util.tree_map(
            lambda leaf, b: leaf if b else jnp.broadcast_to(leaf, (axis_size, *leaf.shape)),
            swept,
            swept_b,
        )
        all_batched = jax.tree_util.tree_map(lambda _: True, swept)
        inputs, inputs_b = (feeder, p, q, swept), (feeder_b, p_b, q_b, all_batched)
        axes = jax.tree_util.tree_map(lambda b: 0 if b else None, inputs_b)
        capacity = min(axis_size, CAPACITY)

        def solve_some(state):
            pending, result = state
            (index,) = jnp.nonzero(pending, size=capacity, fill_value=axis_size)
            picked = jax.tree_util.tree_map(
                lambda b, leaf: jnp.take(leaf, index, axis=0, mode="clip") if b else leaf,
                inputs_b,
                inputs,
            )
            solved = jax.vmap(newton, in_axes=axes)(*picked)
            result = jax.tree_util.tree_map(
                lambda old, new: old.at[index].set(new, mode="drop"), result, solved
            )
            return pending.at[index].set(False, mode="drop"), result

        start = (~swept.converged, swept)
        _, result = jax.lax.cond(
            jnp.any(start[0]),
            lambda s: jax.lax.while_loop(lambda state: jnp.any(state[0]), solve_some, s),
            lambda s: s,
            start,
        )
        return result, all_batched

    return fallback
