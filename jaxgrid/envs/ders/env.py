"""Heterogeneous distributed energy resources sharing one feeder.

**Agents.** One per device, of four types (``env.agent_types``): ``battery``, ``pv``,
``flexload`` (a cluster of flexible household demand) and ``ev`` (a charging point).
Agents of every type share padded dimensions; :attr:`DERs.action_mask` says which
action entries a type uses.

**State.** Step within the day, the day's first profile row, bus voltages of the last
power flow, battery and EV states of charge, flexible-load buffers, EV arrival and
departure steps (drawn at reset), the last dispatch.

**Action.** ``(n, 2)``:

- battery: active and reactive power, shares of the ratings, in [-1, 1] (+ charges);
- pv: curtailment share in [0, 1], reactive-power share of the headroom in [-1, 1];
- flexload: curtailment share in [0, 1], shift share in [-1, 1];
- ev: charging power share in [-1, 1] (negative only with V2G), second entry unused.

**Transition.** Bus loads follow the profiles; devices enact their actions
(:mod:`jaxgrid.devices`); their powers join the bus injections; the feeder is solved
(``distflow``, Newton-Raphson where its sweep does not converge, or ``lindistflow``).

**Observation.** ``(n, 13)`` per agent: time of day (sine, cosine), price (hundreds per
MWh), own bus voltage (pu), four device features (battery: SOC; pv: available power and
last reactive power over the rating; flexload: demand over capacity and buffered energy;
ev: plugged in, SOC, target SOC, steps to departure over the horizon), the agent type as
a one-hot vector of four, and the voltage-band violation count over buses.

**Objectives** (shared by all agents): ``energy_cost`` (minus price times substation
import, currency), ``losses`` (minus network loss, MWh), ``voltage`` (minus the mean l1
barrier ``|v - 1|`` over buses), ``discomfort`` (minus curtailed flexible demand and EV
energy missing at departure, MWh), ``fairness`` (minus the Hoover index of the
flexible loads' curtailment shares).

**Costs.** ``voltage_band`` (pu outside the band, shared), ``thermal`` (branch loading
above 1, shared; ratings are assumed where the case has none), ``device_limits``
(requests a device could not enact, MW, per agent), ``power_flow`` (1 on a step whose
power flow failed).

**Episode.** One day; truncated at the horizon. A power flow with no solution (voltage
collapse) terminates it with the reward ``-power_flow_penalty`` for the failed step and
every step it cuts off (default 10 a step, more than random actions pay on average) and
``info["power_flow_failed"]``; the state keeps
the last solved voltages.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid import spaces
from jaxgrid.data.profiles import Profiles, feeder_loads, start_from_bits
from jaxgrid.devices.battery import BatteryParams, battery_step
from jaxgrid.devices.ev import EVParams, connected, ev_step, schedule_from_bits
from jaxgrid.devices.flexload import FlexLoadParams, flexload_step
from jaxgrid.devices.renewable import inverter_output
from jaxgrid.env import Environment, Transition
from jaxgrid.envs.ders.baselines import no_control, price_and_voltage_rules
from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.limits import branch_loading, voltage_violation_pu
from jaxgrid.grid.solvers import hold_failed, solve_feeder
from jaxgrid.numerics import one_hot_take
from jaxgrid.rewards.abort import AbortConditions
from jaxgrid.rewards.equity import hoover
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array

TYPES = ("battery", "pv", "flexload", "ev")
PRICE_SCALE = 100.0
# the "mpc" baseline's horizon (steps), Adam iterations, step size and cost weight, from
# benchmarks/mpc_baselines.py on held-out days of ders33-v0
MPC_SETTINGS = (12, 30, 0.1, 3.0)


@struct.dataclass
class DERsState:
    time: Array
    start: Array
    vm_pu: Array  # (n_bus,)
    battery_soc: Array  # (n_battery,)
    ev_soc: Array  # (n_ev,)
    ev_arrival: Array  # (n_ev,) int32
    ev_departure: Array  # (n_ev,) int32
    buffer: Array  # (n_flex, window)
    pv_q: Array  # (n_pv,) last reactive power, Mvar
    start_failed: Array  # () bool: the reset's power flow failed (vm_pu 1.0); step 1 says so


@struct.dataclass
class DERsParams:
    """Attributes:
    feeder: the network, with (assumed) branch ratings.
    profiles: loads, PV, prices and episode days.
    load_profile: ``(n_bus,)`` int32 profile column of each bus; load_scale: ``()``.
    battery_bus, pv_bus, flex_bus, ev_bus: bus of each device, int32.
    battery: battery ratings; battery_soc0: ``(n_battery,)`` initial SOC.
    pv_p_max_mw, pv_s_max_mva: ``(n_pv,)`` PV peak and inverter rating; pv_profile: column.
    flex: flexible-load capacities; flex_size_mw: ``(n_flex,)`` peak flexible demand.
    ev: EV batteries and targets; ev_soc0: ``(n_ev,)`` SOC on arrival;
    ev_arrival_range, ev_stay_range: ``(n_ev, 2)`` int32 inclusive ranges, steps.
    price_column: ``()`` int32 price series for the energy cost.
    v_lower, v_upper: voltage band; dt_h: step, hours; solver: ``()`` int32.
    power_flow_penalty: ``()`` reward lost per agent and step lost when a power flow fails.
    abort: bounds on bus voltages and battery SOCs (off by default).
    scalarisation: how the objectives become the reward.
    pv_q_smoothing_mvar: ``()`` width of the smooth surrogate of the PV inverters'
        reactive headroom, Mvar (:mod:`jaxgrid.devices.renewable`); 0 (the default): the
        exact model. The batteries' and EVs' power limits have theirs in
        ``battery.smoothing_mw`` and ``ev.battery.smoothing_mw``.
    """

    feeder: Feeder
    profiles: Profiles
    load_profile: Array
    load_scale: Array
    battery_bus: Array
    battery: BatteryParams
    battery_soc0: Array
    pv_bus: Array
    pv_p_max_mw: Array
    pv_s_max_mva: Array
    pv_profile: Array
    flex_bus: Array
    flex: FlexLoadParams
    flex_size_mw: Array
    ev_bus: Array
    ev: EVParams
    ev_soc0: Array
    ev_arrival_range: Array
    ev_stay_range: Array
    price_column: Array
    v_lower: Array
    v_upper: Array
    dt_h: Array
    solver: Array
    power_flow_penalty: Array
    abort: AbortConditions
    scalarisation: Scalarisation
    pv_q_smoothing_mvar: Array = 0.0


class DERs(Environment):
    """Batteries, PV, flexible loads and EVs on one feeder (see the module docstring)."""

    objective_names = ("energy_cost", "losses", "voltage", "discomfort", "fairness")
    action_names = ("dispatch[0]", "dispatch[1]")  # meaning by type: the module docstring
    cost_names = ("voltage_band", "thermal", "device_limits", "power_flow")
    abort_names = ("min_vm_pu", "max_vm_pu", "min_battery_soc", "max_battery_soc")

    def __init__(
        self,
        default_params: DERsParams,
        horizon: int,
        window: int,
        distflow_iterations: int,
        name: str,
    ):
        self.counts = {
            "battery": int(default_params.battery_bus.shape[0]),
            "pv": int(default_params.pv_bus.shape[0]),
            "flexload": int(default_params.flex_bus.shape[0]),
            "ev": int(default_params.ev_bus.shape[0]),
        }
        self.agent_types = tuple(t for t in TYPES for _ in range(self.counts[t]))
        self.agents = tuple(f"{t}_{i}" for t in TYPES for i in range(self.counts[t]))
        self.horizon = int(horizon)
        self.window = int(window)
        self.distflow_iterations = int(distflow_iterations)
        self._default_params = default_params
        self._name = name
        offsets = {}
        n = 0
        for t in TYPES:
            offsets[t] = slice(n, n + self.counts[t])
            n += self.counts[t]
        self.slices = offsets

    def baselines(self, params: DERsParams) -> dict:
        """Random, no control (EVs charging flat out), price/volt-var rules, and ``mpc``:
        receding-horizon MPC with perfect foresight on this environment's own model
        (:mod:`jaxgrid.control.mpc`, a controller that reads the state)."""
        from jaxgrid.control.mpc import MPCConfig, mpc_controller  # control sits above envs

        return {
            **super().baselines(params),
            "no_control": no_control,
            "rules": price_and_voltage_rules(),
            "mpc": mpc_controller(self, params, MPCConfig(*MPC_SETTINGS)),
        }

    @property
    def action_mask(self) -> jax.Array:
        """``(n, 2)`` bool: the action entries each agent's type uses."""
        return jnp.array([[True, t != "ev"] for t in self.agent_types])

    def action_space(self, params):
        low = jnp.array(
            [
                [-1.0 if t in ("battery", "ev") else 0.0, -1.0 if t != "ev" else 0.0]
                for t in self.agent_types
            ]
        )
        high = jnp.array([[1.0, 1.0 if t != "ev" else 0.0] for t in self.agent_types])
        return spaces.Box(low, high, (self.num_agents, 2))

    def observation_names(self, params) -> tuple[str, ...]:
        """``device[0..3]`` are the type's own features (see the module docstring)."""
        return (
            "sin_time",
            "cos_time",
            "price",
            "vm_pu",
            *(f"device[{j}]" for j in range(4)),
            *(f"is_{t}" for t in TYPES),
            "buses_outside_band",
        )

    def observation_space(self, params):
        return spaces.Box(-jnp.inf, jnp.inf, (self.num_agents, 13))

    def device_buses(self, params: DERsParams) -> dict:
        """Buses of each device type (agent type), for pictures."""
        buses = np.asarray(self.buses(params))
        kinds = np.asarray(self.agent_types)
        return {kind: buses[kinds == kind] for kind in dict.fromkeys(self.agent_types)}

    def buses(self, params: DERsParams) -> Array:
        """``(n,)`` bus of each agent, in agent order."""
        return jnp.concatenate([params.battery_bus, params.pv_bus, params.flex_bus, params.ev_bus])

    # -- exogenous inputs and physics -------------------------------------------------

    def exogenous(self, row, params: DERsParams):
        """Bus loads (MW, Mvar), available PV (MW), household profile value and price at ``row``."""
        prof = params.profiles
        p, q = feeder_loads(prof, row, params.load_profile, params.load_scale, params.feeder)
        row = row % prof.load.shape[0]
        dtype = p.dtype
        pv = (params.pv_p_max_mw * one_hot_take(prof.pv[row], params.pv_profile)).astype(dtype)
        household = prof.load[row, 0].astype(dtype)
        price = prof.price[row, params.price_column].astype(dtype)
        return p, q, pv, household, price

    forecast_names = ("load_mw", "pv_available_mw", "price")

    def exogenous_ahead(self, state, params: DERsParams, steps):
        """Total load and available PV, MW, and the price (the profile's units, per
        MWh) ``steps`` ahead: ``(len(steps), 3)``."""

        def at(row):
            p, _, pv, _, price = self.exogenous(row, params)
            return jnp.stack([jnp.sum(p), jnp.sum(pv), price])

        return jax.vmap(at)(state.start + state.time + jnp.asarray(steps))

    def power_flow(self, p, q, params: DERsParams):
        """The feeder solved for bus injections ``p`` (MW) and ``q`` (Mvar), by the solver
        ``params`` choose (nonlinear DistFlow or LinDistFlow)."""
        return solve_feeder(params.feeder, p, q, params.solver, self.distflow_iterations)

    # -- the model -------------------------------------------------------------------

    def reset_env(self, key, params: DERsParams):
        # the start day and the EV schedules from one draw of bits (a split and two draws
        # were three Threefry hashes: 295 -> 286 kernels in the step, 4 % less LLVM IR)
        n_ev = self.counts["ev"]
        bits = jax.random.bits(key, (1 + 2 * n_ev,), jnp.uint32)
        start = start_from_bits(bits[0], params.profiles.days, self.horizon)
        p, q, _, _, _ = self.exogenous(start, params)
        flow = hold_failed(self.power_flow(p, q, params), 1.0)
        dtype = p.dtype
        arrival, departure = schedule_from_bits(
            bits[1:], params.ev_arrival_range.T, params.ev_stay_range.T, self.horizon
        )
        state = DERsState(
            time=jnp.zeros((), jnp.int32),
            start=start,
            vm_pu=flow.vm_pu,
            battery_soc=params.battery_soc0.astype(dtype),
            ev_soc=params.ev_soc0.astype(dtype),
            ev_arrival=arrival,
            ev_departure=departure,
            buffer=jnp.zeros((self.counts["flexload"], self.window), dtype),
            pv_q=jnp.zeros(self.counts["pv"], dtype),
            start_failed=~flow.converged,
        )
        return self.observe(state, params), state

    def transition(self, key, state: DERsState, action, params: DERsParams) -> Transition:
        s = self.slices
        t = state.time
        dt = params.dt_h
        p_bus, q_bus, pv_avail, household, price = self.exogenous(state.start + t, params)
        dtype = p_bus.dtype
        # batteries: active and reactive power as shares of the rating
        b = params.battery
        bat = battery_step(
            state.battery_soc,
            action[s["battery"], 0] * b.p_max_mw,
            action[s["battery"], 1] * b.s_max_mva,
            dt,
            b,
        )
        # PV: curtail, then reactive power in the headroom
        pv = inverter_output(
            pv_avail,
            action[s["pv"], 0],
            action[s["pv"], 1],
            params.pv_s_max_mva.astype(dtype),
            params.pv_q_smoothing_mvar,
        )
        # flexible loads: demand follows the household profile
        demand = params.flex_size_mw * household
        flex = flexload_step(
            state.buffer,
            demand,
            action[s["flexload"], 0],
            action[s["flexload"], 1],
            dt,
            params.flex,
        )
        # EVs: charge while plugged in
        ev = ev_step(
            state.ev_soc,
            action[s["ev"], 0] * params.ev.battery.p_max_mw,
            jnp.zeros(self.counts["ev"], dtype),
            t,
            state.ev_arrival,
            state.ev_departure,
            dt,
            params.ev,
        )
        n_bus = params.feeder.n_bus
        # every device's MW and Mvar added at its bus by one scatter (a chained scatter a
        # device type and power compiled 7 kernels more in ``ders33-v0``'s step)
        buses = jnp.concatenate([params.battery_bus, params.pv_bus, params.flex_bus, params.ev_bus])
        none = jnp.zeros(self.counts["flexload"] + self.counts["ev"], dtype)
        devices = jnp.stack(
            [
                jnp.concatenate([bat.p_mw, -pv.p_mw, flex.p_mw, ev.p_mw]),
                jnp.concatenate([bat.q_mvar, -pv.q_mvar, none]),
            ],
            axis=1,
        )
        at_bus = jnp.zeros((n_bus, 2), dtype).at[buses].add(devices)
        p_bus, q_bus = p_bus + at_bus[:, 0], q_bus + at_bus[:, 1]
        flow = hold_failed(self.power_flow(p_bus, q_bus, params), state.vm_pu)
        violation = voltage_violation_pu(flow.vm_pu, params.v_lower, params.v_upper)
        overload = jnp.maximum(branch_loading(params.feeder, flow) - 1.0, 0.0)
        curtail_share = flex.curtailed_mw / jnp.maximum(demand, 1e-9)
        objectives = jnp.stack(
            [
                -price * flow.p_import_mw * dt,
                -flow.loss_mw * dt,
                -jnp.mean(jnp.abs(flow.vm_pu - 1.0)),
                -(jnp.sum(flex.curtailed_mw) * dt + jnp.sum(ev.unmet_mwh)),
                -hoover(curtail_share),
            ]
        )
        device_limits = jnp.concatenate(
            [
                bat.clipped_mw + bat.clipped_mvar,
                jnp.zeros(self.counts["pv"] + self.counts["flexload"], dtype),
                ev.clipped_mw,
            ]
        )
        n = self.num_agents
        costs = jnp.concatenate(
            [
                jnp.broadcast_to(jnp.stack([jnp.sum(violation), jnp.sum(overload)]), (n, 2)),
                device_limits[:, None],
                jnp.zeros((n, 1), dtype),
            ],
            axis=1,
        )
        new_state = state.replace(
            time=t + 1,
            vm_pu=flow.vm_pu,
            battery_soc=bat.soc,
            ev_soc=ev.soc,
            buffer=flex.buffer,
            pv_q=pv.q_mvar,
            start_failed=jnp.zeros((), bool),
        )
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=jnp.broadcast_to(objectives, (n, 5)),
            costs=costs,
            terminated=jnp.zeros((), bool),
            truncated=new_state.time >= self.horizon,
            info={
                "vm_pu": flow.vm_pu,
                "loss_mw": flow.loss_mw,
                "import_mw": flow.p_import_mw,
                "controllable": jnp.all(violation == 0.0),
            },
            failed=~flow.converged | state.start_failed,
        )

    def observe(self, state: DERsState, params: DERsParams):
        s = self.slices
        n = self.num_agents
        row = state.start + state.time
        _, _, pv_avail, household, price = self.exogenous(row, params)
        dtype = pv_avail.dtype
        steps_per_day = jnp.round(24.0 / params.dt_h)
        phase = 2 * jnp.pi * (row % steps_per_day) / steps_per_day
        features = jnp.zeros((n, 4), dtype)
        features = features.at[s["battery"], 0].set(state.battery_soc)
        rating = params.pv_s_max_mva.astype(dtype)
        features = (
            features.at[s["pv"], 0].set(pv_avail / rating).at[s["pv"], 1].set(state.pv_q / rating)
        )
        cap = jnp.maximum(params.flex.curtail_cap_mw, 1e-9)
        features = features.at[s["flexload"], 0].set(params.flex_size_mw * household / cap)
        features = features.at[s["flexload"], 1].set(jnp.sum(state.buffer, axis=1) / cap)
        plugged = connected(state.time, state.ev_arrival, state.ev_departure).astype(dtype)
        to_go = jnp.maximum(state.ev_departure - state.time, 0) / self.horizon
        ev = jnp.stack(
            [plugged, state.ev_soc, params.ev.target_soc.astype(dtype), to_go.astype(dtype)], axis=1
        )
        features = features.at[s["ev"]].set(ev)
        types = jnp.array([[t == u for u in TYPES] for t in self.agent_types], dtype)
        shared = jnp.stack([jnp.sin(phase), jnp.cos(phase), price / PRICE_SCALE]).astype(dtype)
        vm = state.vm_pu[self.buses(params)]
        outside = jnp.sum(
            voltage_violation_pu(state.vm_pu, params.v_lower, params.v_upper) > 0
        ).astype(dtype)
        return jnp.concatenate(
            [
                jnp.broadcast_to(shared, (n, 3)),
                vm[:, None],
                features,
                types,
                jnp.broadcast_to(outside, (n, 1)),
            ],
            axis=1,
        )

    def abort_values(self, state: DERsState, params: DERsParams):
        """Lowest and highest bus voltage (pu), lowest and highest battery SOC."""
        soc = state.battery_soc
        return jnp.stack([jnp.min(state.vm_pu), jnp.max(state.vm_pu), jnp.min(soc), jnp.max(soc)])

    def world_state(self, state: DERsState, params: DERsParams):
        """All bus voltages, device states and the time of day."""
        row = state.start + state.time
        steps_per_day = jnp.round(24.0 / params.dt_h)
        phase = 2 * jnp.pi * (row % steps_per_day) / steps_per_day
        dtype = state.vm_pu.dtype
        return jnp.concatenate(
            [
                state.vm_pu,
                state.battery_soc,
                state.ev_soc,
                jnp.sum(state.buffer, axis=1),
                state.pv_q,
                jnp.stack([jnp.sin(phase), jnp.cos(phase)]).astype(dtype),
            ]
        )
