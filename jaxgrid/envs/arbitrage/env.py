"""Energy arbitrage: one battery buys low and sells high against a price series.

**Agent.** One battery (``battery``).

**State.** Step within the episode, the episode's first profile row, state of charge.

**Action.** ``(1, 1)`` in [-1, 1]: the share of the power rating to charge (+) or
discharge (-); infeasible requests are clipped by the battery model
(:mod:`jaxgrid.devices.battery`).

**Observation.** ``(1, 4 + H)``: state of charge, time of day as sine and cosine, the
current price and the next ``H`` prices (perfect forecast), prices in hundreds of
currency units per MWh.

**Objectives.** ``profit``: money earned, ``-price * p * dt`` (currency); ``degradation``:
minus the degradation cost of the throughput. Default reward: their sum.

**Cost.** ``device_limits``: requested power the battery could not enact, MW.

**Episode.** ``horizon`` steps from a day drawn from ``profiles.days``; then it
terminates: the day is the whole task (the agent sees the time of day), and energy left in
the battery is worth nothing, as in the oracle, so a learner must not bootstrap past it.

A perfect-foresight optimum of the same episode is :func:`.oracle.optimal_schedule`, so a
policy's profit can be reported as a share of the best possible.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid import spaces
from jaxgrid.data.profiles import Profiles, sample_start
from jaxgrid.devices.battery import BatteryParams, battery_step
from jaxgrid.env import Environment, Transition
from jaxgrid.envs.arbitrage.baselines import idle, price_threshold
from jaxgrid.envs.arbitrage.oracle import episode_oracle
from jaxgrid.rewards.abort import AbortConditions
from jaxgrid.rewards.scalarise import WEIGHTED_SUM, Scalarisation
from jaxgrid.types import Array, float_dtype

PRICE_SCALE = 100.0  # observed prices are divided by this
# the "mpc" baseline plans the whole day ahead (a shrinking horizon): Adam on the plan
MPC_ITERATIONS, MPC_LEARNING_RATE, MPC_COST_WEIGHT = 100, 0.1, 3.0


@struct.dataclass
class ArbitrageState:
    time: Array  # () int32 steps since the episode started
    start: Array  # () int32 profile row of the first step
    soc: Array  # (1,) state of charge


@struct.dataclass
class ArbitrageParams:
    """Attributes:
    profiles: price series (``profiles.price[:, price_column]``) and the episode days.
    price_column: ``()`` int32 which price series to trade against.
    battery: the battery, ``(1,)`` fields.
    initial_soc: ``(1,)`` state of charge at the start of an episode.
    dt_h: ``()`` step length, hours.
    abort: bounds on the state of charge (off by default).
    scalarisation: how the objectives become the reward.
    """

    profiles: Profiles
    price_column: Array
    battery: BatteryParams
    initial_soc: Array
    dt_h: Array
    abort: AbortConditions
    scalarisation: Scalarisation


class Arbitrage(Environment):
    """One battery against a price series (see the module docstring)."""

    agents = ("battery",)
    agent_types = ("battery",)
    objective_names = ("profit", "degradation")
    action_names = ("p_share",)
    cost_names = ("device_limits",)
    abort_names = ("soc",)

    def __init__(self, default_params: ArbitrageParams, horizon: int, forecast: int, name: str):
        self.horizon = int(horizon)
        self.forecast = int(forecast)
        self._default_params = default_params
        self._name = name

    def action_space(self, params):
        return spaces.Box(-1.0, 1.0, (1, 1))

    def observation_names(self, params) -> tuple[str, ...]:
        prices = ("price", *(f"price[+{h}]" for h in range(1, 1 + self.forecast)))
        return ("soc", "sin_time", "cos_time", *prices)

    def observation_space(self, params):
        low = jnp.concatenate([jnp.array([0.0, -1.0, -1.0]), jnp.full(1 + self.forecast, -jnp.inf)])
        high = jnp.concatenate([jnp.array([1.0, 1.0, 1.0]), jnp.full(1 + self.forecast, jnp.inf)])
        return spaces.Box(low[None], high[None], (1, 4 + self.forecast))

    def abort_values(self, state: ArbitrageState, params: ArbitrageParams):
        """The state of charge."""
        return state.soc

    def prices(self, row, params: ArbitrageParams, length: int) -> Array:
        """``length`` prices from profile row ``row`` (wrapping around the year)."""
        series = params.profiles.price[:, params.price_column]
        return series[(row + jnp.arange(length)) % series.shape[0]].astype(float_dtype())

    forecast_names = ("price",)

    def exogenous_ahead(self, state, params: ArbitrageParams, steps):
        """The price (the profile's units, per MWh) ``steps`` ahead: ``(len(steps), 1)``."""
        rows = state.start + state.time + jnp.asarray(steps)
        return jax.vmap(lambda row: self.prices(row, params, 1))(rows)

    def baselines(self, params: ArbitrageParams) -> dict:
        """Random, idle (no control), a price-threshold heuristic and ``mpc``: receding-horizon
        MPC with perfect foresight over the rest of the day on this environment's own model
        (:mod:`jaxgrid.control.mpc`, a controller that reads the state)."""
        from jaxgrid.control.mpc import MPCConfig, mpc_controller  # control sits above envs

        config = MPCConfig(self.horizon, MPC_ITERATIONS, MPC_LEARNING_RATE, MPC_COST_WEIGHT)

        return {
            **super().baselines(params),
            "idle": idle,
            "threshold": price_threshold(),
            "mpc": mpc_controller(self, params, config),
        }

    def oracle_return(self, params: ArbitrageParams, state: ArbitrageState) -> float:
        """The perfect-foresight optimum of the episode from ``state`` (an unbatched reset state),
        for the default reward (profit plus degradation objectives, equal weights)."""
        weights = np.asarray(params.scalarisation.weights)
        if int(params.scalarisation.method) != WEIGHTED_SUM or not np.allclose(weights, 1.0):
            raise ValueError(
                "the arbitrage oracle knows only the default reward (sum of objectives)"
            )
        return episode_oracle(self, params, int(state.start)).profit

    def observe(self, state: ArbitrageState, params: ArbitrageParams):
        row = state.start + state.time
        steps_per_day = jnp.round(24.0 / params.dt_h)
        phase = 2 * jnp.pi * (row % steps_per_day) / steps_per_day
        prices = self.prices(row, params, 1 + self.forecast) / PRICE_SCALE
        head = jnp.stack([state.soc[0], jnp.sin(phase), jnp.cos(phase)]).astype(prices.dtype)
        return jnp.concatenate([head, prices])[None]

    def reset_env(self, key, params: ArbitrageParams):
        steps_per_day = self.horizon  # episodes start at midnight of a drawn day
        state = ArbitrageState(
            time=jnp.zeros((), jnp.int32),
            start=sample_start(key, params.profiles.days, steps_per_day),
            soc=params.initial_soc.astype(float_dtype()),
        )
        return self.observe(state, params), state

    def transition(self, key, state: ArbitrageState, action, params: ArbitrageParams) -> Transition:
        b = params.battery
        request = action[:, 0] * b.p_max_mw
        step = battery_step(state.soc, request, jnp.zeros_like(request), params.dt_h, b)
        price = self.prices(state.start + state.time, params, 1)
        profit = -price * step.p_mw * params.dt_h
        new_state = state.replace(time=state.time + 1, soc=step.soc)
        return Transition(
            obs=self.observe(new_state, params),
            state=new_state,
            reward_vector=jnp.stack([profit, -step.degradation], axis=1),
            costs=step.clipped_mw[:, None],
            terminated=new_state.time >= self.horizon,
            truncated=jnp.zeros((), bool),
            info={"soc": step.soc, "p_mw": step.p_mw, "price": price},
        )
