"""The physical range of :class:`DSOParams` (checked by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.dso.env import DSOParams
from jaxgrid.grid.solvers import SOLVERS
from jaxgrid.validation import Range, bus_index, code_of, column_of, declare, voltage_band

declare(
    DSOParams,
    column_of("load_profile", "profiles.load"),
    Range("load_scale", gt=0, unit="(multiplier of every load)"),
    bus_index("flex_bus"),
    *voltage_band(),
    Range("dt_h", gt=0, unit="h"),
    code_of("solver", SOLVERS),
    Range("power_flow_penalty", ge=0, unit="(reward lost on a failed power flow)"),
)
