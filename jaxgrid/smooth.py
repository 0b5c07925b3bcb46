"""Smooth surrogates of clips and saturations, for gradients through a device's limits.

A clip ``min(max(x, low), high)`` has a zero derivative on its clipped side: a battery
asked for more power than its state of charge allows enacts the same power whatever it
is asked, so ``jax.grad`` of anything downstream with respect to the request is 0 there.
A planner or an analytic policy gradient that starts on the clipped side never learns
to come back. These surrogates round the corners over a ``width`` in the variable's own
units (MW, Mvar): the derivative falls from 1 to 0 over a few widths instead of at once.

``width = 0`` (every device's default) is the exact model: the result is the exact
clip's, bit for bit (the surrogate is computed beside it and not selected), and so is its
gradient. A ``width`` is a params leaf, so it can differ between environments of a
``vmap`` and be annealed towards 0 during training.

Errors, for an interval much wider than ``width`` (``w``): at distance ``d`` from a
bound, inside or outside, the surrogate differs from the exact clip by
``w log(1 + exp(-d / w))``: ``w log 2 = 0.69 w`` at the bound, below ``w exp(-d / w)``
elsewhere (``4.5e-5 w`` at ``d = 10 w``). The surrogate increases with ``x`` and stays
inside ``(low, high)`` (in exact arithmetic strictly; far beyond a bound it rounds to the
bound), so it never enacts more than the exact limits allow.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.types import Array


def _safe(width: Array) -> tuple[Array, Array]:
    """``(smooth, w)``: where the width is positive, and a width that is never 0 (the
    surrogate branch is computed everywhere; a 0 would put NaN into its unused
    gradient, and ``where`` passes NaN times 0 on)."""
    smooth = width > 0
    return smooth, jnp.where(smooth, width, 1.0)


def soft_clip(x: Array, low: Array, high: Array, width: Array) -> Array:
    """``jnp.clip(x, low, high)`` with its corners rounded over ``width`` (units of ``x``).

    ``x - w softplus((x - high) / w) + w softplus((low - x) / w)`` where ``width > 0``,
    the exact clip where ``width == 0`` (module docstring for the error). Requires
    ``low < high`` where smoothed.
    """
    smooth, w = _safe(jnp.asarray(width))
    rounded = x - w * jax.nn.softplus((x - high) / w) + w * jax.nn.softplus((low - x) / w)
    return jnp.where(smooth, rounded, jnp.clip(x, low, high))


def soft_min(x: Array, limit: Array, width: Array) -> Array:
    """``jnp.minimum(x, limit)`` rounded over ``width``: ``limit - w softplus((limit - x) / w)``
    (at most ``limit`` and at most ``x``; ``w log 2`` below both where they are equal)."""
    smooth, w = _safe(jnp.asarray(width))
    rounded = x - w * jax.nn.softplus((x - limit) / w)
    return jnp.where(smooth, rounded, jnp.minimum(x, limit))


def soft_sqrt_positive(y: Array, width: Array) -> Array:
    """``sqrt(max(y, 0))`` with ``y`` in squared units of ``width``, rounded near ``y = 0``:
    ``sqrt(w^2 softplus(y / w^2))``. Its derivative is finite everywhere (the exact one
    is infinite at 0 and 0 below); it is ``0.83 w`` at ``y = 0`` where the exact value is
    0, and within ``w^2 exp(-|y| / w^2) / (2 sqrt(|y|))`` of it at ``|y| >> w^2`` above."""
    smooth, w = _safe(jnp.asarray(width))
    w2 = w * w
    rounded = jnp.sqrt(w2 * jax.nn.softplus(y / w2))
    # the exact branch's derivative at y <= 0 is inf * 0 = NaN: keep it off where unused
    exact = jnp.sqrt(jnp.maximum(jnp.where(smooth, 1.0, y), 0.0))
    return jnp.where(smooth, rounded, exact)
