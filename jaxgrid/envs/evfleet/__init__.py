"""``evfleet33-v0``: a fleet of electric vehicles charging overnight on case33bw, with V2G,
and its perfect-foresight oracle."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.data.simbench import PRICE_NAMES, simbench_profiles
from jaxgrid.devices.battery import BatteryParams
from jaxgrid.devices.ev import EVParams
from jaxgrid.envs.evfleet import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.evfleet.baselines import charge_on_arrival, price_threshold
from jaxgrid.envs.evfleet.env import EVFleet, EVFleetParams, EVFleetState
from jaxgrid.envs.evfleet.oracle import Plan, day_plan, plan_return
from jaxgrid.grid import cases
from jaxgrid.grid.solvers import SOLVERS
from jaxgrid.registry import register
from jaxgrid.rewards.scalarise import Scalarisation


def make_evfleet(
    feeder: str = "case33bw",
    vehicles_per_bus: int = 2,
    solver: str = "distflow",
    steps_per_day: int = 48,
    load_scale: float = 1.5,
    price: str = "time_of_use",
    charger_kw: float = 11.0,
    battery_kwh: float = 60.0,
    efficiency: float = 0.92,
    target_soc: float = 0.9,
    soc_arrival: tuple[float, float] = (0.2, 0.6),
    arrival_h: tuple[float, float] = (18.0, 1.5),
    departure_h: tuple[float, float] = (7.5, 1.0),
    v2g: bool = True,
    transformer_mva: float = 2.5,
    weights: tuple[float, ...] = (0.05, 10.0, 2.0, 50.0),
    distflow_iterations: int = 8,
    power_flow_penalty: float = 10.0,
):
    """Build an EV-fleet environment on the bundled SimBench year.

    Args:
        feeder: a bundled case name, a MATPOWER ``.m`` or a pandapower ``.json`` file
            (radial).
        vehicles_per_bus: vehicles (one agent each) at every bus with a load.
        solver: ``"distflow"`` or ``"lindistflow"``.
        steps_per_day: 48 (30 minutes), 24 or 96; an episode is one day, noon to noon.
        load_scale: multiplier of every load (the SimBench household profile peaks near
            0.2 of the case's base load on an average evening; every bus follows it).
        price: the price series of the energy cost: ``"time_of_use"`` (60, 100 and 180
            currency/MWh: night, day and the 17:00-21:00 peak) or ``"merit_order"``.
        charger_kw, battery_kwh, efficiency: each vehicle's charger rating (kW), battery
            (kWh) and charge and discharge efficiency.
        target_soc: state of charge each vehicle should leave with.
        soc_arrival: bounds of the uniform state of charge on arrival.
        arrival_h, departure_h: (mean, standard deviation) of the hour of day of arrival
            and of departure the next morning, normal, hours.
        v2g: whether the vehicles may discharge into the grid.
        transformer_mva: substation transformer rating, MVA.
        weights: default weights of energy_cost, fairness, losses, service: a MWh
            missing at departure weighs as much as 1000 currency of energy (the peak
            price is 180).
        distflow_iterations: sweeps of the nonlinear solver, 1 to 100.
        power_flow_penalty: reward lost per agent, on a step whose power flow fails, for
            that step and for each step the episode loses (it ends there).
    """
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {list(SOLVERS)}")
    if price not in PRICE_NAMES:
        raise ValueError(f"unknown price series {price!r}; expected one of {list(PRICE_NAMES)}")
    if not isinstance(vehicles_per_bus, int) or vehicles_per_bus < 1:
        raise ValueError(f"vehicles_per_bus: expected a positive integer, got {vehicles_per_bus!r}")
    for name, value in (("charger_kw", charger_kw), ("battery_kwh", battery_kwh)):
        if not value > 0:
            raise ValueError(f"{name}: expected a positive number, got {value!r}")
    grid = cases.load_feeder(feeder)
    loaded = np.flatnonzero(np.asarray(grid.p_load_mw) > 0).astype(np.int32)
    vehicle_bus = np.repeat(loaded, vehicles_per_bus)
    n = len(vehicle_bus)
    full = lambda v: np.full(n, v, np.float64)  # noqa: E731
    p_max = charger_kw / 1e3
    params = EVFleetParams(
        feeder=grid,
        profiles=simbench_profiles(steps_per_day),
        load_profile=np.zeros(grid.n_bus, np.int32),  # households: the residential column
        load_scale=np.float64(load_scale),
        vehicle_bus=vehicle_bus,
        ev=EVParams(
            battery=BatteryParams(
                capacity_mwh=full(battery_kwh / 1e3),
                p_max_mw=full(p_max),
                s_max_mva=full(p_max),
                eta_charge=full(efficiency),
                eta_discharge=full(efficiency),
                soc_min=full(0.0),
                soc_max=full(1.0),
                degradation_cost=full(0.0),
            ),
            target_soc=full(target_soc),
            v2g=np.full(n, bool(v2g)),
        ),
        soc_arrival_range=np.array(soc_arrival, np.float64),
        arrival_mean_h=np.float64(arrival_h[0]),
        arrival_sd_h=np.float64(arrival_h[1]),
        departure_mean_h=np.float64(departure_h[0]),
        departure_sd_h=np.float64(departure_h[1]),
        first_hour=np.int32(12),
        price_column=np.int32(PRICE_NAMES.index(price)),
        transformer_mva=np.float64(transformer_mva),
        v_lower=np.float64(0.95),
        v_upper=np.float64(1.05),
        dt_h=np.float64(24.0 / steps_per_day),
        solver=np.int32(SOLVERS[solver]),
        power_flow_penalty=np.float32(power_flow_penalty),
        scalarisation=Scalarisation.create(4, "weighted_sum", list(weights)),
    )
    params = jax.tree_util.tree_map(jnp.asarray, params)
    env = EVFleet(
        params,
        horizon=steps_per_day,
        distflow_iterations=distflow_iterations,
        name="evfleet33-v0",
    )
    return env, params


register("evfleet33-v0", make_evfleet)

__all__ = [
    "EVFleet",
    "EVFleetParams",
    "EVFleetState",
    "Plan",
    "charge_on_arrival",
    "day_plan",
    "make_evfleet",
    "plan_return",
    "price_threshold",
]
