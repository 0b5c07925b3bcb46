"""Electricity price series: a time-of-use tariff and a merit-order price of residual load.

Neither is market data (no open-licence price series ships on PyPI); both are documented
models that vary like real prices do:

- :func:`time_of_use`: a three-rate tariff (off-peak night, shoulder, evening peak), the
  shape of common residential TOU tariffs, in currency/MWh;
- :func:`merit_order_price`: a day-ahead-like price from the residual load (demand
  minus wind and PV) through a convex supply curve: cheap when renewables cover demand
  (negative when they exceed it), steep at scarcity.
"""

from __future__ import annotations

import numpy as np

# (start hour, end hour, price per MWh): the default three-rate tariff
DEFAULT_TOU = ((0, 7, 60.0), (7, 17, 100.0), (17, 21, 180.0), (21, 24, 100.0))


def time_of_use(n_steps: int, steps_per_day: int, bands=DEFAULT_TOU) -> np.ndarray:
    """``(n_steps,)`` tariff price of each step; ``bands`` cover 0-24 h without gaps."""
    edges = sorted((float(a), float(b)) for a, b, _ in bands)
    if (
        edges[0][0] != 0
        or edges[-1][1] != 24
        or any(b0 != a1 for (_, b0), (a1, _) in zip(edges, edges[1:]))
    ):
        raise ValueError(f"TOU bands must cover 0-24 h without gaps or overlaps, got {bands}")
    hour = (np.arange(n_steps) % steps_per_day + 0.5) * 24.0 / steps_per_day
    price = np.zeros(n_steps)
    for start, end, value in bands:
        price[(hour >= start) & (hour < end)] = value
    return price


def merit_order_price(
    load: np.ndarray,
    wind: np.ndarray,
    pv: np.ndarray,
    wind_share: float = 0.35,
    pv_share: float = 0.25,
) -> np.ndarray:
    """Price per MWh from profiles in [0, 1] (load relative to its peak, renewables to rated).

    Residual load ``r = load - wind_share * wind - pv_share * pv / max(pv)`` goes through the
    supply curve ``40 + 90 r + 400 max(r - 0.7, 0)^2`` above zero and ``40 + 200 r`` below
    (continuous, negative once renewables exceed demand by a fifth of peak load).
    """
    pv_scaled = pv / max(float(np.max(pv)), 1e-9)
    r = load - wind_share * wind - pv_share * pv_scaled
    return np.where(
        r >= 0, 40.0 + 90.0 * r + 400.0 * np.maximum(r - 0.7, 0.0) ** 2, 40.0 + 200.0 * r
    )
