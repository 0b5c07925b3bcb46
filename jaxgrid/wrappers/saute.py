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

from jaxgrid.types import Array
from jaxgrid.validation import Range, declare, validate_params
from jaxgrid.wrappers.augmented import AugmentedObservation


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


class Saute(AugmentedObservation):
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
        if not budgets:
            raise ValueError(
                f"Saute: give at least one budget, e.g. {{{env.cost_names[0]!r}: 1.0}}"
            )
        unknown = [n for n in budgets if n not in env.cost_names]
        if unknown:
            raise ValueError(
                f"Saute: {env.name} has no cost {unknown}; its costs are {list(env.cost_names)}"
            )
        super().__init__(env, "Saute")
        inner = env.default_params()
        self.budget_names = tuple(budgets)
        self.cost_index = tuple(env.cost_names.index(n) for n in budgets)
        params = SauteParams(
            env=inner,
            budget=jnp.asarray([float(budgets[n]) for n in budgets], jnp.float32),
            unsafe_reward=jnp.asarray(float(unsafe_reward), jnp.float32),
        )
        validate_params(self, params)
        self._default_params = params

    def extra_names(self) -> tuple[str, ...]:
        return tuple(f"budget_left[{n}]" for n in self.budget_names)

    def extra_bounds(self) -> tuple[float, float]:
        return -1.0, 1.0

    def abort_values(self, state: SauteState, params: SauteParams):
        return self.env.abort_values(state.env_state, params.env)

    def world_state(self, state: SauteState, params: SauteParams):
        inner = self.env.world_state(state.env_state, params.env)
        return jnp.concatenate([inner, state.budget_left.reshape(-1).astype(inner.dtype)])

    def failure_penalty(self, state: SauteState, params: SauteParams):
        return self.env.failure_penalty(state.env_state, params.env)

    def steps_lost(self, state: SauteState, params: SauteParams):
        return self.env.steps_lost(state.env_state, params.env)

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
