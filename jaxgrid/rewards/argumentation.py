"""Argumentation-based judgment as fixed-shape array code (after AJAR 1.0.0).

A moral value is an argument graph: arguments that *support* or *counter* the decision
"the action was moral" (or are neutral), and attacks between arguments. In a situation,
an argument is *alive* when its predicate holds; only attacks between alive arguments
count. The *accepted* arguments are the grounded extension of that framework: the least
fixed point of "accept an alive argument when each of its alive attackers is attacked by
an accepted argument". A judgment function turns the numbers of accepted supports ``p``
and counters ``c`` into a reward.

Everything here is batched over leading axes (agents, environments) and jittable; the
graph itself (names, attack matrix, polarities) is a static NumPy constant.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.types import Array

SUPPORT, NEUTRAL, COUNTER = 1, 0, -1
J_SIMPLE, J_DIFF, J_RATIO, J_GRAD, J_OFFSET = 0, 1, 2, 3, 4
JUDGMENTS = {
    "simple": J_SIMPLE,
    "diff": J_DIFF,
    "ratio": J_RATIO,
    "grad": J_GRAD,
    "offset": J_OFFSET,
}


class ArgumentGraph(NamedTuple):
    """A static argument graph.

    Attributes:
        names: argument names, in definition order.
        attacks: ``(k, k)`` bool, ``attacks[x, y]`` when ``x`` attacks ``y``.
        polarity: ``(k,)`` int8, ``SUPPORT``, ``COUNTER`` or ``NEUTRAL``.
        iterations: fixed-point iterations that reach the grounded extension: the
            longest attack path plus one for an acyclic graph, ``k`` otherwise.
    """

    names: tuple[str, ...]
    attacks: np.ndarray
    polarity: np.ndarray
    iterations: int

    @property
    def n_support(self) -> int:
        return int(np.sum(self.polarity == SUPPORT))

    @property
    def n_counter(self) -> int:
        return int(np.sum(self.polarity == COUNTER))


def _longest_path(attacks: np.ndarray) -> int | None:
    """Edges on the longest attack path, or ``None`` when the graph has a cycle."""
    k = attacks.shape[0]
    indegree = attacks.sum(axis=0)
    order, frontier = [], [i for i in range(k) if indegree[i] == 0]
    indegree = indegree.copy()
    while frontier:
        x = frontier.pop()
        order.append(x)
        for y in np.flatnonzero(attacks[x]):
            indegree[y] -= 1
            if indegree[y] == 0:
                frontier.append(int(y))
    if len(order) < k:
        return None
    depth = np.zeros(k, int)
    for x in order:
        for y in np.flatnonzero(attacks[x]):
            depth[y] = max(depth[y], depth[x] + 1)
    return int(depth.max())


def argument_graph(
    arguments: list[tuple[str, int]], attacks: list[tuple[str, str]]
) -> ArgumentGraph:
    """Build a graph from ``(name, polarity)`` arguments and ``(attacker, attacked)`` pairs."""
    names = tuple(name for name, _ in arguments)
    if len(set(names)) != len(names):
        raise ValueError(f"argument names must be distinct, got {names}")
    index = {name: i for i, name in enumerate(names)}
    matrix = np.zeros((len(names), len(names)), bool)
    for attacker, attacked in attacks:
        for name in (attacker, attacked):
            if name not in index:
                raise ValueError(f"attack names an unknown argument {name!r}")
        matrix[index[attacker], index[attacked]] = True
    polarity = np.array([p for _, p in arguments], np.int8)
    if not np.all(np.isin(polarity, (SUPPORT, NEUTRAL, COUNTER))):
        raise ValueError("polarity must be SUPPORT, NEUTRAL or COUNTER")
    longest = _longest_path(matrix)
    iterations = len(names) if longest is None else longest + 1
    return ArgumentGraph(names=names, attacks=matrix, polarity=polarity, iterations=iterations)


def grounded_extension(graph: ArgumentGraph, alive: Array) -> Array:
    """Accepted arguments ``(..., k)`` for aliveness ``alive`` ``(..., k)`` (bool)."""
    alive = jnp.asarray(alive, bool)
    live_attacks = graph.attacks & alive[..., :, None] & alive[..., None, :]

    def accept(_, accepted):
        defeated = jnp.any(accepted[..., :, None] & live_attacks, axis=-2)
        undefeated_attack = live_attacks & ~defeated[..., :, None]
        return alive & ~jnp.any(undefeated_attack, axis=-2)

    accepted = jnp.zeros_like(alive)
    return jax.lax.fori_loop(0, graph.iterations, accept, accepted, unroll=True)


def count_accepted(graph: ArgumentGraph, accepted: Array) -> tuple[Array, Array]:
    """Accepted supports ``p`` and counters ``c``, ``(...)`` int32."""
    p = jnp.sum(accepted & (graph.polarity == SUPPORT), axis=-1, dtype=jnp.int32)
    c = jnp.sum(accepted & (graph.polarity == COUNTER), axis=-1, dtype=jnp.int32)
    return p, c


def judgment(method, p: Array, c: Array, n_support: int, n_counter: int, ratio_max: Array, dtype):
    """The reward of AJAR's judgment ``method`` (``J_SIMPLE`` ...) from counts ``p``, ``c``.

    ``ratio_max`` is the running maximum of ``p + c`` that ``J_RATIO`` divides by (already
    updated with this call); the other methods ignore it.
    """
    p = p.astype(dtype)
    c = c.astype(dtype)
    total = p + c
    simple = jnp.where(total == 0, 0.5, p / jnp.where(total == 0, 1.0, total))
    diff = (p / n_support if n_support > 0 else 0.0) - (c / n_counter if n_counter > 0 else 0.0)
    ratio_max = jnp.asarray(ratio_max, dtype)
    ratio = jnp.where(
        ratio_max == 0, 0.5, (p**2 - c**2) / jnp.where(ratio_max == 0, 1.0, ratio_max)
    )
    if n_support == 0 or n_counter == 0:
        grad = jnp.full_like(p, 0.5)
    else:
        grad = (0.5 + (0.5 / n_support) * p) - (0.5 / n_counter) * c
    offset = jnp.minimum(1.0, (1.0 + p) / (1.0 + c))
    method = jnp.asarray(method)
    return jnp.select(
        [method == J_DIFF, method == J_RATIO, method == J_GRAD, method == J_OFFSET],
        [jnp.broadcast_to(diff, simple.shape), ratio, grad, offset],
        simple,
    )
