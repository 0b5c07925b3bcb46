"""Battery storage: energy, power and apparent-power limits, efficiencies, degradation.

Load sign convention, as for bus loads: ``p > 0`` charges (draws from the grid),
``p < 0`` discharges; ``q > 0`` absorbs reactive power, ``q < 0`` injects. A request the
battery cannot meet is clipped to what physics allows, in this order: the active-power
rating, the energy left between the state-of-charge bounds (accounting for the charge or
discharge efficiency), then reactive power within what the apparent-power rating leaves;
the clipped amount is reported so an environment can charge it as a device-limit cost.

With ``smoothing_mw > 0`` the active-power clip (to the rating and to what the state of
charge allows) is a smooth surrogate (:func:`jaxgrid.smooth.soft_clip`, and
:func:`jaxgrid.smooth.soft_min` between the rating and the energy limit), rounded over
that many MW: the enacted power then moves with a request beyond the limits (its
derivative decays over a few widths instead of dropping to 0) and stays strictly within
them, at most ``0.69 smoothing_mw`` short of a limit it is asked to reach. Likewise
``q_smoothing_mvar > 0`` rounds the reactive-power clip: the headroom ``sqrt(s_max^2 -
p^2)``, whose derivative is infinite at ``p = s_max``, becomes
:func:`jaxgrid.smooth.soft_sqrt_positive` (as an inverter's, :mod:`jaxgrid.devices.renewable`)
and the clip to it :func:`jaxgrid.smooth.soft_clip`. The defaults, 0, are the exact
model, bit for bit.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from flax import struct

from jaxgrid.smooth import soft_clip, soft_min, soft_sqrt_positive
from jaxgrid.types import Array


@struct.dataclass
class BatteryParams:
    """Each field ``(n,)`` for ``n`` batteries.

    Attributes:
        capacity_mwh: energy capacity, MWh.
        p_max_mw: charge and discharge power rating, MW.
        s_max_mva: inverter apparent-power rating, MVA (``>= p_max_mw`` to allow reactive power).
        eta_charge, eta_discharge: efficiencies in (0, 1].
        soc_min, soc_max: state-of-charge bounds, fraction of capacity.
        degradation_cost: cost per MWh of throughput (charged plus discharged), currency/MWh.
        smoothing_mw: ``()`` or ``(n,)`` width of the smooth surrogate of the power
            limits, MW; 0 (the default): the exact clip (module docstring).
        q_smoothing_mvar: ``()`` or ``(n,)`` width of the smooth surrogate of the
            reactive-power headroom and its clip, Mvar; 0 (the default): exact.
    """

    capacity_mwh: Array
    p_max_mw: Array
    s_max_mva: Array
    eta_charge: Array
    eta_discharge: Array
    soc_min: Array
    soc_max: Array
    degradation_cost: Array
    smoothing_mw: Array = 0.0
    q_smoothing_mvar: Array = 0.0


class BatteryStep(NamedTuple):
    """Result of one step, each ``(n,)``."""

    soc: Array  # state of charge after the step, fraction of capacity
    p_mw: Array  # enacted active power (load convention)
    q_mvar: Array  # enacted reactive power (load convention)
    clipped_mw: Array  # |requested - enacted| active power
    clipped_mvar: Array  # |requested - enacted| reactive power
    degradation: Array  # degradation cost of the step


def power_limits(soc: Array, dt_h, params: BatteryParams) -> tuple[Array, Array]:
    """``(p_min, p_max)`` MW the battery can enact this step from state of charge ``soc``."""
    headroom = jnp.maximum(params.soc_max - soc, 0.0) * params.capacity_mwh
    stored = jnp.maximum(soc - params.soc_min, 0.0) * params.capacity_mwh
    width = params.smoothing_mw
    p_charge = soft_min(headroom / (params.eta_charge * dt_h), params.p_max_mw, width)
    p_discharge = soft_min(stored * params.eta_discharge / dt_h, params.p_max_mw, width)
    return -p_discharge, p_charge


def battery_step(
    soc: Array, p_mw: Array, q_mvar: Array, dt_h, params: BatteryParams
) -> BatteryStep:
    """Enact a request of ``p_mw``, ``q_mvar`` for ``dt_h`` hours (see the module docstring)."""
    p_min, p_max = power_limits(soc, dt_h, params)
    p = soft_clip(p_mw, p_min, p_max, params.smoothing_mw)
    q_room = soft_sqrt_positive(params.s_max_mva**2 - p**2, params.q_smoothing_mvar)
    q = soft_clip(q_mvar, -q_room, q_room, params.q_smoothing_mvar)
    energy = jnp.where(p >= 0, p * params.eta_charge, p / params.eta_discharge) * dt_h
    new_soc = jnp.clip(soc + energy / params.capacity_mwh, params.soc_min, params.soc_max)
    return BatteryStep(
        soc=new_soc,
        p_mw=p,
        q_mvar=q,
        clipped_mw=jnp.abs(p_mw - p),
        clipped_mvar=jnp.abs(q_mvar - q),
        degradation=params.degradation_cost * jnp.abs(p) * dt_h,
    )
