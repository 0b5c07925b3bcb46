"""Equity of a distribution: the Hoover index, whole and leave-one-out."""

from __future__ import annotations

import jax
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

    With the others' mean ``m_j = (S - x_j) / (n - 1)``, their deviations sum to zero, so
    ``sum_{i != j} |x_i - m_j| = 2 sum_{i != j} max(x_i - m_j, 0)``: ``n`` terms for each
    of ``n`` entries, summed over ``i`` by a loop of ``n`` passes over ``(..., n)``
    (``lax.fori_loop``, unrolled), so that XLA fuses the ``n x n`` terms into one kernel
    instead of writing them out. For ``n = 1`` the others are empty and the index is 0.

    Measured under ``jax.vmap(env.step)`` (``smartgrid-v0``, 2048 environments, one XLA
    device of a 2-core CPU, alternated in one process): the ``(..., n, n)`` table summed
    by a product with ones took 1.99 ms a step, this loop 1.70 ms; rolled (not unrolled)
    2.16 ms. ``smartgrid-medium-v0`` (100 agents, 1024 environments): 8.03 -> 4.59 ms.
    """
    n = values.shape[-1]
    if n == 1:
        return jnp.zeros_like(values)
    others_sum = jnp.sum(values, axis=-1, keepdims=True) - values  # (..., n)
    others_mean = others_sum / (n - 1)

    def add_term(i, above):
        x_i = jax.lax.dynamic_slice_in_dim(values, i, 1, axis=-1)  # (..., 1)
        return above + jnp.maximum(x_i - others_mean, 0.0)

    above = jax.lax.fori_loop(0, n, add_term, jnp.zeros_like(values), unroll=True)
    spread = 2.0 * (above - jnp.maximum(values - others_mean, 0.0))
    return div_tiny(spread, 2.0 * others_sum)
