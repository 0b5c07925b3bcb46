"""Generalised advantage estimation that tells termination from truncation.

At a step that ended its episode by a time limit (truncated), the episode would have
gone on: the bootstrap value is the critic's value of the final observation
(``info["final_observation"]``, before the auto-reset). At a terminal step there is
nothing to bootstrap. Either way the advantage recursion stops at the episode boundary.

    delta_t = r_t + gamma * (1 - terminated_t) * V(next_t) - V(s_t)
    A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},   done = terminated | truncated

where ``next_t`` is the (pre-reset) observation after step ``t``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.types import Array


def gae(
    rewards: Array,
    values: Array,
    next_values: Array,
    terminated: Array,
    truncated: Array,
    gamma: float,
    lam: float,
):
    """``(advantages, returns)`` for arrays with time first, ``(T, ...)``."""
    not_terminal = 1.0 - terminated.astype(rewards.dtype)
    not_done = 1.0 - (terminated | truncated).astype(rewards.dtype)
    deltas = rewards + gamma * not_terminal * next_values - values

    def back(advantage, xs):
        delta, keep = xs
        advantage = delta + gamma * lam * keep * advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(back, jnp.zeros_like(deltas[0]), (deltas, not_done), reverse=True)
    return advantages, advantages + values
