"""What one gardener does with one action, and which actions its mask allows.

Actions are the peer's: ``UP`` (row - 1), ``DOWN`` (row + 1), ``LEFT`` (column - 1),
``RIGHT`` (column + 1), ``HARVEST``, ``WAIT``, then ``PLANT_TYPE_i`` for each flower type
``i``. An action the mask forbids is refused as the peer refuses it (the peer warns):
nothing changes but the agent's turns without income, which every action except a
successful harvest raises by one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.envs.gardeners.types import (
    INFINITE_SEEDS,
    MAX_SEED_RETURNS,
    MIN_SEED_RETURNS,
    NO_AGENT,
    NO_FLOWER,
    NO_SEED_SYSTEM,
    RANDOM_EACH_HARVEST,
    GardenersParams,
    GardenersState,
)
from jaxgrid.envs.gardeners.world import can_enter

UP, DOWN, LEFT, RIGHT, HARVEST, WAIT, PLANT = range(7)  # PLANT: PLANT_TYPE_0
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))  # (row, column) steps of UP, DOWN, LEFT, RIGHT


def action_names(num_flower_types: int) -> tuple[str, ...]:
    """The peer's action names in index order."""
    plant = tuple(f"PLANT_TYPE_{i}" for i in range(num_flower_types))
    return ("UP", "DOWN", "LEFT", "RIGHT", "HARVEST", "WAIT") + plant


def _has_seed(seeds):
    return (seeds > 0) | (seeds == INFINITE_SEEDS)


def _grown(state: GardenersState, row, col, params: GardenersParams):
    flower = state.flower_type[row, col]
    last = params.last_stage[jnp.maximum(flower, 0)]
    return (flower != NO_FLOWER) & (state.flower_stage[row, col] == last)


def action_mask(state: GardenersState, params: GardenersParams) -> jax.Array:
    """``(n, 6 + T)`` bool: the peer's ``update_action_mask`` for every agent."""
    pos = state.position
    moves = jnp.stack(
        [can_enter(state, pos + jnp.array(m, jnp.int32), params) for m in MOVES], axis=1
    )
    row, col = pos[:, 0], pos[:, 1]
    harvest = _grown(state, row, col, params)
    free = state.flower_type[row, col] == NO_FLOWER  # agents stand on ground only
    plant = _has_seed(state.seeds) & free[:, None]
    wait = jnp.ones_like(harvest)
    return jnp.concatenate([moves, harvest[:, None], wait[:, None], plant], axis=1)


def act(state: GardenersState, agent, action, key, params: GardenersParams):
    """Agent ``agent`` takes ``action`` (the peer's ``ActionHandler.handle_action``).

    Returns the new state and whether the action was refused. ``key`` draws the seeds a
    harvest returns under ``RANDOM_EACH_HARVEST``.
    """
    num_types = params.price.shape[0]
    pos = state.position[agent]
    row, col = pos[0], pos[1]

    # moves: into a walkable cell that, with collisions, no agent holds
    is_move = action < HARVEST
    target = pos + jnp.array(MOVES, jnp.int32)[jnp.minimum(action, RIGHT)]
    moved = is_move & can_enter(state, target, params)
    height, width = state.obstacle.shape
    t_row, t_col = jnp.clip(target[0], 0, height - 1), jnp.clip(target[1], 0, width - 1)
    occupant = state.occupant.at[row, col].set(jnp.where(moved, NO_AGENT, state.occupant[row, col]))
    occupant = occupant.at[t_row, t_col].set(jnp.where(moved, agent, occupant[t_row, t_col]))
    position = state.position.at[agent].set(jnp.where(moved, target, pos))

    # harvest: a grown flower brings its price and (by the seed rule) seeds of its type
    flower = state.flower_type[row, col]
    kind = jnp.maximum(flower, 0)
    harvested = (action == HARVEST) & _grown(state, row, col, params)
    rule = state.seeds_returned
    drawn = jax.random.randint(key, (), MIN_SEED_RETURNS, MAX_SEED_RETURNS, jnp.int32)
    returned = jnp.where(rule == RANDOM_EACH_HARVEST, drawn, rule)
    own = state.seeds[agent, kind]
    gets_seeds = harvested & (rule != NO_SEED_SYSTEM) & (own != INFINITE_SEEDS)
    seeds = state.seeds.at[agent, kind].add(jnp.where(gets_seeds, returned, 0))
    money = state.money.at[agent].add(
        jnp.where(harvested, params.price[kind], 0).astype(state.money.dtype)
    )
    planted = state.flowers_planted.at[agent, kind].add(-harvested.astype(jnp.int32))
    harvests = state.flowers_harvested.at[agent, kind].add(harvested.astype(jnp.int32))

    # plant: a seed of the type on a cell without a flower
    is_plant = action >= PLANT
    new_kind = jnp.clip(action - PLANT, 0, num_types - 1)
    stock = seeds[agent, new_kind]
    sown = is_plant & _has_seed(stock) & (flower == NO_FLOWER)
    seeds = seeds.at[agent, new_kind].add(jnp.where(sown & (stock != INFINITE_SEEDS), -1, 0))
    planted = planted.at[agent, new_kind].add(sown.astype(jnp.int32))
    cell_flower = jnp.where(harvested, NO_FLOWER, jnp.where(sown, new_kind, flower))
    cell_stage = jnp.where(harvested | sown, 0, state.flower_stage[row, col])

    refused = (is_move & ~moved) | ((action == HARVEST) & ~harvested) | (is_plant & ~sown)
    new = state.replace(
        occupant=occupant,
        position=position,
        flower_type=state.flower_type.at[row, col].set(cell_flower),
        flower_stage=state.flower_stage.at[row, col].set(cell_stage),
        money=money,
        seeds=seeds,
        flowers_planted=planted,
        flowers_harvested=harvests,
        turns_without_income=state.turns_without_income.at[agent].set(
            jnp.where(harvested, 0, state.turns_without_income[agent] + 1)
        ),
    )
    return new, refused
