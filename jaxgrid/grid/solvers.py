"""The feeder solvers an environment chooses with a params leaf, and what a failed solve
leaves behind.

``params.solver`` is an int32 leaf (:data:`SOLVERS`), so one ``vmap`` over params can
compare the linear and the nonlinear model. :func:`solve_feeder` picks the solver;
:func:`hold_failed` replaces the numbers of a solve that did not converge by ones that
carry no physics from it, so that nothing downstream (observations, state, info) is
computed from garbage while the environment reports the failure.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.grid.fallback import distflow_with_fallback
from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.lindistflow import lindistflow
from jaxgrid.grid.result import PowerFlowResult
from jaxgrid.numerics import full_precision

LINDISTFLOW, DISTFLOW = 0, 1
SOLVERS = {"lindistflow": LINDISTFLOW, "distflow": DISTFLOW}


@full_precision
def solve_feeder(feeder: Feeder, p_mw, q_mvar, solver, sweeps: int) -> PowerFlowResult:
    """The feeder solved for bus loads ``p_mw``, ``q_mvar`` ``(n_bus,)`` (positive =
    consumption) by LinDistFlow or by DistFlow (``sweeps`` sweeps, Newton-Raphson where
    they do not converge: :func:`~jaxgrid.grid.fallback.distflow_with_fallback`), as the
    int32 ``solver`` (a params leaf) says."""
    return jax.lax.cond(
        solver == DISTFLOW,
        lambda: distflow_with_fallback(feeder, p_mw, q_mvar, sweeps=sweeps),
        lambda: lindistflow(feeder, p_mw, q_mvar),
    )


def hold_failed(flow: PowerFlowResult, vm_last_pu) -> PowerFlowResult:
    """``flow`` where it converged; else the last voltages ``vm_last_pu`` ``(n_bus,)``,
    zero flows, losses and imports, ``converged`` False and the failed solve's mismatch."""
    held = jax.tree_util.tree_map(jnp.zeros_like, flow).replace(
        vm_pu=jnp.asarray(vm_last_pu, flow.vm_pu.dtype),
        converged=flow.converged,
        mismatch_pu=flow.mismatch_pu,
    )
    return jax.tree_util.tree_map(lambda a, b: jnp.where(flow.converged, a, b), flow, held)
