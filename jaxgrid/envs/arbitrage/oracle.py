"""The perfect-foresight optimum of an arbitrage episode, by mixed-integer programming.

Given the episode's prices, the best schedule maximises
``sum_t price_t (d_t - c_t) dt - deg (c_t + d_t) dt`` over charge ``c_t`` and discharge
``d_t`` (MW) subject to the battery model of :mod:`jaxgrid.devices.battery`:
``soc_{t+1} = soc_t + (eta_c c_t - d_t / eta_d) dt / capacity`` within the SOC bounds and
the power rating. A binary per step forbids charging and discharging at once (which a
plain LP would exploit at negative prices to burn energy through the losses, something
the environment's single power setpoint cannot do), so the optimum is exact for the
environment's model. Solved with HiGHS through ``scipy.optimize.milp``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp


class Schedule(NamedTuple):
    profit: float  # objective value: money earned minus degradation cost
    p_mw: np.ndarray  # (T,) optimal power, load convention (charge > 0)
    soc: np.ndarray  # (T + 1,) state of charge


def optimal_schedule(
    prices,
    dt_h: float,
    capacity_mwh: float,
    p_max_mw: float,
    eta_charge: float,
    eta_discharge: float,
    soc_min: float,
    soc_max: float,
    degradation_cost: float,
    initial_soc: float,
) -> Schedule:
    """The optimal schedule and its value for one episode of ``prices`` (currency/MWh)."""
    prices = np.asarray(prices, float)
    n = len(prices)
    # variables: c (n), d (n), soc (n + 1), u (n binary: 1 = charging)
    c, d, s, u = slice(0, n), slice(n, 2 * n), slice(2 * n, 3 * n + 1), slice(3 * n + 1, 4 * n + 1)
    nv = 4 * n + 1
    objective = np.zeros(nv)
    objective[c] = (prices + degradation_cost) * dt_h  # minimise cost = -profit
    objective[d] = (-prices + degradation_cost) * dt_h
    rows, lo, hi = [], [], []
    for t in range(n):
        row = np.zeros(nv)  # soc_{t+1} - soc_t - (eta_c c - d / eta_d) dt / cap = 0
        row[2 * n + t + 1], row[2 * n + t] = 1.0, -1.0
        row[t] = -eta_charge * dt_h / capacity_mwh
        row[n + t] = dt_h / (eta_discharge * capacity_mwh)
        rows.append(row), lo.append(0.0), hi.append(0.0)
        row = np.zeros(nv)  # c_t <= p_max u_t
        row[t], row[3 * n + 1 + t] = 1.0, -p_max_mw
        rows.append(row), lo.append(-np.inf), hi.append(0.0)
        row = np.zeros(nv)  # d_t <= p_max (1 - u_t)
        row[n + t], row[3 * n + 1 + t] = 1.0, p_max_mw
        rows.append(row), lo.append(-np.inf), hi.append(p_max_mw)
    lower = np.zeros(nv)
    upper = np.full(nv, p_max_mw)
    lower[s], upper[s] = soc_min, soc_max
    lower[2 * n], upper[2 * n] = initial_soc, initial_soc
    lower[u], upper[u] = 0.0, 1.0
    integrality = np.zeros(nv)
    integrality[u] = 1
    result = milp(
        objective,
        constraints=LinearConstraint(np.array(rows), lo, hi),
        integrality=integrality,
        bounds=Bounds(lower, upper),
        options={"mip_rel_gap": 1e-9},
    )
    if not result.success:
        raise RuntimeError(f"the arbitrage oracle did not solve: {result.message}")
    x = result.x
    return Schedule(profit=-float(result.fun), p_mw=x[c] - x[d], soc=x[s])


def episode_oracle(env, params, start: int) -> Schedule:
    """The perfect-foresight optimum of the episode that starts at profile row ``start``."""
    b = jax.tree_util.tree_map(lambda x: float(np.asarray(x).reshape(-1)[0]), params.battery)
    return optimal_schedule(
        np.asarray(env.prices(start, params, env.horizon)),
        dt_h=float(params.dt_h),
        capacity_mwh=b.capacity_mwh,
        p_max_mw=b.p_max_mw,
        eta_charge=b.eta_charge,
        eta_discharge=b.eta_discharge,
        soc_min=b.soc_min,
        soc_max=b.soc_max,
        degradation_cost=b.degradation_cost,
        initial_soc=float(np.asarray(params.initial_soc)[0]),
    )
