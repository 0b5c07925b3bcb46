"""Actor-critic networks for agents in stacked arrays, with per-type parameters.

:class:`ActorCritic` maps observations ``(..., n_agents, obs_dim)`` to a policy's
distribution parameters ``(..., n_agents, ...)`` and values ``(..., n_agents)``. All
agents of one type share a network; with ``agent_ids`` each agent's one-hot index is
appended to its observation so that a shared network can still tell agents apart
(IPPO). A single agent (PPO) is the case ``n_agents = 1``.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax.numpy as jnp
import numpy as np


class MLP(nn.Module):
    """Dense layers with tanh, orthogonal initialisation."""

    hidden: Sequence[int]

    @nn.compact
    def __call__(self, x):
        for width in self.hidden:
            x = nn.tanh(nn.Dense(width, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(x))
        return x


class TypeNetwork(nn.Module):
    """Actor and critic of one agent type: ``(..., obs) -> ((..., n_out), (...,))``."""

    hidden: Sequence[int]
    n_out: int

    @nn.compact
    def __call__(self, x):
        actor = MLP(self.hidden)(x)
        out = nn.Dense(self.n_out, kernel_init=nn.initializers.orthogonal(0.01))(actor)
        critic = MLP(self.hidden)(x)
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(critic)[..., 0]
        return out, value


class ActorCritic(nn.Module):
    """Per-type actor-critic over stacked agents (see the module docstring).

    Attributes:
        agent_type: static index of each agent's type, length ``n_agents``.
        n_out: distribution parameters per agent (e.g. ``2 * act_dim`` for a Beta).
        hidden: hidden layer widths.
        agent_ids: append each agent's one-hot index to its observation.
    """

    agent_type: tuple[int, ...]
    n_out: int
    hidden: Sequence[int] = (64, 64)
    agent_ids: bool = True

    @nn.compact
    def __call__(self, obs):
        n = len(self.agent_type)
        if self.agent_ids and n > 1:
            ids = jnp.broadcast_to(jnp.eye(n, dtype=obs.dtype), obs.shape[:-2] + (n, n))
            obs = jnp.concatenate([obs, ids], axis=-1)
        types = np.asarray(self.agent_type)
        outs, values = [], []
        order = []
        for t in sorted(set(self.agent_type)):
            members = np.flatnonzero(types == t)
            out, value = TypeNetwork(self.hidden, self.n_out, name=f"type_{t}")(
                obs[..., members, :]
            )
            outs.append(out)
            values.append(value)
            order.append(members)
        # put the agents back in their order
        inverse = np.argsort(np.concatenate(order))
        return jnp.concatenate(outs, axis=-2)[..., inverse, :], jnp.concatenate(values, axis=-1)[
            ..., inverse
        ]
