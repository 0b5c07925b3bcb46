"""The feeder solvers an environment chooses with a params leaf, and what a failed solve
leaves behind.

``params.solver`` is an int32 leaf (:data:`SOLVERS`), so one ``vmap`` over params can
compare the linear and the nonlinear model. :func:`solve_feeder` picks the solver for
the environments' solves, :func:`solve_feeder_by_newton` for a solve that a whole batch
shares; :func:`hold_failed` replaces the numbers of a solve that did not converge by
ones that carry no physics from it, so that nothing downstream (observations, state,
info) is computed from garbage while the environment reports the failure.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.grid.distflow_newton import distflow_newton
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


@full_precision
def solve_feeder_by_newton(feeder: Feeder, p_mw, q_mvar, solver) -> PowerFlowResult:
    """The feeder solved for bus loads ``p_mw``, ``q_mvar`` ``(n_bus,)`` by LinDistFlow or,
    where the int32 ``solver`` says DistFlow, by Newton-Raphson from LinDistFlow
    (:func:`~jaxgrid.grid.distflow_newton.distflow_newton`, its default iterations):
    for a solve that every environment of a batch shares, as a reset's does when its
    loads are params only (``smartgrid33-v0``'s idle feeder).

    Why not :func:`solve_feeder`: its sweeps with Newton where they did not converge
    pay for a batch of solves, and a shared solve is one solve, computed once, whose
    Newton fallback is a second solver in the program (a ``lax.cond``). Newton alone
    is the more robust of the two and one solve costs nothing beside a batch. Measured
    on ``smartgrid33-v0``'s ``jax.vmap(env.step)``, whose auto-reset solves the idle
    feeder (``benchmarks/compile_time.py``, before the states' ``start_failed``): 487
    kernels instead of 533, 9.5 % less LLVM IR, XLA's compile 0.1-0.4 s shorter and the
    trace 0.1 s longer (a second Newton traced), the voltages the same to float32
    round-off.
    """
    return jax.lax.cond(
        solver == DISTFLOW,
        lambda: distflow_newton(feeder, p_mw, q_mvar),
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
