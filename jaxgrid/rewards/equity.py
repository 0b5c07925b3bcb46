"""Equity of a distribution: the Hoover index, whole and leave-one-out."""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.numerics import div_tiny
from jaxgrid.types import Array


def hoover(values: Array) -> Array:
    """Hoover index of ``values`` ``(..., n)`` over the last axis: 0 = equal, 1 = one has all.

    ``sum |x - mean| / (2 sum x)``, as in EthicalSmartGrid; 0 for an empty or all-zero set.
    """
    mean = jnp.mean(values, axis=-1, keepdims=True)
    return div_tiny(jnp.sum(jnp.abs(values - mean), axis=-1), 2.0 * jnp.sum(values, axis=-1))


def hoover_without_each(values: Array) -> Array:
    """``out[..., j]`` = Hoover index of ``values`` without entry ``j`` ``(..., n)``.

    Computed as fused elementwise terms over an ``n x n`` table (no gathers), exactly:
    the mean of the others is ``(S - x_j) / (n - 1)`` and entry ``j`` is masked out.
    For ``n = 1`` the others are empty and the index is 0.
    """
    n = values.shape[-1]
    if n == 1:
        return jnp.zeros_like(values)
    total = jnp.sum(values, axis=-1, keepdims=True)
    others_sum = total - values  # (..., n)
    others_mean = others_sum / (n - 1)
    deviation = jnp.abs(values[..., None, :] - others_mean[..., :, None])  # [.., j, i]
    off_diagonal = ~jnp.eye(n, dtype=bool)
    spread = jnp.sum(jnp.where(off_diagonal, deviation, 0.0), axis=-1)
    return div_tiny(spread, 2.0 * others_sum)
