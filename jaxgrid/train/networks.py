"""Actor-critic networks for agents in stacked arrays, with per-type parameters.

:class:`ActorCritic` maps observations ``(..., n_agents, obs_dim)`` to a policy's
distribution parameters ``(..., n_agents, ...)`` and values ``(..., n_agents)``. All
agents of one type share a network; with ``agent_ids`` each agent of a type with more
than one agent also has its own learned bias on the first hidden layer (``agent_bias``,
``(agents of the type, width)``, added before the tanh in the actor's and the critic's
MLP), so that a shared network can still tell agents apart (IPPO). Observations are not
extended: the bias adds what a one-hot agent index appended to the observation would add
through the first layer's kernel, without multiplying the zeros of the one-hot. A single
agent (PPO) is the case ``n_agents = 1``, without a bias.

Mixed precision: with ``compute_dtype="bfloat16"`` the layers' products and activations
run in bfloat16 while the parameters stay float32 (so the optimiser's state and updates
do), and the outputs come back in the observation's dtype, so losses are float32.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

ORTHOGONAL = nn.initializers.orthogonal(np.sqrt(2))


ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}


class MLP(nn.Module):
    """Dense layers with ``activation`` (tanh or relu) and orthogonal initialisation;
    ``n_ids > 0`` adds a learned ``(n_ids, width)`` bias to the first layer, one row per
    agent (second-last axis). Products and activations in ``dtype`` (``None``: the
    input's), parameters in the input's dtype."""

    hidden: Sequence[int]
    n_ids: int = 0
    dtype: str | None = None
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x):
        param_dtype = x.dtype
        for i, width in enumerate(self.hidden):
            x = nn.Dense(width, kernel_init=ORTHOGONAL, dtype=self.dtype, param_dtype=param_dtype)(
                x
            )
            if i == 0 and self.n_ids:
                bias = self.param("agent_bias", ORTHOGONAL, (self.n_ids, width), param_dtype)
                x = x + bias.astype(x.dtype)
            x = ACTIVATIONS[self.activation](x)
        return x


class TypeNetwork(nn.Module):
    """Actor and critic of one agent type: ``(..., members, obs) -> ((..., members, n_out),
    (..., members))``; with ``shared_torso`` both heads sit on one MLP (half the
    products, as PowerZooJax's ``SharedActorCritic``), otherwise each has its own. With
    ``n_costs`` each cost has a critic of its own MLP, never shared, and the values are
    ``(..., members, 1 + n_costs)``."""

    hidden: Sequence[int]
    n_out: int
    n_ids: int = 0
    shared_torso: bool = False
    dtype: str | None = None
    n_costs: int = 0

    @nn.compact
    def __call__(self, x):
        def head(n, scale):
            return nn.Dense(
                n,
                kernel_init=nn.initializers.orthogonal(scale),
                dtype=self.dtype,
                param_dtype=x.dtype,
            )

        actor = MLP(self.hidden, self.n_ids, self.dtype)(x)
        out = head(self.n_out, 0.01)(actor)
        critic = actor if self.shared_torso else MLP(self.hidden, self.n_ids, self.dtype)(x)
        value = head(1, 1.0)(critic)[..., 0]
        if self.n_costs:
            costs = [
                head(1, 1.0)(MLP(self.hidden, self.n_ids, self.dtype, name=f"cost_{i}")(x))
                for i in range(self.n_costs)
            ]
            value = jnp.concatenate([value[..., None], *costs], axis=-1)
        return out.astype(x.dtype), value.astype(x.dtype)


class ActorCritic(nn.Module):
    """Per-type actor-critic over stacked agents (see the module docstring).

    Attributes:
        agent_type: static index of each agent's type, length ``n_agents``.
        n_out: distribution parameters per agent (e.g. ``2 * act_dim`` for a Beta).
        hidden: hidden layer widths.
        agent_ids: give each agent of a type with more than one agent its own learned
            first-layer bias (the observation is not extended).
        shared_torso: actor and critic heads on one MLP per type.
        compute_dtype: dtype of the products and activations ("float32", "bfloat16");
            ``None`` computes in the observation's dtype.
        n_costs: budgeted costs, each with a critic of its own (an MLP that shares
            nothing with the actor or the return's critic): 0 gives values ``(...,
            n_agents)``, more ``(..., n_agents, 1 + n_costs)`` (the return's value, then
            each cost's).
    """

    agent_type: tuple[int, ...]
    n_out: int
    hidden: Sequence[int] = (64, 64)
    agent_ids: bool = True
    shared_torso: bool = False
    compute_dtype: str | None = None
    n_costs: int = 0

    @nn.compact
    def __call__(self, obs):
        types = np.asarray(self.agent_type)
        outs, values, order = [], [], []
        for t in sorted(set(self.agent_type)):
            members = np.flatnonzero(types == t)
            n_ids = len(members) if self.agent_ids and len(members) > 1 else 0
            out, value = TypeNetwork(
                self.hidden,
                self.n_out,
                n_ids,
                self.shared_torso,
                self.compute_dtype,
                self.n_costs,
                name=f"type_{t}",
            )(_take_agents(obs, members))
            outs.append(out)
            values.append(value)
            order.append(members)
        # put the agents back in their order
        inverse = np.argsort(np.concatenate(order))
        out = _take_agents(jnp.concatenate(outs, axis=-2), inverse)
        if not self.n_costs:
            value = _take_agents(jnp.concatenate(values, axis=-1)[..., None], inverse)[..., 0]
        else:
            value = _take_agents(jnp.concatenate(values, axis=-2), inverse)
        return out, value


class TypedMLP(nn.Module):
    """One MLP with a linear head per agent type over stacked agents: ``(..., n_agents,
    in_dim) -> (..., n_agents, n_out)``, for networks that are not a PPO actor-critic pair
    (SAC's actor and its Q-functions, :mod:`jaxgrid.train.sac`). Agents of one type share
    the parameters and, with ``agent_ids``, are told apart by a learned first-layer bias,
    as in :class:`ActorCritic`.

    Attributes:
        agent_type: static index of each agent's type, length ``n_agents``.
        n_out: outputs per agent.
        hidden: hidden layer widths.
        agent_ids: a learned first-layer bias per agent of a type with several agents.
        activation: ``"relu"`` or ``"tanh"``.
        head_scale: gain of the head's orthogonal initialisation.
    """

    agent_type: tuple[int, ...]
    n_out: int
    hidden: Sequence[int] = (256, 256)
    agent_ids: bool = True
    activation: str = "relu"
    head_scale: float = 1.0

    @nn.compact
    def __call__(self, x):
        types = np.asarray(self.agent_type)
        outs, order = [], []
        for t in sorted(set(self.agent_type)):
            members = np.flatnonzero(types == t)
            n_ids = len(members) if self.agent_ids and len(members) > 1 else 0
            h = MLP(self.hidden, n_ids, activation=self.activation, name=f"type_{t}")(
                _take_agents(x, members)
            )
            head = nn.Dense(
                self.n_out,
                kernel_init=nn.initializers.orthogonal(self.head_scale),
                param_dtype=x.dtype,
                name=f"head_{t}",
            )
            outs.append(head(h))
            order.append(members)
        return _take_agents(jnp.concatenate(outs, axis=-2), np.argsort(np.concatenate(order)))


def _take_agents(x, index: np.ndarray):
    """``x[..., index, :]``; a slice where ``index`` is a contiguous range (agents of a type
    listed together, the usual case), which spares a gather and, in the gradient, a
    scatter."""
    start = int(index[0])
    if np.array_equal(index, np.arange(start, start + len(index))):
        return x[..., start : start + len(index), :]
    return x[..., index, :]
