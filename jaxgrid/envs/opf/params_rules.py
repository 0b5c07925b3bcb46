"""The physical range of :class:`OPFParams` (checked by :mod:`jaxgrid.validation`)."""

import math

from jaxgrid.envs.opf.env import OPFParams
from jaxgrid.validation import Ordered, Range, declare

declare(
    OPFParams,
    Range("profiles.load", ge=0, le=1, unit="(share of the class's annual peak)"),
    Range("pd_mw", ge=0, unit="MW"),
    Range("load_weights", ge=0, le=1),
    Range("demand_floor", ge=0, le=1),
    Range("cost_poly", ge=0, unit="(c2, c1, c0: convex, non-negative cost curves)"),
    Range("pmin_mw", ge=0, unit="MW"),
    Ordered("pmin_mw", "pmax_mw", unit="MW"),
    Ordered("qmin_mvar", "qmax_mvar", unit="Mvar"),
    Range("vmin_pu", gt=0, unit="pu"),
    Ordered("vmin_pu", "vmax_pu", unit="pu"),
    Range("rate_mva", gt=0, unit="MVA", no_limit=math.inf),
    Range("vm_tol_pu", ge=0, unit="pu"),
    Range("flow_tol_mva", ge=0, unit="MVA"),
    Range("q_tol_mvar", ge=0, unit="Mvar"),
    Range("p_tol_mw", ge=0, unit="MW"),
    Range("dt_h", gt=0, unit="h"),
    Range("power_flow_penalty", ge=0, unit="thousand currency per step"),
)
