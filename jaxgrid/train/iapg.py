"""Analytic policy gradients with per-agent networks (APG as IPPO is PPO).

Every agent acts on its own observation with one actor and one critic shared by all
agents of a device type: agents of different types get different networks, agents of one
type share theirs and are told apart by a learned per-agent bias on the first hidden
layer (``APGConfig.agent_ids``, on by default; :class:`~jaxgrid.train.networks.TypedMLP`).
Each agent's critic values its own reward; the actor follows the gradient of the mean
over agents of their returns through the environment. The training program is
:mod:`jaxgrid.train.apg`'s with the agents kept as a batch axis instead of merged into one
centralised controller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxgrid.env import Environment
from jaxgrid.train.apg import APGConfig
from jaxgrid.train.apg import make_train as _make_apg
from jaxgrid.train.ppo import TrainFns


def make_train(
    config: APGConfig,
    env: Environment,
    params: Any = None,
    log: Callable[[dict], None] | None = None,
) -> TrainFns:
    """Per-agent APG for ``env``: ``train(key)`` runs the whole training in one compiled
    program."""
    return _make_apg(config, env, params, log, centralise=False)
