"""The physical range of :class:`ArbitrageParams` (checked by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.arbitrage.env import ArbitrageParams
from jaxgrid.validation import Ordered, Range, column_of, declare

declare(
    ArbitrageParams,
    column_of("price_column", "profiles.price"),
    Ordered("battery.soc_min", "initial_soc"),
    Ordered("initial_soc", "battery.soc_max"),
    Range("dt_h", gt=0, unit="h"),
)
