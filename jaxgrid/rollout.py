"""Roll a policy through an environment inside one compiled ``lax.scan``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp

from jaxgrid.env import Environment
from jaxgrid.types import PRNGKey, PyTree

Policy = Callable[[PRNGKey, PyTree], PyTree]  # policy(key, obs) -> action


@runtime_checkable
class Controller(Protocol):
    """A reference policy that reads the environment's state and carries a memory from
    step to step (a model-predictive controller's plan), where ``policy(key, obs)`` cannot:
    a controller on the environment's own model needs the state the model steps from,
    which an observation does not hold (an episode's profile row, for one). Marked by
    ``reads_state = True``; :func:`act` calls either kind, so rollouts and evaluations take
    both. Its memory goes on across an auto-reset (a plan is a warm start, not a fact)."""

    reads_state: bool

    def init(self, state: PyTree) -> PyTree:
        """The memory at the start, from the first state."""

    def act(self, key: PRNGKey, obs: PyTree, state: PyTree, memory: PyTree):
        """``(action, memory)`` for the step from ``state``."""


def is_controller(policy) -> bool:
    """Whether ``policy`` is a :class:`Controller` (reads the state) rather than
    ``policy(key, obs)``. Wrappers leave controllers out of their baselines: a controller
    plans on the wrapped environment's own state, params and reward."""
    return bool(getattr(policy, "reads_state", False))


def start_memory(policy, state: PyTree) -> PyTree:
    """The memory :func:`act` threads for ``policy``: a controller's ``init(state)``, else ``()``."""
    return policy.init(state) if is_controller(policy) else ()


def act(policy, key: PRNGKey, obs: PyTree, state: PyTree, memory: PyTree):
    """``(action, memory)``: a :class:`Controller` sees the state and its memory, a plain
    ``policy(key, obs)`` only the observation (its memory stays ``()``)."""
    if is_controller(policy):
        return policy.act(key, obs, state, memory)
    return policy(key, obs), memory


class OneOf:
    """The policy ``policies[index]``, chosen by a traced int32 ``index``: a
    :class:`Controller` (it reads the state) that runs one of several policies through
    ``lax.switch``.

    One compiled evaluation then serves every policy, the index an argument of the
    program: an environment's step compiles once, not once per policy (``voltage33-v0``'s
    four baselines took 26 s to evaluate one after another here, most of it compiling the
    same day's rollout four times). The memory holds every policy's own memory; actions
    take the dtype the policies' actions promote to (a float for a discrete choice is
    sanitised by the environment as before).
    """

    reads_state = True

    def __init__(self, policies, index):
        self.policies = tuple(policies)
        self.index = index

    def init(self, state: PyTree) -> PyTree:
        """Every policy's memory at the start, from the first state: a tuple, one each."""
        return tuple(start_memory(p, state) for p in self.policies)

    def act(self, key: PRNGKey, obs: PyTree, state: PyTree, memory: PyTree):
        """``(action, memory)`` of ``policies[index]``; the others' memories unchanged."""

        def branch(i):
            def run(memory):
                action, own = act(self.policies[i], key, obs, state, memory[i])
                return action, (*memory[:i], own, *memory[i + 1 :])

            return run

        branches = [branch(i) for i in range(len(self.policies))]
        shapes = [jax.eval_shape(b, memory)[0] for b in branches]
        dtypes = jax.tree_util.tree_map(lambda *a: jnp.result_type(*a), *shapes)

        def cast(b):
            def run(memory):
                action, memory = b(memory)
                return jax.tree_util.tree_map(jnp.asarray, action, dtypes), memory

            return run

        return jax.lax.switch(self.index, [cast(b) for b in branches], memory)


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
    ``policy`` is ``policy(key, obs) -> action`` or a :class:`Controller`.

    ``trajectory.obs[t]`` is the observation the action ``trajectory.action[t]`` answered.
    With ``with_states``, also the state each step reached, stacked, e.g. to draw them:
    where an episode ended, its last state (before the auto-reset, like
    ``info["final_observation"]``), so ``states.time[t]`` counts the steps of the episode
    up to and including step ``t``.
    """
    k_reset, k_run = jax.random.split(key)
    obs, state = env.reset(k_reset, params)

    def body(carry, key):
        obs, state, memory = carry
        k_act, k_step = jax.random.split(key)
        action, memory = act(policy, k_act, obs, state, memory)
        next_obs, next_state, reward, terminated, truncated, info = env.step(
            k_step, state, action, params
        )
        step = Trajectory(obs, action, reward, terminated, truncated, info)
        if not with_states:
            return (next_obs, next_state, memory), step
        # the state before the auto-reset: step_env with the key env.step gives it
        reached = env.step_env(jax.random.split(k_step)[0], state, action, params)[1]
        return (next_obs, next_state, memory), (step, reached)

    carry = (obs, state, start_memory(policy, state))
    _, out = jax.lax.scan(body, carry, jax.random.split(k_run, num_steps))
    return out
