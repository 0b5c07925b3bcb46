"""A jaxgrid environment as a PettingZoo ``ParallelEnv``.

Every agent acts at every step; agents are named as in ``env.agents``. Each agent's
reward is its scalarised reward vector; its ``info`` holds that vector, the objective
mask and its costs. All agents end together (``terminated`` or ``truncated``) and leave
``agents``; ``reset`` starts the next episode. Steps run a jitted ``step_env``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pettingzoo

from jaxgrid import spaces
from jaxgrid.env import Environment
from jaxgrid.interop.space_conversion import to_gymnasium


class PettingZooEnv(pettingzoo.ParallelEnv):
    """``pettingzoo.ParallelEnv`` over ``env`` with ``params`` (default: the env's defaults)."""

    metadata = {"render_modes": [], "name": "jaxgrid"}

    def __init__(self, env: Environment, params: Any = None):
        self.env = env
        self.params = env.default_params() if params is None else params
        self.metadata = {"render_modes": [], "name": env.name}
        self.possible_agents = list(env.agents)
        self.agents: list[str] = []
        obs_space = env.observation_space(self.params)
        act_space = env.action_space(self.params)
        self.observation_spaces = {
            a: to_gymnasium(spaces.agent_space(obs_space, i))
            for i, a in enumerate(self.possible_agents)
        }
        self.action_spaces = {
            a: to_gymnasium(spaces.agent_space(act_space, i))
            for i, a in enumerate(self.possible_agents)
        }
        self._action_dtype = act_space.dtype
        self._reset = jax.jit(env.reset_env)
        self._step = jax.jit(env.step_env)
        self._rng = np.random.default_rng()
        self._key = None
        self._state = None

    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._key = jax.random.PRNGKey(int(self._rng.integers(2**31)))
        self._key, key = jax.random.split(self._key)
        obs, self._state = self._reset(key, self.params)
        self.agents = list(self.possible_agents)
        obs = np.asarray(obs)
        return {a: obs[i] for i, a in enumerate(self.agents)}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError(f"{self.env.name}: the episode is over; call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"{self.env.name}: no action for agents {missing}")
        stacked = jnp.stack(
            [jnp.asarray(actions[a], self._action_dtype) for a in self.possible_agents]
        )
        self._key, key = jax.random.split(self._key)
        obs, self._state, reward, terminated, truncated, info = self._step(
            key, self._state, stacked, self.params
        )
        obs, reward = np.asarray(obs), np.asarray(reward)
        vector, mask, costs = (
            np.asarray(info[k]) for k in ("reward_vector", "objective_mask", "costs")
        )
        live = self.agents
        out = (
            {a: obs[i] for i, a in enumerate(live)},
            {a: float(reward[i]) for i, a in enumerate(live)},
            {a: bool(terminated) for a in live},
            {a: bool(truncated) for a in live},
            {
                a: {"reward_vector": vector[i], "objective_mask": mask[i], "costs": costs[i]}
                for i, a in enumerate(live)
            },
        )
        if terminated or truncated:
            self.agents = []
        return out
