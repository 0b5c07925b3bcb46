"""The physical range of :class:`DERsParams` (checked by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.ders.env import DERsParams
from jaxgrid.grid.solvers import SOLVERS
from jaxgrid.numerics import MAX_RANDOM_RANGE
from jaxgrid.validation import Ordered, Range, bus_index, code_of, column_of, declare, voltage_band

declare(
    DERsParams,
    column_of("load_profile", "profiles.load"),
    Range("load_scale", gt=0, unit="(multiplier of every load)"),
    bus_index("battery_bus"),
    Ordered("battery.soc_min", "battery_soc0"),
    Ordered("battery_soc0", "battery.soc_max"),
    bus_index("pv_bus"),
    Range("pv_p_max_mw", ge=0, unit="MW"),
    Range("pv_s_max_mva", ge=0, unit="MVA"),
    Range("pv_q_smoothing_mvar", ge=0, unit="Mvar"),
    column_of("pv_profile", "profiles.pv"),
    bus_index("flex_bus"),
    Range("flex_size_mw", ge=0, unit="MW"),
    bus_index("ev_bus"),
    Ordered("ev.battery.soc_min", "ev_soc0"),
    Ordered("ev_soc0", "ev.battery.soc_max"),
    # (each range is drawn by scaled_bits, which serves up to 2**16 - 1 values)
    Range("ev_arrival_range", ge=0, le=MAX_RANDOM_RANGE - 2, unit="steps"),
    Ordered("ev_arrival_range[0]", "ev_arrival_range[1]", unit="steps"),
    Range("ev_stay_range", ge=0, le=MAX_RANDOM_RANGE - 2, unit="steps"),
    Ordered("ev_stay_range[0]", "ev_stay_range[1]", unit="steps"),
    column_of("price_column", "profiles.price"),
    *voltage_band(),
    Range("dt_h", gt=0, unit="h"),
    code_of("solver", SOLVERS),
    Range("power_flow_penalty", ge=0, unit="(reward lost on a failed power flow)"),
)
