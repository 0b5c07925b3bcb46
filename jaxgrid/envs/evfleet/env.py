"""A fleet of electric vehicles charging overnight on one feeder, with vehicle-to-grid.

**Agents.** One per vehicle and its home charger (``vehicle_0`` ...), each at a bus of
the feeder. Every episode each vehicle arrives once in the evening and leaves the next
morning (:func:`~jaxgrid.devices.ev.overnight_sessions`), with a state of charge
drawn from ``soc_arrival_range``; it should leave with ``ev.target_soc``.

**Episode.** From ``first_hour`` (noon) to the same hour of the next day, ``horizon``
steps of ``dt_h`` hours; truncated at the horizon. A power flow with no solution
(voltage collapse) terminates it with the reward ``-power_flow_penalty`` for the failed
step and every step it cuts off and ``info["power_flow_failed"]``.

**Action.** ``(n, 1)``: charging power as a share of the charger rating in [-1, 1];
negative discharges into the grid, enacted only for vehicles with ``ev.v2g``. Vehicles
that are away enact nothing.

**Transition.** Bus loads follow the profiles; each plugged-in vehicle charges within
its battery's limits (:func:`~jaxgrid.devices.ev.ev_step`); the feeder is solved
(``distflow`` with Newton-Raphson where its sweep does not converge, or ``lindistflow``).

**Observation.** ``(n, 12)`` per agent, :meth:`EVFleet.observation_names`: time of day
(sine, cosine), price (hundreds per MWh), own bus voltage (pu), plugged in (0/1), state
of charge, target state of charge, steps to departure over the horizon, energy still
needed over the battery capacity, laxity (steps to departure minus the steps full power
needs to reach the target, over the horizon; below 0 the target is out of reach), the
substation transformer's loading of the last step (apparent power over rating) and
whether the vehicle may discharge (0/1).

**Objectives** (shared): ``energy_cost`` (minus the price times the fleet's charging
energy, currency; discharging earns), ``fairness`` (minus the Hoover index of the shares
of their needs the vehicles received, on the episode's last step, 0 before),
``losses`` (minus network loss, MWh), ``service`` (minus the energy missing from the
vehicles' targets when they leave, MWh). Without ``service`` a reward of the other three
pays for emptying every battery into the evening peak: the bill falls and the Hoover
index of equally unserved vehicles is 0 (a first IPPO run found exactly that).

**Costs.** ``unmet_energy`` (energy missing from the target at departure, MWh, per
agent), ``voltage_band`` (pu outside the band summed over buses, shared),
``transformer`` (substation apparent power above the rating, MVA, shared),
``device_limits`` (charging requests a vehicle could not enact, MW, per agent: power or
energy limits, or discharging without V2G), ``power_flow`` (1 on a failed power flow).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxgrid import spaces
from jaxgrid.data.profiles import Profiles, feeder_loads, start_from_bits
from jaxgrid.devices.ev import (
    EVParams,
    connected,
    ev_step,
    overnight_sessions,
    served_share,
)
from jaxgrid.env import Environment, Transition
from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.limits import voltage_violation_pu
from jaxgrid.grid.solvers import hold_failed, solve_feeder
from jaxgrid.numerics import unit_floats
from jaxgrid.rewards.equity import hoover
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array

PRICE_SCALE = 100.0
# the "mpc" baseline's horizon (steps), Adam iterations, step size and cost weight, from
# benchmarks/mpc_baselines.py on held-out days
MPC_SETTINGS = (16, 30, 0.1, 3.0)


@struct.dataclass
class EVFleetState:
    time: Array
    start: Array  # profile row of the episode's first step
    vm_pu: Array  # (n_bus,) voltages of the last power flow
    soc: Array  # (n,)
    soc_arrival: Array  # (n,)
    arrival: Array  # (n,) int32 step
    departure: Array  # (n,) int32 step
    loading: Array  # () transformer loading of the last step, apparent power / rating
    start_failed: Array  # () bool: the reset's power flow failed (vm_pu 1.0); step 1 says so


@struct.dataclass
class EVFleetParams:
    """Attributes:
    feeder: the network.
    profiles: loads and prices; episodes start on ``profiles.days``.
    load_profile: ``(n_bus,)`` int32 profile column of each bus; load_scale: ``()``.
    vehicle_bus: ``(n,)`` int32 bus of each vehicle's charger.
    ev: batteries (charger ratings as ``p_max_mw``), targets and V2G flags, ``(n,)`` each.
    soc_arrival_range: ``(2,)`` bounds of the uniform state of charge on arrival.
    arrival_mean_h, arrival_sd_h: ``()`` hour of day of arrival, normal, hours.
    departure_mean_h, departure_sd_h: ``()`` hour of day of departure (next day), hours.
    first_hour: ``()`` int32 hour of day of the episode's first step.
    price_column: ``()`` int32 price series of the energy cost.
    transformer_mva: ``()`` substation transformer rating, MVA.
    v_lower, v_upper: voltage band, pu; dt_h: step, hours; solver: ``()`` int32.
    power_flow_penalty: ``()`` reward lost per agent and step lost when a power flow fails.
    scalarisation: how the objectives become the reward.
    """

    feeder: Feeder
    profiles: Profiles
    load_profile: Array
    load_scale: Array
    vehicle_bus: Array
    ev: EVParams
    soc_arrival_range: Array
    arrival_mean_h: Array
    arrival_sd_h: Array
    departure_mean_h: Array
    departure_sd_h: Array
    first_hour: Array
    price_column: Array
    transformer_mva: Array
    v_lower: Array
    v_upper: Array
    dt_h: Array
    solver: Array
    power_flow_penalty: Array
    scalarisation: Scalarisation


class EVFleet(Environment):
    """Vehicles charging overnight on one feeder (see the module docstring)."""

    objective_names = ("energy_cost", "fairness", "losses", "service")
    action_names = ("charge",)
    cost_names = ("unmet_energy", "voltage_band", "transformer", "device_limits", "power_flow")

    def __init__(
        self, default_params: EVFleetParams, horizon: int, distflow_iterations: int, name: str
    ):
        n = int(default_params.vehicle_bus.shape[0])
        self.agents = tuple(f"vehicle_{i}" for i in range(n))
        self.agent_types = ("vehicle",) * n
        self.horizon = int(horizon)
        self.distflow_iterations = int(distflow_iterations)
        self._default_params = default_params
        self._name = name

    def baselines(self, params: EVFleetParams) -> dict:
        """Random, charge on arrival (no control), a price threshold with a deadline, and
        ``mpc``: receding-horizon MPC with perfect foresight on this environment's own
        model (:mod:`jaxgrid.control.mpc`, a controller that reads the state)."""
        from jaxgrid.control.mpc import MPCConfig, mpc_controller  # control sits above envs
        from jaxgrid.envs.evfleet.baselines import charge_on_arrival, price_threshold

        return {
            **super().baselines(params),
            "charge_on_arrival": charge_on_arrival,
            "price_threshold": price_threshold(),
            "mpc": mpc_controller(self, params, MPCConfig(*MPC_SETTINGS)),
        }

    def oracle_return(self, params: EVFleetParams, state: EVFleetState) -> float:
        """The return of the perfect-foresight plan of :mod:`.oracle` (the cheapest
        charging that serves every vehicle within the linearised network's limits)
        stepped through this environment from ``state`` (an unbatched reset state)."""
        from jaxgrid.envs.evfleet.oracle import plan_return

        return plan_return(self, params, state)

    def action_space(self, params):
        return spaces.Box(-1.0, 1.0, (self.num_agents, 1))

    def observation_names(self, params) -> tuple[str, ...]:
        return (
            "sin_time",
            "cos_time",
            "price",
            "vm_pu",
            "plugged_in",
            "soc",
            "target_soc",
            "to_departure",
            "energy_needed",
            "laxity",
            "transformer_loading",
            "v2g",
        )

    def observation_space(self, params):
        return spaces.Box(-jnp.inf, jnp.inf, (self.num_agents, 12))

    def buses(self, params: EVFleetParams) -> Array:
        """``(n,)`` bus of each agent."""
        return params.vehicle_bus

    # -- exogenous inputs and physics -------------------------------------------------

    def exogenous(self, row, params: EVFleetParams):
        """Bus loads (MW, Mvar) and the price (currency/MWh) at profile ``row``."""
        prof = params.profiles
        p, q = feeder_loads(prof, row, params.load_profile, params.load_scale, params.feeder)
        return p, q, prof.price[row % prof.price.shape[0], params.price_column].astype(p.dtype)

    forecast_names = ("load_mw", "price")

    def exogenous_ahead(self, state, params: EVFleetParams, steps):
        """Total base load, MW, and the price ``steps`` ahead: ``(len(steps), 2)``."""

        def at(row):
            p, _, price = self.exogenous(row, params)
            return jnp.stack([jnp.sum(p), price])

        return jax.vmap(at)(state.start + state.time + jnp.asarray(steps))

    def power_flow(self, p, q, params: EVFleetParams):
        """The feeder solved for bus loads ``p`` (MW) and ``q`` (Mvar)."""
        return solve_feeder(params.feeder, p, q, params.solver, self.distflow_iterations)

    # -- the model -------------------------------------------------------------------

    def reset_env(self, key, params: EVFleetParams):
        # every random number of the reset from one draw of bits: the start day, both
        # hours of each session and each arrival's state of charge (a split and three
        # draws were four Threefry hashes: 295 -> 275 kernels and 13 % less LLVM IR in
        # the step, ``benchmarks/kernel_cost.py``)
        n = self.num_agents
        bits = jax.random.bits(key, (1 + 3 * n,), jnp.uint32)
        steps_per_day = jnp.round(24.0 / params.dt_h).astype(jnp.int32)
        first = jnp.round(params.first_hour / params.dt_h).astype(jnp.int32)
        start = start_from_bits(bits[0], params.profiles.days, steps_per_day) + first
        arrival, departure = overnight_sessions(
            bits[1 : 1 + 2 * n],
            params.arrival_mean_h,
            params.arrival_sd_h,
            params.departure_mean_h,
            params.departure_sd_h,
            params.first_hour,
            params.dt_h,
            self.horizon,
        )
        p, q, _ = self.exogenous(start, params)
        dtype = p.dtype
        lo, hi = params.soc_arrival_range[0], params.soc_arrival_range[1]
        soc = (lo + (hi - lo) * unit_floats(bits[1 + 2 * n :])).astype(dtype)
        flow = hold_failed(self.power_flow(p, q, params), 1.0)
        state = EVFleetState(
            time=jnp.zeros((), jnp.int32),
            start=start,
            vm_pu=flow.vm_pu,
            soc=soc,
            soc_arrival=soc,
            arrival=arrival,
            departure=departure,
            loading=jnp.zeros((), dtype),
            start_failed=~flow.converged,
        )
        return self.observe(state, params), state

    def transition(self, key, state: EVFleetState, action, params: EVFleetParams) -> Transition:
        t = state.time
        dt = params.dt_h
        p_bus, q_bus, price = self.exogenous(state.start + t, params)
        dtype = p_bus.dtype
        n = self.num_agents
        ev = ev_step(
            state.soc,
            action[:, 0] * params.ev.battery.p_max_mw,
            jnp.zeros(n, dtype),
            t,
            state.arrival,
            state.departure,
            dt,
            params.ev,
        )
        p_bus = p_bus + jnp.zeros_like(p_bus).at[params.vehicle_bus].add(ev.p_mw)
        flow = hold_failed(self.power_flow(p_bus, q_bus, params), state.vm_pu)
        violation = voltage_violation_pu(flow.vm_pu, params.v_lower, params.v_upper)
        apparent = jnp.hypot(flow.p_import_mw, flow.q_import_mvar)
        last = t + 1 >= self.horizon
        share = served_share(ev.soc, state.soc_arrival, params.ev.target_soc)
        objectives = jnp.stack(
            [
                -price * jnp.sum(ev.p_mw) * dt,
                jnp.where(last, -hoover(share), 0.0),
                -flow.loss_mw * dt,
                -jnp.sum(ev.unmet_mwh),
            ]
        ).astype(dtype)
        shared = jnp.stack(
            [jnp.sum(violation), jnp.maximum(apparent - params.transformer_mva, 0.0)]
        ).astype(dtype)
        costs = jnp.concatenate(
            [
                ev.unmet_mwh[:, None],
                jnp.broadcast_to(shared, (n, 2)),
                ev.clipped_mw[:, None],
                jnp.zeros((n, 1), dtype),
            ],
            axis=1,
        )
        new_state = state.replace(
            time=t + 1,
            vm_pu=flow.vm_pu,
            soc=ev.soc,
            loading=(apparent / params.transformer_mva).astype(dtype),
            start_failed=jnp.zeros((), bool),
        )
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=jnp.broadcast_to(objectives, (n, 4)),
            costs=costs,
            terminated=jnp.zeros((), bool),
            truncated=last,
            info={
                "vm_pu": flow.vm_pu,
                "loss_mw": flow.loss_mw,
                "import_mw": flow.p_import_mw,
                "fleet_mw": jnp.sum(ev.p_mw),
                "transformer_loading": new_state.loading,
                "controllable": jnp.all(violation == 0.0),
            },
            failed=~flow.converged | state.start_failed,
        )

    def observe(self, state: EVFleetState, params: EVFleetParams):
        n = self.num_agents
        row = state.start + state.time
        _, _, price = self.exogenous(row, params)
        dtype = price.dtype
        steps_per_day = jnp.round(24.0 / params.dt_h)
        phase = 2 * jnp.pi * (row % steps_per_day) / steps_per_day
        b = params.ev.battery
        plugged = connected(state.time, state.arrival, state.departure)
        to_go = jnp.maximum(state.departure - state.time, 0)
        needed = jnp.maximum(params.ev.target_soc - state.soc, 0.0)
        steps_needed = needed * b.capacity_mwh / (b.eta_charge * b.p_max_mw * params.dt_h)
        own = jnp.stack(
            [
                state.vm_pu[params.vehicle_bus],
                plugged,
                state.soc,
                jnp.broadcast_to(params.ev.target_soc, (n,)),
                to_go / self.horizon,
                needed,
                (to_go - steps_needed) / self.horizon,
            ],
            axis=1,
        ).astype(dtype)
        shared = jnp.stack([jnp.sin(phase), jnp.cos(phase), price / PRICE_SCALE]).astype(dtype)
        return jnp.concatenate(
            [
                jnp.broadcast_to(shared, (n, 3)),
                own,
                jnp.broadcast_to(state.loading.astype(dtype), (n, 1)),
                jnp.broadcast_to(params.ev.v2g, (n,))[:, None].astype(dtype),
            ],
            axis=1,
        )

    def world_state(self, state: EVFleetState, params: EVFleetParams):
        """Bus voltages, every vehicle's plug state and state of charge, the time of day,
        the price and the transformer loading."""
        row = state.start + state.time
        steps_per_day = jnp.round(24.0 / params.dt_h)
        phase = 2 * jnp.pi * (row % steps_per_day) / steps_per_day
        _, _, price = self.exogenous(row, params)
        dtype = state.vm_pu.dtype
        plugged = connected(state.time, state.arrival, state.departure).astype(dtype)
        return jnp.concatenate(
            [
                state.vm_pu,
                plugged,
                state.soc,
                jnp.stack(
                    [jnp.sin(phase), jnp.cos(phase), price / PRICE_SCALE, state.loading]
                ).astype(dtype),
            ]
        )
