"""The physical range of :class:`VoltageParams` (checked by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.voltage.types import SOLVERS, VoltageParams
from jaxgrid.rewards.voltage_barrier import BARRIERS
from jaxgrid.validation import Range, bus_index, code_of, column_of, declare, voltage_band

declare(
    VoltageParams,
    column_of("load_profile", "profiles.load"),
    Range("load_scale", gt=0, unit="(multiplier of every load)"),
    bus_index("pv_bus"),
    column_of("pv_profile", "profiles.pv"),
    Range("pv_p_max_mw", ge=0, unit="MW"),
    Range("pv_s_max_mva", ge=0, unit="MVA"),
    Range("pv_q_smoothing_mvar", ge=0, unit="Mvar"),
    bus_index("zone_buses"),
    Range("v_ref", gt=0, lt=2, unit="pu"),
    *voltage_band(),
    code_of("barrier", BARRIERS),
    code_of("solver", SOLVERS),
    Range("power_flow_penalty", ge=0, unit="(reward lost on a failed power flow)"),
)
