"""Active voltage control by PV inverters on an unbalanced three-phase feeder.

The three-phase counterpart of :mod:`jaxgrid.envs.voltage` (after MAPDN, Wang et al.
2021): single- and three-phase inverters on an IEEE test feeder, each step solved by the
exact unbalanced power flow on the feeder's port Z-bus
(:func:`jaxgrid.grid.three_phase.port_power_flow`, within 1e-6 pu of OpenDSS in
float32), so the phase that violates first is the one the costs see.

**Agents.** One per PV inverter (``pv_<bus>``, type ``"pv"``), connected phase to
ground on one phase (single-phase) or on three (three-phase, its power shared equally).

**State.** Time step within the episode, the episode's first profile row, the voltage of
every node (phase of a bus) of the last power flow (pu) and the inverters' last reactive
power (kvar).

**Exogenous inputs.** At profile row ``k``: every load phase's nominal power times
``load_scale * profiles.load[k, load_profile]`` (OpenDSS's ZIP models keep their voltage
dependence) and the available PV power ``p_pv = pv_p_max_kw * profiles.pv[k, pv_profile]``.
PV is never curtailed.

**Regulators.** Their taps are state, from ``params.feeder.tap_pu`` at reset. With
``params.tap_control`` every regulator control acts once after each step's power flow, as
OpenDSS's ``RegControl`` (band, line-drop compensation, 70 % of the wanted steps;
:func:`jaxgrid.devices.regulator.tap_step`), on the voltage it sees then; the new taps
hold for the next step. In float32 the line-drop compensator's current comes from the
regulators' near-short admittance and is off by up to 0.06 V on the 120 V base on IEEE 123
(a twelfth of a tap step); float64 is exact.

**Action.** ``(n_pv, 1)`` in [-1, 1]: the share of each inverter's reactive headroom to
inject (+) or absorb (-), ``q = a * sqrt(s_max^2 - p_pv^2)``, shared equally among its
phases like its active power.

**Transition.** The inverters' P and Q, as constant-power injections on their nodes, go
through ``port_power_flow`` (``n_iter`` fixed-point iterations); time advances.

**Observation.** ``(n_pv, 9)`` per agent: ``vm_pu[a]``, ``vm_pu[b]``, ``vm_pu[c]`` (its
bus's phase voltages of the last power flow, 0 for a phase the bus lacks),
``phase[a]``, ``phase[b]``, ``phase[c]`` (1 where the inverter is connected), its
available PV power ``p_pv_kw`` of the step about to be controlled, its last reactive
power ``q_kvar`` and ``vm_own_pu``, the mean voltage of its own phases.

**Objectives** (shared by all agents): ``voltage`` = minus the mean voltage barrier over
the monitored nodes (every phase of every distribution bus; ``params.barrier``),
``reactive_power`` = minus the mean ``|q|`` over inverters, Mvar (the single-phase
environments' unit, so the default weight means the same). Default reward:
``voltage + 0.1 * reactive_power``.

**Costs** (shared): ``voltage_band``: sum over monitored nodes of the distance outside
``[v_lower, v_upper]`` (pu); ``unbalance``: sum over three-phase buses of the voltage
unbalance factor (IEC, ``|V2|/|V1|`` of the line-to-line voltages) above ``vuf_limit``;
``thermal``: sum over line phases of the loading above 1 (current over the line's
normal rating); ``power_flow``: 1 on a step whose power flow failed.

**Episode.** ``horizon`` steps (one day) from a day drawn from ``profiles.days``;
truncated at the horizon. A power flow that did not converge terminates it with the
reward ``-power_flow_penalty`` for the failed step and every step it cuts off,
``info["power_flow_failed"]`` and the ``power_flow`` cost; the state keeps the last solved
voltages.

**Info.** ``vm_pu`` ``(n_node,)``, ``vuf`` ``(n_bus,)``, ``line_loading`` ``(n_line, 3)``,
``q_kvar``, ``p_pv_kw``, ``loss_kw``, ``tap_pu`` (the step's taps), ``power_flow_failed``
and ``controllable`` (every
monitored node inside the band): its mean over an episode is MAPDN's controllable ratio.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid import spaces
from jaxgrid.data.profiles import sample_start
from jaxgrid.devices.regulator import regulator_voltage, tap_step
from jaxgrid.devices.renewable import inverter_q_mvar
from jaxgrid.env import Environment, Transition
from jaxgrid.envs.voltage3.baselines import no_control, volt_var_droop3
from jaxgrid.envs.voltage3.types import Voltage3Params, Voltage3State
from jaxgrid.grid.limits import voltage_violation_pu
from jaxgrid.grid.three_phase import port_power_flow
from jaxgrid.numerics import one_hot_take
from jaxgrid.rewards.voltage_barrier import voltage_barrier
from jaxgrid.types import float_dtype

# Fixed-point sweeps a step (Anderson-accelerated, jaxgrid.grid.three_phase.port_zbus).
# Measured on 2048 random actions at random hours, taps and loads, a third of them at
# +-1, float32 (the experiment behind port_zbus.ANDERSON_DEPTH): on voltage123-v0, 15
# converge every situation that 200 plain sweeps converge (40 plain ones, this
# environment's count before, missed 3); on voltage13-v0 all but 4 of 1472 (40 plain: 16).
N_ITER = 15
# the "mpc" baseline: a one-step horizon (a step's reward depends on its own action
# only), 100 Adam iterations from a step of 0.2 decayed to 0.002 (so the plan settles at
# |q| = 0 and the barrier's kinks), cost weight 0.03 (the thermal cost of IEEE 13's
# overloaded lines, which no inverter removes, would otherwise buy reactive power):
# from benchmarks/mpc_baselines.py on held-out days of voltage13-v0
MPC_SETTINGS = {"horizon": 1, "iterations": 100, "learning_rate": 0.2, "cost_weight": 0.03,
                "final_learning_rate": 0.002}  # fmt: skip


class Voltage3Control(Environment):
    """Three-phase active voltage control (see the module docstring)."""

    objective_names = ("voltage", "reactive_power")
    action_names = ("q_share",)
    cost_names = ("voltage_band", "unbalance", "thermal", "power_flow")
    # The nodal matrix holds the source's and regulators' 1e3-1e4 pu admittances beside
    # loads of 1e-2 pu, so float64's round-off reaches the solution amplified: a batched
    # LU (vmap) and a single one differ by up to 2e-9 relative in the line currents
    # (measured, thermal cost, 2 x 96 random steps); a batching bug moves them by O(1).
    solver_rtol = 1e-7

    def __init__(
        self,
        default_params: Voltage3Params,
        horizon: int,
        agents: tuple[str, ...],
        n_iter: int = N_ITER,
        name: str = "Voltage3Control",
    ):
        self.agents = tuple(agents)
        self.agent_types = ("pv",) * len(self.agents)
        self.horizon = int(horizon)
        self.n_iter = int(n_iter)
        self._default_params = default_params
        self._name = name

    # -- spaces ----------------------------------------------------------------------

    def action_space(self, params: Voltage3Params) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (self.num_agents, 1))

    def observation_names(self, params: Voltage3Params) -> tuple[str, ...]:
        phases = ("a", "b", "c")
        return (
            *(f"vm_pu[{p}]" for p in phases),
            *(f"phase[{p}]" for p in phases),
            "p_pv_kw",
            "q_kvar",
            "vm_own_pu",
        )

    def observation_space(self, params: Voltage3Params) -> spaces.Box:
        inf = jnp.inf
        low = jnp.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -inf, 0.0])
        high = jnp.array([2.0, 2.0, 2.0, 1.0, 1.0, 1.0, inf, inf, 2.0])
        return spaces.Box(low, high, (self.num_agents, 9))

    # -- exogenous inputs and physics -------------------------------------------------

    def exogenous(self, row, params: Voltage3Params):
        """Load multiplier of every load phase ``(n_lp,)`` and available PV power of
        every inverter ``(n_pv,)``, kW, at profile row ``row``."""
        prof = params.profiles
        row = row % prof.load.shape[0]
        dtype = float_dtype()
        load_mult = (params.load_scale * one_hot_take(prof.load[row], params.load_profile)).astype(
            dtype
        )
        p_pv = (params.pv_p_max_kw * one_hot_take(prof.pv[row], params.pv_profile)).astype(dtype)
        return load_mult, p_pv

    def node_injection(self, per_inverter, params: Voltage3Params):
        """``(n_node, ...)`` injection of each node from ``(n_pv, ...)`` inverter totals
        (kW, kvar or both side by side), shared equally among each inverter's phases."""
        phases = params.pv_phases.astype(per_inverter.dtype)
        count = jnp.maximum(jnp.sum(phases, axis=1), 1.0)[:, None]
        extra = (1,) * (per_inverter.ndim - 1)  # the totals' trailing axes
        share = (
            per_inverter[:, None]
            * phases.reshape(phases.shape + extra)
            / count.reshape(count.shape + extra)
        )
        empty = jnp.zeros((params.feeder.n_node,) + per_inverter.shape[1:], per_inverter.dtype)
        return empty.at[params.pv_nodes].add(share)

    def power_flow(self, load_mult, p_pv, q_pv, tap_pu, params: Voltage3Params):
        """The unbalanced power flow with the inverters' injections (kW, kvar) at the
        regulators' taps ``tap_pu`` ``(n_reg,)``."""
        zbus = params.zbus
        gen_node = zbus.port_node[zbus.gen_from]
        return port_power_flow(
            zbus,
            params.feeder.replace(tap_pu=tap_pu),
            load_mult,
            # both powers by one scatter: two compiled 12 kernels more in
            # ``voltage123-v0``'s step (``benchmarks/kernel_cost.py``)
            *jnp.moveaxis(self.node_injection(jnp.stack([p_pv, q_pv], 1), params)[gen_node], 1, 0),
            n_iter=self.n_iter,
        )

    # -- the model -------------------------------------------------------------------

    def reset_env(self, key, params: Voltage3Params):
        start = sample_start(key, params.profiles.days, self.horizon)
        load_mult, p_pv = self.exogenous(start, params)
        q_pv = jnp.zeros_like(p_pv)
        taps = params.feeder.tap_pu.astype(p_pv.dtype)
        flow = self.power_flow(load_mult, p_pv, q_pv, taps, params)
        vm = jnp.where(flow.converged, flow.vm_pu, jnp.ones_like(flow.vm_pu))
        state = Voltage3State(
            time=jnp.zeros((), jnp.int32),
            start=start,
            vm_pu=vm,
            q_kvar=q_pv,
            tap_pu=taps,
            start_failed=~flow.converged,
        )
        return self.observe(state, params), state

    def first_node(self, params: Voltage3Params):
        """``(n_pv,)`` the node of each inverter's first connected phase."""
        first = jnp.argmax(params.pv_phases, axis=1)
        return jnp.take_along_axis(params.pv_nodes, first[:, None], axis=1)[:, 0]

    def bus_phase_vm(self, state: Voltage3State, params: Voltage3Params):
        """``(n_pv, 3)`` voltage of each phase of each inverter's bus, pu (0 if absent)."""
        feeder = params.feeder
        nodes = feeder.bus_nodes[feeder.node_bus[self.first_node(params)]]
        return jnp.where(nodes >= 0, state.vm_pu[jnp.maximum(nodes, 0)], 0.0)

    def observe(self, state: Voltage3State, params: Voltage3Params):
        _, p_pv = self.exogenous(state.start + state.time, params)
        phases = params.pv_phases.astype(p_pv.dtype)
        own = jnp.sum(state.vm_pu[params.pv_nodes] * phases, axis=1) / jnp.sum(phases, axis=1)
        return jnp.concatenate(
            [
                self.bus_phase_vm(state, params),
                phases,
                jnp.stack([p_pv, state.q_kvar, own], axis=1),
            ],
            axis=1,
        )

    def transition(self, key, state: Voltage3State, action, params: Voltage3Params) -> Transition:
        load_mult, p_pv = self.exogenous(state.start + state.time, params)
        s_max = params.pv_s_max_kva.astype(p_pv.dtype)
        q_pv = inverter_q_mvar(action[:, 0], p_pv, s_max, params.pv_q_smoothing_kvar)
        flow = self.power_flow(load_mult, p_pv, q_pv, state.tap_pu, params)
        failed = ~flow.converged
        control = tap_step(
            params.regcontrol,
            state.tap_pu,
            regulator_voltage(params.regcontrol, params.feeder.replace(tap_pu=state.tap_pu), flow),
        )
        taps = jnp.where(params.tap_control & ~failed, control.tap_pu, state.tap_pu)
        # nothing is taken from a failed solve: the last voltages, no unbalance, loading
        # or losses (a diverged iteration's numbers are round-off dependent)
        flow = jax.tree_util.tree_map(lambda x: jnp.where(failed, jnp.zeros_like(x), x), flow)
        vm = jnp.where(failed, state.vm_pu, flow.vm_pu)
        watched = params.monitored
        barrier = voltage_barrier(vm, params.barrier, params.v_ref, params.v_lower, params.v_upper)
        violation = jnp.where(
            watched, voltage_violation_pu(vm, params.v_lower, params.v_upper), 0.0
        )
        objectives = jnp.stack(
            [
                -jnp.sum(jnp.where(watched, barrier, 0.0)) / jnp.sum(watched),
                -jnp.mean(jnp.abs(q_pv)) / 1e3,
            ]
        )
        costs = jnp.stack(
            [
                jnp.sum(violation),
                jnp.sum(jnp.maximum(flow.vuf - params.vuf_limit, 0.0)),
                jnp.sum(jnp.maximum(flow.line_loading - 1.0, 0.0)),
                jnp.zeros((), vm.dtype),
            ]
        )
        new_state = Voltage3State(
            time=state.time + 1,
            start=state.start,
            vm_pu=vm,
            q_kvar=q_pv,
            tap_pu=taps,
            start_failed=jnp.zeros((), bool),
        )
        n = self.num_agents
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=jnp.broadcast_to(objectives, (n, 2)),
            costs=jnp.broadcast_to(costs, (n, 4)),
            terminated=jnp.zeros((), bool),
            truncated=new_state.time >= self.horizon,
            info={
                "vm_pu": vm,
                "vuf": flow.vuf,
                "line_loading": flow.line_loading,
                "q_kvar": q_pv,
                "p_pv_kw": p_pv,
                "loss_kw": flow.loss_kw,
                "tap_pu": state.tap_pu,
                "controllable": jnp.all(violation == 0.0),
            },
            failed=failed | state.start_failed,
        )

    def baselines(self, params: Voltage3Params) -> dict:
        """Random actions, no control, local volt-var droop on each inverter's phases, and
        ``mpc``: each step's reactive power optimised on this environment's own model
        (:mod:`jaxgrid.control.mpc`, a controller that reads the state)."""
        from jaxgrid.control.mpc import MPCConfig, mpc_controller  # control sits above envs

        return {
            **super().baselines(params),
            "no_control": no_control,
            "droop": volt_var_droop3(params),
            "mpc": mpc_controller(self, params, MPCConfig(**MPC_SETTINGS)),
        }

    def device_buses(self, params: Voltage3Params) -> dict:
        """Bus of each inverter, for pictures."""
        node_bus = np.asarray(params.feeder.node_bus)
        return {"PV inverter (agent)": node_bus[np.asarray(self.first_node(params))]}

    def world_state(self, state: Voltage3State, params: Voltage3Params):
        """Critic view: every node's voltage, every load phase's multiplier, every
        inverter's available PV (kW) and last q (kvar), the regulators' taps and the time
        of day."""
        load_mult, p_pv = self.exogenous(state.start + state.time, params)
        t = (state.time / self.horizon).astype(p_pv.dtype)
        return jnp.concatenate([state.vm_pu, load_mult, p_pv, state.q_kvar, state.tap_pu, t[None]])
