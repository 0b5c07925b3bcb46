"""State and params of the active voltage control environments."""

from __future__ import annotations

from flax import struct

from jaxgrid.data.profiles import Profiles
from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.solvers import DISTFLOW, LINDISTFLOW, SOLVERS  # noqa: F401  re-exported
from jaxgrid.rewards.abort import AbortConditions
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array


@struct.dataclass
class VoltageState:
    """Attributes:
    time: ``()`` int32 steps since the episode started.
    start: ``()`` int32 profile row of the episode's first step.
    vm_pu: ``(n_bus,)`` bus voltages of the last power flow, pu.
    q_mvar: ``(n_pv,)`` reactive power the inverters gave in the last step, Mvar.
    start_failed: ``()`` bool: the power flow of the episode's first operating point (the
        reset's) did not converge; ``vm_pu`` holds 1.0 pu in its place and the first
        step is reported failed.
    """

    time: Array
    start: Array
    vm_pu: Array
    q_mvar: Array
    start_failed: Array


@struct.dataclass
class VoltageParams:
    """Everything a scenario may vary.

    Attributes:
        feeder: the network (impedances, base loads, slack voltage).
        profiles: load multipliers and PV availability per time step, with the days
            episodes start on.
        load_profile: ``(n_bus,)`` int32 column of ``profiles.load`` driving each bus.
        load_scale: ``()`` multiplier of every load.
        pv_bus: ``(n_pv,)`` int32 bus index of each PV inverter (one agent each).
        pv_profile: ``(n_pv,)`` int32 column of ``profiles.pv`` of each PV.
        pv_p_max_mw: ``(n_pv,)`` installed PV peak, MW.
        pv_s_max_mva: ``(n_pv,)`` inverter rating, MVA (MAPDN: 1.2 x peak).
        zone_buses: ``(n_pv, zone_size)`` int32 buses each agent observes (padded).
        zone_mask: ``(n_pv, zone_size)`` bool, real entries of ``zone_buses``.
        v_ref, v_lower, v_upper: ``()`` reference voltage and band, pu.
        barrier: ``()`` int32 voltage barrier (:mod:`jaxgrid.rewards.voltage_barrier`).
        solver: ``()`` int32 ``LINDISTFLOW`` or ``DISTFLOW``.
        power_flow_penalty: ``()`` reward lost per agent, on a step whose power flow
            fails (voltage collapse), for that step and each step the episode loses.
        abort: bounds on the lowest and highest bus voltage (off by default).
        scalarisation: how the objectives become the reward.
        pv_q_smoothing_mvar: ``()`` width of the smooth surrogate of the inverters'
            reactive headroom, Mvar (:mod:`jaxgrid.devices.renewable`); 0 (the
            default): the exact model.
    """

    feeder: Feeder
    profiles: Profiles
    load_profile: Array
    load_scale: Array
    pv_bus: Array
    pv_profile: Array
    pv_p_max_mw: Array
    pv_s_max_mva: Array
    zone_buses: Array
    zone_mask: Array
    v_ref: Array
    v_lower: Array
    v_upper: Array
    barrier: Array
    solver: Array
    power_flow_penalty: Array
    abort: AbortConditions
    scalarisation: Scalarisation
    pv_q_smoothing_mvar: Array = 0.0
