"""Ethical Gardeners in JAX: ``gardeners-v0`` and its variants."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.envs.gardeners import params_rules  # noqa: F401 (declares the params' ranges)
from jaxgrid.envs.gardeners.actions import action_names
from jaxgrid.envs.gardeners.env import OBSERVATIONS, Gardeners
from jaxgrid.envs.gardeners.grid_file import GridFile, read_grid_file
from jaxgrid.envs.gardeners.observation import FEATURES
from jaxgrid.envs.gardeners.rewards import OBJECTIVES
from jaxgrid.envs.gardeners.types import NO_FLOWER, GardenersParams, GardenersState, Layout
from jaxgrid.registry import register_variant
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import float_dtype

GRIDS = {p.stem: p for p in (Path(__file__).parent / "grids").glob("*.txt")}
PEER_PRICES = (10.0, 5.0, 2.0)
PEER_REDUCTIONS = ((0.0, 0.0, 0.0, 0.0, 5.0), (0.0, 0.0, 1.0, 3.0), (1.0,))


def make_gardeners(
    width: int = 10,
    height: int = 10,
    num_agents: int = 2,
    obstacles_ratio: float = 0.2,
    grid_file: str | None = None,
    observation: str = "partial",
    view_radius: int = 1,
    prices: tuple[float, ...] = PEER_PRICES,
    pollution_reductions: tuple[tuple[float, ...], ...] = PEER_REDUCTIONS,
    money: float = 0.0,
    seeds: int = 10,
    initial_pollution: float = 50.0,
    min_pollution: float = 0.0,
    max_pollution: float = 100.0,
    pollution_increment: float = 1.0,
    num_seeds_returned: int = -3,
    collisions: bool = True,
    max_penalty_turns: float = 10.0,
    horizon: int = 500,
    scalarisation: str = "weighted_sum",
    weights: tuple[float, ...] | None = None,
    name: str = "gardeners-v0",
):
    """Build a gardeners environment and its default params (defaults: the peer's
    packaged configuration).

    Args:
        width, height, num_agents, obstacles_ratio: a random grid, drawn at every reset
            (obstacles on ``int(obstacles_ratio * width * height)`` cells, agents on free
            cells).
        grid_file: a grid in the peer's text format (a path, or the name of a bundled grid:
            ``GRIDS``) instead: it sets the size, obstacles, flowers, agents with their
            money and seeds, and the flower types, so ``width``, ``height``,
            ``num_agents``, ``obstacles_ratio``, ``prices``, ``pollution_reductions``,
            ``money`` and ``seeds`` are not used.
        observation: ``"partial"`` (a window of ``view_radius`` cells around the agent) or
            ``"total"`` (the whole grid).
        prices: money a harvested flower of each type brings.
        pollution_reductions: per flower type, the pollution its flower takes from its cell
            per turn at each growth stage (the last stage is grown).
        money, seeds: every agent's money and seeds of each type at reset (-1 seeds: never
            run out).
        initial_pollution, min_pollution, max_pollution, pollution_increment: pollution of
            ground cells at reset, its bounds, and its rise per turn without a flower.
        num_seeds_returned: seeds a harvest returns: ``n >= 0``; -1 none (no seed system);
            -2 a random number in [1, 5) drawn per episode; -3 one drawn per harvest.
        collisions: an agent cannot enter a cell that holds another agent.
        max_penalty_turns: turns without income that bring the full wellbeing penalty.
        horizon: turns per episode (the peer's ``num_iterations / num_agents``).
        scalarisation, weights: how the objectives become the reward (default: their mean,
            the peer's ``total``).
        name: the environment's name.
    """
    if grid_file is not None:
        grid = read_grid_file(GRIDS.get(grid_file, grid_file))
    else:
        grid = _random_grid_defaults(
            width, height, num_agents, obstacles_ratio, prices, money, seeds
        )
        grid = grid._replace(pollution_reductions=tuple(tuple(r) for r in pollution_reductions))
    height, width = grid.obstacle.shape
    num_agents, num_types = grid.seeds.shape
    prices, reductions = np.asarray(grid.prices, np.float64), grid.pollution_reductions
    if len(reductions) != len(prices) or any(len(r) == 0 for r in reductions):
        raise ValueError(
            f"give one price and a non-empty list of pollution reductions per flower type, got "
            f"{len(prices)} prices and reductions {reductions}"
        )
    if (
        not np.all(np.isfinite(np.concatenate([prices, *map(np.asarray, reductions)])))
        or np.max(prices) <= 0
    ):
        raise ValueError(
            f"prices and reductions must be finite with a positive highest price, got {prices}"
        )
    if not min_pollution <= initial_pollution <= max_pollution:
        raise ValueError(
            f"need min_pollution <= initial_pollution <= max_pollution, got "
            f"{min_pollution}, {initial_pollution}, {max_pollution}"
        )
    if num_seeds_returned < -3:
        raise ValueError(
            f"num_seeds_returned must be >= -3 (the peer's codes), got {num_seeds_returned}"
        )
    if view_radius < 0 or horizon < 1 or max_penalty_turns <= 0:
        raise ValueError(
            f"need view_radius >= 0, horizon >= 1 and max_penalty_turns > 0, got "
            f"{view_radius}, {horizon}, {max_penalty_turns}"
        )
    stages = max(len(r) for r in reductions)
    table = np.zeros((num_types, stages))
    for t, r in enumerate(reductions):
        table[t, : len(r)] = r
    dtype = float_dtype()
    params = GardenersParams(
        layout=Layout(
            obstacle=jnp.asarray(grid.obstacle),
            flower_type=jnp.asarray(grid.flower_type, jnp.int32),
            flower_stage=jnp.asarray(grid.flower_stage, jnp.int32),
            position=jnp.asarray(grid.position, jnp.int32),
        ),
        obstacles_ratio=jnp.asarray(obstacles_ratio, dtype),
        money=jnp.asarray(grid.money, dtype),
        seeds=jnp.asarray(grid.seeds, jnp.int32),
        price=jnp.asarray(prices, dtype),
        pollution_reduction=jnp.asarray(table, dtype),
        last_stage=jnp.asarray([len(r) - 1 for r in reductions], jnp.int32),
        initial_pollution=jnp.asarray(initial_pollution, dtype),
        min_pollution=jnp.asarray(min_pollution, dtype),
        max_pollution=jnp.asarray(max_pollution, dtype),
        pollution_increment=jnp.asarray(pollution_increment, dtype),
        seeds_returned=jnp.asarray(num_seeds_returned, jnp.int32),
        collisions=jnp.asarray(bool(collisions)),
        max_penalty_turns=jnp.asarray(max_penalty_turns, dtype),
        scalarisation=jax.tree_util.tree_map(
            jnp.asarray, Scalarisation.create(len(OBJECTIVES), scalarisation, weights)
        ),
    )
    env = Gardeners(
        params,
        (height, width),
        num_agents,
        num_types,
        random_grid=grid_file is None,
        observation=observation,
        view_radius=view_radius,
        horizon=horizon,
        name=name,
    )
    return env, params


def _random_grid_defaults(width, height, num_agents, obstacles_ratio, prices, money, seeds):
    """A :class:`GridFile` of a random grid's sizes: its layout is drawn at reset."""
    if width < 1 or height < 1 or num_agents < 1:
        raise ValueError(
            f"need width, height and num_agents >= 1, got {width}, {height}, {num_agents}"
        )
    if not 0 <= obstacles_ratio < 1:
        raise ValueError(f"obstacles_ratio must be in [0, 1), got {obstacles_ratio}")
    free = width * height - int(obstacles_ratio * width * height)
    if num_agents > free:
        raise ValueError(
            f"num_agents = {num_agents} is more than the {free} free cells of a {width} x {height} "
            f"grid with obstacles_ratio = {obstacles_ratio}"
        )
    if seeds < -1:
        raise ValueError(f"seeds must be >= 0, or -1 for seeds that never run out, got {seeds}")
    cells = np.arange(num_agents)
    return GridFile(
        obstacle=np.zeros((height, width), bool),
        flower_type=np.full((height, width), NO_FLOWER, np.int32),
        flower_stage=np.zeros((height, width), np.int32),
        position=np.stack([cells // width, cells % width], axis=1).astype(np.int32),
        money=np.full(num_agents, float(money)),
        seeds=np.full((num_agents, len(prices)), seeds, np.int32),
        prices=np.asarray(prices, np.float64),
        pollution_reductions=(),
    )


register_variant("gardeners-v0", make_gardeners)
register_variant("gardeners-total-v0", make_gardeners, observation="total")
register_variant(
    "gardeners-file-v0", make_gardeners, grid_file="peer_example", num_seeds_returned=1
)

__all__ = [
    "FEATURES",
    "GRIDS",
    "OBJECTIVES",
    "OBSERVATIONS",
    "Gardeners",
    "GardenersParams",
    "GardenersState",
    "GridFile",
    "Layout",
    "action_names",
    "make_gardeners",
    "read_grid_file",
]
