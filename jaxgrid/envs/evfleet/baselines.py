"""Reference policies for ``evfleet33-v0``: ``policy(key, obs) -> action`` on ``(n, 12)``.

Observation columns used: 2 price (hundreds per MWh), 4 plugged in, 9 laxity (steps to
spare before a vehicle must charge at full power to leave with its target, over the
horizon), 11 V2G allowed.
"""

from __future__ import annotations

import jax.numpy as jnp


def charge_on_arrival(key, obs):
    """Every vehicle charges at full power from arrival until it is full (no control)."""
    return jnp.ones((obs.shape[0], 1), obs.dtype)


def price_threshold(cheap: float = 0.8, dear: float = 1.5, must: float = 0.05, spare: float = 0.2):
    """Charge at full power while the price is below ``cheap`` (hundreds per MWh) or at
    most ``must`` of the horizon is left to spare (laxity, a margin for the rounding to
    whole steps); discharge vehicles with V2G while the price is above ``dear`` and more
    than ``spare`` of the horizon is left to spare; else idle."""

    def policy(key, obs):
        price, laxity, v2g = obs[:, 2], obs[:, 9], obs[:, 11] > 0.5
        charge = (price < cheap) | (laxity <= must)
        discharge = v2g & (price > dear) & (laxity > spare)
        action = jnp.where(charge, 1.0, jnp.where(discharge, -1.0, 0.0))
        return action[:, None].astype(obs.dtype)

    return policy
