"""Devices grouped into agents: each group of an environment's agents acts as one agent.

A group agent sees its members' observations side by side (``(k * obs_dim,)``, members in
the order given; a group smaller than the largest, ``k`` members, is padded with zeros)
and sets its members' actions side by side (padded entries have ``low == high == 0`` and
are ignored). Its reward vector is each objective's mean over the members for which it
is active, its costs the members' mean, its reward the scalarisation of that vector.
Groups of the same member types in the same order share a type (``"battery+pv"``), so
IPPO gives them one network. Baselines act for every member, so they carry over.

:class:`~jaxgrid.wrappers.CentralisedWrapper` is the one group of every agent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax.numpy as jnp
import numpy as np

from jaxgrid import spaces
from jaxgrid.env import Environment, Transition
from jaxgrid.rollout import is_controller
from jaxgrid.wrappers.base import Wrapper


class GroupAgents(Wrapper):
    """``env``'s agents in ``groups``, ``{agent name: [member names]}`` (every member once);
    errors name a group as ``<label>.<name>``."""

    def __init__(
        self, env: Environment, groups: Mapping[str, Sequence[str]], label: str = "groups"
    ):
        super().__init__(env)
        names = list(env.agents)
        if not groups:
            raise ValueError(f"{label}: expected at least one group of agents")
        members, seen = [], {}
        for group, group_members in groups.items():
            if not group_members:
                raise ValueError(f"{label}.{group}: expected at least one agent of {env.name}")
            for agent in group_members:
                if agent not in names:
                    raise ValueError(
                        f"{label}.{group}: {agent!r} is not an agent of {env.name}; "
                        f"expected some of {names}"
                    )
                if agent in seen:
                    raise ValueError(
                        f"{label}.{group}: {agent!r} is already in group {seen[agent]!r}"
                    )
                seen[agent] = group
            members.append([names.index(a) for a in group_members])
        left = [a for a in names if a not in seen]
        if left:
            raise ValueError(f"{label}: agents {left} are in no group; every agent needs one")
        self.groups = dict(groups)
        self.size = max(len(m) for m in members)  # k: members per group, padded
        self.member = np.zeros((len(members), self.size), np.int32)  # (groups, k) inner index
        self.present = np.zeros((len(members), self.size), bool)
        for g, m in enumerate(members):
            self.member[g, : len(m)] = m
            self.present[g, : len(m)] = True
        # each inner agent's slot in the flattened (groups * k) member axis
        self.slot = np.argsort(np.where(self.present, self.member, len(names)).ravel())[
            : len(names)
        ]
        # agent-major groups of equal size: a reshape, no gather
        self._reshape_only = bool(np.all(self.present)) and np.array_equal(
            self.member.ravel(), np.arange(len(names))
        )
        self._agents = tuple(groups)
        self._types = tuple("+".join(env.agent_types[i] for i in m) for m in members)

    @property
    def agents(self):
        return self._agents

    @property
    def agent_types(self):
        return self._types

    # -- names and spaces ----------------------------------------------------------------

    def _slot_names(self, names):
        return None if names is None else tuple(f"{s}.{n}" for s in range(self.size) for n in names)

    @property
    def action_names(self):
        return self._slot_names(self.env.action_names)

    def observation_names(self, params) -> tuple[str, ...]:
        return self._slot_names(self.env.observation_names(params))

    def _box(self, space, what: str) -> spaces.Box:
        if not isinstance(space, spaces.Box):
            raise ValueError(f"grouping agents needs Box {what}s, got {space}")
        low, high = (self._gather(b.reshape(b.shape[0], -1)) for b in space._bounds())
        return spaces.Box(low, high, low.shape, space.dtype)

    def observation_space(self, params):
        return self._box(self.env.observation_space(params), "observation")

    def action_space(self, params):
        return self._box(self.env.action_space(params), "action")

    # -- members and groups --------------------------------------------------------------

    def _members(self, x):
        """``(n, m)`` per member -> ``(groups, k, m)`` (padding 0)."""
        shape = (len(self._agents), self.size, x.shape[-1])
        if self._reshape_only:
            return x.reshape(shape)
        return jnp.where(self.present[..., None], x[self.member], 0)

    def _gather(self, x):
        """``(n, m)`` per member -> ``(groups, k * m)`` (padding 0)."""
        return self._members(x).reshape(len(self._agents), -1)

    def _scatter(self, x, width: int):
        """``(groups, k * width)`` -> ``(n, width)`` per member."""
        if self._reshape_only:
            return x.reshape(-1, width)
        return x.reshape(-1, width)[self.slot]

    def _mean(self, per_member, active):
        """Each group's mean over its members where ``active`` ``(n, m)``."""
        weight = self._members(active)
        share = jnp.maximum(jnp.sum(weight, axis=1), 1)
        return jnp.sum(jnp.where(weight, self._members(per_member), 0.0), axis=1) / share

    # -- the model -----------------------------------------------------------------------

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return self._gather(obs.reshape(obs.shape[0], -1)), state

    def observe(self, state, params):
        obs = self.env.observe(state, params)
        return self._gather(obs.reshape(obs.shape[0], -1))

    def transition(self, key, state, action, params) -> Transition:
        inner = self.env.action_space(params)
        width = int(np.prod(inner.shape[1:]))
        tr = self.env.transition(
            key, state, self._scatter(action, width).reshape(inner.shape), params
        )
        mask = tr.objective_mask
        if mask is None:
            mask = jnp.ones(tr.reward_vector.shape, bool)
        return Transition(
            obs=self._gather(tr.obs.reshape(tr.obs.shape[0], -1)),
            state=tr.state,
            reward_vector=self._mean(tr.reward_vector, mask),
            costs=self._mean(tr.costs, jnp.ones(tr.costs.shape, bool)),
            terminated=tr.terminated,
            truncated=tr.truncated,
            info=tr.info,
            objective_mask=jnp.any(self._members(mask), axis=1),
            failed=tr.failed,  # failed physics ends the group's episode as the members'
        )

    def baselines(self, params) -> dict:
        inner = self.env.action_space(params)
        obs_width = int(np.prod(self.env.observation_space(params).shape[1:]))
        obs_shape = self.env.observation_space(params).shape
        space = self.action_space(params)

        def grouped(policy):
            def act(key, obs):
                action = policy(key, self._scatter(obs, obs_width).reshape(obs_shape))
                return self._gather(action.reshape(inner.shape[0], -1))

            return act

        return {
            **{
                name: grouped(p)
                for name, p in self.env.baselines(params).items()
                if not is_controller(p)
            },
            "random": lambda key, obs: space.sample(key),
        }
