"""Active voltage control by PV inverters on a radial feeder (after MAPDN, Wang et al. 2021).

**Agents.** One per PV inverter (``pv_0 .. pv_{n-1}``, type ``"pv"``).

**State.** Time step within the episode, the episode's first profile row, bus voltages
of the last power flow (pu) and the inverters' last reactive power (Mvar).

**Exogenous inputs.** At profile row ``k``: bus loads ``p = load_scale * p_base *
profiles.load[k, load_profile]`` (Q likewise, constant power factor) and available PV
power ``p_pv = pv_p_max * profiles.pv[k, pv_profile]``. PV is never curtailed here.

**Action.** ``(n_pv, 1)`` in [-1, 1]: the share of each inverter's reactive headroom to
inject (+) or absorb (-), ``q = a * sqrt(s_max^2 - p_pv^2)`` (:mod:`jaxgrid.devices.renewable`).

**Transition.** Net bus demand ``p - p_pv``, ``q_load - q`` goes through
``lindistflow`` or ``distflow`` (``params.solver``; DistFlow falls back to Newton-Raphson
where its sweep does not converge); time advances by one step.

**Observation.** ``(n_pv, 3 * zone_size + 3)`` per agent: its zone's bus load P (MW),
load Q (Mvar) and last voltages (pu) — padded entries are 0 — then its own available PV
power (MW), last reactive power (Mvar) and own-bus voltage (pu). Loads and PV are those
of the step about to be controlled; voltages are those the last action produced.

**Objectives** (shared by all agents): ``voltage`` = minus the mean voltage barrier over
buses (``params.barrier``: l1, l2, bowl, Courant-Beltrami), ``reactive_power`` = minus
the mean ``|q|`` over inverters (Mvar). Default reward: ``voltage + 0.1 * reactive_power``.

**Costs.** ``voltage_band``: sum over buses of the distance outside
``[v_lower, v_upper]`` (pu), shared by all agents; ``power_flow``: 1 on a step whose power
flow failed.

**Episode.** ``horizon`` steps (one day) from a day drawn from ``profiles.days``;
truncated at the horizon. A power flow with no solution (voltage collapse: reactive
power or load beyond what the feeder can carry) terminates it with the reward
``-power_flow_penalty`` for the failed step and every step it cuts off (default 0.1 a
step), ``info["power_flow_failed"]`` and the ``power_flow`` cost; the state
keeps the last solved voltages.

**Info.** ``vm_pu``, ``q_mvar``, ``p_pv_mw``, ``loss_mw``, ``power_flow_failed`` and
``controllable`` (every bus inside the band) — the mean of ``controllable`` over an
episode is MAPDN's controllable ratio CR, the mean ``|q|`` its QL.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid import spaces
from jaxgrid.data.profiles import feeder_loads, sample_start
from jaxgrid.devices.renewable import inverter_q_mvar
from jaxgrid.env import Environment, Transition
from jaxgrid.envs.voltage.baselines import no_control, volt_var_droop
from jaxgrid.envs.voltage.types import VoltageParams, VoltageState
from jaxgrid.grid.limits import voltage_violation_pu
from jaxgrid.grid.solvers import hold_failed, solve_feeder
from jaxgrid.numerics import one_hot_take
from jaxgrid.rewards.voltage_barrier import voltage_barrier

# the "mpc" baseline's Adam iterations, step size and cost weight (reward per pu outside the band)
MPC_SETTINGS = (50, 0.2, 3.0)


class VoltageControl(Environment):
    """MAPDN-style active voltage control (see the module docstring)."""

    objective_names = ("voltage", "reactive_power")
    action_names = ("q_share",)
    cost_names = ("voltage_band", "power_flow")
    abort_names = ("min_vm_pu", "max_vm_pu")

    def __init__(
        self,
        default_params: VoltageParams,
        horizon: int,
        distflow_iterations: int = 10,
        name: str = "VoltageControl",
    ):
        n_pv = int(default_params.pv_bus.shape[0])
        self.agents = tuple(f"pv_{i}" for i in range(n_pv))
        self.agent_types = ("pv",) * n_pv
        self.horizon = int(horizon)
        self.distflow_iterations = int(distflow_iterations)
        self.zone_size = int(default_params.zone_buses.shape[1])
        self._default_params = default_params
        self._name = name

    # -- spaces ----------------------------------------------------------------------

    def device_buses(self, params: VoltageParams) -> dict:
        """Buses of each device type, for pictures."""
        return {"PV inverter (agent)": np.asarray(params.pv_bus)}

    def action_space(self, params: VoltageParams) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (self.num_agents, 1))

    def observation_names(self, params: VoltageParams) -> tuple[str, ...]:
        zone = range(self.zone_size)
        return (
            *(f"zone_p_load_mw[{j}]" for j in zone),
            *(f"zone_q_load_mvar[{j}]" for j in zone),
            *(f"zone_vm_pu[{j}]" for j in zone),
            "p_pv_mw",
            "q_mvar",
            "vm_pu",
        )

    def observation_space(self, params: VoltageParams) -> spaces.Box:
        z = self.zone_size
        inf = jnp.inf
        low = jnp.concatenate([jnp.full(2 * z, -inf), jnp.zeros(z), jnp.array([0.0, -inf, 0.0])])
        high = jnp.concatenate([jnp.full(2 * z, inf), jnp.full(z, 2.0), jnp.array([inf, inf, 2.0])])
        return spaces.Box(low, high, (self.num_agents, 3 * z + 3))

    # -- exogenous inputs and physics -------------------------------------------------

    def exogenous(self, row, params: VoltageParams):
        """Bus loads (MW, Mvar) and available PV power (MW) at profile row ``row``."""
        prof = params.profiles
        p_load, q_load = feeder_loads(
            prof, row, params.load_profile, params.load_scale, params.feeder
        )
        row = row % prof.load.shape[0]
        p_pv = (params.pv_p_max_mw * one_hot_take(prof.pv[row], params.pv_profile)).astype(
            p_load.dtype
        )
        return p_load, q_load, p_pv

    forecast_names = ("load_mw", "pv_available_mw")

    def exogenous_ahead(self, state, params: VoltageParams, steps):
        """Total load and total available PV, MW, ``steps`` ahead: ``(len(steps), 2)``."""

        def at(row):
            p_load, _, p_pv = self.exogenous(row, params)
            return jnp.stack([jnp.sum(p_load), jnp.sum(p_pv)])

        return jax.vmap(at)(state.start + state.time + jnp.asarray(steps))

    def power_flow(self, p_load, q_load, p_pv, q_pv, params: VoltageParams):
        """Solve the feeder with the PV injections; the solver is a params choice."""
        n_bus = params.feeder.n_bus
        # one scatter for both powers (two compiled 4 kernels more in voltage33-v0's step)
        pv = jnp.zeros((n_bus, 2), p_load.dtype).at[params.pv_bus].add(jnp.stack([p_pv, q_pv], 1))
        p_bus, q_bus = p_load - pv[:, 0], q_load - pv[:, 1]
        return solve_feeder(params.feeder, p_bus, q_bus, params.solver, self.distflow_iterations)

    # -- the model -------------------------------------------------------------------

    def reset_env(self, key, params: VoltageParams):
        start = sample_start(key, params.profiles.days, self.horizon)
        p_load, q_load, p_pv = self.exogenous(start, params)
        q_pv = jnp.zeros_like(p_pv)
        flow = hold_failed(self.power_flow(p_load, q_load, p_pv, q_pv, params), 1.0)
        state = VoltageState(
            time=jnp.zeros((), jnp.int32),
            start=start,
            vm_pu=flow.vm_pu,
            q_mvar=q_pv,
            start_failed=~flow.converged,
        )
        return self.observe(state, params), state

    def observe(self, state: VoltageState, params: VoltageParams):
        p_load, q_load, p_pv = self.exogenous(state.start + state.time, params)
        zone, mask = params.zone_buses, params.zone_mask
        own_vm = state.vm_pu[params.pv_bus]
        return jnp.concatenate(
            [
                jnp.where(mask, p_load[zone], 0.0),
                jnp.where(mask, q_load[zone], 0.0),
                jnp.where(mask, state.vm_pu[zone], 0.0),
                jnp.stack([p_pv, state.q_mvar, own_vm], axis=1),
            ],
            axis=1,
        )

    def transition(self, key, state: VoltageState, action, params: VoltageParams) -> Transition:
        p_load, q_load, p_pv = self.exogenous(state.start + state.time, params)
        s_max = params.pv_s_max_mva.astype(p_pv.dtype)
        q_pv = inverter_q_mvar(action[:, 0], p_pv, s_max, params.pv_q_smoothing_mvar)
        flow = hold_failed(self.power_flow(p_load, q_load, p_pv, q_pv, params), state.vm_pu)
        vm = flow.vm_pu
        barrier = voltage_barrier(vm, params.barrier, params.v_ref, params.v_lower, params.v_upper)
        violation = voltage_violation_pu(vm, params.v_lower, params.v_upper)
        objectives = jnp.stack([-jnp.mean(barrier), -jnp.mean(jnp.abs(q_pv))])
        new_state = VoltageState(
            time=state.time + 1,
            start=state.start,
            vm_pu=vm,
            q_mvar=q_pv,
            start_failed=jnp.zeros((), bool),
        )
        n = self.num_agents
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=jnp.broadcast_to(objectives, (n, 2)),
            costs=jnp.broadcast_to(jnp.stack([jnp.sum(violation), 0.0]), (n, 2)),
            terminated=jnp.zeros((), bool),
            truncated=new_state.time >= self.horizon,
            info={
                "vm_pu": vm,
                "q_mvar": q_pv,
                "p_pv_mw": p_pv,
                "loss_mw": flow.loss_mw,
                "controllable": jnp.all(violation == 0.0),
            },
            failed=~flow.converged | state.start_failed,
        )

    def baselines(self, params: VoltageParams) -> dict:
        """Random actions, no control, local volt-var droop and ``mpc``: each step's reactive
        power optimised on this environment's own model (:mod:`jaxgrid.control.mpc`, a
        controller that reads the state). A step's reward depends only on its own action
        (no storage), so a one-step horizon is the whole problem."""
        from jaxgrid.control.mpc import MPCConfig, mpc_controller  # control sits above envs

        return {
            **super().baselines(params),
            "no_control": no_control,
            "droop": volt_var_droop(params),
            "mpc": mpc_controller(self, params, MPCConfig(1, *MPC_SETTINGS)),
        }

    def abort_values(self, state, params):
        """Lowest and highest bus voltage of the last power flow, pu."""
        return jnp.stack([jnp.min(state.vm_pu), jnp.max(state.vm_pu)])

    def world_state(self, state: VoltageState, params: VoltageParams):
        """Global critic view: every bus's load P, Q and voltage, PV power and q, time of day."""
        p_load, q_load, p_pv = self.exogenous(state.start + state.time, params)
        t = (state.time / self.horizon).astype(p_load.dtype)
        return jnp.concatenate([p_load, q_load, state.vm_pu, p_pv, state.q_mvar, t[None]])
