"""A data-centre microgrid: one operator schedules GPU work, cooling, a battery, a diesel
generator and the grid exchange over a day of five-minute steps against PV and prices.

**Agent.** One operator (``operator``).

**State.** Step within the episode, the episode's first profile row; the data centre
(:mod:`jaxgrid.devices.datacentre`: backlog and deadline slack of training and
fine-tuning work, hall temperature), the battery's state of charge
(:mod:`jaxgrid.devices.battery`), the diesel generator (:mod:`jaxgrid.devices.diesel`:
running, start-up steps left, last output) and the last step's data-centre power and grid
exchange (observed).

**Action.** ``(1, 5)``: GPU shares for training and fine-tuning (each in [0, 1], scaled
down when they add up to more than 1), the cooling setpoint in [0, 1] of
``[t_set_min, t_set_max]``, the battery power in [-1, 1] of its rating (charge > 0) and the
diesel request in [-1, 1] of its rating (``<= 0``: off).

**Power balance.** The grid takes the rest: ``p_grid = p_dc + p_battery - p_pv - p_diesel``
(MW, import > 0; export is paid the same price). Energy above the import cap is still
delivered (a contracted capacity, not a fuse) and charged as a cost.

**Observation.** ``(1, 16 + 2 H)`` (see :meth:`Dcmg.observation_names`): time of day,
state of charge, hall and outdoor temperature (°C / 10), backlog and deadline slack of
each class (hours of the whole cluster), the diesel's status and output (MW), the last
data-centre power and grid exchange (MW), PV (MW) and price (currency/MWh / 100) now and at
each of the next ``H`` hours (perfect forecast).

**Objectives.** ``energy_cost``: minus the money paid (grid energy, diesel fuel and
starts, battery degradation), currency; ``emissions``: minus the CO2 of grid imports and
diesel fuel, t; ``work_completed``: GPU-hours served. Default reward: their weighted sum
with weights ``(1, carbon price, value of a GPU-hour)``.

**Costs.** ``thermal``: hall temperature above ``t_max`` (K); ``sla``: work past its
deadline still not served (GPU-h, both classes); ``battery_limits``: battery power
requested beyond what it can enact (MW); ``grid_import``: import above the cap (MW).

**Episode.** ``horizon`` steps (288: a day of five minutes) from midnight of a day drawn
from ``profiles.days``; then it terminates (work left and energy stored are worth nothing,
as in the oracle).

The perfect-foresight optimum of the same day is :func:`.oracle.episode_oracle`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid import spaces
from jaxgrid.data.profiles import Profiles, sample_start
from jaxgrid.devices.battery import BatteryParams, battery_step
from jaxgrid.devices.datacentre import DataCentreParams, DataCentreState, datacentre_step
from jaxgrid.devices.diesel import DieselParams, DieselState, diesel_off, diesel_step
from jaxgrid.env import Environment, Transition
from jaxgrid.rewards.scalarise import WEIGHTED_SUM, Scalarisation
from jaxgrid.types import Array, float_dtype

PRICE_SCALE = 100.0  # observed prices are divided by this
TEMPERATURE_SCALE = 10.0  # observed temperatures (°C) are divided by this
# the "mpc" baseline's horizon (steps: three hours), Adam iterations, step size and cost
# weight, from benchmarks/mpc_baselines.py on held-out days
MPC_SETTINGS = (36, 30, 0.1, 3.0)


@struct.dataclass
class DcmgState:
    """The microgrid between two steps (the devices' states and the last step's flows)."""

    time: Array  # () int32 steps since the episode started
    start: Array  # () int32 profile row of the first step
    datacentre: DataCentreState
    soc: Array  # (1,) battery state of charge
    diesel: DieselState
    p_dc_mw: Array  # () data-centre power of the last step, MW
    p_grid_mw: Array  # () grid exchange of the last step, MW (import > 0)


@struct.dataclass
class DcmgParams:
    """Attributes:
    profiles: PV (``profiles.pv[:, pv_column]``, share of rated power) and price
        (``profiles.price[:, price_column]``, currency/MWh) on the environment's step.
    workload_gpu_h: ``(T, 2)`` GPU-hours of training and fine-tuning work arriving per
        step, on the same rows as ``profiles``.
    pv_column, price_column: ``()`` int32 which series to use.
    pv_mw: ``()`` PV rating, MW.
    datacentre: the data centre.
    battery: the battery, ``(1,)`` fields.
    diesel: the diesel generator.
    initial_soc: ``(1,)`` state of charge at the start of a day.
    t_initial: ``()`` hall temperature at the start of a day, °C.
    t_out_mean, t_out_amplitude: ``()`` outdoor temperature, a daily sine peaking at
        15:00 (°C).
    import_cap_mw: ``()`` grid import cap, MW.
    grid_t_per_mwh: ``()`` CO2 of imported energy, t/MWh.
    dt_h: ``()`` step length, hours.
    scalarisation: how the objectives become the reward.
    """

    profiles: Profiles
    workload_gpu_h: Array
    pv_column: Array
    price_column: Array
    pv_mw: Array
    datacentre: DataCentreParams
    battery: BatteryParams
    diesel: DieselParams
    initial_soc: Array
    t_initial: Array
    t_out_mean: Array
    t_out_amplitude: Array
    import_cap_mw: Array
    grid_t_per_mwh: Array
    dt_h: Array
    scalarisation: Scalarisation


class Dcmg(Environment):
    """The data-centre microgrid (see the module docstring)."""

    agents = ("operator",)
    agent_types = ("operator",)
    objective_names = ("energy_cost", "emissions", "work_completed")
    action_names = ("train_share", "finetune_share", "cooling_setpoint", "battery", "diesel")
    cost_names = ("thermal", "sla", "battery_limits", "grid_import")
    forecast_names = ("pv_mw", "price")

    def __init__(self, default_params: DcmgParams, horizon: int, forecast_hours: int, name: str):
        self.horizon = int(horizon)
        self.forecast_hours = int(forecast_hours)
        self._default_params = default_params
        self._name = name

    # -- spaces ----------------------------------------------------------------------

    def action_space(self, params):
        low = jnp.array([[0.0, 0.0, 0.0, -1.0, -1.0]])
        return spaces.Box(low, jnp.ones((1, 5)), (1, 5))

    def observation_names(self, params) -> tuple[str, ...]:
        ahead = tuple(
            f"{s}[+{h}h]" for s in ("pv", "price") for h in range(1, 1 + self.forecast_hours)
        )
        return (
            "sin_time", "cos_time", "soc", "t_hall", "t_out",
            "backlog_train", "backlog_finetune", "ahead_train", "ahead_finetune",
            "diesel_running", "diesel_starting", "p_diesel",
            "p_dc", "p_grid", "pv", "price", *ahead,
        )  # fmt: skip

    def observation_space(self, params):
        n = len(self.observation_names(params))
        return spaces.Box(-jnp.inf, jnp.inf, (1, n))

    # -- exogenous series ---------------------------------------------------------------

    def steps_per_hour(self, params) -> Array:
        """Steps in one hour (12 at five minutes)."""
        return jnp.round(1.0 / params.dt_h).astype(jnp.int32)

    def exogenous(self, rows, params: DcmgParams) -> tuple[Array, Array, Array]:
        """PV (MW), price (currency/MWh) and arrivals ``(..., 2)`` (GPU-h) at profile ``rows``
        (wrapping around the series)."""
        n = params.profiles.pv.shape[0]
        rows = rows % n
        pv = params.profiles.pv[rows, params.pv_column] * params.pv_mw
        price = params.profiles.price[rows, params.price_column]
        return pv.astype(float_dtype()), price.astype(float_dtype()), params.workload_gpu_h[rows]

    def outdoor_temperature(self, row, params: DcmgParams) -> Array:
        """Outdoor temperature (°C) at profile row ``row``: a daily sine peaking at 15:00."""
        hour = (row * params.dt_h) % 24.0
        return params.t_out_mean + params.t_out_amplitude * jnp.cos(
            2 * jnp.pi * (hour - 15.0) / 24.0
        )

    def newly_due(self, state: DcmgState, params: DcmgParams) -> Array:
        """``(2,)`` GPU-hours whose deadline is the end of the state's next step: the work
        that arrived ``deadline_steps - 1`` steps before it, within the episode."""
        back = state.time + 1 - params.datacentre.deadline_steps
        arrived = params.workload_gpu_h[(state.start + back) % params.workload_gpu_h.shape[0]]
        return jnp.where(back >= 0, arrived[jnp.arange(2), jnp.arange(2)], 0.0)

    def exogenous_ahead(self, state, params: DcmgParams, steps):
        """PV (MW) and price (per MWh) ``steps`` ahead: ``(len(steps), 2)``."""
        rows = state.start + state.time + jnp.asarray(steps)
        pv, price, _ = self.exogenous(rows, params)
        return jnp.stack([pv, price], axis=-1)

    # -- reference policies -----------------------------------------------------------------

    def baselines(self, params: DcmgParams) -> dict:
        """Random, PowerZooJax-style rule-based and greedy (work first, self-consumption),
        and ``mpc``: receding-horizon MPC with perfect foresight on this environment's own
        model (:mod:`jaxgrid.control.mpc`, a controller that reads the state)."""
        from jaxgrid.control.mpc import MPCConfig, mpc_controller  # control sits above envs
        from jaxgrid.envs.dcmg.baselines import greedy, rule_based

        return {
            **super().baselines(params),
            "rule_based": rule_based(self, params),
            "greedy": greedy(self, params),
            "mpc": mpc_controller(self, params, MPCConfig(*MPC_SETTINGS)),
        }

    def oracle_return(self, params: DcmgParams, state: DcmgState) -> float:
        """The perfect-foresight optimum of the day from ``state`` (an unbatched reset state)
        for a weighted-sum reward with non-negative weights."""
        from jaxgrid.envs.dcmg.oracle import episode_oracle

        if int(params.scalarisation.method) != WEIGHTED_SUM or np.any(
            np.asarray(params.scalarisation.weights) < 0
        ):
            raise ValueError("the dcmg oracle knows only weighted sums with weights >= 0")
        return episode_oracle(self, params, int(state.start)).value

    # -- the model ------------------------------------------------------------------------

    def observe(self, state: DcmgState, params: DcmgParams):
        row = state.start + state.time
        phase = 2 * jnp.pi * ((row * params.dt_h) % 24.0) / 24.0
        hourly = jnp.arange(1 + self.forecast_hours) * self.steps_per_hour(params)
        pv, price, _ = self.exogenous(row + hourly, params)
        dc, diesel = state.datacentre, state.diesel
        cluster_h = params.datacentre.n_gpus  # GPU-h of one hour of the whole cluster
        head = jnp.stack(
            [
                jnp.sin(phase),
                jnp.cos(phase),
                state.soc[0],
                dc.t_hall / TEMPERATURE_SCALE,
                self.outdoor_temperature(row, params) / TEMPERATURE_SCALE,
                *(dc.backlog_gpu_h / cluster_h),
                *(dc.ahead_gpu_h / cluster_h),
                diesel.running.astype(float_dtype()),
                (diesel.start_left > 0).astype(float_dtype()),
                diesel.p_mw,
                state.p_dc_mw,
                state.p_grid_mw,
            ]
        ).astype(float_dtype())
        return jnp.concatenate([head, pv[:1], price[:1] / PRICE_SCALE, pv[1:],
                                price[1:] / PRICE_SCALE])[None]  # fmt: skip

    def reset_env(self, key, params: DcmgParams):
        f = float_dtype()
        state = DcmgState(
            time=jnp.zeros((), jnp.int32),
            start=sample_start(key, params.profiles.days, self.horizon),
            datacentre=DataCentreState(
                backlog_gpu_h=jnp.zeros(2, f),
                ahead_gpu_h=jnp.zeros(2, f),
                t_hall=params.t_initial.astype(f),
            ),
            soc=params.initial_soc.astype(f),
            diesel=diesel_off(),
            p_dc_mw=jnp.zeros((), f),
            p_grid_mw=jnp.zeros((), f),
        )
        return self.observe(state, params), state

    def transition(self, key, state: DcmgState, action, params: DcmgParams) -> Transition:
        a = action[0]
        dc_p, dt = params.datacentre, params.dt_h
        row = state.start + state.time
        pv, price, arrivals = self.exogenous(row, params)
        t_out = self.outdoor_temperature(row, params)

        setpoint = dc_p.t_set_min + a[2] * (dc_p.t_set_max - dc_p.t_set_min)
        dc = datacentre_step(state.datacentre, a[:2], setpoint, arrivals,
                             self.newly_due(state, params), t_out, dt, dc_p)  # fmt: skip
        b = params.battery
        request = a[3:4] * b.p_max_mw
        bat = battery_step(state.soc, request, jnp.zeros_like(request), dt, b)
        gen = diesel_step(state.diesel, a[4] * params.diesel.p_max_mw, dt, params.diesel)

        p_grid = dc.p_mw + bat.p_mw[0] - pv - gen.p_mw
        energy_cost = price * p_grid * dt + gen.cost + bat.degradation[0]
        emissions = params.grid_t_per_mwh * jnp.maximum(p_grid, 0.0) * dt + gen.emissions_t
        work = jnp.sum(dc.served_gpu_h)

        new_state = state.replace(
            time=state.time + 1, datacentre=dc.state, soc=bat.soc, diesel=gen.state,
            p_dc_mw=dc.p_mw, p_grid_mw=p_grid,
        )  # fmt: skip
        costs = jnp.stack(
            [
                dc.overheat_k,
                jnp.sum(dc.late_gpu_h),
                bat.clipped_mw[0],
                jnp.maximum(p_grid - params.import_cap_mw, 0.0),
            ]
        )
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=jnp.stack([-energy_cost, -emissions, work])[None],
            costs=costs[None],
            terminated=new_state.time >= self.horizon,
            truncated=jnp.zeros((), bool),
            info={
                "p_dc_mw": dc.p_mw,
                "p_it_mw": dc.p_it_mw,
                "p_cool_mw": dc.p_cool_mw,
                "p_grid_mw": p_grid,
                "p_pv_mw": pv,
                "p_diesel_mw": gen.p_mw,
                "p_battery_mw": bat.p_mw[0],
                "soc": bat.soc[0],
                "t_hall": dc.state.t_hall,
                "price": price,
                "served_gpu_h": dc.served_gpu_h,
                "late_gpu_h": dc.late_gpu_h,
            },  # fmt: skip
        )
