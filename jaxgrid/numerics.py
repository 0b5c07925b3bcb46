"""Small numerical helpers shared by environments."""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.types import Array


def div_tiny(num: Array, den: Array) -> Array:
    """``num / (den + 1e-299)`` without the float32 underflow of the guard.

    EthicalSmartGrid divides by ``den + 10e-300`` to avoid dividing by zero; in float32 the
    guard underflows to 0 and ``0 / 0`` would give NaN. Here a zero denominator is
    replaced by the smallest normal number of the dtype, which gives 0 for a zero
    numerator and a huge value otherwise, exactly as the guard does in float64.
    """
    den = jnp.asarray(den)
    tiny = jnp.finfo(jnp.result_type(num, den, jnp.float32)).tiny
    return num / jnp.where(den == 0, tiny, den)


def interp_unit(x: Array, low, high) -> Array:
    """``np.interp(x, (low, high), (0, 1))``: linear map of ``[low, high]`` to ``[0, 1]``, clamped."""
    return jnp.clip((x - low) * (1.0 / (high - low)), 0.0, 1.0)
