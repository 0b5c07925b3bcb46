"""LinDistFlow: the linearised, lossless DistFlow power flow of a radial feeder.

With squared voltages ``v = |V|^2``, lossless branch flows ``P = A^-T p`` and the path
matrix ``A^-T`` (:attr:`Feeder.path`, branch ``k`` on the path to bus ``j``),

    v = v0 - 2 A^-1 (r * P + x * Q)   i.e.   v = v0 - 2 R p - 2 X q,

with ``R = A^-1 diag(r) A^-T``. Voltages are reported as ``sqrt(v)`` (the form linear in
``|V|`` doubles the error). LinDistFlow ignores losses, so it always reads voltages too
high under consumption; ``loss_mw`` is the usual a-posteriori estimate ``r (P^2+Q^2)/v``
and ``p_import_mw`` is the total load plus that estimate. Shunts are evaluated at the
slack voltage. Jittable and vmappable; one solve is four small matrix products. Sums
over buses and branches are products with ones (:func:`~jaxgrid.numerics.sum_last_axis`),
and the from-bus voltages a product rather than a gather: timing variants of a jitted
batch of 1024 case33bw solves on XLA's CPU backend, the reductions took as long as the
three path products and a gather of the from-bus voltages half as long again; with
products the batch ran at 2.9-3.3e6 solves/s instead of 2.0e6 (``python
benchmarks/powerflow.py`` times the solvers).

**Collapse.** A linear model always has a solution, so ``converged`` says whether the
loading is one where the AC power flow can have one: it is False when a squared voltage
falls below :data:`V_COLLAPSE` (0.4 pu^2, 0.63 pu). For a single line a solution needs
``v >= v0 / 2`` in LinDistFlow terms; measured with pandapower's Newton-Raphson, uniform
load scaling of case33bw, case69 and case141 collapses where LinDistFlow reads 0.40-0.46
(solvable points read above 0.43), and on 300 hard operating points of ``voltage33-v0``
every point below 0.5 had no AC solution. The floor is a documented approximation, not
a proof: LinDistFlow can read above it where the AC power flow has already collapsed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.injections import bus_injections, demand_at
from jaxgrid.grid.result import PowerFlowResult
from jaxgrid.numerics import full_precision, sum_last_axis

V_FLOOR = 1e-2  # squared-voltage floor (0.1 pu) of the nonlinear solvers: below it, collapsed
V_COLLAPSE = 0.4  # squared voltage (pu^2) below which LinDistFlow reports voltage collapse


@jax.jit  # one program when called eagerly (docs: Physics, Solvers)
@full_precision
def lindistflow(feeder: Feeder, p_mw, q_mvar) -> PowerFlowResult:
    """Solve LinDistFlow for bus loads ``p_mw``, ``q_mvar`` ``(n_bus,)`` (positive = consumption)."""
    inj = bus_injections(feeder, p_mw, q_mvar)
    dtype = inj.dtype
    path = jnp.asarray(feeder.path, dtype)
    base = jnp.asarray(feeder.base_mva, dtype)
    r = jnp.asarray(feeder.r_pu, dtype) / base  # pu per MW: v in pu, flows in MW
    x = jnp.asarray(feeder.x_pu, dtype) / base
    v0 = jnp.asarray(feeder.vm_slack_pu, dtype) ** 2
    p, q = demand_at(inj, v0)
    p_branch = p @ path.T
    q_branch = q @ path.T
    drop = r * p_branch + x * q_branch
    v = v0 - 2.0 * drop @ path
    v_from = v0 - 2.0 * drop @ path[:, feeder.branch_from]
    current_sq = (p_branch**2 + q_branch**2) / jnp.maximum(v_from, V_FLOOR)  # MVA^2 per pu
    loss_branch = r * current_sq
    loss = sum_last_axis(loss_branch)
    collapsed = sum_last_axis((v <= V_COLLAPSE).astype(dtype))
    return PowerFlowResult(
        vm_pu=jnp.sqrt(jnp.maximum(v, 0.0)),
        p_branch_mw=p_branch,
        q_branch_mvar=q_branch,
        loss_branch_mw=loss_branch,
        loss_mw=loss,
        p_import_mw=sum_last_axis(p) + loss,
        q_import_mvar=sum_last_axis(q) + sum_last_axis(x * current_sq),
        converged=collapsed == 0,
        mismatch_pu=jnp.zeros((), dtype),
    )
