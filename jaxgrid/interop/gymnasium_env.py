"""A jaxgrid environment as a Gymnasium environment (single-agent view).

One controller observes every agent (flattened) and sets every agent's action
(:class:`jaxgrid.wrappers.CentralisedWrapper`); its reward is the agents' mean reward.
Steps run a jitted ``step_env`` on the default device and return NumPy values;
``info`` carries the reward vector, the objective mask and the costs of the step.
Episodes end with ``terminated`` or ``truncated`` and need a ``reset``, as in Gymnasium.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid import spaces
from jaxgrid.env import Environment
from jaxgrid.interop.space_conversion import to_gymnasium
from jaxgrid.wrappers.centralised import CentralisedWrapper


class GymnasiumEnv(gymnasium.Env):
    """``gymnasium.Env`` over ``env`` with ``params`` (default: the env's defaults)."""

    metadata = {"render_modes": []}

    def __init__(self, env: Environment, params: Any = None):
        self.env = CentralisedWrapper(env)
        self.params = env.default_params() if params is None else params
        self.observation_space = to_gymnasium(
            spaces.agent_space(self.env.observation_space(self.params), 0)
        )
        self.action_space = to_gymnasium(spaces.agent_space(self.env.action_space(self.params), 0))
        self._action_shape = self.env.action_space(self.params).shape
        self._reset = jax.jit(self.env.reset_env)
        self._step = jax.jit(self.env.step_env)
        self._key = None
        self._state = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._key = jax.random.PRNGKey(int(self.np_random.integers(2**31)))
        self._key, key = jax.random.split(self._key)
        obs, self._state = self._reset(key, self.params)
        return np.asarray(obs[0]), {}

    def step(self, action):
        if self._state is None:
            raise RuntimeError(f"{self.env.name}: call reset() before step()")
        action = jnp.asarray(action, self.action_space.dtype).reshape(self._action_shape)
        self._key, key = jax.random.split(self._key)
        obs, self._state, reward, terminated, truncated, info = self._step(
            key, self._state, action, self.params
        )
        info = {
            "reward_vector": np.asarray(info["reward_vector"][0]),
            "objective_mask": np.asarray(info["objective_mask"][0]),
            "costs": np.asarray(info["costs"][0]),
        }
        return np.asarray(obs[0]), float(reward[0]), bool(terminated), bool(truncated), info
