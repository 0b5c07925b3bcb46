"""The perfect-foresight charging plan of an ``evfleet`` episode, by linear programming.

Knowing the day's loads, prices and every vehicle's session, the plan minimises the
fleet's energy cost ``sum_t price_t sum_i (c_it - d_it) dt`` over charging ``c`` and
V2G discharging ``d`` (MW, grid side) subject to

- each battery's model (:func:`~jaxgrid.devices.battery.battery_step`):
  ``soc_i,t+1 = soc_it + (eta_c c_it - d_it / eta_d) dt / capacity`` within the SOC
  bounds, power within the charger rating while plugged in, none while away;
- each vehicle leaving with its target, or with as much as its stay allows at full power
  when the target is out of reach;
- the linearised network (LinDistFlow, :mod:`jaxgrid.grid.lindistflow`): squared bus
  voltages ``v_t = v_t^base - 2 R p_t^ev`` inside the band, and the substation's active
  import inside what the transformer rating leaves beside the base loads' reactive
  import; both softened by slacks that cost :data:`SLACK_COST` per pu (or MVA) and step,
  as a day whose base load already leaves the band must stay solvable.

Solved with HiGHS through ``scipy.optimize.milp``; where a price is negative a binary per
vehicle and step forbids charging and discharging at once (which would burn energy
through the losses, something a single setpoint cannot do). The plan is then stepped
through the environment itself (:func:`plan_return`), so the oracle's figure is a return
the environment really pays, with its nonlinear power flow, losses and fairness term.
It is the optimum of the energy cost within the linearised limits, not of the weighted
reward: losses are left out of the program (they are second order here).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix, vstack

from jaxgrid.grid.lindistflow import lindistflow

SLACK_COST = 1e4  # currency per pu of squared voltage outside the band (or MVA) and step


class Plan(NamedTuple):
    energy_cost: float  # currency, the program's energy cost (slacks excluded)
    p_mw: np.ndarray  # (T, n) charging power, grid side (discharge < 0)
    soc: np.ndarray  # (T + 1, n) state of charge
    slack: float  # sum of the band and transformer slacks the plan needed


def _host(x) -> np.ndarray:
    return np.asarray(x, np.float64)


@functools.partial(jax.jit, static_argnums=0)
def _base_day(env, params, rows):
    """Price (currency/MWh), LinDistFlow voltages (pu), active and reactive import (MW,
    Mvar) of the base loads alone at profile ``rows``: ``(T,)``, ``(T, n_bus)``, ..."""

    def at(row):
        p, q, price = env.exogenous(row, params)
        flow = lindistflow(params.feeder, p, q)
        return price, flow.vm_pu, flow.p_import_mw, flow.q_import_mvar

    return jax.vmap(at)(rows)


def day_plan(env, params, state) -> Plan:
    """The cheapest plan for the episode of ``state`` (an unbatched reset state)."""
    n, horizon = env.num_agents, env.horizon
    dt = float(params.dt_h)
    b = jax.tree_util.tree_map(_host, params.ev.battery)
    v2g = np.broadcast_to(np.asarray(params.ev.v2g, bool), (n,))
    target = np.broadcast_to(_host(params.ev.target_soc), (n,))
    arrival, departure = np.asarray(state.arrival), np.asarray(state.departure)
    soc0 = _host(state.soc_arrival)
    feeder = params.feeder
    price, vm, p_import, q_import = (
        _host(x) for x in _base_day(env, params, state.start + jnp.arange(horizon))
    )
    v_base = vm**2  # (T, n_bus)
    path = _host(feeder.path)
    r = _host(feeder.r_pu) / float(feeder.base_mva)
    sens = 2.0 * (path.T * r) @ path  # (n_bus, n_bus): squared-voltage drop per MW at a bus
    drop = sens[:, np.asarray(params.vehicle_bus)]  # (n_bus, n)
    n_bus = drop.shape[0]
    plugged = (arrival[None] <= np.arange(horizon)[:, None]) & (
        np.arange(horizon)[:, None] < departure[None]
    )  # (T, n)
    burn = bool((price < 0).any() and v2g.any())

    # variable blocks: c (T n), d (T n), soc ((T+1) n), band slack (T n_bus, low and
    # high), transformer slack (T), and binaries u (T n) where burning must be forbidden
    nc = horizon * n
    offsets = np.cumsum([0, nc, nc, (horizon + 1) * n, 2 * horizon * n_bus, horizon, nc])
    c_at = lambda t, i: offsets[0] + t * n + i  # noqa: E731
    d_at = lambda t, i: offsets[1] + t * n + i  # noqa: E731
    s_at = lambda t, i: offsets[2] + t * n + i  # noqa: E731
    n_var = offsets[-1] if burn else offsets[-2]
    objective = np.zeros(n_var)
    objective[offsets[0] : offsets[1]] = np.repeat(price * dt, n)
    objective[offsets[1] : offsets[2]] = -np.repeat(price * dt, n)
    objective[offsets[3] : offsets[5]] = SLACK_COST
    lower, upper = np.zeros(n_var), np.zeros(n_var)
    upper[offsets[0] : offsets[1]] = (plugged * b.p_max_mw).ravel()
    upper[offsets[1] : offsets[2]] = (plugged * v2g * b.p_max_mw).ravel()
    lower[offsets[2] : offsets[3]] = np.tile(b.soc_min * np.ones(n), horizon + 1)
    upper[offsets[2] : offsets[3]] = np.tile(b.soc_max * np.ones(n), horizon + 1)
    lower[s_at(0, 0) : s_at(1, 0)], upper[s_at(0, 0) : s_at(1, 0)] = soc0, soc0
    upper[offsets[3] : offsets[5]] = np.inf
    integrality = np.zeros(n_var)
    if burn:
        upper[offsets[5] :] = 1.0
        integrality[offsets[5] :] = 1

    blocks, lo, hi = [], [], []

    def add(entries, low, high):
        rr, cc, vv = (np.concatenate(x) for x in zip(*entries))
        blocks.append(coo_matrix((vv, (rr, cc)), shape=(int(rr.max()) + 1, n_var)))
        lo.append(np.asarray(low, float)), hi.append(np.asarray(high, float))

    t_idx, i_idx = np.meshgrid(np.arange(horizon), np.arange(n), indexing="ij")
    t_idx, i_idx = t_idx.ravel(), i_idx.ravel()
    k = np.arange(nc)
    # soc_{t+1} - soc_t - (eta_c c - d / eta_d) dt / capacity = 0
    cap = np.broadcast_to(b.capacity_mwh, (n,))[i_idx]
    eta_c = np.broadcast_to(b.eta_charge, (n,))[i_idx]
    eta_d = np.broadcast_to(b.eta_discharge, (n,))[i_idx]
    add(
        [
            (k, s_at(t_idx + 1, i_idx), np.ones(nc)),
            (k, s_at(t_idx, i_idx), -np.ones(nc)),
            (k, c_at(t_idx, i_idx), -eta_c * dt / cap),
            (k, d_at(t_idx, i_idx), dt / (eta_d * cap)),
        ],
        np.zeros(nc),
        np.zeros(nc),
    )
    # leave with the target, or with what full power from arrival reaches
    p_max = np.broadcast_to(b.p_max_mw, (n,))
    capacity = np.broadcast_to(b.capacity_mwh, (n,))
    reachable = soc0 + (departure - arrival) * p_max * np.broadcast_to(b.eta_charge, (n,)) * dt
    reachable = reachable / capacity
    goal = np.minimum(np.minimum(target, reachable), np.broadcast_to(b.soc_max, (n,)))
    goal = np.maximum(goal, soc0) - 1e-9
    rows_i = np.arange(n)
    add([(rows_i, s_at(departure, rows_i), np.ones(n))], goal, np.full(n, np.inf))
    # band: v_base - sum_i drop[j, i] (c - d) + low_slack >= v_lower^2, and
    #       v_base - sum_i drop[j, i] (c - d) - high_slack <= v_upper^2
    v_lo, v_hi = float(params.v_lower) ** 2, float(params.v_upper) ** 2
    for sign, bound in ((1.0, v_lo), (-1.0, v_hi)):
        entries = []
        row = (np.arange(horizon)[:, None] * n_bus + np.arange(n_bus)[None]).ravel()
        rr = np.repeat(row, n)
        tt = np.repeat(np.arange(horizon), n_bus * n)
        ii = np.tile(np.arange(n), horizon * n_bus)
        vv = -np.tile(drop.ravel(), horizon)
        entries.append((rr, c_at(tt, ii), vv))
        entries.append((rr, d_at(tt, ii), -vv))
        first = offsets[3] + (0 if sign > 0 else horizon * n_bus)
        entries.append((row, first + row, sign * np.ones(horizon * n_bus)))
        rest = bound - v_base.ravel()
        if sign > 0:
            add(entries, rest, np.full(horizon * n_bus, np.inf))
        else:
            add(entries, np.full(horizon * n_bus, -np.inf), rest)
    # transformer: base import + fleet - slack <= sqrt(rating^2 - q_import^2)
    rating = float(params.transformer_mva)
    room = np.sqrt(np.maximum(rating**2 - q_import**2, 0.0)) - p_import
    add(
        [
            (t_idx, c_at(t_idx, i_idx), np.ones(nc)),
            (t_idx, d_at(t_idx, i_idx), -np.ones(nc)),
            (np.arange(horizon), offsets[5] - horizon + np.arange(horizon), -np.ones(horizon)),
        ],
        np.full(horizon, -np.inf),
        room,
    )
    if burn:  # c <= p_max u, d <= p_max (1 - u)
        u = offsets[5] + k
        pm = p_max[i_idx]
        add([(k, c_at(t_idx, i_idx), np.ones(nc)), (k, u, -pm)], np.full(nc, -np.inf), 0 * pm)
        add([(k, d_at(t_idx, i_idx), np.ones(nc)), (k, u, pm)], np.full(nc, -np.inf), pm)
    result = milp(
        objective,
        constraints=LinearConstraint(
            vstack(blocks).tocsr(), np.concatenate(lo), np.concatenate(hi)
        ),
        integrality=integrality,
        bounds=Bounds(lower, upper),
        options={"mip_rel_gap": 1e-9},
    )
    if result.x is None:
        raise RuntimeError(f"the evfleet oracle did not solve: {result.message}")
    x = result.x
    p = (x[offsets[0] : offsets[1]] - x[offsets[1] : offsets[2]]).reshape(horizon, n)
    slack = float(np.sum(x[offsets[3] : offsets[5]]))
    return Plan(
        energy_cost=float(np.sum(price[:, None] * p) * dt),
        p_mw=p,
        soc=x[offsets[2] : offsets[3]].reshape(horizon + 1, n),
        slack=slack,
    )


def plan_actions(plan: Plan, params) -> np.ndarray:
    """``(T, n, 1)`` the plan as actions: shares of each charger's rating."""
    p_max = np.broadcast_to(_host(params.ev.battery.p_max_mw), plan.p_mw.shape[1:])
    return np.clip(plan.p_mw / p_max, -1.0, 1.0)[..., None]


def rollout_plan(env, params, state, actions):
    """Step the environment from ``state`` through ``actions`` ``(T, n, 1)`` without
    auto-reset: ``(rewards (T, n), costs (T, n, n_costs), info)`` of every step."""

    def one(carry, action):
        _, new, reward, _, _, info = env.step_env(jax.random.PRNGKey(0), carry, action, params)
        return new, (reward, info["costs"], info)

    _, (rewards, costs, info) = jax.lax.scan(one, state, jnp.asarray(actions))
    return rewards, costs, info


_rollout_plan_jit = jax.jit(rollout_plan, static_argnums=0)


def plan_return(env, params, state) -> float:
    """The return (mean over agents) of :func:`day_plan`'s plan in the environment."""
    actions = plan_actions(day_plan(env, params, state), params)
    rewards, _, _ = _rollout_plan_jit(env, params, state, actions)
    return float(jnp.mean(jnp.sum(rewards, axis=0)))
