"""Voltage angles recovered from a DistFlow or LinDistFlow result.

DistFlow works with voltage magnitudes only; the angles follow from the branch flows:
with ``V_i`` as the angle reference and ``I = (P - jQ) / |V_i|`` entering branch
``i -> j``, ``V_j = V_i - (r + jx) I``, so the angle drops over the branch by
``atan2(x P - r Q, |V_i|^2 - r P - x Q)``. Kept apart from the solvers because the
arctangent costs as much as the rest of a LinDistFlow solve and most environments never
look at angles.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.result import PowerFlowResult
from jaxgrid.numerics import arctan2, full_precision
from jaxgrid.types import Array


@full_precision
def voltage_angles(feeder: Feeder, result: PowerFlowResult) -> Array:
    """Bus voltage angles ``(n_bus,)`` relative to the slack, degrees."""
    dtype = result.vm_pu.dtype
    base = jnp.asarray(feeder.base_mva, dtype)
    r = jnp.asarray(feeder.r_pu, dtype)
    x = jnp.asarray(feeder.x_pu, dtype)
    p = result.p_branch_mw / base
    q = result.q_branch_mvar / base
    v_from = result.vm_pu[feeder.branch_from] ** 2
    drop = arctan2(x * p - r * q, v_from - r * p - x * q)
    return -jnp.degrees(drop @ jnp.asarray(feeder.path, dtype))
