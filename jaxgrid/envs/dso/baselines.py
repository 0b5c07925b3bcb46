"""Reference policies for the DSO task: ``policy(key, obs) -> action`` on ``(1, 195)``."""

from __future__ import annotations

import jax.numpy as jnp


def no_control(n_flex: int):
    """Leave every flexible load alone."""
    return lambda key, obs: jnp.zeros((1, 2 * n_flex), obs.dtype)


def evening_shift(n_flex: int, start_hour: float = 17.0, end_hour: float = 21.0):
    """Time-of-use rule: defer as much as possible in the evening peak, recover at night
    (0-6 h), otherwise idle. The hour is read from the observed sine/cosine of the day."""

    def policy(key, obs):
        # obs layout: ... [sin, cos] then 5 numbers per flexible load
        sin, cos = obs[0, -5 * n_flex - 2], obs[0, -5 * n_flex - 1]
        hour = (jnp.arctan2(sin, cos) / (2 * jnp.pi) % 1.0) * 24.0
        shift = jnp.where(
            (hour >= start_hour) & (hour < end_hour), 1.0, jnp.where(hour < 6.0, -1.0, 0.0)
        )
        return jnp.concatenate([jnp.zeros(n_flex), jnp.full(n_flex, shift)])[None].astype(obs.dtype)

    return policy
