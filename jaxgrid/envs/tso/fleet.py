"""The unit-commitment data of a generator fleet: what MATPOWER cases leave out.

MATPOWER's cases give each generator its rating and a cost curve but no minimum stable
output, ramp rates, minimum up and down times, start-up or no-load costs. jaxgrid assigns
them by size class, from the unit's rating alone (assumed, round values in the ranges
unit-commitment test systems use; a scenario may replace any of them, they are params):

============  ===========  ==========  ==============  ============  ==============
class         rating       pmin        ramp            min up/down   start-up,
                           (of pmax)   (of pmax per h)  (h)          no-load
============  ===========  ==========  ==============  ============  ==============
``base``      >= 300 MW    40 %        50 %            8 / 8         100 /MW, 3 /MWh
``mid``       100-300 MW   30 %        100 %           4 / 4         60 /MW, 3 /MWh
``peaker``    <= 100 MW    20 %        200 %           1 / 1         30 /MW, 2 /MWh
============  ===========  ==========  ==============  ============  ==============

Start-up costs are currency per MW of rating per start, no-load costs currency per MW of
rating per hour on line. A unit starting up may produce up to ``startup_ramp_mw`` in its
first step and one shutting down must have produced at most ``shutdown_ramp_mw`` in its
last (both ``max(pmin, ramp)``, the usual convention of unit-commitment formulations).
"""

from __future__ import annotations

import numpy as np
from flax import struct

from jaxgrid.types import Array

CLASS_NAMES = ("base", "mid", "peaker")
# per class: pmin share, ramp share per hour, min up h, min down h, start-up /MW, no-load /MWh
_CLASS_TABLE = np.array(
    [
        [0.4, 0.5, 8.0, 8.0, 100.0, 3.0],
        [0.3, 1.0, 4.0, 4.0, 60.0, 3.0],
        [0.2, 2.0, 1.0, 1.0, 30.0, 2.0],
    ]
)


@struct.dataclass
class UnitParams:
    """The fleet's unit-commitment data, ``(n_gen,)`` each.

    Attributes:
        pmin_mw, pmax_mw: minimum stable output and rating of a committed unit, MW.
        ramp_up_mw, ramp_down_mw: largest change of output between consecutive steps of
            a unit that stays on, MW per step.
        startup_ramp_mw: most a unit may produce in the step it starts, MW.
        shutdown_ramp_mw: most a unit may have produced in the step before it stops, MW.
        min_up_steps, min_down_steps: int32 steps a unit stays on after a start, off
            after a stop.
        startup_cost: currency per start.
        no_load_cost: currency per hour on line (on top of the cost curve).
        cost_poly: ``(n_gen, 3)`` cost curve ``(c2, c1, c0)`` of output in MW, currency/MW²h,
            currency/MWh, currency/h.
    """

    pmin_mw: Array
    pmax_mw: Array
    ramp_up_mw: Array
    ramp_down_mw: Array
    startup_ramp_mw: Array
    shutdown_ramp_mw: Array
    min_up_steps: Array
    min_down_steps: Array
    startup_cost: Array
    no_load_cost: Array
    cost_poly: Array


def unit_class(pmax_mw) -> np.ndarray:
    """Host side: ``(n_gen,)`` int index into :data:`CLASS_NAMES` by rating (MW)."""
    pmax = np.asarray(pmax_mw, float)
    return np.where(pmax >= 300.0, 0, np.where(pmax > 100.0, 1, 2))


def fleet_by_class(network, dt_h: float) -> UnitParams:
    """Host side: the :class:`UnitParams` of ``network``'s in-service generators by size
    class (module docstring), for steps of ``dt_h`` hours."""
    pmax = np.asarray(network.pmax_mw, float)
    pmin_share, ramp_share, up_h, down_h, startup, no_load = _CLASS_TABLE[unit_class(pmax)].T
    pmin = np.maximum(np.asarray(network.pmin_mw, float), pmin_share * pmax)
    ramp = ramp_share * pmax * dt_h
    return UnitParams(
        pmin_mw=pmin,
        pmax_mw=pmax,
        ramp_up_mw=ramp,
        ramp_down_mw=ramp,
        startup_ramp_mw=np.maximum(pmin, ramp),
        shutdown_ramp_mw=np.maximum(pmin, ramp),
        min_up_steps=np.round(up_h / dt_h).astype(np.int32),
        min_down_steps=np.round(down_h / dt_h).astype(np.int32),
        startup_cost=startup * pmax,
        no_load_cost=no_load * pmax,
        cost_poly=np.asarray(network.cost_poly, float),
    )
