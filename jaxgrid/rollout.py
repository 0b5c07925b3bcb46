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
    With ``with_states``, also the environment states after each step (stacked; the
    reset state where an episode ended), e.g. to draw them.
    """
    k_reset, k_run = jax.random.split(key)
    obs, state = env.reset(k_reset, params)

    def body(carry, key):
        obs, state = carry
        k_act, k_step = jax.random.split(key)
        action = policy(k_act, obs)
        next_obs, state, reward, terminated, truncated, info = env.step(
            k_step, state, action, params
        )
        step = Trajectory(obs, action, reward, terminated, truncated, info)
        return (next_obs, state), (step, state) if with_states else step

    _, out = jax.lax.scan(body, (obs, state), jax.random.split(k_run, num_steps))
    return out
