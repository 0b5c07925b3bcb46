"""State and params of the gardeners environments."""

from __future__ import annotations

from flax import struct

from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array

NO_FLOWER = -1  # flower_type of a cell without a flower
NO_AGENT = -1  # occupant of a cell without an agent
INFINITE_SEEDS = -1  # a seed count that never runs out (the peer's -1)
# seed-return codes (the peer's ``num_seeds_returned``); n >= 0 returns n seeds
NO_SEED_SYSTEM, RANDOM_ONCE, RANDOM_EACH_HARVEST = -1, -2, -3
MIN_SEED_RETURNS, MAX_SEED_RETURNS = 1, 5  # random returns are in [1, 5)


@struct.dataclass
class Layout:
    """A grid as a text file (or the peer's world) gives it; shapes ``(H, W)`` and ``(n, .)``.

    Attributes:
        obstacle: ``(H, W)`` bool, cells no agent can enter.
        flower_type: ``(H, W)`` int32 flower type of each cell, ``NO_FLOWER`` where none.
        flower_stage: ``(H, W)`` int32 growth stage of each flower.
        position: ``(n, 2)`` int32 ``(row, column)`` of each agent.
    """

    obstacle: Array
    flower_type: Array
    flower_stage: Array
    position: Array


@struct.dataclass
class GardenersParams:
    """Everything a gardeners scenario may vary.

    Attributes:
        layout: the grid at reset when the environment has a fixed grid (a text file).
        obstacles_ratio: ``()`` share of cells made obstacles when the grid is random.
        money: ``(n,)`` money of each agent at reset.
        seeds: ``(n, T)`` int32 seeds of each flower type at reset (``INFINITE_SEEDS``: never
            run out).
        price: ``(T,)`` money a harvested flower of each type brings.
        pollution_reduction: ``(T, S)`` pollution a flower takes from its cell per turn at
            each growth stage (padded with 0 beyond its last stage).
        last_stage: ``(T,)`` int32 last growth stage of each type (the flower is grown there).
        initial_pollution: ``()`` pollution of every ground cell at reset (the peer: 50).
        min_pollution, max_pollution: ``()`` bounds of a cell's pollution.
        pollution_increment: ``()`` pollution a cell without a flower gains per turn.
        seeds_returned: ``()`` int32 seeds returned by a harvest: ``n >= 0``, or
            ``NO_SEED_SYSTEM``, ``RANDOM_ONCE`` (drawn per episode), ``RANDOM_EACH_HARVEST``.
        collisions: ``()`` bool, an agent cannot enter a cell another agent holds.
        max_penalty_turns: ``()`` turns without income that bring the full wellbeing
            penalty (the peer's ``MAX_PENALTY_TURNS``, 10).
        scalarisation: how ecology, wellbeing and biodiversity become the reward (the
            peer's ``total`` is their mean).
    """

    layout: Layout
    obstacles_ratio: Array
    money: Array
    seeds: Array
    price: Array
    pollution_reduction: Array
    last_stage: Array
    initial_pollution: Array
    min_pollution: Array
    max_pollution: Array
    pollution_increment: Array
    seeds_returned: Array
    collisions: Array
    max_penalty_turns: Array
    scalarisation: Scalarisation


@struct.dataclass
class GardenersState:
    """One grid world between two turns.

    Attributes:
        obstacle: ``(H, W)`` bool.
        pollution: ``(H, W)`` pollution of each cell (0 on obstacles, which have none).
        flower_type: ``(H, W)`` int32, ``NO_FLOWER`` where none.
        flower_stage: ``(H, W)`` int32.
        occupant: ``(H, W)`` int32 the agent a cell records, ``NO_AGENT`` where none. As in
            the peer, a cell records the last agent that entered it and forgets it when any
            agent leaves (only differs from the true occupancy without collisions).
        position: ``(n, 2)`` int32 ``(row, column)`` of each agent.
        money: ``(n,)``.
        seeds: ``(n, T)`` int32.
        flowers_planted: ``(n, T)`` int32 flowers planted less flowers harvested (the peer's
            count: a harvest lowers the harvester's count, whoever planted the flower).
        flowers_harvested: ``(n, T)`` int32.
        turns_without_income: ``(n,)`` int32 actions since the agent's last harvest.
        seeds_returned: ``()`` int32 the episode's seed-return rule (``RANDOM_ONCE`` resolved).
        time: ``()`` int32 turns since reset.
    """

    obstacle: Array
    pollution: Array
    flower_type: Array
    flower_stage: Array
    occupant: Array
    position: Array
    money: Array
    seeds: Array
    flowers_planted: Array
    flowers_harvested: Array
    turns_without_income: Array
    seeds_returned: Array
    time: Array
