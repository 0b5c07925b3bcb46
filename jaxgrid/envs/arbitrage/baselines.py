"""Reference policies for arbitrage: ``policy(key, obs) -> action`` on observations ``(1, 4 + H)``."""

from __future__ import annotations

import jax.numpy as jnp


def idle(key, obs):
    """Never trade (the no-control baseline: zero profit)."""
    return jnp.zeros((1, 1), obs.dtype)


def price_threshold(margin: float = 0.1):
    """Charge at full power when the price is ``margin`` below the mean of the forecast
    window, discharge when it is ``margin`` above, else idle."""

    def policy(key, obs):
        now, window = obs[0, 3], obs[0, 3:]
        mean = jnp.mean(window)
        spread = margin * jnp.abs(mean)
        action = jnp.where(now < mean - spread, 1.0, jnp.where(now > mean + spread, -1.0, 0.0))
        return jnp.reshape(action, (1, 1)).astype(obs.dtype)

    return policy
