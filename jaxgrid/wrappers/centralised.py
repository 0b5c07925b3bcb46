"""A centralised single-agent view of a multi-agent environment.

One controller sees every agent's observation (flattened) and sets every agent's action
(flattened). Its reward vector is each objective's mean over the agents for which it is
active, its costs the means over agents, and its reward the scalarisation of that vector
(for a weighted sum, the mean of the agents' rewards). Used by single-agent algorithms
(PPO) and adapters.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid import spaces
from jaxgrid.env import Transition
from jaxgrid.wrappers.base import Wrapper


class CentralisedWrapper(Wrapper):
    """One controller for all agents of ``env`` (see the module docstring)."""

    agents = ("controller",)
    agent_types = ("controller",)

    def _inner_action(self, params):
        space = self.env.action_space(params)
        if not isinstance(space, spaces.Box):
            raise ValueError("CentralisedWrapper needs a Box action space")
        return space

    def action_space(self, params):
        space = self._inner_action(params)
        low, high = space._bounds()
        return spaces.Box(low.reshape(1, -1), high.reshape(1, -1), (1, low.size))

    def observation_space(self, params):
        space = self.env.observation_space(params)
        if not isinstance(space, spaces.Box):
            raise ValueError("CentralisedWrapper needs a Box observation space")
        low, high = space._bounds()
        return spaces.Box(low.reshape(1, -1), high.reshape(1, -1), (1, low.size))

    def observe(self, state, params):
        return self.env.observe(state, params).reshape(1, -1)

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return obs.reshape(1, -1), state

    def transition(self, key, state, action, params):
        inner = self._inner_action(params)
        tr = self.env.transition(key, state, action.reshape(inner.shape), params)
        mask = tr.objective_mask
        if mask is None:
            mask = jnp.ones(tr.reward_vector.shape, bool)
        share = jnp.maximum(jnp.sum(mask, axis=0), 1)
        return Transition(
            obs=tr.obs.reshape(1, -1),
            state=tr.state,
            reward_vector=(jnp.sum(jnp.where(mask, tr.reward_vector, 0.0), axis=0) / share)[None],
            costs=jnp.mean(tr.costs, axis=0)[None],
            terminated=tr.terminated,
            truncated=tr.truncated,
            info=tr.info,
            objective_mask=jnp.any(mask, axis=0)[None],
        )
