"""Operating limits: voltage band violations and branch loading."""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.result import PowerFlowResult
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array


def voltage_violation_pu(vm_pu: Array, vmin_pu, vmax_pu) -> Array:
    """Distance of each bus voltage outside ``[vmin_pu, vmax_pu]``, pu (0 inside the band)."""
    return jnp.maximum(vmin_pu - vm_pu, 0.0) + jnp.maximum(vm_pu - vmax_pu, 0.0)


@full_precision
def branch_loading(feeder: Feeder, result: PowerFlowResult) -> Array:
    """Apparent power at the sending end over the rating, ``(n_branch,)`` (0 where unrated)."""
    s_mva = jnp.hypot(result.p_branch_mw, result.q_branch_mvar)
    rate = jnp.asarray(feeder.rate_mva, s_mva.dtype)
    return jnp.where(jnp.isfinite(rate), s_mva / rate, 0.0)
