"""A centralised single-agent view of a multi-agent environment.

One controller sees every agent's observation (flattened) and sets every agent's action
(flattened): the one group of all agents (:class:`~jaxgrid.wrappers.groups.GroupAgents`).
Its reward vector is each objective's mean over the agents for which it is active, its
costs the means over agents, and its reward the scalarisation of that vector (for a
weighted sum, the mean of the agents' rewards). Used by single-agent algorithms (PPO) and
adapters.
"""

from __future__ import annotations

from jaxgrid.env import Environment
from jaxgrid.wrappers.groups import GroupAgents


class CentralisedWrapper(GroupAgents):
    """One controller for all agents of ``env`` (see the module docstring)."""

    def __init__(self, env: Environment):
        super().__init__(env, {"controller": env.agents})
        self._types = ("controller",)
