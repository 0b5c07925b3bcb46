"""Bus injections in per unit: checked inputs, shunts and line charging."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxgrid.grid.feeder import Feeder
from jaxgrid.types import Array, float_dtype


class Injections(NamedTuple):
    """Loads and shunts of one solve, in pu on ``feeder.base_mva``, in the solve's dtype.

    ``p + g * v`` and ``q - b * v`` are the bus demands at squared voltage ``v``.
    """

    p: Array
    q: Array
    g: Array
    b: Array
    dtype: jnp.dtype


def bus_injections(feeder: Feeder, p_mw, q_mvar) -> Injections:
    """Check the shapes of the bus loads (MW, Mvar, positive = consumption) and convert to pu."""
    p_mw, q_mvar = jnp.asarray(p_mw), jnp.asarray(q_mvar)
    n_bus = feeder.n_bus
    for name, arr in (("p_mw", p_mw), ("q_mvar", q_mvar)):
        if arr.shape != (n_bus,):
            raise ValueError(
                f"{name} must have shape ({n_bus},) (one entry per bus, in the feeder's bus "
                f"order), got {arr.shape}; use jax.vmap for batches"
            )
    dtype = jnp.promote_types(p_mw.dtype, q_mvar.dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = float_dtype()
    base = jnp.asarray(feeder.base_mva, dtype)
    half_b = 0.5 * jnp.asarray(feeder.b_pu, dtype)
    charging = (
        jnp.zeros(n_bus, dtype).at[feeder.branch_from].add(half_b).at[feeder.branch_to].add(half_b)
    )
    return Injections(
        p=p_mw.astype(dtype) / base,
        q=q_mvar.astype(dtype) / base,
        g=jnp.asarray(feeder.gs_mw, dtype) / base,
        b=jnp.asarray(feeder.bs_mvar, dtype) / base + charging,
        dtype=dtype,
    )
