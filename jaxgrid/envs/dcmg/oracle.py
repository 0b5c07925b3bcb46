"""The perfect-foresight optimum of a dcmg day, by mixed-integer linear programming.

Knowing the day's PV, prices, outdoor temperatures and work arrivals, the best plan
maximises the weighted sum of the objectives (minus energy cost, minus emissions, plus
GPU-hours served) over the day, subject to the models of the environment, every one of
which is linear for given inputs:

- work (:mod:`jaxgrid.devices.datacentre`): served GPU-hours ``s_k,t`` never exceed what
  has arrived, together never the cluster's capacity, and every GPU-hour is served by its
  deadline (the ``sla`` cost is held at 0);
- the hall: the exact first-order step ``T_t = a T_{t-1} + (1 - a) T_out + g (p_it - q_t)``
  with the hall kept inside the setpoint range (and below ``t_max``: no ``thermal`` cost),
  so the environment's setpoint controller enacts the planned cooling ``q_t`` exactly;
- the battery (:mod:`jaxgrid.devices.battery`): charge and discharge with a binary per step
  forbidding both at once, as in :mod:`jaxgrid.envs.arbitrage.oracle` (on days with a
  negative price only: otherwise doing both at once loses money and degradation, so the
  relaxed plan never does it);
- the diesel generator (:mod:`jaxgrid.devices.diesel`): binaries for running ``u_t`` and
  starting ``z_t``; a unit runs at ``t`` only if it ran at ``t - 1`` or a start began
  ``start_steps`` before, not while it starts; minimum stable load, ramp limits (the first
  running step at most ``max(p_min, ramp dt)``); HOMER's fuel curve ``F0 p_max u + F1 p``;
- the grid: ``p_grid = p_dc + c - d - p_pv - p_diesel`` below the import cap (no
  ``grid_import`` cost); emissions on imports ``e_t >= p_grid,t``, ``e_t >= 0``.

Costs are held at zero, so the optimum is the best return a policy can earn without
violating a constraint. Solved with HiGHS through ``scipy.optimize.milp``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

MIP_GAP = 1e-2  # relative optimality gap at which HiGHS stops (the diesel's binaries)
TIME_LIMIT_S = 120.0  # ... or after this long, with the best plan found and its bound
DISP = False  # print HiGHS's log


class Plan(NamedTuple):
    """The optimal plan of one day (arrays ``(T,)`` unless said otherwise)."""

    value: float  # the weighted sum of the objectives over the day
    bound: float  # HiGHS's proof that no plan earns more (value <= optimum <= bound)
    objectives: np.ndarray  # (3,) energy_cost, emissions, work_completed (reward signs)
    served_gpu_h: np.ndarray  # (T, 2)
    t_hall: np.ndarray  # hall temperature after each step, °C
    q_cool_mw: np.ndarray
    p_battery_mw: np.ndarray  # load convention (charge > 0)
    p_diesel_mw: np.ndarray
    diesel_running: np.ndarray  # bool
    diesel_start: np.ndarray  # bool, a start-up begins
    p_grid_mw: np.ndarray


def _scalar(x) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def episode_oracle(env, params, start: int) -> Plan:
    """The optimal plan of the day that starts at profile row ``start``."""
    T, dt = env.horizon, _scalar(params.dt_h)
    rows = start + np.arange(T)
    pv, price, arrivals = (np.asarray(x, float) for x in env.exogenous(rows, params))
    t_out = np.asarray(env.outdoor_temperature(rows, params), float)
    w = np.asarray(params.scalarisation.weights, float)
    dc = {k: np.asarray(v, float) for k, v in vars(params.datacentre).items()}
    bat = {k: _scalar(v) for k, v in vars(params.battery).items()}
    dg = {k: _scalar(v) for k, v in vars(params.diesel).items()}

    # one variable per step of each: served work and work served so far per class,
    # cooling, hall temperature, battery charge / discharge / state of charge / direction,
    # grid exchange, grid imports, diesel output / running / starting
    names = ["s0", "s1", "S0", "S1", "q", "th", "c", "d", "soc", "b", "g", "e", "p", "u", "z"]
    idx = {n: i * T + np.arange(T) for i, n in enumerate(names)}
    n_var = len(names) * T
    lower, upper = np.zeros(n_var), np.full(n_var, np.inf)
    integrality = np.zeros(n_var)
    rows_, cols_, vals_, lo, hi = [], [], [], [], []

    def constrain(terms, low, high):
        """``low <= sum(coef * x[col]) <= high``, terms ``[(cols (T,), coefs)]``; one row per t."""
        r0 = len(lo)
        for cols, coef in terms:
            cols = np.asarray(cols)
            rows_.append(r0 + np.arange(len(cols)))
            cols_.append(cols)
            vals_.append(np.broadcast_to(np.asarray(coef, float), cols.shape))
        n = len(np.asarray(terms[0][0]))
        lo.extend(np.broadcast_to(low, n))
        hi.extend(np.broadcast_to(high, n))

    def bound(name, low, high):
        lower[idx[name]], upper[idx[name]] = low, high

    def prev(name):  # column of the previous step's variable, t >= 1
        return idx[name][:-1]

    def couple(cols, coef, shift=1):
        """Add ``coef * x[cols]`` to the rows ``shift..T-1`` of the last ``T`` rows."""
        r0 = len(lo) - T
        rows_.append(r0 + np.arange(shift, T))
        cols_.append(np.asarray(cols))
        vals_.append(np.full(T - shift, coef, float))

    # -- work: arrived >= served so far >= due so far; shares add up to at most 1
    cap = dc["n_gpus"] * dt
    deadline = np.asarray(params.datacentre.deadline_steps).astype(int)
    for k, (s, total) in enumerate((("s0", "S0"), ("s1", "S1"))):
        bound(s, 0.0, cap)
        arrived = np.cumsum(arrivals[:, k])
        due = np.concatenate([np.zeros(deadline[k] - 1), arrived])[:T]
        # S_t = S_{t-1} + s_t, the work served so far, between what is due and what arrived
        constrain([(idx[total], 1.0), (idx[s], -1.0)], 0.0, 0.0)
        couple(prev(total), -1.0)
        lower[idx[total]], upper[idx[total]] = due - 1e-9 * (1 + due), arrived
    constrain([(idx["s0"], 1.0), (idx["s1"], 1.0)], 0.0, cap)

    # -- hall: T_t - a T_{t-1} + g q_t - g slope (s0 + s1) = (1 - a) T_out + g p_idle
    x = dc["ua_mw_per_k"] * dt / dc["c_mwh_per_k"]
    a, g = np.exp(-x), -np.expm1(-x) / dc["ua_mw_per_k"]
    slope = (dc["p_peak_mw"] - dc["p_idle_mw"]) / cap  # MW of IT power per GPU-h a step
    rhs = (1 - a) * t_out + g * dc["p_idle_mw"]
    rhs[0] += a * _scalar(params.t_initial)
    constrain(
        [(idx["th"], 1.0), (idx["q"], g), (idx["s0"], -g * slope), (idx["s1"], -g * slope)],
        rhs,
        rhs,
    )
    couple(prev("th"), -a)
    bound("q", 0.0, dc["q_max_mw"])
    bound("th", dc["t_set_min"], min(dc["t_set_max"], dc["t_max"]))
    cop = np.maximum(dc["cop_ref"] - dc["cop_slope"] * (t_out - dc["t_ref"]), dc["cop_min"])

    # -- battery: soc after step t; c <= p_max b, d <= p_max (1 - b)
    for name, low, high in (("c", 0.0, bat["p_max_mw"]), ("d", 0.0, bat["p_max_mw"]),
                            ("soc", bat["soc_min"], bat["soc_max"]), ("b", 0.0, 1.0)):  # fmt: skip
        bound(name, low, high)
    # losses pay only at a negative price (or free throughput): binaries only then
    integrality[idx["b"]] = float(price.min() < 0 or bat["degradation_cost"] <= 0)
    e_c = bat["eta_charge"] * dt / bat["capacity_mwh"]
    e_d = dt / (bat["eta_discharge"] * bat["capacity_mwh"])
    soc0 = np.zeros(T)
    soc0[0] = _scalar(params.initial_soc)
    constrain([(idx["soc"], 1.0), (idx["c"], -e_c), (idx["d"], e_d)], soc0, soc0)
    couple(prev("soc"), -1.0)
    constrain([(idx["c"], 1.0), (idx["b"], -bat["p_max_mw"])], -np.inf, 0.0)
    constrain([(idx["d"], 1.0), (idx["b"], bat["p_max_mw"])], -np.inf, bat["p_max_mw"])

    # -- diesel: p_min u <= p <= p_max u; start-up, ramps
    for name, high in (("p", dg["p_max_mw"]), ("u", 1.0), ("z", 1.0)):
        bound(name, 0.0, high)
    integrality[idx["u"]] = integrality[idx["z"]] = 1
    constrain([(idx["p"], 1.0), (idx["u"], -dg["p_min_mw"])], 0.0, np.inf)
    constrain([(idx["p"], 1.0), (idx["u"], -dg["p_max_mw"])], -np.inf, 0.0)
    L = int(np.asarray(params.diesel.start_steps))
    ramp = dg["ramp_mw_per_h"] * dt
    first = min(max(dg["p_min_mw"], ramp), dg["p_max_mw"])
    # runs at t only if it ran at t-1 or a start began at t-L: u_t - u_{t-1} - z_{t-L} <= 0
    constrain([(idx["u"], 1.0)], -np.inf, 0.0)
    couple(prev("u"), -1.0)
    if L < T:
        couple(idx["z"][: T - L], -1.0, shift=L)
    # no start while running the step before; not running while starting
    constrain([(idx["z"][1:], 1.0), (prev("u"), 1.0)], -np.inf, 1.0)
    for k in range(L):
        constrain([(idx["u"][k:], 1.0), (idx["z"][: T - k], 1.0)], -np.inf, 1.0)
    # ramps: p_t - p_{t-1} <= ramp u_{t-1} + first (1 - u_{t-1}); p_0 <= first
    constrain([(idx["p"][1:], 1.0), (prev("p"), -1.0), (prev("u"), first - ramp)], -np.inf, first)
    upper[idx["p"][0]] = first
    # p_{t-1} - p_t <= ramp u_t + p_max (1 - u_t)
    constrain(
        [(prev("p"), 1.0), (idx["p"][1:], -1.0), (idx["u"][1:], dg["p_max_mw"] - ramp)],
        -np.inf,
        dg["p_max_mw"],
    )

    # -- grid: g - p_dc - c + d + p = -pv, p_dc = p_idle + slope (s0 + s1) + q / cop
    bound("g", -np.inf, _scalar(params.import_cap_mw))
    rhs = dc["p_idle_mw"] - pv
    constrain(
        [
            (idx["g"], 1.0),
            (idx["s0"], -slope),
            (idx["s1"], -slope),
            (idx["q"], -1.0 / cop),
            (idx["c"], -1.0),
            (idx["d"], 1.0),
            (idx["p"], 1.0),
        ],
        rhs,
        rhs,
    )
    bound("e", 0.0, np.inf)
    constrain([(idx["e"], 1.0), (idx["g"], -1.0)], 0.0, np.inf)

    # -- objectives, reward signs: energy_cost, emissions, work_completed
    fuel_u = dg["fuel_noload_l_per_mwh"] * dg["p_max_mw"] * dt  # litres a running step
    fuel_p = dg["fuel_l_per_mwh"] * dt  # litres per MW a step
    objective = np.zeros((3, n_var))
    objective[0, idx["g"]] = -price * dt
    objective[0, idx["c"]] = objective[0, idx["d"]] = -bat["degradation_cost"] * dt
    objective[0, idx["u"]] = -dg["fuel_price"] * fuel_u
    objective[0, idx["p"]] = -dg["fuel_price"] * fuel_p
    objective[0, idx["z"]] = -dg["start_cost"]
    objective[1, idx["e"]] = -_scalar(params.grid_t_per_mwh) * dt
    objective[1, idx["u"]] = -dg["emission_t_per_l"] * fuel_u
    objective[1, idx["p"]] = -dg["emission_t_per_l"] * fuel_p
    objective[2, idx["s0"]] = objective[2, idx["s1"]] = 1.0

    matrix = sp.csr_matrix(
        (np.concatenate(vals_), (np.concatenate(rows_), np.concatenate(cols_))),
        shape=(len(lo), n_var),
    )
    result = milp(
        -(w @ objective),
        constraints=LinearConstraint(matrix, np.array(lo), np.array(hi)),
        integrality=integrality,
        bounds=Bounds(lower, upper),
        options={"mip_rel_gap": MIP_GAP, "time_limit": TIME_LIMIT_S, "disp": DISP},
    )
    if result.x is None:
        raise RuntimeError(
            f"the dcmg oracle found no plan for the day from row {start} ({result.message}): "
            "its work cannot meet the deadlines, or its load the import cap"
        )
    sol = result.x
    on = sol[idx["u"]] > 0.5
    return Plan(
        value=-float(result.fun),
        bound=-float(getattr(result, "mip_dual_bound", result.fun) or result.fun),
        objectives=objective @ sol,
        served_gpu_h=np.stack([sol[idx["s0"]], sol[idx["s1"]]], axis=1),
        t_hall=sol[idx["th"]],
        q_cool_mw=sol[idx["q"]],
        p_battery_mw=sol[idx["c"]] - sol[idx["d"]],
        p_diesel_mw=np.where(on, sol[idx["p"]], 0.0),
        diesel_running=on,
        diesel_start=sol[idx["z"]] > 0.5,
        p_grid_mw=sol[idx["g"]],
    )


def plan_actions(env, params, plan: Plan) -> np.ndarray:
    """``(T, 1, 5)`` environment actions that enact ``plan``."""
    dc, dg = params.datacentre, params.diesel
    cap = _scalar(dc.n_gpus) * _scalar(params.dt_h)
    setpoint = (plan.t_hall - _scalar(dc.t_set_min)) / (
        _scalar(dc.t_set_max) - _scalar(dc.t_set_min)
    )
    L = int(np.asarray(dg.start_steps))
    starting = np.zeros(env.horizon, bool)
    for t in np.flatnonzero(plan.diesel_start):  # keep asking while it starts
        starting[t : t + L] = True
    diesel = np.where(
        plan.diesel_running,
        plan.p_diesel_mw / _scalar(dg.p_max_mw),
        np.where(starting, _scalar(dg.p_min_mw) / _scalar(dg.p_max_mw), 0.0),
    )
    return np.stack(
        [
            plan.served_gpu_h[:, 0] / cap,
            plan.served_gpu_h[:, 1] / cap,
            setpoint,
            plan.p_battery_mw / _scalar(params.battery.p_max_mw),
            diesel,
        ],
        axis=1,
    )[:, None, :]
