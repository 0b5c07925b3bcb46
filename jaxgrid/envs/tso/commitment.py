"""The commitment rules a transmission operator's request must obey, as array functions.

A request switches units on or off; the rules refuse what a unit cannot do:

- **minimum up and down times**: a unit that started (stopped) fewer than
  ``min_up_steps`` (``min_down_steps``) steps ago stays on (off);
- **shut-down ramp**: a unit may stop only from an output at most ``shutdown_ramp_mw``
  (else it stays on and ramps down); the output comes from a dispatch, so one within
  the dispatch's :func:`~jaxgrid.dispatch.dcopf.tolerance_mw` above it counts as at it
  (the interior point leaves a unit at its minimum, here often its shut-down ramp,
  slightly above it: measured, 9 of 439 refusals in ``tso118-v0``'s random rollouts
  were by 3e-14 to 2e-11 MW in float64, 8 by 6e-5 to 1e-2 MW in float32);

and then bound each committed unit's output in the step (the **ramp window**): within
``ramp_down_mw``/``ramp_up_mw`` of its last output if it stays on, in
``[pmin, startup_ramp_mw]`` if it starts. Everything is elementwise over the units: no
loop, any leading batch axes.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxgrid.dispatch.dcopf import tolerance_mw
from jaxgrid.envs.tso.fleet import UnitParams
from jaxgrid.types import Array


class Commitment(NamedTuple):
    """The outcome of a request, ``(n_gen,)`` each.

    Attributes:
        status: bool, units on line in the step.
        started: bool, units that start in the step.
        refused_min_up_down: bool, switches refused by the minimum up or down time.
        refused_ramp_mw: output above the shut-down ramp of units whose stop was refused,
            MW (0 elsewhere).
        p_low_mw, p_high_mw: the ramp window of each committed unit, MW (0 when off).
    """

    status: Array
    started: Array
    refused_min_up_down: Array
    refused_ramp_mw: Array
    p_low_mw: Array
    p_high_mw: Array


def commit(request: Array, status: Array, time_in_state: Array, p_mw: Array, units: UnitParams):
    """Apply the rules to ``request`` (bool, units asked to be on).

    Args:
        request: ``(n_gen,)`` bool, the requested status.
        status: ``(n_gen,)`` bool, the status in the last step.
        time_in_state: ``(n_gen,)`` int32 steps since the unit's last switch.
        p_mw: ``(n_gen,)`` output in the last step, MW.
        units: the fleet.

    Returns:
        :class:`Commitment`.
    """
    locked = jnp.where(
        status, time_in_state < units.min_up_steps, time_in_state < units.min_down_steps
    )
    wants_switch = request != status
    refused_lock = wants_switch & locked
    after_lock = jnp.where(refused_lock, status, request)
    stopping = status & ~after_lock
    excess = p_mw - units.shutdown_ramp_mw
    refused_ramp = stopping & (excess > tolerance_mw(units.shutdown_ramp_mw))
    new_status = after_lock | refused_ramp
    started = new_status & ~status
    low = jnp.where(started, units.pmin_mw, jnp.maximum(units.pmin_mw, p_mw - units.ramp_down_mw))
    high = jnp.where(
        started,
        jnp.minimum(units.pmax_mw, units.startup_ramp_mw),
        jnp.minimum(units.pmax_mw, p_mw + units.ramp_up_mw),
    )
    high = jnp.maximum(high, low)
    return Commitment(
        status=new_status,
        started=started,
        refused_min_up_down=refused_lock,
        refused_ramp_mw=jnp.where(refused_ramp, excess, 0.0),
        p_low_mw=jnp.where(new_status, low, 0.0),
        p_high_mw=jnp.where(new_status, high, 0.0),
    )


def next_time_in_state(time_in_state: Array, status: Array, new_status: Array, cap: int) -> Array:
    """``(n_gen,)`` int32 steps since the last switch after a step: 1 where the unit
    switched, else one more, saturating at ``cap`` (the longest minimum time suffices)."""
    return jnp.where(new_status != status, 1, jnp.minimum(time_in_state + 1, cap)).astype(jnp.int32)
