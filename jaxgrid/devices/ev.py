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
from jaxgrid.numerics import scaled_bits, standard_normals
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
    key: PRNGKey, n: int, arrival_range, stay_range, horizon: int
) -> tuple[Array, Array]:
    """Arrival steps uniform in ``arrival_range`` and stays uniform in ``stay_range``
    (both inclusive ``(low, high)``, each bound a number or ``(n,)`` one a vehicle, high
    minus low at most ``2**16 - 2`` steps), departures capped at ``horizon``;
    ``(arrival, departure)`` int32 ``(n,)``.

    Both from one draw of bits (:func:`~jaxgrid.numerics.scaled_bits`), where a split and
    two ``jax.random.randint`` (each a split and two draws) compiled seven Threefry hashes
    into the resets that call this (``ders33-v0``'s step 327 -> 317 kernels)."""

    bits = jax.random.bits(key, (2 * n,), jnp.uint32)
    return schedule_from_bits(bits, arrival_range, stay_range, horizon)


def schedule_from_bits(bits, arrival_range, stay_range, horizon: int) -> tuple[Array, Array]:
    """:func:`sample_schedule` of ``n`` vehicles from ``(2 n,)`` uint32 random ``bits``
    (the arrivals', then the stays'), which a reset may draw with its other random
    numbers in one draw."""
    n = bits.shape[0] // 2

    def bound(i):
        """``(2, n)`` int32: bound ``i`` (0 low, 1 high) of the arrival, then of the stay."""
        ranges = (arrival_range, stay_range)
        return jnp.stack([jnp.broadcast_to(jnp.asarray(r[i], jnp.int32), (n,)) for r in ranges])

    low, high = bound(0), bound(1)
    arrival, stay = low + scaled_bits(bits.reshape(2, n), high - low + 1).astype(jnp.int32)
    return arrival, jnp.minimum(arrival + stay, horizon).astype(jnp.int32)


def overnight_sessions(
    bits: Array,
    arrival_mean_h,
    arrival_sd_h,
    departure_mean_h,
    departure_sd_h,
    first_hour,
    dt_h,
    horizon: int,
) -> tuple[Array, Array]:
    """Overnight charging sessions of ``n`` vehicles in an episode that starts at hour of
    day ``first_hour`` and lasts ``horizon`` steps of ``dt_h`` hours, from ``(2 n,)``
    uint32 random ``bits`` (the caller draws them with its other random numbers, in one
    draw: a split and a draw of each kind were a Threefry hash each).

    Each vehicle arrives at an hour of day drawn from N(``arrival_mean_h``,
    ``arrival_sd_h``) and leaves the next day at an hour drawn from
    N(``departure_mean_h``, ``departure_sd_h``) (hours may exceed 24 or fall below 0:
    they count from midnight of the arrival day, and of the next day); the normals are
    :func:`~jaxgrid.numerics.standard_normals` of the first and the second half of
    ``bits``. Steps are rounded to the nearest and kept in the episode: ``0 <= arrival <
    departure <= horizon``. Returns ``(arrival, departure)`` int32 ``(n,)`` steps. Every
    argument but ``horizon`` may be traced, so the statistics are params leaves a
    scenario can sweep.
    """
    arrive_z, leave_z = jnp.split(standard_normals(bits), 2)
    arrive_h = arrival_mean_h + arrival_sd_h * arrive_z
    leave_h = 24.0 + departure_mean_h + departure_sd_h * leave_z
    arrival = jnp.clip(jnp.round((arrive_h - first_hour) / dt_h), 0, horizon - 1)
    departure = jnp.clip(jnp.round((leave_h - first_hour) / dt_h), arrival + 1, horizon)
    return arrival.astype(jnp.int32), departure.astype(jnp.int32)


def served_share(soc: Array, soc_arrival: Array, target_soc: Array) -> Array:
    """Share of each vehicle's need (``target_soc - soc_arrival``) that is in its battery
    at ``soc``, in [0, 1]; 1 where a vehicle needed nothing."""
    need = target_soc - soc_arrival
    share = (soc - soc_arrival) / jnp.where(need > 0, need, 1.0)
    return jnp.where(need > 0, jnp.clip(share, 0.0, 1.0), 1.0)
