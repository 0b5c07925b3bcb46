"""LinDistFlow: the linearised, lossless DistFlow power flow of a radial feeder.

With squared voltages ``v = |V|^2``, lossless branch flows ``P = A^-T p`` and the path
matrix ``A^-T`` (:attr:`Feeder.path`, branch ``k`` on the path to bus ``j``),

    v = v0 - 2 A^-1 (r * P + x * Q)   i.e.   v = v0 - 2 R p - 2 X q,

with ``R = A^-1 diag(r) A^-T``. Voltages are reported as ``sqrt(v)`` (the form linear in
``|V|`` doubles the error). LinDistFlow ignores losses, so it always reads voltages too
high under consumption; ``loss_mw`` is the usual a-posteriori estimate ``r (P^2+Q^2)/v``
and ``p_import_mw`` is the total load plus that estimate. Shunts are evaluated at the
slack voltage. Jittable and vmappable; one solve is two small matrix products.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.injections import bus_injections
from jaxgrid.grid.result import PowerFlowResult, assemble

V_FLOOR = 1e-2  # squared-voltage floor (0.1 pu) below which a solve is reported as collapsed


def lindistflow(feeder: Feeder, p_mw, q_mvar) -> PowerFlowResult:
    """Solve LinDistFlow for bus loads ``p_mw``, ``q_mvar`` ``(n_bus,)`` (positive = consumption)."""
    inj = bus_injections(feeder, p_mw, q_mvar)
    dtype = inj.dtype
    path = jnp.asarray(feeder.path, dtype)
    r = jnp.asarray(feeder.r_pu, dtype)
    x = jnp.asarray(feeder.x_pu, dtype)
    v0 = jnp.asarray(feeder.vm_slack_pu, dtype) ** 2
    p = inj.p + inj.g * v0
    q = inj.q - inj.b * v0
    p_branch = p @ path.T
    q_branch = q @ path.T
    v = v0 - 2.0 * (r * p_branch + x * q_branch) @ path
    ell = (p_branch**2 + q_branch**2) / jnp.maximum(v[feeder.branch_from], V_FLOOR)
    return assemble(
        feeder,
        inj,
        p_branch,
        q_branch,
        v,
        ell,
        p_import=jnp.sum(p) + jnp.sum(r * ell),
        q_import=jnp.sum(q) + jnp.sum(x * ell),
        converged=jnp.all(v > V_FLOOR),
        mismatch=jnp.zeros((), dtype),
    )
