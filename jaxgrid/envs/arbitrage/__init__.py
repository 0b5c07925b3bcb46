"""Battery arbitrage against a price series (``arbitrage-v0``), with a perfect-foresight oracle."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.data.csv_profiles import csv_profiles
from jaxgrid.data.simbench import PRICE_NAMES, simbench_profiles
from jaxgrid.devices.battery import BatteryParams
from jaxgrid.envs.arbitrage import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.arbitrage.baselines import idle, price_threshold
from jaxgrid.envs.arbitrage.env import Arbitrage, ArbitrageParams, ArbitrageState
from jaxgrid.envs.arbitrage.oracle import Schedule, episode_oracle, optimal_schedule
from jaxgrid.registry import register
from jaxgrid.rewards.abort import AbortConditions
from jaxgrid.rewards.scalarise import Scalarisation


def make_arbitrage(
    price: str = "merit_order",
    steps_per_day: int = 24,
    capacity_mwh: float = 2.0,
    p_max_mw: float = 1.0,
    efficiency: float = 0.95,
    soc_bounds: tuple[float, float] = (0.1, 0.9),
    degradation_cost: float = 2.0,
    initial_soc: float = 0.5,
    forecast: int | None = None,
    abort: dict | None = None,
    name: str = "arbitrage-v0",
    price_csv: dict | None = None,
):
    """Build an arbitrage environment on the bundled SimBench year and its default params.

    Args:
        price: ``"merit_order"`` (dynamic) or ``"time_of_use"``.
        steps_per_day: 24 (hourly), 48 or 96; an episode is one day.
        capacity_mwh, p_max_mw: battery energy and power ratings.
        efficiency: charge and discharge efficiency each.
        soc_bounds: state-of-charge bounds.
        degradation_cost: currency per MWh of throughput.
        initial_soc: state of charge at the start of each day.
        forecast: how many future prices the agent sees (default: one day).
        abort: bounds that end an episode, e.g. ``{"soc": (0.2, 0.8)}``.
        price_csv: a CSV source of the price (currency/MWh,
            :mod:`jaxgrid.data.csv_profiles`); it replaces the SimBench year's ``price``.
    """
    if price not in PRICE_NAMES:
        raise ValueError(f"unknown price series {price!r}; expected one of {list(PRICE_NAMES)}")
    lo, hi = soc_bounds
    if not 0 <= lo < hi <= 1 or not lo <= initial_soc <= hi:
        raise ValueError(
            f"need 0 <= soc_min <= initial_soc <= soc_max <= 1, got {soc_bounds}, {initial_soc}"
        )
    if not 0 < efficiency <= 1 or capacity_mwh <= 0 or p_max_mw <= 0:
        raise ValueError("efficiency must be in (0, 1] and ratings positive")
    one = lambda v: np.full(1, v, np.float64)  # noqa: E731
    params = ArbitrageParams(
        profiles=(
            simbench_profiles(steps_per_day)
            if price_csv is None
            else csv_profiles(steps_per_day, price=price_csv)
        ),
        price_column=np.int32(PRICE_NAMES.index(price)),
        battery=BatteryParams(
            capacity_mwh=one(capacity_mwh),
            p_max_mw=one(p_max_mw),
            s_max_mva=one(p_max_mw),
            eta_charge=one(efficiency),
            eta_discharge=one(efficiency),
            soc_min=one(lo),
            soc_max=one(hi),
            degradation_cost=one(degradation_cost),
        ),
        initial_soc=one(initial_soc),
        dt_h=np.float64(24.0 / steps_per_day),
        abort=AbortConditions.create(Arbitrage.abort_names, **(abort or {})),
        scalarisation=Scalarisation.create(2, "weighted_sum", [1.0, 1.0]),
    )
    params = jax.tree_util.tree_map(jnp.asarray, params)
    env = Arbitrage(
        params,
        horizon=steps_per_day,
        forecast=steps_per_day if forecast is None else forecast,
        name=name,
    )
    return env, params


register("arbitrage-v0", make_arbitrage)

__all__ = [
    "Arbitrage",
    "ArbitrageParams",
    "ArbitrageState",
    "Schedule",
    "episode_oracle",
    "idle",
    "make_arbitrage",
    "optimal_schedule",
    "price_threshold",
]
