"""What a gardener sees: the whole grid or a window around it, 7 features per cell.

Features of a cell (:data:`FEATURES`), each in [0, 1]: its type (0 ground, 0.5
obstacle), its pollution between the bounds (0 on obstacles), its flower's
``(type + 1) / T`` and ``(stage + 1) / (last stage + 1)`` (0 without a flower), the agent
it records ``(index + 1) / n`` (0 without one), then the *observing* agent's own row and
column scaled to [0, 1].

- ``total``: ``(H, W, 7)`` indexed ``[row, column]`` (the peer's ``TotalObservation``).
- ``partial``: ``(2r + 1, 2r + 1, 7)`` around the agent, indexed ``[column offset, row
  offset]`` as the peer's ``PartialObservation`` builds it; cells outside the grid are all
  zeros, own position included.

The peer runs square grids only (its observations index rows by the width); on them
these are its observations exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.envs.gardeners.types import NO_AGENT, NO_FLOWER, GardenersParams, GardenersState

FEATURES = (
    "cell_type",
    "pollution",
    "flower_type",
    "growth_stage",
    "agent",
    "own_row",
    "own_column",
)
CELL_TYPES = 2  # ground, obstacle


def cell_features(state: GardenersState, params: GardenersParams, dtype) -> jax.Array:
    """``(H, W, 5)`` the features of every cell that do not depend on the observer."""
    num_types = params.price.shape[0]
    num_agents = state.position.shape[0]
    span = params.max_pollution - params.min_pollution
    pollution = (state.pollution - params.min_pollution) / jnp.where(span > 0, span, 1)
    has_flower = state.flower_type != NO_FLOWER
    kind = jnp.maximum(state.flower_type, 0)
    last = params.last_stage[kind]
    return jnp.stack(
        [
            state.obstacle / CELL_TYPES,
            jnp.where(state.obstacle, 0.0, pollution),
            jnp.where(has_flower, (kind + 1) / num_types, 0.0),
            jnp.where(has_flower, (state.flower_stage + 1) / (last + 1), 0.0),
            jnp.where(state.occupant != NO_AGENT, (state.occupant + 1) / num_agents, 0.0),
        ],
        axis=-1,
    ).astype(dtype)


def own_position(state: GardenersState, dtype) -> jax.Array:
    """``(n, 2)`` each agent's row and column scaled to [0, 1]."""
    height, width = state.obstacle.shape
    scale = jnp.array([max(height - 1, 1), max(width - 1, 1)], dtype)
    return state.position.astype(dtype) / scale


def total(state: GardenersState, params: GardenersParams, dtype) -> jax.Array:
    """``(n, H, W, 7)`` every agent's view of the whole grid."""
    cells = cell_features(state, params, dtype)
    n = state.position.shape[0]
    own = jnp.broadcast_to(
        own_position(state, dtype)[:, None, None, :], (n,) + cells.shape[:2] + (2,)
    )
    return jnp.concatenate([jnp.broadcast_to(cells, (n,) + cells.shape), own], axis=-1)


def partial(state: GardenersState, params: GardenersParams, radius: int, dtype) -> jax.Array:
    """``(n, 2r + 1, 2r + 1, 7)`` every agent's window of radius ``radius``."""
    cells = cell_features(state, params, dtype)
    inside = jnp.ones(cells.shape[:2] + (1,), dtype)
    padded = jnp.pad(
        jnp.concatenate([cells, inside], axis=-1), ((radius, radius), (radius, radius), (0, 0))
    )
    size = 2 * radius + 1

    def window(position, own):
        view = jax.lax.dynamic_slice(
            padded, (position[0], position[1], jnp.int32(0)), (size, size, 6)
        )
        view = jnp.swapaxes(view, 0, 1)  # [column offset, row offset], as the peer
        seen = view[..., 5:]
        return jnp.concatenate([view[..., :5], seen * own], axis=-1)

    return jax.vmap(window)(state.position, own_position(state, dtype))
