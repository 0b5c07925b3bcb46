"""The physical range of :class:`EVFleetParams` (checked by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.evfleet.env import EVFleetParams
from jaxgrid.grid.solvers import SOLVERS
from jaxgrid.validation import Ordered, Range, bus_index, code_of, column_of, declare, voltage_band

declare(
    EVFleetParams,
    column_of("load_profile", "profiles.load"),
    Range("load_scale", gt=0, unit="(multiplier of every load)"),
    bus_index("vehicle_bus"),
    Range("soc_arrival_range", ge=0, le=1),
    Ordered("soc_arrival_range[0]", "soc_arrival_range[1]"),
    Ordered("ev.battery.soc_min", "soc_arrival_range[0]"),
    Ordered("soc_arrival_range[1]", "ev.battery.soc_max"),
    Range("arrival_sd_h", ge=0, unit="h"),
    Range("departure_sd_h", ge=0, unit="h"),
    Range("first_hour", ge=0, lt=24, unit="h"),
    column_of("price_column", "profiles.price"),
    Range("transformer_mva", gt=0, unit="MVA"),
    *voltage_band(),
    Range("dt_h", gt=0, unit="h"),
    code_of("solver", SOLVERS),
    Range("power_flow_penalty", ge=0, unit="(reward lost on a failed power flow)"),
)
