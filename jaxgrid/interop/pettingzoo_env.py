"""A jaxgrid environment as a PettingZoo ``ParallelEnv``.

Every agent acts at every step; agents are named as in ``env.agents``. Each agent's
reward is its scalarised reward vector; its ``info`` holds that vector, the objective
mask and its costs. All agents end together (``terminated`` or ``truncated``) and leave
``agents``; ``reset`` starts the next episode. Steps run a jitted ``step_env``.
Dict observations (``{"observation", "action_mask"}``) reach each agent as dicts, the
PettingZoo convention for action masks.

:func:`aec_env` gives the same game turn by turn (PettingZoo's ``AECEnv``).
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
        self.render_mode = None
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
        return self._by_agent(obs), {a: {} for a in self.agents}

    def _by_agent(self, obs) -> dict[str, Any]:
        """Each live agent's share of a stacked observation (array or dict of arrays)."""
        obs = jax.tree_util.tree_map(_int8_masks, jax.device_get(obs))
        return {
            a: jax.tree_util.tree_map(lambda x, i=i: np.asarray(x[i]), obs)
            for i, a in enumerate(self.agents)
        }

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
        reward = np.asarray(reward)
        vector, mask, costs = (
            np.asarray(info[k]) for k in ("reward_vector", "objective_mask", "costs")
        )
        live = self.agents
        out = (
            self._by_agent(obs),
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


def _int8_masks(x):
    """Boolean masks as int8, as PettingZoo's checkers expect."""
    x = np.asarray(x)
    return x.astype(np.int8) if x.dtype == np.bool_ else x


def aec_env(env: Environment, params: Any = None) -> pettingzoo.AECEnv:
    """``env`` as a PettingZoo ``AECEnv``: agents act one after the other in ``env.agents``
    order, and the environment steps once every agent of the turn has acted (so each agent
    observes the state at the start of the turn). The step applies the turn's actions in
    agent order, as the environments define a turn (``gardeners`` reproduces its peer's AEC
    order inside that step)."""
    from pettingzoo.utils.conversions import parallel_to_aec

    return parallel_to_aec(PettingZooEnv(env, params))
