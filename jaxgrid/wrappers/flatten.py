"""Each agent's observation as one flat vector."""

from __future__ import annotations

import numpy as np

from jaxgrid import spaces
from jaxgrid.env import Transition
from jaxgrid.wrappers.base import Wrapper


class FlattenObservation(Wrapper):
    """Observations ``(num_agents, *shape)`` become ``(num_agents, prod(shape))`` (a dict
    observation flattens its ``"observation"`` entry and keeps the others, e.g. masks)."""

    def _flat(self, obs):
        if isinstance(obs, dict):
            return {**obs, "observation": self._flat(obs["observation"])}
        return obs.reshape(obs.shape[0], -1)

    def observation_space(self, params):
        inner = self.env.observation_space(params)
        if isinstance(inner, spaces.Dict):
            return spaces.Dict(
                {**inner.spaces, "observation": self._flat_space(inner["observation"])}
            )
        return self._flat_space(inner)

    def _flat_space(self, space):
        if not isinstance(space, spaces.Box):
            raise ValueError(f"FlattenObservation needs Box observations, got {space}")
        low, high = space._bounds()
        n = space.shape[0]
        width = int(np.prod(space.shape[1:]))
        return spaces.Box(low.reshape(n, width), high.reshape(n, width), (n, width), space.dtype)

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return self._flat(obs), state

    def observe(self, state, params):
        return self._flat(self.env.observe(state, params))

    def transition(self, key, state, action, params) -> Transition:
        tr = self.env.transition(key, state, action, params)
        return tr._replace(obs=self._flat(tr.obs))
