"""A data-centre microgrid (``dcmg-v0``): GPU work, cooling, battery, diesel and grid over a
day of five-minute steps, with a perfect-foresight oracle."""

from __future__ import annotations

import numpy as np

from jaxgrid.data.profiles import Profiles
from jaxgrid.data.simbench import PRICE_NAMES, PV_NAMES, simbench_profiles
from jaxgrid.data.workload import synthetic_workload
from jaxgrid.devices.battery import BatteryParams
from jaxgrid.devices.datacentre import DataCentreParams
from jaxgrid.devices.diesel import DieselParams
from jaxgrid.envs.dcmg import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.dcmg.baselines import greedy, rule_based
from jaxgrid.envs.dcmg.env import Dcmg, DcmgParams, DcmgState
from jaxgrid.envs.dcmg.oracle import Plan, episode_oracle, plan_actions
from jaxgrid.registry import register
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import at_default_precision

STEPS_PER_DAY = 288  # five-minute steps
SIMBENCH_STEPS_PER_DAY = 96  # the bundled profiles are quarter-hourly


def five_minute_profiles() -> Profiles:
    """The bundled SimBench year (quarter-hourly) held constant over each quarter hour."""
    repeat = STEPS_PER_DAY // SIMBENCH_STEPS_PER_DAY
    quarter = simbench_profiles(SIMBENCH_STEPS_PER_DAY)
    return quarter.replace(
        **{
            k: np.repeat(getattr(quarter, k), repeat, axis=0)
            for k in ("load", "pv", "wind", "price")
        }
    )


def make_dcmg(
    price: str = "merit_order",
    pv: str = "PV3",
    pv_mw: float = 1.5,
    n_gpus: float = 1000.0,
    utilisation: tuple[float, float] = (0.35, 0.2),
    deadline_hours: tuple[float, float] = (8.0, 2.0),
    battery_mwh: float = 2.0,
    battery_mw: float = 1.0,
    diesel_mw: float = 1.0,
    import_cap_mw: float = 1.0,
    carbon_price: float = 100.0,
    work_value: float = 0.5,
    t_out_mean: float = 15.0,
    forecast_hours: int = 6,
    workload_seed: int = 0,
    name: str = "dcmg-v0",
):
    """Build the data-centre microgrid on the bundled SimBench year and its default params.

    Args:
        price: ``"merit_order"`` (dynamic) or ``"time_of_use"`` grid price.
        pv: SimBench PV profile (``PV1``, ``PV3``, ``PV5``, ``PV8``); ``pv_mw`` its rating.
        n_gpus: GPUs of the data centre (IT power 0.3 MW idle to 1 MW busy per 1000).
        utilisation: mean share of the GPU-hours that training and fine-tuning work asks
            for (the synthetic workload of :mod:`jaxgrid.data.workload`).
        deadline_hours: hours from arrival to deadline of each class.
        battery_mwh, battery_mw: battery ratings.
        diesel_mw: diesel rating (minimum stable load 30 %).
        import_cap_mw: grid import cap.
        carbon_price: weight of the emissions objective, currency per t CO2.
        work_value: weight of the work objective, currency per GPU-hour.
        t_out_mean: mean outdoor temperature, °C (daily swing ±6 K).
        forecast_hours: hours of PV and price ahead in the observation.
        workload_seed: seed of the synthetic workload year.
    """
    if price not in PRICE_NAMES:
        raise ValueError(f"unknown price series {price!r}; expected one of {list(PRICE_NAMES)}")
    if pv not in PV_NAMES:
        raise ValueError(f"unknown PV profile {pv!r}; expected one of {list(PV_NAMES)}")
    if forecast_hours < 0:
        raise ValueError(f"forecast_hours must be >= 0, got {forecast_hours}")
    dt_h = 24.0 / STEPS_PER_DAY
    deadline_steps = np.round(np.asarray(deadline_hours) / dt_h).astype(np.int32)
    if np.any(deadline_steps < 1):
        raise ValueError(f"deadline_hours must be at least one step (5 min), got {deadline_hours}")
    profiles = five_minute_profiles()
    if n_gpus <= 0:
        raise ValueError(f"n_gpus must be positive, got {n_gpus}")
    workload = synthetic_workload(
        len(profiles.pv) // STEPS_PER_DAY, STEPS_PER_DAY, n_gpus, utilisation, seed=workload_seed
    )
    one = lambda v: np.full(1, v, np.float64)  # noqa: E731
    scale = n_gpus / 1000.0
    params = DcmgParams(
        profiles=profiles,
        workload_gpu_h=workload.astype(np.float32),
        pv_column=np.int32(PV_NAMES.index(pv)),
        price_column=np.int32(PRICE_NAMES.index(price)),
        pv_mw=np.float64(pv_mw),
        datacentre=DataCentreParams(
            n_gpus=np.float64(n_gpus),
            p_idle_mw=np.float64(0.3 * scale),
            p_peak_mw=np.float64(1.0 * scale),
            deadline_steps=deadline_steps,
            c_mwh_per_k=np.float64(0.5 * scale),
            ua_mw_per_k=np.float64(0.01 * scale),
            q_max_mw=np.float64(2.0 * scale),
            t_set_min=np.float64(18.0),
            t_set_max=np.float64(27.0),
            t_max=np.float64(32.0),
            cop_ref=np.float64(5.0),
            cop_slope=np.float64(0.1),
            cop_min=np.float64(2.0),
            t_ref=np.float64(20.0),
        ),
        battery=BatteryParams(
            capacity_mwh=one(battery_mwh),
            p_max_mw=one(battery_mw),
            s_max_mva=one(battery_mw),
            eta_charge=one(0.95),
            eta_discharge=one(0.95),
            soc_min=one(0.1),
            soc_max=one(0.9),
            degradation_cost=one(2.0),
        ),
        diesel=DieselParams(
            p_max_mw=np.float64(diesel_mw),
            p_min_mw=np.float64(0.3 * diesel_mw),
            ramp_mw_per_h=np.float64(6.0 * diesel_mw),
            start_steps=np.int32(1),
            start_cost=np.float64(20.0),
            fuel_noload_l_per_mwh=np.float64(80.0),
            fuel_l_per_mwh=np.float64(250.0),
            fuel_price=np.float64(1.2),
            emission_t_per_l=np.float64(0.00268),
        ),
        initial_soc=one(0.5),
        t_initial=np.float64(22.0),
        t_out_mean=np.float64(t_out_mean),
        t_out_amplitude=np.float64(6.0),
        import_cap_mw=np.float64(import_cap_mw),
        grid_t_per_mwh=np.float64(0.4),
        dt_h=np.float64(dt_h),
        scalarisation=Scalarisation.create(3, "weighted_sum", [1.0, carbon_price, work_value]),
    )
    params = at_default_precision(params)
    env = Dcmg(params, horizon=STEPS_PER_DAY, forecast_hours=forecast_hours, name=name)
    return env, params


register("dcmg-v0", make_dcmg)

__all__ = [
    "Dcmg",
    "DcmgParams",
    "DcmgState",
    "Plan",
    "episode_oracle",
    "five_minute_profiles",
    "greedy",
    "make_dcmg",
    "plan_actions",
    "rule_based",
]
