"""The range of :class:`GardenersParams` (checked by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.gardeners.types import (
    INFINITE_SEEDS,
    NO_FLOWER,
    RANDOM_EACH_HARVEST,
    GardenersParams,
    Layout,
)
from jaxgrid.validation import Index, Ordered, Range, declare

declare(
    Layout,
    Range("flower_type", ge=NO_FLOWER),
    Range("flower_stage", ge=0),
)
declare(
    GardenersParams,
    Index("layout.position[0]", lambda p: p.layout.obstacle.shape[-2], "a row of the grid"),
    Index("layout.position[1]", lambda p: p.layout.obstacle.shape[-1], "a column of the grid"),
    Range("obstacles_ratio", ge=0, lt=1),
    Range("seeds", ge=INFINITE_SEEDS),
    Index("last_stage", lambda p: p.pollution_reduction.shape[-1], "a growth stage"),
    Ordered("min_pollution", "initial_pollution"),
    Ordered("initial_pollution", "max_pollution"),
    Range("seeds_returned", ge=RANDOM_EACH_HARVEST),
    Range("max_penalty_turns", gt=0, unit="turns"),
)
