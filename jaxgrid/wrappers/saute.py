"""Sauté: the remaining safety budget in the observation, the reward cut once it is spent.

Sootla et al., "Sauté RL: Almost Surely Safe Reinforcement Learning Using State
Augmentation" (ICML 2022). Each agent carries, for every budgeted cost, the share of its
episode budget still unspent::

    z_0 = 1,    z_(t+1) = z_t - c_t / budget          (c_t: the step's cost, info["costs"])

and observes ``z`` (clipped to ``[-1, 1]``) after its own observation entries. While every
``z`` of an agent is positive its reward is the environment's; from the step that spends
a budget on (``z <= 0``) it is ``params.unsafe_reward``, a constant below any reward the
environment pays, so that spending a budget is never worth it. An unconstrained learner
(PPO, IPPO, SAC) on the wrapped environment then learns a policy that keeps to the
budget, with no Lagrange multiplier to tune. Budgets are undiscounted, as for episodic
tasks in the paper; ``z`` restarts at 1 with every episode.

Budgets and the unsafe reward are params leaves (:class:`SauteParams`), so ``vmap`` over
params sweeps budgets in one compiled run. The environment's reward vector, costs and
every other ``info`` entry pass through unchanged; ``info["saute_unsafe"]`` ``(num_agents,)``
says whose reward was replaced.
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from jaxgrid import spaces
from jaxgrid.types import Array
from jaxgrid.validation import Range, declare, validate_params
from jaxgrid.wrappers.base import Wrapper


@struct.dataclass
class SauteParams:
    """Attributes:
    env: the wrapped environment's params.
    budget: ``(n_budgeted,)`` episode budget of each budgeted cost, in the cost's own
        units summed over an episode (``info["costs"]`` per agent).
    unsafe_reward: ``()`` the reward of an agent whose budget is spent, per step.
    """

    env: object
    budget: Array
    unsafe_reward: Array


declare(
    SauteParams,
    Range("budget", gt=0, unit="(cost summed over an episode)"),
)


@struct.dataclass
class SauteState:
    env_state: object
    budget_left: Array  # (num_agents, n_budgeted) share of each budget unspent, 1 at reset


class Saute(Wrapper):
    """Sauté state augmentation for the costs named in ``budgets`` (see the module
    docstring).

    Args:
        env: an environment whose observation is an array ``(num_agents, obs_dim)``.
        budgets: ``{cost name: episode budget}``; every name one of ``env.cost_names``.
        unsafe_reward: the reward once a budget is spent (below any reward ``env`` pays).

    Raises:
        ValueError: an unknown cost name, no budget, or an environment whose observation
            is not one array.
    """

    def __init__(self, env, budgets: dict[str, float], unsafe_reward: float):
        super().__init__(env)
        if not budgets:
            raise ValueError(
                f"Saute: give at least one budget, e.g. {{{env.cost_names[0]!r}: 1.0}}"
            )
        unknown = [n for n in budgets if n not in env.cost_names]
        if unknown:
            raise ValueError(
                f"Saute: {env.name} has no cost {unknown}; its costs are {list(env.cost_names)}"
            )
        inner = env.default_params()
        if not isinstance(env.observation_space(inner), spaces.Box):
            raise ValueError(f"Saute: {env.name}'s observation is not one array (a Box)")
        self.budget_names = tuple(budgets)
        self.cost_index = tuple(env.cost_names.index(n) for n in budgets)
        params = SauteParams(
            env=inner,
            budget=jnp.asarray([float(budgets[n]) for n in budgets], jnp.float32),
            unsafe_reward=jnp.asarray(float(unsafe_reward), jnp.float32),
        )
        validate_params(self, params)
        self._default_params = params

    def default_params(self) -> SauteParams:
        return self._default_params

    # -- params of the wrapped environment ----------------------------------------------

    def scalarisation(self, params: SauteParams):
        return self.env.scalarisation(params.env)

    def with_scalarisation(self, params: SauteParams, scalarisation) -> SauteParams:
        return params.replace(env=self.env.with_scalarisation(params.env, scalarisation))

    def action_space(self, params: SauteParams):
        return self.env.action_space(params.env)

    def observation_space(self, params: SauteParams):
        inner = self.env.observation_space(params.env)
        n, k = inner.shape[0], len(self.budget_names)
        low = jnp.concatenate(
            [jnp.broadcast_to(inner.low, inner.shape), jnp.full((n, k), -1.0, inner.dtype)], axis=1
        )
        high = jnp.concatenate(
            [jnp.broadcast_to(inner.high, inner.shape), jnp.ones((n, k), inner.dtype)], axis=1
        )
        return spaces.Box(low, high, (n, inner.shape[1] + k), inner.dtype)

    def observation_names(self, params: SauteParams) -> tuple[str, ...]:
        own = self.env.observation_names(params.env)
        return (*own, *(f"budget_left[{n}]" for n in self.budget_names))

    def baselines(self, params: SauteParams) -> dict:
        """The wrapped environment's baselines, reading their own observation entries."""
        dim = self.env.observation_space(params.env).shape[1]
        return {
            name: (lambda key, obs, policy=policy: policy(key, obs[:, :dim]))
            for name, policy in self.env.baselines(params.env).items()
        }

    def abort_values(self, state: SauteState, params: SauteParams):
        return self.env.abort_values(state.env_state, params.env)

    def world_state(self, state: SauteState, params: SauteParams):
        inner = self.env.world_state(state.env_state, params.env)
        return jnp.concatenate([inner, state.budget_left.reshape(-1).astype(inner.dtype)])

    def failure_penalty(self, state: SauteState, params: SauteParams):
        return self.env.failure_penalty(state.env_state, params.env)

    # -- the augmented model ---------------------------------------------------------------

    def _observe(self, obs: Array, budget_left: Array) -> Array:
        return jnp.concatenate([obs, jnp.clip(budget_left, -1.0, 1.0).astype(obs.dtype)], axis=1)

    def reset_env(self, key, params: SauteParams):
        obs, state = self.env.reset_env(key, params.env)
        budget_left = jnp.ones((obs.shape[0], len(self.budget_names)), obs.dtype)
        return self._observe(obs, budget_left), SauteState(state, budget_left)

    def observe(self, state: SauteState, params: SauteParams):
        return self._observe(self.env.observe(state.env_state, params.env), state.budget_left)

    def step_env(self, key, state: SauteState, action, params: SauteParams | None = None):
        params = self.default_params() if params is None else params
        obs, env_state, reward, terminated, truncated, info = self.env.step_env(
            key, state.env_state, action, params.env
        )
        spent = info["costs"][:, jnp.asarray(self.cost_index)] / params.budget
        budget_left = state.budget_left - spent.astype(state.budget_left.dtype)
        unsafe = jnp.any(budget_left <= 0.0, axis=1)
        reward = jnp.where(unsafe, params.unsafe_reward.astype(reward.dtype), reward)
        info = {**info, "saute_unsafe": unsafe}
        new_state = SauteState(env_state, budget_left)
        return self._observe(obs, budget_left), new_state, reward, terminated, truncated, info

    def transition(self, key, state, action, params):  # the wrapper overrides step_env
        raise NotImplementedError
