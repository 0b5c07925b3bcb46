"""The physical range of :class:`TSOParams` (checked by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.tso.env import TSOParams
from jaxgrid.envs.tso.fleet import UnitParams
from jaxgrid.validation import Ordered, Range, declare

declare(
    UnitParams,
    Range("pmin_mw", ge=0, unit="MW"),
    Range("pmax_mw", gt=0, unit="MW"),
    Ordered("pmin_mw", "pmax_mw", unit="MW"),
    Range("ramp_up_mw", gt=0, unit="MW per step"),
    Range("ramp_down_mw", gt=0, unit="MW per step"),
    Ordered("pmin_mw", "startup_ramp_mw", unit="MW"),
    Ordered("pmin_mw", "shutdown_ramp_mw", unit="MW"),
    Range("min_up_steps", ge=1, unit="steps"),
    Range("min_down_steps", ge=1, unit="steps"),
    Range("startup_cost", ge=0, unit="currency"),
    Range("no_load_cost", ge=0, unit="currency/h"),
    Range("cost_poly", ge=0, unit="(c2 currency/MW²h, c1 currency/MWh, c0 currency/h)"),
)
declare(
    TSOParams,
    Range("rate_mva", gt=0, unit="MVA"),
    Range("load_share", ge=-1, le=1),
    Range("peak_demand_mw", gt=0, unit="MW"),
    Range("demand_floor", ge=0, le=1),
    Range("wind_mw", ge=0, unit="MW"),
    Range("pv_mw", ge=0, unit="MW"),
    Range("reserve_margin", ge=0, le=1),
    Range("dispatch.voll", gt=0, unit="currency/MWh"),
    Range("dispatch.spill_price", gt=0, unit="currency/MWh"),
    Range("dispatch.reserve_shortfall_price", gt=0, unit="currency/MWh"),
    Range("dispatch.slack_price_rise", ge=0, le=1),
    Range("bias_max", ge=0, unit="currency/MWh"),
    Range("dt_h", gt=0, unit="h"),
    Range("power_flow_penalty", ge=0, unit="thousand currency per step"),
)
