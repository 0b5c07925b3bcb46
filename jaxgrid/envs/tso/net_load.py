"""System demand, must-take wind and solar, and the net load the thermal fleet serves.

From the bundled profiles' single columns (:func:`jaxgrid.envs.tso.make_tso` builds them:
the demand shape ``load`` as a share of its annual peak, wind and PV as shares of rated
power), for profile row ``row``::

    demand   = peak_demand_mw * (demand_floor + (1 - demand_floor) * load[row])
    must_take = wind_mw * wind[row] + pv_mw * pv[row]
    net_load = max(demand - must_take, 0)        curtailed = max(must_take - demand, 0)

all in MW; ``net_load`` is spread over the buses by ``load_share``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxgrid.types import Array, float_dtype


class NetLoad(NamedTuple):
    """System totals at the rows asked for, MW (the shape of ``row``)."""

    demand_mw: Array
    renewable_mw: Array
    net_load_mw: Array
    curtailed_mw: Array


def net_load(row: Array, params) -> NetLoad:
    """The :class:`NetLoad` at profile rows ``row`` (int, any shape; wraps around the year)."""
    p = params.profiles
    row = row % p.load.shape[0]
    shape = p.load[row, 0].astype(float_dtype())
    demand = params.peak_demand_mw * (params.demand_floor + (1.0 - params.demand_floor) * shape)
    renewable = params.wind_mw * p.wind[row, 0] + params.pv_mw * p.pv[row, 0]
    return NetLoad(
        demand_mw=demand,
        renewable_mw=renewable,
        net_load_mw=jnp.maximum(demand - renewable, 0.0),
        curtailed_mw=jnp.maximum(renewable - demand, 0.0),
    )
