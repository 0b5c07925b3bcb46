"""Electric vehicles: a battery that is plugged in only between arrival and departure.

While away, an EV's actions are masked (no power), and it comes back with its arrival
state of charge. At departure it should hold ``target_soc``; the energy missing then is
reported as unmet (a cost). Without V2G (``v2g`` False) it can only charge. Arrival and
departure steps are sampled from a key (:func:`sample_schedule`) or given in params.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from jaxgrid.devices.battery import BatteryParams, battery_step
from jaxgrid.types import Array, PRNGKey


@struct.dataclass
class EVParams:
    """Each field ``(n,)``.

    Attributes:
        battery: the vehicle's battery.
        target_soc: state of charge required at departure, fraction.
        v2g: bool, whether the vehicle may discharge into the grid.
    """

    battery: BatteryParams
    target_soc: Array
    v2g: Array


class EVStep(NamedTuple):
    """Result of one step, each ``(n,)``."""

    soc: Array
    p_mw: Array
    q_mvar: Array
    clipped_mw: Array  # requested power that could not be enacted (while plugged in)
    unmet_mwh: Array  # energy missing from the target at departure (this step only)
    degradation: Array


def connected(t, arrival: Array, departure: Array) -> Array:
    """Whether each EV is plugged in during step ``t``: ``arrival <= t < departure``."""
    return (arrival <= t) & (t < departure)


def ev_step(
    soc: Array,
    p_mw: Array,
    q_mvar: Array,
    t,
    arrival: Array,
    departure: Array,
    dt_h,
    params: EVParams,
) -> EVStep:
    """Enact charging requests at step ``t``; EVs that are away do nothing (masked)."""
    plugged = connected(t, arrival, departure)
    p_request = jnp.where(params.v2g, p_mw, jnp.maximum(p_mw, 0.0))
    step = battery_step(soc, p_request, q_mvar, dt_h, params.battery)
    leaving = plugged & (t + 1 == departure)
    missing = jnp.maximum(params.target_soc - step.soc, 0.0) * params.battery.capacity_mwh
    return EVStep(
        soc=jnp.where(plugged, step.soc, soc),
        p_mw=jnp.where(plugged, step.p_mw, 0.0),
        q_mvar=jnp.where(plugged, step.q_mvar, 0.0),
        clipped_mw=jnp.where(plugged, jnp.abs(p_mw - step.p_mw), 0.0),
        unmet_mwh=jnp.where(leaving, missing, 0.0),
        degradation=jnp.where(plugged, step.degradation, 0.0),
    )


def sample_schedule(
    key: PRNGKey, n: int, arrival_range: tuple[int, int], stay_range: tuple[int, int], horizon: int
) -> tuple[Array, Array]:
    """Arrival steps uniform in ``arrival_range`` and stays uniform in ``stay_range``
    (both inclusive), departures capped at ``horizon``; ``(arrival, departure)`` int32."""
    k_arrive, k_stay = jax.random.split(key)
    arrival = jax.random.randint(k_arrive, (n,), arrival_range[0], arrival_range[1] + 1)
    stay = jax.random.randint(k_stay, (n,), stay_range[0], stay_range[1] + 1)
    return arrival.astype(jnp.int32), jnp.minimum(arrival + stay, horizon).astype(jnp.int32)
