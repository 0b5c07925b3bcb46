"""Equity of a distribution: the Hoover index, whole and leave-one-out."""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.numerics import div_tiny, sum_last_axis
from jaxgrid.types import Array


def hoover(values: Array) -> Array:
    """Hoover index of ``values`` ``(..., n)`` over the last axis: 0 = equal, 1 = one has all.

    ``sum |x - mean| / (2 sum x)``, as in EthicalSmartGrid; 0 for an empty or all-zero set.
    """
    mean = jnp.mean(values, axis=-1, keepdims=True)
    return div_tiny(jnp.sum(jnp.abs(values - mean), axis=-1), 2.0 * jnp.sum(values, axis=-1))


def hoover_without_each(values: Array) -> Array:
    """``out[..., j]`` = Hoover index of ``values`` without entry ``j`` ``(..., n)``.

    Computed from an ``n x n`` table of elementwise terms (no gathers). With the
    others' mean ``m_j = (S - x_j) / (n - 1)``, their deviations sum to zero, so
    ``sum_{i != j} |x_i - m_j| = 2 sum_{i != j} max(x_i - m_j, 0)``. For ``n = 1`` the
    others are empty and the index is 0.
    """
    n = values.shape[-1]
    if n == 1:
        return jnp.zeros_like(values)
    others_sum = jnp.sum(values, axis=-1, keepdims=True) - values  # (..., n)
    others_mean = others_sum / (n - 1)
    above = jnp.maximum(values[..., None, :] - others_mean[..., :, None], 0.0)  # [.., j, i]
    spread = 2.0 * (sum_last_axis(above) - jnp.maximum(values - others_mean, 0.0))
    return div_tiny(spread, 2.0 * others_sum)
