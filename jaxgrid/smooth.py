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
bound, and a result that rounding puts an ulp outside is set to the bound), so it never
enacts more than the exact limits allow.

:func:`soft_round` is the same idea for a discrete event, a rounding to whole steps (a
regulator's tap): a staircase whose treads are tilted over ``width`` steps, exact at
every integer; see its docstring for its error and derivative.
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


def _at_most(value: Array, bound: Array) -> Array:
    """``value``, or ``bound`` where rounding put it above: the surrogates' bounds hold in
    floating point too. Measured: compiled without LLVM's optimisations, the diesel's
    window surrogate rounded to 0.7500000000000001 MW against a bound of 0.75. The
    gradient there is the bound's (0), as the surrogate's own is far beyond a bound."""
    return jnp.where(value > bound, bound, value)


def _at_least(value: Array, bound: Array) -> Array:
    """``value``, or ``bound`` where rounding put it below (:func:`_at_most`)."""
    return jnp.where(value < bound, bound, value)


def soft_clip(x: Array, low: Array, high: Array, width: Array) -> Array:
    """``jnp.clip(x, low, high)`` with its corners rounded over ``width`` (units of ``x``).

    ``x - w softplus((x - high) / w) + w softplus((low - x) / w)`` where ``width > 0``,
    the exact clip where ``width == 0`` (module docstring for the error). Requires
    ``low < high`` where smoothed.
    """
    smooth, w = _safe(jnp.asarray(width))
    rounded = x - w * jax.nn.softplus((x - high) / w) + w * jax.nn.softplus((low - x) / w)
    rounded = _at_most(_at_least(rounded, low), high)
    return jnp.where(smooth, rounded, jnp.clip(x, low, high))


def soft_min(x: Array, limit: Array, width: Array) -> Array:
    """``jnp.minimum(x, limit)`` rounded over ``width``: ``limit - w softplus((limit - x) / w)``
    (at most ``limit`` and at most ``x``; ``w log 2`` below both where they are equal)."""
    smooth, w = _safe(jnp.asarray(width))
    rounded = _at_most(_at_most(x - w * jax.nn.softplus((x - limit) / w), limit), x)
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


def soft_round(x: Array, width: Array) -> Array:
    """``jnp.round(x)`` as a smooth staircase, its steps rounded over ``width`` (units of
    ``x``, a fraction of one step): the soft rounding of Agustsson and Theis (NeurIPS
    2020, "Universally quantized neural compression"), with ``alpha = 1 / width``::

        floor(x) + 1/2 + tanh(r / w) / (2 tanh(1 / (2 w))),   r = x - floor(x) - 1/2

    where ``width > 0``; the exact ``jnp.round`` (half to even) where ``width == 0``, bit
    for bit, with JAX's derivative of it (0).

    The surrogate is continuous with a continuous derivative, increases with ``x``, equals
    ``x`` at every integer (so a request of 0 stays 0) and stays within ``1/2`` of ``x``,
    so it never moves further than the exact rounding could. At distance ``h`` from the
    nearest half-integer it differs from ``round(x)`` by at most ``1 / (1 + exp(2 h / w))``
    (below ``exp(-2 h / w)``; ``1/2`` at a half-integer, where ``round`` jumps). Its
    derivative is ``sech^2(r / w) / (2 w tanh(1 / (2 w)))``: about ``1 / (2 w)`` at a
    half-integer and ``sech^2(1 / (2 w)) / (2 w tanh(1 / (2 w)))``, about
    ``2 exp(-1 / w) / w``, at an integer (``0.067`` at ``w = 0.2``, ``0.55`` at ``w =
    0.5``). As ``width`` grows the staircase tends to ``x`` itself.
    """
    smooth, w = _safe(jnp.asarray(width))
    floor = jnp.floor(x)
    r = x - floor - 0.5
    rounded = floor + 0.5 + jnp.tanh(r / w) / (2.0 * jnp.tanh(0.5 / w))
    # at an integer the two tanh agree only to rounding (compiled without LLVM's
    # optimisations, soft_round(-1) gave -0.9999999999999999): the value there is x itself,
    # the derivative the staircase's
    at_integer = jax.lax.stop_gradient(x) + (rounded - jax.lax.stop_gradient(rounded))
    rounded = jnp.where(r == -0.5, at_integer, rounded)
    return jnp.where(smooth, rounded, jnp.round(x))
