"""Independent PPO for multi-agent environments (after JaxMARL's IPPO).

Every agent runs PPO on its own observation, reward and advantage, with one policy shared
by all agents of a device type: agents of different types (a battery beside a PV
inverter) get different networks, agents of one type share theirs and are told apart by
a one-hot agent id appended to the observation. The training program is
:mod:`jaxgrid.train.ppo`'s with the agents kept as a batch axis instead of merged into one
centralised controller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxgrid.env import Environment
from jaxgrid.train.ppo import PPOConfig, TrainFns
from jaxgrid.train.ppo import make_train as _make_ppo


def make_train(
    config: PPOConfig,
    env: Environment,
    params: Any = None,
    log: Callable[[dict], None] | None = None,
) -> TrainFns:
    """IPPO for ``env``: ``train(key)`` runs the whole training in one compiled program."""
    return _make_ppo(config, env, params, log, centralise=False)
