"""A distribution system operator dispatching flexible loads to cut network losses.

After PowerZoo's DSO task (case33bw, six flexible loads, 30-minute steps), so the two can
be compared.

**Agent.** One operator (``operator``).

**State.** Step within the day, the day's first profile row, bus voltages and branch flows
of the last power flow, and each flexible load's deferral buffer (MWh by age).

**Action.** ``(1, 12)``: six curtailment shares in [0, 1] then six shift shares in
[-1, 1] (defer if positive, recover deferred demand if negative), each scaled by the
load's capacity (:mod:`jaxgrid.devices.flexload`).

**Transition.** Every bus draws its base load times its profile; at the six flexible
buses the flexible load's curtailment and shifting change that demand; the feeder is
solved by ``distflow`` (Newton-Raphson where its sweep does not converge) or
``lindistflow`` (``params.solver``).

**Observation.** ``(1, 195)``: bus voltages (pu, 33), branch P and Q flows (MW, Mvar,
32 + 32), bus load P and Q of the coming step (MW, Mvar, 33 + 33), time of day as sine
and cosine, and per flexible load its coming demand, last curtailment, deferral,
recovery (MW) and buffered energy (MWh).

**Objectives.** ``losses``: minus the network loss of the step (MWh); ``curtailment``:
minus the demand curtailed (MWh); ``deferral``: minus the energy waiting in buffers
(MWh, a holding discomfort). Default reward: ``losses + curtailment + 0.1 deferral``.

**Costs.** ``voltage_band``: sum over buses of the distance outside the band (pu);
``power_flow``: 1 on a step whose power flow failed.

**Episode.** ``horizon`` steps (a day) from a day drawn from ``profiles.days``. A power
flow with no solution (voltage collapse) terminates it with the reward
``-power_flow_penalty`` for the failed step and every step it cuts off (default 0.15 a
step, more than random actions pay on average)
and ``info["power_flow_failed"]``; the state keeps the last solved voltages and flows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid import spaces
from jaxgrid.data.profiles import Profiles, feeder_loads, sample_start
from jaxgrid.devices.flexload import FlexLoadParams, flexload_step
from jaxgrid.env import Environment, Transition
from jaxgrid.envs.dso.baselines import evening_shift, no_control
from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.limits import voltage_violation_pu
from jaxgrid.grid.solvers import hold_failed, solve_feeder
from jaxgrid.rewards.abort import AbortConditions
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array

# the "mpc" baseline's horizon (steps), Adam iterations, step size and cost weight (reward
# per pu outside the band), from benchmarks/mpc_baselines.py on held-out days
MPC_SETTINGS = (8, 30, 0.1, 10.0)


@struct.dataclass
class DSOState:
    time: Array  # () int32
    start: Array  # () int32
    vm_pu: Array  # (n_bus,)
    p_branch_mw: Array  # (n_branch,)
    q_branch_mvar: Array  # (n_branch,)
    buffer: Array  # (n_flex, window) MWh
    last: Array  # (3, n_flex) last curtailment, deferral and recovery, MW
    start_failed: Array  # () bool: the reset's power flow failed (vm_pu 1.0); step 1 says so


@struct.dataclass
class DSOParams:
    """Attributes:
    feeder: the network (its ``vm_slack_pu`` sets the substation voltage).
    profiles: load profiles and episode days.
    load_profile: ``(n_bus,)`` int32 column of ``profiles.load`` for each bus.
    load_scale: ``()`` multiplier of every load.
    flex_bus: ``(n_flex,)`` int32 bus of each flexible load.
    flex: capacities of the flexible loads.
    v_lower, v_upper: ``()`` voltage band, pu.
    dt_h: ``()`` step length, hours.
    solver: ``()`` int32 ``LINDISTFLOW`` or ``DISTFLOW``.
    power_flow_penalty: ``()`` reward lost per step lost when a power flow fails.
    abort: bounds on the lowest and highest bus voltage (off by default).
    scalarisation: how the objectives become the reward.
    """

    feeder: Feeder
    profiles: Profiles
    load_profile: Array
    load_scale: Array
    flex_bus: Array
    flex: FlexLoadParams
    v_lower: Array
    v_upper: Array
    dt_h: Array
    solver: Array
    power_flow_penalty: Array
    abort: AbortConditions
    scalarisation: Scalarisation


class DSO(Environment):
    """Flexible-load dispatch on a feeder (see the module docstring)."""

    agents = ("operator",)
    agent_types = ("operator",)
    objective_names = ("losses", "curtailment", "deferral")
    cost_names = ("voltage_band", "power_flow")
    abort_names = ("min_vm_pu", "max_vm_pu")

    def __init__(
        self,
        default_params: DSOParams,
        horizon: int,
        window: int,
        distflow_iterations: int,
        name: str,
    ):
        self.horizon = int(horizon)
        self.window = int(window)
        self.distflow_iterations = int(distflow_iterations)
        self.n_flex = int(default_params.flex_bus.shape[0])
        self.action_names = (
            *(f"curtail_share[{i}]" for i in range(self.n_flex)),
            *(f"shift_share[{i}]" for i in range(self.n_flex)),
        )
        self._default_params = default_params
        self._name = name

    def device_buses(self, params: DSOParams) -> dict:
        """Buses of each device type, for pictures."""
        return {"flexible load": np.asarray(params.flex_bus)}

    def action_space(self, params):
        low = jnp.concatenate([jnp.zeros(self.n_flex), -jnp.ones(self.n_flex)])
        return spaces.Box(low[None], 1.0, (1, 2 * self.n_flex))

    def observation_names(self, params: DSOParams) -> tuple[str, ...]:
        f = params.feeder
        buses = [int(b) for b in np.asarray(f.bus_ids)]
        branches = range(f.n_branch)
        flex = ("p_load_mw", "curtailed_mw", "deferred_mw", "recovered_mw", "buffer_mwh")
        return (
            *(f"vm_pu[{b}]" for b in buses),
            *(f"p_branch_mw[{k}]" for k in branches),
            *(f"q_branch_mvar[{k}]" for k in branches),
            *(f"p_load_mw[{b}]" for b in buses),
            *(f"q_load_mvar[{b}]" for b in buses),
            "sin_time",
            "cos_time",
            *(f"flex[{i}].{x}" for i in range(self.n_flex) for x in flex),
        )

    def observation_space(self, params):
        f = params.feeder
        size = 3 * f.n_bus + 2 * f.n_branch + 2 + 5 * self.n_flex
        return spaces.Box(-jnp.inf, jnp.inf, (1, size))

    def loads(self, row, params: DSOParams):
        """Bus loads (MW, Mvar) at profile row ``row``."""
        return feeder_loads(
            params.profiles, row, params.load_profile, params.load_scale, params.feeder
        )

    forecast_names = ("load_mw",)

    def exogenous_ahead(self, state, params: DSOParams, steps):
        """Total load, MW, ``steps`` ahead: ``(len(steps), 1)``."""
        rows = state.start + state.time + jnp.asarray(steps)
        return jax.vmap(lambda row: jnp.sum(self.loads(row, params)[0])[None])(rows)

    def power_flow(self, p, q, params: DSOParams):
        """The feeder solved for bus injections ``p`` (MW) and ``q`` (Mvar), by the solver
        ``params`` choose (nonlinear DistFlow or LinDistFlow)."""
        return solve_feeder(params.feeder, p, q, params.solver, self.distflow_iterations)

    def baselines(self, params: DSOParams) -> dict:
        """Random, no control, deferring the evening peak to the night, and ``mpc``:
        receding-horizon MPC with perfect foresight on this environment's own model
        (:mod:`jaxgrid.control.mpc`, a controller that reads the state)."""
        from jaxgrid.control.mpc import MPCConfig, mpc_controller  # control sits above envs

        return {
            **super().baselines(params),
            "no_control": no_control(self.n_flex),
            "evening_shift": evening_shift(self.n_flex),
            "mpc": mpc_controller(self, params, MPCConfig(*MPC_SETTINGS)),
        }

    def abort_values(self, state, params):
        """Lowest and highest bus voltage of the last power flow, pu."""
        return jnp.stack([jnp.min(state.vm_pu), jnp.max(state.vm_pu)])

    def observe(self, state: DSOState, params: DSOParams):
        p, q = self.loads(state.start + state.time, params)
        steps_per_day = jnp.round(24.0 / params.dt_h)
        phase = 2 * jnp.pi * ((state.start + state.time) % steps_per_day) / steps_per_day
        flex = jnp.concatenate(
            [p[params.flex_bus][None], state.last, jnp.sum(state.buffer, axis=1)[None]], axis=0
        ).T.ravel()
        parts = [
            state.vm_pu,
            state.p_branch_mw,
            state.q_branch_mvar,
            p,
            q,
            jnp.stack([jnp.sin(phase), jnp.cos(phase)]),
            flex,
        ]
        return jnp.concatenate([x.astype(p.dtype) for x in parts])[None]

    def reset_env(self, key, params: DSOParams):
        start = sample_start(key, params.profiles.days, self.horizon)
        p, q = self.loads(start, params)
        flow = hold_failed(self.power_flow(p, q, params), 1.0)
        dtype = p.dtype
        state = DSOState(
            time=jnp.zeros((), jnp.int32),
            start=start,
            vm_pu=flow.vm_pu,
            p_branch_mw=flow.p_branch_mw,
            q_branch_mvar=flow.q_branch_mvar,
            buffer=jnp.zeros((self.n_flex, self.window), dtype),
            last=jnp.zeros((3, self.n_flex), dtype),
            start_failed=~flow.converged,
        )
        return self.observe(state, params), state

    def transition(self, key, state: DSOState, action, params: DSOParams) -> Transition:
        p, q = self.loads(state.start + state.time, params)
        bus = params.flex_bus
        demand = p[bus]
        flex = flexload_step(
            state.buffer,
            demand,
            action[0, : self.n_flex],
            action[0, self.n_flex :],
            params.dt_h,
            params.flex,
        )
        # the flexible buses draw the dispatched demand; reactive load follows at its power factor
        ratio = jnp.where(demand > 0, flex.p_mw / jnp.where(demand > 0, demand, 1.0), 1.0)
        p = p.at[bus].set(flex.p_mw)
        q = q.at[bus].set(q[bus] * ratio)  # not .multiply: JAX has no gradient of that
        solved = self.power_flow(p, q, params)
        flow = hold_failed(solved, state.vm_pu)
        violation = voltage_violation_pu(flow.vm_pu, params.v_lower, params.v_upper)
        dt = params.dt_h
        objectives = jnp.stack(
            [-flow.loss_mw * dt, -jnp.sum(flex.curtailed_mw) * dt, -jnp.sum(flex.buffer)]
        )
        new_state = DSOState(
            time=state.time + 1,
            start=state.start,
            vm_pu=flow.vm_pu,
            p_branch_mw=jnp.where(solved.converged, flow.p_branch_mw, state.p_branch_mw),
            q_branch_mvar=jnp.where(solved.converged, flow.q_branch_mvar, state.q_branch_mvar),
            buffer=flex.buffer,
            last=jnp.stack([flex.curtailed_mw, flex.deferred_mw, flex.served_mw]),
            start_failed=jnp.zeros((), bool),
        )
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=objectives[None],
            costs=jnp.stack([jnp.sum(violation), 0.0])[None],
            terminated=jnp.zeros((), bool),
            truncated=new_state.time >= self.horizon,
            info={
                "vm_pu": flow.vm_pu,
                "loss_mw": flow.loss_mw,
                "flex_p_mw": flex.p_mw,
                "violation": jnp.any(violation > 0),
            },
            failed=~solved.converged | state.start_failed,
        )
