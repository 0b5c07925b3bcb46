"""Base of wrappers that append entries to every agent's observation and keep params of
their own around the environment's (``params.env``): :class:`~jaxgrid.wrappers.Saute`
(budget left) and :class:`~jaxgrid.wrappers.Forecast` (forecasts)."""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid import spaces
from jaxgrid.rollout import is_controller
from jaxgrid.wrappers.base import Wrapper


class AugmentedObservation(Wrapper):
    """Routes the environment's params through ``params.env`` and appends
    :meth:`extra_names` entries, bounded by :meth:`extra_bounds`, to each agent's
    observation (an array ``(num_agents, obs_dim)``); subclasses build the entries."""

    def __init__(self, env, what: str):
        super().__init__(env)
        if not isinstance(env.observation_space(env.default_params()), spaces.Box):
            raise ValueError(f"{what}: {env.name}'s observation is not one array (a Box)")

    def extra_names(self) -> tuple[str, ...]:
        """Names of the appended entries, in order."""
        raise NotImplementedError

    def extra_bounds(self) -> tuple[float, float]:
        """``(low, high)`` of every appended entry."""
        raise NotImplementedError

    def default_params(self):
        return self._default_params

    def scalarisation(self, params):
        return self.env.scalarisation(params.env)

    def with_scalarisation(self, params, scalarisation):
        return params.replace(env=self.env.with_scalarisation(params.env, scalarisation))

    def action_space(self, params):
        return self.env.action_space(params.env)

    def observation_space(self, params):
        inner = self.env.observation_space(params.env)
        n, k = inner.shape[0], len(self.extra_names())
        low, high = self.extra_bounds()
        own = (jnp.broadcast_to(inner.low, inner.shape), jnp.broadcast_to(inner.high, inner.shape))
        return spaces.Box(
            jnp.concatenate([own[0], jnp.full((n, k), low, inner.dtype)], axis=1),
            jnp.concatenate([own[1], jnp.full((n, k), high, inner.dtype)], axis=1),
            (n, inner.shape[1] + k),
            inner.dtype,
        )

    def observation_names(self, params) -> tuple[str, ...]:
        return (*self.env.observation_names(params.env), *self.extra_names())

    def baselines(self, params) -> dict:
        """The wrapped environment's baselines, reading their own observation entries."""
        dim = self.env.observation_space(params.env).shape[1]
        return {
            name: (lambda key, obs, policy=policy: policy(key, obs[:, :dim]))
            for name, policy in self.env.baselines(params.env).items()
            if not is_controller(policy)  # it plans on the inner state and params
        }

    def transition(self, key, state, action, params):  # subclasses override step_env
        raise NotImplementedError
