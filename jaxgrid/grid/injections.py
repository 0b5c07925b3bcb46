"""Bus injections of one solve: checked inputs, shunts and line charging.

Solvers work in MW and Mvar with impedances divided by the base power
(``r / base_mva`` in pu/MVA), which saves the per-unit conversions of every input and
output. Shunts that are known to be zero at trace time (a feeder closed over as a
constant with none, as in every bundled case) are left out of the computation.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.grid.feeder import Feeder
from jaxgrid.types import Array, float_dtype


class Injections(NamedTuple):
    """Loads of one solve, in the solve's dtype.

    ``p + g * v`` (MW) and ``q - b * v`` (Mvar) are the bus demands at squared voltage
    ``v`` (pu); ``g`` and ``b`` are ``None`` when the feeder has no shunts.
    """

    p: Array
    q: Array
    g: Array | None
    b: Array | None
    dtype: jnp.dtype


def _known_zero(*arrays) -> bool:
    return all(not isinstance(a, jax.core.Tracer) and not np.any(np.asarray(a)) for a in arrays)


def bus_injections(feeder: Feeder, p_mw, q_mvar) -> Injections:
    """Check the shapes of the bus loads (MW, Mvar, positive = consumption)."""
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
    p, q = p_mw.astype(dtype), q_mvar.astype(dtype)
    if _known_zero(feeder.gs_mw, feeder.bs_mvar, feeder.b_pu):
        return Injections(p=p, q=q, g=None, b=None, dtype=dtype)
    base = jnp.asarray(feeder.base_mva, dtype)
    half_b = 0.5 * jnp.asarray(feeder.b_pu, dtype) * base
    # half of each branch's charging at each of its ends, summed over a comparison of
    # every branch end with every bus: it fuses with its use, where two scatters were two
    # kernels of their own in every solver of a step (the topology is traced params)
    bus = jnp.arange(n_bus)
    ends = (jnp.asarray(feeder.branch_from)[:, None] == bus).astype(dtype) + (
        jnp.asarray(feeder.branch_to)[:, None] == bus
    ).astype(dtype)
    charging = jnp.sum(half_b[:, None] * ends, axis=0)
    return Injections(
        p=p,
        q=q,
        g=jnp.asarray(feeder.gs_mw, dtype),
        b=jnp.asarray(feeder.bs_mvar, dtype) + charging,
        dtype=dtype,
    )


def demand_at(inj: Injections, v) -> tuple[Array, Array]:
    """Bus demand (MW, Mvar) at squared voltages ``v``, shunts included."""
    if inj.g is None:
        return inj.p, inj.q
    return inj.p + inj.g * v, inj.q - inj.b * v
