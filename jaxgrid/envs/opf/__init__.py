"""Generators as the agents of an AC optimal power flow on MATPOWER cases (``opf14-v0``,
``opf118-v0``; PowerZoo's ``marl_opf``), with proportional and economic-dispatch
baselines and the AC-OPF of every step as the oracle."""

from __future__ import annotations

import numpy as np

from jaxgrid.data.simbench import simbench_profiles
from jaxgrid.envs.opf import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.opf.baselines import acopf_policy, economic_dispatch, proportional
from jaxgrid.envs.opf.env import OPF, OPFParams, OPFState
from jaxgrid.envs.opf.oracle import DayOPF, day_oracle
from jaxgrid.envs.tso.ratings import angle_ratings
from jaxgrid.grid import network_from_matpower
from jaxgrid.registry import register, register_variant
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import at_default_precision


def make_opf(
    case: str = "case14",
    steps_per_day: int = 48,
    demand_floor: float = 0.4,
    vm_tol_pu: float = 1e-4,
    flow_tol_mva: float = 0.1,
    q_tol_mvar: float = 0.1,
    p_tol_mw: float = 0.1,
    iterations: int | None = None,
    power_flow_penalty: float | None = None,
    acopf_baseline: bool | None = None,
    name: str = "opf14-v0",
):
    """Build a generators-as-agents AC-OPF environment on a bundled MATPOWER case and its
    default params.

    Loads: every bus's load in the case data is its peak; it follows one of the bundled
    SimBench load profiles (2016, ODbL; households H0, commerce G0, business-hours
    commerce G1), bus ``i`` the class ``i % 3``, each profile divided by its annual peak,
    as ``peak * (demand_floor + (1 - demand_floor) * shape)``, with the bus's power
    factor. Costs, limits and voltage bands are the case's; branches without a rating get
    the 10° angle rating of :func:`jaxgrid.envs.tso.ratings.angle_ratings` (MATPOWER's
    case14 and case118 rate none).

    Args:
        case: a bundled MATPOWER case with every generator in service (``case14``,
            ``case118``, ...).
        steps_per_day: 48 (half-hourly), 24 or 96; an episode is one day.
        demand_floor: a bus's load at its profile's zero, share of its peak.
        vm_tol_pu, flow_tol_mva, q_tol_mvar, p_tol_mw: violations up to these are not
            counted (round-off of the float32 power flow).
        iterations: fast-decoupled iterations of each step's power flow (default: 12 in
            float32, 30 in float64).
        power_flow_penalty: reward lost per step an episode loses to a failed power flow
            (thousands of currency); default: every generator at full output for a step,
            rounded up.
        acopf_baseline: offer the AC-OPF of each step as a baseline (default: on networks
            up to 30 buses, where it is cheap).
    """
    network = network_from_matpower(case)
    pd = np.asarray(network.pd_mw, float)
    if np.any(pd < 0):
        raise ValueError(f"{case} has negative loads; the load model scales loads by profiles")
    dt_h = 24.0 / steps_per_day
    profiles = simbench_profiles(steps_per_day)
    load = profiles.load / profiles.load.max(axis=0)
    n_class = load.shape[1]
    weights = np.eye(n_class)[np.arange(network.n_bus) % n_class]
    if power_flow_penalty is None:
        full = np.sum(np.asarray(network.generation_cost(network.pmax_mw)))
        power_flow_penalty = float(np.ceil(full * dt_h / 1000.0))
    if acopf_baseline is None:
        acopf_baseline = network.n_bus <= 30
    params = OPFParams(
        profiles=profiles.replace(load=load),
        pd_mw=pd,
        qd_mvar=np.asarray(network.qd_mvar, float),
        load_weights=weights,
        demand_floor=np.float64(demand_floor),
        cost_poly=np.asarray(network.cost_poly, float),
        pmin_mw=np.asarray(network.pmin_mw, float),
        pmax_mw=np.asarray(network.pmax_mw, float),
        qmin_mvar=np.asarray(network.qmin_mvar, float),
        qmax_mvar=np.asarray(network.qmax_mvar, float),
        vmin_pu=np.asarray(network.vmin_pu, float),
        vmax_pu=np.asarray(network.vmax_pu, float),
        rate_mva=angle_ratings(network),
        vm_tol_pu=np.float64(vm_tol_pu),
        flow_tol_mva=np.float64(flow_tol_mva),
        q_tol_mvar=np.float64(q_tol_mvar),
        p_tol_mw=np.float64(p_tol_mw),
        dt_h=np.float64(dt_h),
        power_flow_penalty=np.float64(power_flow_penalty),
        scalarisation=Scalarisation.create(1, "weighted_sum", [1.0]),
    )
    params = at_default_precision(params)
    env = OPF(
        network,
        params,
        horizon=steps_per_day,
        iterations=iterations,
        acopf_baseline=acopf_baseline,
        name=name,
    )
    return env, params


register("opf14-v0", make_opf)
register_variant("opf118-v0", make_opf, case="case118")

__all__ = [
    "OPF",
    "DayOPF",
    "OPFParams",
    "OPFState",
    "acopf_policy",
    "day_oracle",
    "economic_dispatch",
    "make_opf",
    "proportional",
]
