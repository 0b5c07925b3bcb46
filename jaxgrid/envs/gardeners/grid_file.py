"""Grids from text files in the peer's format (``GridWorld.init_from_file``).

.. code-block:: text

    3 3                 width height
    G O A0              one line per row: G ground, O obstacle,
    F1_2 G G            FX_Y flower of type X at growth stage Y, AX agent X (on ground)
    G G A1
    0,100,5|10|3        one line per agent, in index order of the agents: id,money,seeds per type
    1,0,-1|0|2          (-1 seeds: never run out)
    0,10,0|0|0|0|5      one line per flower type: type,price,pollution reduction per stage
    1,5,0|0|1|3
    2,2,1

Agents take the order of their lines (the peer's). Any malformed line raises one
``ValueError`` naming the file, the line and what is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxgrid.envs.gardeners.types import NO_FLOWER


class GridFile(NamedTuple):
    """A parsed grid file (NumPy arrays).

    Attributes:
        obstacle: ``(H, W)`` bool.
        flower_type, flower_stage: ``(H, W)`` int32 (``NO_FLOWER`` where none).
        position: ``(n, 2)`` int32 ``(row, column)`` of each agent.
        money: ``(n,)`` float.
        seeds: ``(n, T)`` int32.
        prices: ``(T,)`` float.
        pollution_reductions: ``T`` tuples of per-stage reductions.
    """

    obstacle: np.ndarray
    flower_type: np.ndarray
    flower_stage: np.ndarray
    position: np.ndarray
    money: np.ndarray
    seeds: np.ndarray
    prices: np.ndarray
    pollution_reductions: tuple[tuple[float, ...], ...]


def read_grid_file(path: str | Path) -> GridFile:
    """Parse the grid file at ``path`` (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such grid file")
    lines = [(k + 1, line.strip()) for k, line in enumerate(path.read_text().splitlines())]
    lines = [(k, line) for k, line in lines if line]

    def fail(number, message):
        raise ValueError(f"{path}, line {number}: {message}")

    if not lines:
        fail(1, "empty file; expected 'width height' on the first line")
    number, first = lines[0]
    try:
        width, height = (int(v) for v in first.split())
    except ValueError:
        fail(number, f"expected 'width height' (two integers), got {first!r}")
    if width < 1 or height < 1:
        fail(number, f"width and height must be >= 1, got {width} x {height}")
    if len(lines) < 1 + height:
        fail(lines[-1][0], f"expected {height} grid rows after the size line")

    obstacle = np.zeros((height, width), bool)
    flower_type = np.full((height, width), NO_FLOWER, np.int32)
    flower_stage = np.zeros((height, width), np.int32)
    agent_cells: dict[int, tuple[int, int]] = {}
    for row, (number, line) in enumerate(lines[1 : 1 + height]):
        codes = line.split()
        if len(codes) != width:
            fail(number, f"grid row {row} has {len(codes)} cells, expected {width}")
        for col, code in enumerate(codes):
            if code == "O":
                obstacle[row, col] = True
            elif code.startswith("F") and _is_flower(code):
                kind, stage = code[1:].split("_")
                flower_type[row, col], flower_stage[row, col] = int(kind), int(stage)
            elif code.startswith("A") and code[1:].isdigit():
                if int(code[1:]) in agent_cells:
                    fail(number, f"agent {code[1:]} appears twice")
                agent_cells[int(code[1:])] = (row, col)
            elif code != "G":
                fail(
                    number,
                    f"bad cell {code!r} at column {col}; expected G, O, FX_Y (flower type X, "
                    "stage Y) or AX (agent X)",
                )

    rest = lines[1 + height :]
    num_agents = len(agent_cells)
    if num_agents == 0:
        fail(lines[height][0], "the grid holds no agent (AX)")
    if len(rest) < num_agents:
        fail(lines[-1][0], f"expected {num_agents} agent lines 'id,money,seeds' after the grid")
    position, money, seeds = [], [], []
    for number, line in rest[:num_agents]:
        parts = line.split(",")
        try:
            agent, cash, stock = (
                int(parts[0]),
                float(parts[1]),
                [int(s) for s in parts[2].split("|")],
            )
        except (ValueError, IndexError):
            agent = None
        if agent is None or len(parts) != 3 or min(stock) < -1 or not np.isfinite(cash):
            fail(number, f"expected an agent line 'id,money,seeds|per|type', got {line!r}")
        if agent not in agent_cells:
            fail(number, f"agent {agent} is not on the grid (agents there: {sorted(agent_cells)})")
        position.append(agent_cells.pop(agent))
        money.append(cash)
        seeds.append(stock)
    if agent_cells:
        fail(
            rest[num_agents - 1][0],
            f"agents {sorted(agent_cells)} are on the grid but have no line",
        )

    flowers: dict[int, tuple[float, tuple[float, ...]]] = {}
    for number, line in rest[num_agents:]:
        parts = line.split(",")
        try:
            kind, price = int(parts[0]), int(parts[1])
            reduction = tuple(float(r) for r in parts[2].split("|"))
        except (ValueError, IndexError):
            kind = None
        if kind is None or len(parts) != 3 or kind in flowers:
            fail(number, f"expected a flower line 'type,price,reduction|per|stage', got {line!r}")
        flowers[kind] = (float(price), reduction)
    num_types = len(flowers)
    if sorted(flowers) != list(range(num_types)) or num_types == 0:
        fail(lines[-1][0], f"flower types must be 0 .. T-1 with T >= 1, got {sorted(flowers)}")
    if any(len(s) != num_types for s in seeds):
        fail(rest[0][0], f"every agent needs seeds for each of the {num_types} flower types")
    last = np.array([len(flowers[t][1]) - 1 for t in range(num_types)])
    planted = flower_type != NO_FLOWER
    if np.any(flower_type >= num_types) or np.any(
        flower_stage[planted] > last[flower_type[planted]]
    ):
        fail(lines[1][0], "a flower on the grid has an unknown type or a stage beyond its last")
    return GridFile(
        obstacle=obstacle,
        flower_type=flower_type,
        flower_stage=flower_stage,
        position=np.array(position, np.int32),
        money=np.array(money, np.float64),
        seeds=np.array(seeds, np.int32),
        prices=np.array([flowers[t][0] for t in range(num_types)]),
        pollution_reductions=tuple(flowers[t][1] for t in range(num_types)),
    )


def _is_flower(code: str) -> bool:
    kind, _, stage = code[1:].partition("_")
    return kind.isdigit() and stage.isdigit()
