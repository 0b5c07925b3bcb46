"""Reference policies for the DER environments: ``policy(key, obs) -> action`` on ``(n, 13)``.

Observation columns used: 2 price (hundreds per MWh), 3 own-bus voltage, 8-11 the agent
type one-hot (battery, pv, flexload, ev).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.envs.voltage.baselines import volt_var_curve


def _types(obs):
    return [obs[:, 8 + i] > 0.5 for i in range(4)]  # battery, pv, flexload, ev


def no_control(key, obs):
    """Batteries, PV and flexible loads idle (PV at full output); EVs charge at full power."""
    battery, pv, flex, ev = _types(obs)
    first = jnp.where(ev, 1.0, 0.0)
    return jnp.stack([first, jnp.zeros_like(first)], axis=1).astype(obs.dtype)


def price_and_voltage_rules(cheap: float = 0.45, dear: float = 0.7):
    """Batteries charge below ``cheap`` and discharge above ``dear`` (hundreds per MWh); PV
    follows the volt-var curve of its bus voltage; EVs charge at full power; flexible
    loads idle."""

    def policy(key, obs):
        battery, pv, flex, ev = _types(obs)
        price, vm = obs[:, 2], obs[:, 3]
        trade = jnp.where(price < cheap, 1.0, jnp.where(price > dear, -1.0, 0.0))
        first = jnp.where(battery, trade, jnp.where(ev, 1.0, 0.0))
        second = jnp.where(pv, volt_var_curve(vm), 0.0)
        return jnp.stack([first, second], axis=1).astype(obs.dtype)

    return policy
