"""The physical range of :class:`GenCosParams` (checked by :mod:`jaxgrid.validation`)."""

import math

from jaxgrid.envs.gencos.env import GenCosParams
from jaxgrid.validation import Ordered, Range, column_of, declare

declare(
    GenCosParams,
    Range("pd_mw", ge=0, unit="MW"),
    column_of("load_profile", "profiles.load"),
    Range("base_share", ge=0, le=1, unit="(flat share of each bus's load)"),
    Range("cost_poly", ge=0, unit="(c2, c1, c0: convex, non-negative cost curves)"),
    Range("pmax_mw", ge=0, unit="MW"),
    Range("rate_mva", gt=0, unit="MVA", no_limit=math.inf),
    Range("markup_min", gt=-1, unit="(offers stay above zero)"),
    Ordered("markup_min", "markup_max"),
    Range("voll", gt=0, unit="currency/MWh"),
    Range("dt_h", gt=0, unit="h"),
    Range("power_flow_penalty", ge=0, unit="currency (reward lost on a failed clearing)"),
)
