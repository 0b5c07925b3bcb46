"""Observations standardised by running statistics that live in the environment state."""

from __future__ import annotations

import jax
from flax import struct

from jaxgrid.running_stats import RunningStats
from jaxgrid.wrappers.base import Wrapper


@struct.dataclass
class NormalizeState:
    env_state: object
    moments: RunningStats


class NormalizeObservation(Wrapper):
    """Each observation entry (per agent and feature) minus its running mean, over its
    running standard deviation, clipped to ``[-clip, clip]``.

    The statistics are part of each environment's state and keep accumulating across
    episodes (the inner environment auto-resets; the statistics are never reset), so a
    ``vmap`` of environments keeps one set per environment. ``info["final_observation"]``
    is normalised with the same statistics. Box observations only. Because the statistics
    outlive a reset, ``step`` is deliberately not ``step_env`` followed by ``reset_env``.
    """

    def __init__(self, env, epsilon: float = 1e-8, clip: float = 10.0):
        super().__init__(env)
        self.epsilon, self.clip = float(epsilon), float(clip)

    def observation_space(self, params):
        from jaxgrid import spaces

        inner = self.env.observation_space(params)
        return spaces.Box(-self.clip, self.clip, inner.shape, inner.dtype)

    def baselines(self, params) -> dict:
        """Random actions only: the environment's other baselines read raw observation
        entries, which the standardised ones no longer are."""
        space = self.action_space(params)
        return {"random": lambda key, obs: space.sample(key)}

    def _out(self, moments, obs):
        return moments.normalize(obs, self.epsilon, self.clip)

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        moments = RunningStats.create(obs.shape, obs.dtype).update(obs)
        return self._out(moments, obs), NormalizeState(state, moments)

    def observe(self, state: NormalizeState, params):
        return self._out(state.moments, self.env.observe(state.env_state, params))

    def world_state(self, state: NormalizeState, params):
        return self.env.world_state(state.env_state, params)

    def abort_values(self, state: NormalizeState, params):
        return self.env.abort_values(state.env_state, params)

    def _wrap(self, state: NormalizeState, out):
        """One environment's step outputs with its statistics updated by the step's own
        observation (before any auto-reset) and the observations normalised."""
        obs, env_state, reward, terminated, truncated, info = out
        raw_step_obs = info.get("final_observation", obs)
        moments = state.moments.update(raw_step_obs)
        info = dict(info)
        if "final_observation" in info:
            info["final_observation"] = self._out(moments, raw_step_obs)
        normalised = self._out(moments, obs)
        return normalised, NormalizeState(env_state, moments), reward, terminated, truncated, info

    def step_env(self, key, state: NormalizeState, action, params=None):
        return self._wrap(state, self.env.step_env(key, state.env_state, action, params))

    def step(self, key, state: NormalizeState, action, params=None):
        return self._wrap(state, self.env.step(key, state.env_state, action, params))

    def step_batch(self, keys, states: NormalizeState, actions, params=None):
        out = self.env.step_batch(keys, states.env_state, actions, params)
        return jax.vmap(self._wrap)(states, out)

    def transition(self, key, state, action, params):  # the wrapper overrides the steps
        raise NotImplementedError
