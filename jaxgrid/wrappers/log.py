"""Episode statistics: returns per objective and costs, reported when an episode ends."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxgrid.wrappers.base import Wrapper


@struct.dataclass
class LogState:
    env_state: object
    episode_return: jax.Array  # (num_agents,) scalar reward so far
    episode_objectives: jax.Array  # (num_agents, n_objectives)
    episode_costs: jax.Array  # (num_agents, n_costs)
    episode_length: jax.Array  # () int32


class LogWrapper(Wrapper):
    """Accumulate each episode's return, objectives and costs.

    ``info`` gains ``returned_episode`` (bool: an episode ended this step) and, valid where
    it is true, ``episode_return`` ``(num_agents,)``, ``episode_objectives``
    ``(num_agents, n_objectives)``, ``episode_costs`` ``(num_agents, n_costs)`` and
    ``episode_length``. Inactive objectives add nothing to their sums.
    """

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        n = self.num_agents
        dtype = jnp.result_type(float)
        return obs, LogState(
            env_state=state,
            episode_return=jnp.zeros(n, dtype),
            episode_objectives=jnp.zeros((n, len(self.objective_names)), dtype),
            episode_costs=jnp.zeros((n, len(self.cost_names)), dtype),
            episode_length=jnp.zeros((), jnp.int32),
        )

    def observe(self, state: LogState, params):
        return self.env.observe(state.env_state, params)

    def world_state(self, state: LogState, params):
        return self.env.world_state(state.env_state, params)

    def abort_values(self, state: LogState, params):
        return self.env.abort_values(state.env_state, params)

    def step_env(self, key, state: LogState, action, params=None):
        obs, env_state, reward, terminated, truncated, info = self.env.step_env(
            key, state.env_state, action, params
        )
        vector = jnp.where(info["objective_mask"], info["reward_vector"], 0.0)
        new = LogState(
            env_state=env_state,
            episode_return=state.episode_return + reward,
            episode_objectives=state.episode_objectives + vector,
            episode_costs=state.episode_costs + info["costs"],
            episode_length=state.episode_length + 1,
        )
        info = dict(info)
        info.update(
            returned_episode=terminated | truncated,
            episode_return=new.episode_return,
            episode_objectives=new.episode_objectives,
            episode_costs=new.episode_costs,
            episode_length=new.episode_length,
        )
        return obs, new, reward, terminated, truncated, info

    def transition(self, key, state, action, params):  # the wrapper overrides step_env
        raise NotImplementedError
