"""The grid world: a random grid from a key, the world update after a full turn.

A cell is ground or an obstacle. Ground holds a pollution level and at most one flower;
obstacles hold neither. After every agent has acted once (a turn), each cell's pollution
changes by the flower it holds at its current growth stage (down, to ``min_pollution``)
or by ``pollution_increment`` when it holds none (up, to ``max_pollution``); then every
flower grows one stage, up to its type's last stage.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.envs.gardeners.types import NO_FLOWER, GardenersParams, GardenersState, Layout


def random_layout(key, params: GardenersParams, shape: tuple[int, int], num_agents: int) -> Layout:
    """Obstacles on ``int(obstacles_ratio * H * W)`` cells drawn without replacement, then
    every agent on its own free cell, all uniformly (the peer's ``init_random``); no flowers.

    The number of obstacles is a params leaf, so the cells are ranked by a random key and
    the lowest ranks become obstacles; agents take the free cells of lowest random score.
    """
    height, width = shape
    cells = height * width
    k_obstacle, k_agent = jax.random.split(key)
    count = jnp.floor(params.obstacles_ratio * width * height).astype(jnp.int32)
    rank = jnp.argsort(jnp.argsort(jax.random.uniform(k_obstacle, (cells,))))
    obstacle = rank < count
    score = jnp.where(obstacle, 2.0, jax.random.uniform(k_agent, (cells,)))
    _, chosen = jax.lax.top_k(-score, num_agents)
    position = jnp.stack([chosen // width, chosen % width], axis=1).astype(jnp.int32)
    return Layout(
        obstacle=obstacle.reshape(shape),
        flower_type=jnp.full(shape, NO_FLOWER, jnp.int32),
        flower_stage=jnp.zeros(shape, jnp.int32),
        position=position,
    )


def cell_pollution_update(pollution, flower_type, flower_stage, obstacle, params: GardenersParams):
    """Pollution after a world update of cells (any shape): a flower reduces it by its
    stage's reduction down to ``min_pollution``; no flower adds ``pollution_increment`` up
    to ``max_pollution``; obstacles keep theirs."""
    dtype = pollution.dtype
    has_flower = flower_type != NO_FLOWER
    reduction = params.pollution_reduction.astype(dtype)[jnp.maximum(flower_type, 0), flower_stage]
    reduced = jnp.maximum(pollution - reduction, params.min_pollution.astype(dtype))
    raised = jnp.minimum(pollution + params.pollution_increment.astype(dtype), params.max_pollution)
    return jnp.where(obstacle, pollution, jnp.where(has_flower, reduced, raised).astype(dtype))


def update_world(state: GardenersState, params: GardenersParams) -> GardenersState:
    """The world update after a full turn: pollution (at the flowers' current stages), then
    growth."""
    pollution = cell_pollution_update(
        state.pollution, state.flower_type, state.flower_stage, state.obstacle, params
    )
    last = params.last_stage[jnp.maximum(state.flower_type, 0)]
    grown = jnp.minimum(state.flower_stage + 1, last)
    stage = jnp.where(state.flower_type != NO_FLOWER, grown, state.flower_stage)
    return state.replace(pollution=pollution, flower_stage=stage)


def walkable(state: GardenersState, target) -> jax.Array:
    """Whether cells ``target`` ``(..., 2)`` lie inside the grid and are not obstacles."""
    height, width = state.obstacle.shape
    row, col = target[..., 0], target[..., 1]
    inside = (row >= 0) & (row < height) & (col >= 0) & (col < width)
    return inside & ~state.obstacle[jnp.clip(row, 0, height - 1), jnp.clip(col, 0, width - 1)]


def can_enter(state: GardenersState, target, params: GardenersParams) -> jax.Array:
    """The peer's ``valid_move``: walkable and, with collisions, recorded as empty."""
    height, width = state.obstacle.shape
    held = state.occupant[
        jnp.clip(target[..., 0], 0, height - 1), jnp.clip(target[..., 1], 0, width - 1)
    ]
    return walkable(state, target) & ~(params.collisions & (held >= 0))
