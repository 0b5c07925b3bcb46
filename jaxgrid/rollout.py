"""Roll a policy through an environment inside one compiled ``lax.scan``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from jaxgrid.env import Environment
from jaxgrid.types import PRNGKey, PyTree

Policy = Callable[[PRNGKey, PyTree], PyTree]  # policy(key, obs) -> action


class Trajectory(NamedTuple):
    """Stacked per-step outputs, leading axis = time (then any batch axes of ``vmap``)."""

    obs: PyTree
    action: PyTree
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    info: dict[str, Any]


def rollout(
    env: Environment,
    params,
    policy: Policy,
    key: PRNGKey,
    num_steps: int,
    with_states: bool = False,
) -> Trajectory | tuple[Trajectory, PyTree]:
    """Run ``num_steps`` auto-resetting steps from a reset; jittable and vmappable over keys.

    ``trajectory.obs[t]`` is the observation the action ``trajectory.action[t]`` answered.
    With ``with_states``, also the state each step reached, stacked, e.g. to draw them:
    where an episode ended, its last state (before the auto-reset, like
    ``info["final_observation"]``), so ``states.time[t]`` counts the steps of the episode
    up to and including step ``t``.
    """
    k_reset, k_run = jax.random.split(key)
    obs, state = env.reset(k_reset, params)

    def body(carry, key):
        obs, state = carry
        k_act, k_step = jax.random.split(key)
        action = policy(k_act, obs)
        next_obs, next_state, reward, terminated, truncated, info = env.step(
            k_step, state, action, params
        )
        step = Trajectory(obs, action, reward, terminated, truncated, info)
        if not with_states:
            return (next_obs, next_state), step
        # the state before the auto-reset: step_env with the key env.step gives it
        reached = env.step_env(jax.random.split(k_step)[0], state, action, params)[1]
        return (next_obs, next_state), (step, reached)

    _, out = jax.lax.scan(body, (obs, state), jax.random.split(k_run, num_steps))
    return out
