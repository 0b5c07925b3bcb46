"""Flexible loads: curtail demand, or defer it to a buffer that must be served in time.

Each step a flexible load has a base demand ``d`` (MW). Its two actions, in [0, 1] and
[-1, 1], curtail up to ``curtail_cap`` (energy lost, a discomfort) and shift up to
``shift_cap``: positive defers demand into a buffer, negative serves deferred demand
(oldest first). Deferred energy ages one slot per step; what reaches the end of the
``window`` is served at once, whatever the action, so every deferred MWh is served within
``window`` steps. Buffers are ``(n, window)`` MWh by age.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from flax import struct

from jaxgrid.types import Array


@struct.dataclass
class FlexLoadParams:
    """Each field ``(n,)``.

    Attributes:
        curtail_cap_mw: most demand that may be curtailed, MW.
        shift_cap_mw: most demand that may be deferred or recovered in a step, MW.
    """

    curtail_cap_mw: Array
    shift_cap_mw: Array


class FlexLoadStep(NamedTuple):
    """Result of one step."""

    buffer: Array  # (n, window) deferred energy by age after the step, MWh
    p_mw: Array  # (n,) demand drawn from the grid
    curtailed_mw: Array  # (n,) demand dropped
    deferred_mw: Array  # (n,) demand moved into the buffer this step
    served_mw: Array  # (n,) deferred demand served this step (chosen and forced)
    forced_mw: Array  # (n,) deferred demand served because its window ran out


def flexload_step(
    buffer: Array, demand_mw: Array, curtail: Array, shift: Array, dt_h, params: FlexLoadParams
) -> FlexLoadStep:
    """Enact ``curtail`` in [0, 1] and ``shift`` in [-1, 1] against ``demand_mw`` for ``dt_h`` hours."""
    demand = jnp.maximum(demand_mw, 0.0)
    curtailed = jnp.minimum(jnp.clip(curtail, 0.0, 1.0) * params.curtail_cap_mw, demand)
    remaining = demand - curtailed
    deferred = jnp.minimum(jnp.maximum(shift, 0.0) * params.shift_cap_mw, remaining)
    # recover deferred energy, oldest first: take from each age slot what is left to take
    wanted = jnp.maximum(-shift, 0.0) * params.shift_cap_mw * dt_h  # MWh
    oldest_first = buffer[:, ::-1]
    before = jnp.cumsum(oldest_first, axis=1) - oldest_first  # energy in older slots
    taken = jnp.clip(wanted[:, None] - before, 0.0, oldest_first)[:, ::-1]
    left = buffer - taken
    forced = left[:, -1]  # the oldest slot must be served now
    aged = jnp.concatenate([(deferred * dt_h)[:, None], left[:, :-1]], axis=1)
    served = (jnp.sum(taken, axis=1) + forced) / dt_h
    return FlexLoadStep(
        buffer=aged,
        p_mw=remaining - deferred + served,
        curtailed_mw=curtailed,
        deferred_mw=deferred,
        served_mw=served,
        forced_mw=forced / dt_h,
    )
