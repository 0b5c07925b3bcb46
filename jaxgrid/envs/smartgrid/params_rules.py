"""The range of :class:`SmartgridParams` and, on a feeder, :class:`FeederParams` (checked
by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.smartgrid.on_feeder import FeederParams
from jaxgrid.envs.smartgrid.types import (
    GENERATORS,
    BuildingProfiles,
    EnergyGenerator,
    Schedule,
    SmartgridParams,
)
from jaxgrid.grid.solvers import SOLVERS
from jaxgrid.rewards.argumentation import JUDGMENTS
from jaxgrid.validation import (
    Index,
    Ordered,
    Range,
    bus_index,
    code_of,
    declare,
    voltage_band,
)

declare(
    BuildingProfiles,
    Range("needs", ge=0, unit="Wh"),
    Range("length", ge=1, unit="h"),
    Range("productions", ge=0, unit="Wh"),
    Range("production_high", ge=0, unit="Wh"),
)
declare(
    EnergyGenerator,
    code_of("kind", GENERATORS),
    Range("lower", ge=0, unit="(share of the total need)"),
    Range("upper", ge=0, unit="(share of the total need)"),
    Ordered("lower", "upper"),
    Range("series", ge=0),
    Ordered("bounds[0]", "bounds[1]", strict=True, unit="Wh"),
)
declare(
    Schedule,
    Range("start", ge=0, unit="h"),
    Ordered("start", "end", unit="h"),
)
declare(
    SmartgridParams,
    Index("agent_profile", lambda p: p.profiles.needs.shape[-2], "a row of params.profiles.needs"),
    Range("capacity", gt=0, unit="Wh"),
    Range("action_limit", ge=0, unit="Wh"),
    Range("comfort[0]", ge=0, unit="(Richards curve q)"),
    Range("comfort[2]", gt=0, unit="(Richards curve v)"),
    Range("max_need", gt=0, unit="Wh"),
    Range("mos_coefficients", ge=0),
    Range("adaptability_steps", ge=0, unit="steps"),
    Ordered("adaptability_steps[2]", "adaptability_steps[3]", unit="steps"),
    code_of("judgments", JUDGMENTS),
)
declare(
    FeederParams,
    bus_index("agent_bus"),
    Range("buildings_per_agent", gt=0),
    Range("background_share", ge=0),
    Range("power_factor", gt=0, le=1),
    *voltage_band(),
    Range("power_flow_penalty", ge=0, unit="(reward lost on a failed power flow)"),
    code_of("solver", SOLVERS),
)
