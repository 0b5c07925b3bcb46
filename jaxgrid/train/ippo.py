"""Independent PPO for multi-agent environments (after JaxMARL's IPPO).

Every agent runs PPO on its own observation, reward and advantage, with one policy shared
by all agents of a device type: agents of different types (a battery beside a PV
inverter) get different networks, agents of one type share theirs and are told apart by
a learned per-agent bias on the first hidden layer (``PPOConfig.agent_ids``, on by
default; :mod:`jaxgrid.train.networks`). The observation is left as it is: each agent of a
type with more than one agent adds its own row of a ``(agents of the type, first-layer
width)`` parameter to the first layer's pre-activations, in the actor's and in the critic's
MLP (in the one MLP they share with ``shared_torso``). That gives the function a one-hot agent id appended to the observation would, without
the products with its zeros. The training program is
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
