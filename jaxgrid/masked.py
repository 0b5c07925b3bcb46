"""``fn(*args)`` where a mask is set, else a given value, computed only where it is set.

The auto-reset of :meth:`~jaxgrid.env.Environment.step` needs this: a step returns the
reset ``(obs, state)`` where the episode ended and the stepped ones elsewhere. Written as
``jnp.where(done, reset(key), stepped)`` (as gymnax and JaxMARL do), ``jax.vmap(env.step)``
computes a reset for every environment at every step, and so does a per-element
``lax.cond``, which ``vmap`` turns into a select of both branches. Environments whose
reset draws a random grid (``gardeners-v0``) or solves a power flow (feeder environments)
then spend most of their step resetting (``gardeners-v0`` at 4096 envs: 4.8e4 env-steps/s
under ``vmap(env.step)`` against 1.6e6 where the reset was skipped).

:func:`masked_apply` therefore carries its own batching rule
(``jax.custom_batching.custom_vmap``): a batch computes ``fn`` for none of its elements
when no mask is set (most steps of an episode), behind a ``lax.cond`` on the whole
batch. When some mask is set it computes ``fn`` for the whole batch and selects, or,
given a ``capacity``, gathers the masked elements ``capacity`` at a time, computes ``fn``
on them and scatters the results back until none is left. Gathering pays where ``fn``
costs many times the gather and scatter and few elements need it (Newton after the
DistFlow sweep: :mod:`jaxgrid.grid.fallback`); it does not for resets. Measured with
``benchmarks/env_throughput.py``'s ``measure`` (``vmap(env.step)`` in a scan) on this
2-core CPU, gathering ``n // 16`` at a time: ``arbitrage-v0`` ran at 4.3e6 env-steps/s at 4096 envs against 1.0e7 for the
whole-batch pass, ``gardeners-v0`` at 1.36e6 against 1.81e6. Unbatched it is a
``lax.cond``. Nested ``vmap`` (seeds times environments) is merged into one batch first,
so the rule holds at every depth. Differentiable: forward and reverse mode go through a
``custom_jvp`` whose tangent is the select of ``fn``'s tangent and the given value's, so
a gradient costs ``fn`` everywhere, as the plain select would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.extend
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

PyTree = Any


def masked_apply(
    fn: Callable[..., PyTree],
    mask,
    otherwise: PyTree,
    *args,
    capacity: int | float | Callable[[int], int] | None = None,
) -> PyTree:
    """``fn(*args)`` where the scalar ``mask`` is True, else ``otherwise``.

    ``fn(*args)`` must have the structure, shapes and dtypes of ``otherwise``. Under
    ``jax.vmap`` (any depth) a batch computes ``fn`` not at all where no mask is set;
    otherwise, by default, for the whole batch (then a select), and with ``capacity``
    only for the masked elements, gathered ``capacity`` at a time: an ``int``, a
    ``float`` in (0, 1], that share of the batch (rounded, at least one; for a stage
    that a share of any batch needs), or a function of the batch's size that returns
    the number (a share up to a limit, say; called when the batch is traced, at least
    one and at most the batch taken). The result is the
    same as ``jnp.where(mask, fn(*args), otherwise)``. ``fn`` is traced once, with
    every leaf of ``args`` as an array (a Python number among them is traced, not
    static: close over static values instead).
    """
    traced = _traced_once(fn, args)

    @jax.custom_jvp
    def apply(mask, otherwise, *args):
        return _one(traced, capacity)(mask, otherwise, *args)

    @apply.defjvp
    def apply_jvp(primals, tangents):
        mask, otherwise, *args = primals
        _, d_otherwise, *d_args = tangents
        out = apply(mask, otherwise, *args)
        _, d_new = jax.jvp(traced, tuple(args), tuple(d_args))
        d_out = jax.tree_util.tree_map(
            lambda new, old: new if new.dtype == jax.dtypes.float0 else jnp.where(mask, new, old),
            d_new,
            d_otherwise,
        )
        return out, d_out

    return apply(jnp.asarray(mask, bool), otherwise, *args)


def _traced_once(fn, args):
    """``fn`` as its jaxpr at ``args``' shapes, traced here once. The cond and each
    batched form then evaluate that jaxpr instead of running ``fn``'s Python again: a
    ``lax.scan`` batches its body until its carry's batching settles, and each pass ran
    the batched rule, so ``tso118-v0``'s step traced its interior point three times
    (``jax.jit(fn)`` does not help: the batched rule runs under another tracing
    context, which misses ``jit``'s cache). Tracing and lowering ``jax.vmap`` of that
    step took 3.9 s before and 2.8 s after (``ders33-v0``'s 0.81 and 0.56 s: one
    process, the two alternated, median of 5, a slow day on a 2-core CPU); XLA
    compiles the same program."""
    closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    tree = jax.tree_util.tree_structure(shape)
    evaluate = jax.extend.core.jaxpr_as_fun(closed)

    def traced(*args):
        return jax.tree_util.tree_unflatten(tree, evaluate(*jax.tree_util.tree_leaves(args)))

    return traced


def _one(fn, capacity):
    """``apply(mask, otherwise, *args)`` for one element; its ``vmap`` goes to :func:`_many`."""

    @custom_vmap
    def apply(mask, otherwise, *args):
        return jax.lax.cond(mask, lambda: fn(*args), lambda: otherwise)

    @apply.def_vmap
    def batched(axis_size, in_batched, mask, otherwise, *args):
        mask_b, otherwise_b, *args_b = in_batched
        mask = _broadcast(mask, mask_b, axis_size)
        otherwise = jax.tree_util.tree_map(
            lambda leaf, b: _broadcast(leaf, b, axis_size), otherwise, otherwise_b
        )
        out = _many(fn, capacity, tuple(args_b))(mask, otherwise, *args)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return apply


def _many(fn, capacity, args_batched: tuple):
    """``apply(mask (n,), otherwise (n, ...), *args)``: the elements' results, where the
    leaves of ``args`` flagged in ``args_batched`` have the batch axis first and the others
    are shared; a further ``vmap`` merges its axis into this one."""
    in_axes = jax.tree_util.tree_map(lambda b: 0 if b else None, args_batched)
    shared = not any(jax.tree_util.tree_leaves(args_batched))

    def results(size, *args):
        """``fn`` of each of ``size`` elements; where no argument is batched (only the
        mask is), its one result for each."""
        if shared:
            return jax.tree_util.tree_map(
                lambda leaf: jnp.broadcast_to(leaf, (size,) + leaf.shape), fn(*args)
            )
        return jax.vmap(fn, in_axes=in_axes)(*args)

    @custom_vmap
    def apply(mask, otherwise, *args):
        n = mask.shape[0]

        def every(state):
            pending, result = state
            new = results(n, *args)
            return pending, jax.tree_util.tree_map(
                lambda a, b: jnp.where(mask.reshape((n,) + (1,) * (a.ndim - 1)), a, b),
                new,
                result,
            )

        def some(state):
            pending, result = state
            (index,) = jnp.nonzero(pending, size=round_size(capacity, n), fill_value=n)
            # a round with fewer pending elements than places computes the first of
            # them in the spare places (its result dropped), not the batch's last
            # element: an iterative ``fn`` then runs no longer than the round needs
            padded = jnp.where(index < n, index, index[0])
            picked = jax.tree_util.tree_map(
                lambda leaf, b: jnp.take(leaf, padded, axis=0) if b else leaf,
                args,
                args_batched,
            )
            new = results(index.shape[0], *picked)
            result = jax.tree_util.tree_map(
                lambda old, v: old.at[index].set(v, mode="drop"), result, new
            )
            return pending.at[index].set(False, mode="drop"), result

        def rounds(state):
            return jax.lax.while_loop(lambda s: jnp.any(s[0]), some, state)

        _, result = jax.lax.cond(
            jnp.any(mask), every if capacity is None else rounds, lambda s: s, (mask, otherwise)
        )
        return result

    @apply.def_vmap
    def merged(axis_size, in_batched, mask, otherwise, *args):
        mask_b, otherwise_b, *args_b = in_batched
        n = mask.shape[-1]

        def flat(leaf, outer):  # (m, n, ...) or an unbatched (n, ...) -> (m * n, ...)
            leaf = _broadcast(leaf, outer, axis_size)
            return leaf.reshape((axis_size * n,) + leaf.shape[2:])

        mask = flat(mask, mask_b)
        otherwise = jax.tree_util.tree_map(flat, otherwise, otherwise_b)

        def flat_arg(leaf, outer, inner):
            if inner:
                return flat(leaf, outer)
            if outer:  # one value per outer element, shared by its n inner ones
                return jnp.repeat(leaf, n, axis=0)
            return leaf

        args = jax.tree_util.tree_map(flat_arg, tuple(args), tuple(args_b), args_batched)
        merged_b = jax.tree_util.tree_map(lambda o, i: o or i, tuple(args_b), args_batched)
        out = _many(fn, capacity, merged_b)(mask, otherwise, *args)
        out = jax.tree_util.tree_map(lambda x: x.reshape((axis_size, n) + x.shape[1:]), out)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return apply


def round_size(capacity: int | float | Callable[[int], int], n: int) -> int:
    """Elements gathered per round for ``capacity`` (an ``int``, a share of ``n`` or a
    function of ``n``)."""
    if callable(capacity):
        return max(1, min(n, int(capacity(n))))
    if isinstance(capacity, float):
        if not 0.0 < capacity <= 1.0:
            raise ValueError(f"capacity as a share of the batch must be in (0, 1], got {capacity}")
        return max(1, min(n, round(capacity * n)))
    return min(n, int(capacity))


def _broadcast(leaf, batched: bool, axis_size: int):
    """``leaf`` with a leading batch axis of ``axis_size`` (added when it has none)."""
    leaf = jnp.asarray(leaf)
    return leaf if batched else jnp.broadcast_to(leaf, (axis_size,) + leaf.shape)
