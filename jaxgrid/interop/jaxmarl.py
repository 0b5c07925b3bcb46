"""A jaxgrid environment behind JaxMARL's dict API, still pure and jittable.

``reset(key, params) -> (obs, state)`` and ``step(key, state, actions, params) ->
(obs, state, rewards, dones, infos)`` with observations, actions and rewards as dicts
keyed by agent name, ``dones["__all__"]`` for the episode's end (auto-reset as in
``env.step``), per-agent spaces in ``observation_spaces`` / ``action_spaces`` and
``get_avail_actions(state)``.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from jaxgrid import spaces
from jaxgrid.env import Environment


class JaxMARLEnv:
    """JaxMARL-style view of ``env`` (see the module docstring)."""

    def __init__(self, env: Environment, params: Any = None):
        self.env = env
        self.default_params = env.default_params() if params is None else params
        self.agents = list(env.agents)
        self.num_agents = env.num_agents
        obs_space = env.observation_space(self.default_params)
        act_space = env.action_space(self.default_params)
        self.observation_spaces = {
            a: spaces.agent_space(obs_space, i) for i, a in enumerate(self.agents)
        }
        self.action_spaces = {
            a: spaces.agent_space(act_space, i) for i, a in enumerate(self.agents)
        }

    def observation_space(self, agent: str) -> spaces.Space:
        """``agent``'s observation space."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """``agent``'s action space."""
        return self.action_spaces[agent]

    def _split(self, stacked) -> dict[str, Any]:
        if isinstance(stacked, dict):  # {"observation", "action_mask"}: split each part
            parts = {k: self._split(v) for k, v in stacked.items()}
            return {a: {k: parts[k][a] for k in parts} for a in self.agents}
        return {a: stacked[i] for i, a in enumerate(self.agents)}

    def reset(self, key, params=None):
        """``(observations by agent, state)`` of a new episode."""
        params = self.default_params if params is None else params
        obs, state = self.env.reset(key, params)
        return self._split(obs), state

    def step(self, key, state, actions: dict[str, Any], params=None):
        """``(observations, state, rewards, dones, infos)`` by agent, auto-resetting."""
        params = self.default_params if params is None else params
        stacked = jnp.stack([jnp.asarray(actions[a]) for a in self.agents])
        obs, state, reward, terminated, truncated, info = self.env.step(key, state, stacked, params)
        done = terminated | truncated
        dones = {a: done for a in self.agents} | {"__all__": done}
        info = info | {"terminated": terminated, "truncated": truncated}
        return self._split(obs), state, self._split(reward), dones, info

    def get_avail_actions(self, state, params=None) -> dict[str, Any]:
        """Each agent's allowed actions: the environment's action mask where it has one,
        otherwise everything (ones of the action's shape, or of its choices)."""
        params = self.default_params if params is None else params
        obs = self.env.observe(state, params)
        if isinstance(obs, dict) and "action_mask" in obs:
            return self._split(obs["action_mask"])
        space = self.env.action_space(params)
        if isinstance(space, spaces.MultiDiscrete):
            n_max = int(np.max(space.nvec))
            allowed = jnp.asarray(np.arange(n_max) < np.asarray(space.nvec)[..., None])
            return self._split(allowed)
        return self._split(jnp.ones(space.shape, bool))
