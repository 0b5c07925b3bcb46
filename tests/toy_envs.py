"""A tiny environment for testing the contract machinery, and broken variants of it.

``Tanks``: each agent fills (+) or drains (-) its own tank; objectives reward a level
near a target and penalise effort; the cost is overflow above a limit. The episode
terminates when every tank is above ``params.stop_level`` and is truncated at the horizon.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid import spaces
from jaxgrid.env import Environment, Transition
from jaxgrid.rewards import Scalarisation


@struct.dataclass
class TanksState:
    level: jax.Array  # (num_agents,)
    time: jax.Array  # () int32


@struct.dataclass
class TanksParams:
    target: jax.Array
    limit: jax.Array
    stop_level: jax.Array
    scalarisation: Scalarisation


class Tanks(Environment):
    objective_names = ("tracking", "effort")
    cost_names = ("overflow",)

    def __init__(self, num_agents: int = 3, horizon: int = 7):
        self.agents = tuple(f"tank_{i}" for i in range(num_agents))
        self.agent_types = ("tank",) * num_agents
        self.horizon = horizon

    def default_params(self):
        return TanksParams(
            target=jnp.float32(0.5),
            limit=jnp.float32(0.9),
            stop_level=jnp.float32(0.95),
            scalarisation=Scalarisation.create(2),
        )

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (self.num_agents, 2))

    def action_space(self, params):
        return spaces.Box(-0.2, 0.2, (self.num_agents, 1))

    def observe(self, state, params):
        t = jnp.full((self.num_agents,), jnp.minimum(state.time / self.horizon, 1.0), jnp.float32)
        return jnp.stack([state.level, t], axis=1)

    def reset_env(self, key, params):
        state = TanksState(
            level=jax.random.uniform(key, (self.num_agents,), minval=0.0, maxval=0.6),
            time=jnp.zeros((), jnp.int32),
        )
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        noise = 0.01 * jax.random.normal(key, (self.num_agents,))
        level = jnp.clip(state.level + action[:, 0] + noise, 0.0, 1.0)
        state = TanksState(level=level, time=state.time + 1)
        reward_vector = jnp.stack([-jnp.abs(level - params.target), -jnp.abs(action[:, 0])], axis=1)
        costs = jnp.maximum(level - params.limit, 0.0)[:, None]
        return Transition(
            obs=self.observe(state, params),
            state=state,
            reward_vector=reward_vector,
            costs=costs,
            terminated=jnp.all(level > params.stop_level),
            truncated=state.time >= self.horizon,
            info={"mean_level": jnp.mean(level)},
        )


class LoudTanks(Tanks):
    """Tanks whose overflow cost is counted in units 1e4 times the reward's, plus 1e3 a
    step: cost values on the scale of ``voltage33-v0``'s failure charges."""

    def transition(self, key, state, action, params):
        step = super().transition(key, state, action, params)
        return step._replace(costs=step.costs * 1e4 + 1e3)


class DtypeDrift(Tanks):
    """Bug: the step turns the integer clock into a float."""

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        return tr._replace(state=tr.state.replace(time=tr.state.time.astype(jnp.float32)))


class TraceTimeRandomness(Tanks):
    """Bug: the initial level comes from NumPy's global generator, baked in at trace time."""

    def reset_env(self, key, params):
        obs, state = super().reset_env(key, params)
        state = state.replace(level=state.level * 0 + np.float32(np.random.uniform(0, 0.5)))  # noqa: NPY002
        return self.observe(state, params), state


class TraceTimeRandomTransition(Tanks):
    """Bug: the inflow comes from NumPy's global generator, baked in at trace time, in the
    transition only: within one trace every call of the (jitted) step shares it, so only
    a second trace shows it."""

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        inflow = np.float32(np.random.uniform(0, 0.01))  # noqa: NPY002
        return tr._replace(state=tr.state.replace(level=tr.state.level + inflow))


class GoesNaN(Tanks):
    """Bug: an unguarded log of the action makes the state NaN for negative actions."""

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        return tr._replace(
            state=tr.state.replace(level=tr.state.level + jnp.log(action[:, 0] + 0.2))
        )


class ObsOutOfSpace(Tanks):
    """Bug: the observation is scaled beyond its declared box."""

    def observe(self, state, params):
        return 2.0 * super().observe(state, params)


class LateTruncation(Tanks):
    """Bug: truncation one step after the horizon."""

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        return tr._replace(truncated=tr.state.time >= self.horizon + 1)


class WrongCostShape(Tanks):
    """Bug: one cost column too many."""

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        return tr._replace(costs=jnp.concatenate([tr.costs, tr.costs], axis=1))


@jax.custom_batching.custom_vmap
def _total(x):
    return jnp.sum(x)


@_total.def_vmap
def _total_vmap(axis_size, in_batched, x):
    """Bug: sums over the batch too, so each environment sees its neighbours' tanks."""
    return jnp.full((axis_size,), jnp.sum(x), x.dtype), True


class BatchMixing(Tanks):
    """Bug: a hand-written batching rule mixes environments under ``vmap``: the tracking
    objective rewards the mean level of the tanks of all environments in the batch."""

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        mean = _total(tr.state.level) / self.num_agents
        return tr._replace(
            reward_vector=tr.reward_vector.at[:, 0].set(-jnp.abs(mean - params.target))
        )


class Float32Only(Tanks):
    """Bug: the step hard-codes float32, so under ``jax_enable_x64`` the state's dtype
    changes from reset (float64) to step (float32)."""

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        return tr._replace(state=tr.state.replace(level=tr.state.level.astype(jnp.float32)))


class WeakTypeDrift(Tanks):
    """Bug: reset builds the clock from a Python int (a weakly typed int32), the step from
    an array (strongly typed), so a jitted step traces again for the second step."""

    def reset_env(self, key, params):
        obs, state = super().reset_env(key, params)
        return obs, state.replace(time=jnp.asarray(0))

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        return tr._replace(state=tr.state.replace(time=tr.state.time.astype(jnp.int32)))


class WorldStateGoesNaN(Tanks):
    """Bug: the centralised critic's input divides by a clock that reaches zero late in
    an episode (after the first six steps)."""

    def world_state(self, state, params):
        return jnp.append(state.level, 1.0 / (self.horizon - 2 - state.time))


class StepProductBelowFullPrecision(Tanks):
    """Bug: overrides ``step`` (as a wrapper may) and mixes the observation by a matrix
    product of its own, outside ``full_precision``: on a GPU it would run in TF32."""

    def step(self, key, state, action, params=None):
        obs, state, *rest = super().step(key, state, action, params)
        return (obs @ jnp.eye(obs.shape[-1], dtype=obs.dtype), state, *rest)


@struct.dataclass
class DoorsState:
    time: jax.Array  # () int32


@struct.dataclass
class DoorsParams:
    value: jax.Array  # (n_doors,) reward of each door
    scalarisation: Scalarisation


class Doors(Environment):
    """Discrete choices under an action mask that changes with time.

    Each agent opens one of four doors worth ``params.value``; the best door (2) is locked
    on odd steps, when the best open door is 1. Opening a locked door pays -10 and counts
    in ``info["locked_opened"]``. Observation: ``{"observation": (n, 2), "action_mask": (n, 4)}``.
    """

    objective_names = ("value",)
    cost_names = ()

    def __init__(self, num_agents: int = 2, horizon: int = 8):
        self.agents = tuple(f"door_{i}" for i in range(num_agents))
        self.agent_types = ("door",) * num_agents
        self.horizon = horizon

    def default_params(self):
        return DoorsParams(
            value=jnp.array([0.1, 0.5, 1.0, 0.2]), scalarisation=Scalarisation.create(1)
        )

    def observation_space(self, params):
        n = self.num_agents
        return spaces.Dict(
            {
                "observation": spaces.Box(0.0, 1.0, (n, 2)),
                "action_mask": spaces.MultiDiscrete(np.full((n, 4), 2), jnp.bool_),
            }
        )

    def action_space(self, params):
        return spaces.Discrete(4, (self.num_agents,))

    def _mask(self, state):
        locked = state.time % 2 == 1
        return jnp.broadcast_to(
            jnp.array([True, True, True, True]).at[2].set(~locked), (self.num_agents, 4)
        )

    def observe(self, state, params):
        odd = (state.time % 2).astype(float)  # the default float: float64 under x64
        features = jnp.broadcast_to(jnp.stack([odd, 1.0 - odd]), (self.num_agents, 2))
        return {"observation": features, "action_mask": self._mask(state)}

    def reset_env(self, key, params):
        state = DoorsState(time=jnp.zeros((), jnp.int32))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        allowed = jnp.take_along_axis(self._mask(state), action[:, None], axis=1)[:, 0]
        reward = jnp.where(allowed, params.value[action], -10.0)
        state = DoorsState(time=state.time + 1)
        return Transition(
            obs=self.observe(state, params),
            state=state,
            reward_vector=reward[:, None],
            costs=jnp.zeros((self.num_agents, 0)),
            terminated=jnp.zeros((), bool),
            truncated=state.time >= self.horizon,
            info={"locked_opened": jnp.sum(~allowed)},
        )


@struct.dataclass
class PublicGoodsParams:
    multiplier: jax.Array  # the pot is multiplied by this and shared among all agents
    scalarisation: Scalarisation


class PublicGoods(Environment):
    """A public-goods game, a social dilemma: each agent keeps (0) or contributes (1) one
    unit; agent ``j`` receives ``-c_j + multiplier * mean(c)``. With ``1 < multiplier <
    num_agents`` keeping is every agent's best reply, while contributing maximises the
    agents' mean reward. Observation: the time, ``(n, 1)``."""

    objective_names = ("payoff",)
    cost_names = ()

    def __init__(self, num_agents: int = 2, horizon: int = 4):
        self.agents = tuple(f"player_{i}" for i in range(num_agents))
        self.agent_types = ("player",) * num_agents
        self.horizon = horizon

    def default_params(self):
        return PublicGoodsParams(multiplier=jnp.float32(1.5), scalarisation=Scalarisation.create(1))

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (self.num_agents, 1))

    def action_space(self, params):
        return spaces.Discrete(2, (self.num_agents,))

    def observe(self, state, params):
        return jnp.full((self.num_agents, 1), state.time / self.horizon, jnp.float32)

    def reset_env(self, key, params):
        state = DoorsState(time=jnp.zeros((), jnp.int32))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        contribution = action.astype(jnp.float32)
        payoff = -contribution + params.multiplier * jnp.mean(contribution)
        state = DoorsState(time=state.time + 1)
        return Transition(
            obs=self.observe(state, params),
            state=state,
            reward_vector=payoff[:, None],
            costs=jnp.zeros((self.num_agents, 0)),
            terminated=jnp.zeros((), bool),
            truncated=state.time >= self.horizon,
            info={"contributed": jnp.mean(contribution)},
        )


@struct.dataclass
class CollapsesParams(TanksParams):
    power_flow_penalty: jax.Array


class Collapses(Tanks):
    """Tanks whose 'power flow' fails on the fourth step of every episode, reporting a
    garbage ``loss_mw`` there (1e6; 1.0 on every solved step): nothing may average it."""

    cost_names = ("overflow", "power_flow")

    def default_params(self):
        return CollapsesParams(
            **vars(super().default_params()), power_flow_penalty=jnp.float32(9.0)
        )

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        failed = tr.state.time == 4
        return tr._replace(
            costs=jnp.concatenate([tr.costs, jnp.zeros_like(tr.costs)], axis=1),
            info={**tr.info, "loss_mw": jnp.where(failed, 1e6, 1.0)},
            failed=failed,
        )


@struct.dataclass
class CliffState:
    time: jax.Array  # () int32


@struct.dataclass
class CliffParams:
    edge: jax.Array  # an action above this steps off the cliff: the step's physics fails
    power_flow_penalty: jax.Array  # reward lost per step a failure cuts off
    scalarisation: Scalarisation


class Cliff(Environment):
    """A walk along a cliff with a cost no policy can avoid.

    Each step pays 0.1 and costs ``hazard = 0.5 + 0.5 a^2`` for the action ``a`` in
    [-1, 1]; an action above ``params.edge`` steps off the edge: the contract's failed
    step (``Transition.failed``), which ends the episode at ``-power_flow_penalty`` per
    step lost. A budget of 0 on ``hazard`` cannot be met, so an unchecked multiplier makes
    stepping off (which ends every later cost) look cheapest; the best safe walk is
    ``a = 0``. Observation: the share of the horizon gone, ``(1, 1)``.
    """

    objective_names = ("progress",)
    cost_names = ("hazard", "power_flow")

    def __init__(self, horizon: int = 16):
        self.agents = ("walker",)
        self.agent_types = ("walker",)
        self.horizon = horizon

    def default_params(self):
        return CliffParams(
            edge=jnp.float32(0.5),
            power_flow_penalty=jnp.float32(0.1),
            scalarisation=Scalarisation.create(1),
        )

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (1, 1))

    def action_space(self, params):
        return spaces.Box(-1.0, 1.0, (1, 1))

    def observe(self, state, params):
        return jnp.full((1, 1), state.time, float) / self.horizon  # the default float

    def reset_env(self, key, params):
        state = CliffState(time=jnp.zeros((), jnp.int32))
        return self.observe(state, params), state

    def transition(self, key, state, action, params):
        new = CliffState(time=state.time + 1)
        return Transition(
            obs=self.observe(new, params),
            state=new,
            reward_vector=jnp.full((1, 1), 0.1),
            costs=jnp.stack([0.5 + 0.5 * action[0] ** 2, jnp.zeros(1)], axis=1),
            terminated=jnp.zeros((), bool),
            truncated=new.time >= self.horizon,
            info={},
            failed=action[0, 0] > params.edge,
        )
