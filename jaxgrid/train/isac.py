"""Independent SAC for multi-agent environments (SAC as IPPO is PPO).

Every agent learns soft actor-critic on its own observation, reward and action, with one
actor and one pair of Q-functions shared by all agents of a device type: agents of
different types get different networks, agents of one type share theirs and are told
apart by a learned per-agent bias on the first hidden layer (``SACConfig.agent_ids``, on by
default; :class:`~jaxgrid.train.networks.TypedMLP`). Each agent keeps its own entropy
temperature. The training program is :mod:`jaxgrid.train.sac`'s with the agents kept as a
batch axis instead of merged into one centralised controller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxgrid.env import Environment
from jaxgrid.train.ppo import TrainFns
from jaxgrid.train.sac import SACConfig
from jaxgrid.train.sac import make_train as _make_sac


def make_train(
    config: SACConfig,
    env: Environment,
    params: Any = None,
    log: Callable[[dict], None] | None = None,
) -> TrainFns:
    """Independent SAC for ``env``: ``train(key)`` runs the whole training in one compiled
    program."""
    return _make_sac(config, env, params, log, centralise=False)
