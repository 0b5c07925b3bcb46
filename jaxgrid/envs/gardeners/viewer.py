"""A gardeners grid as a picture, in the peer's colours (its ``GraphicalRenderer``).

Ground is green, darker where more polluted (green channel ``255 - int(110 x pollution
/ max_pollution)``); obstacles grey; a flower is a disc of its type's colour, larger and
brighter as it grows; an agent is a square of its colour with its index. Drawn with
matplotlib off screen (no pyplot).
"""

from __future__ import annotations

import numpy as np

from jaxgrid.envs.gardeners.types import NO_FLOWER
from jaxgrid.viz.image import figure_to_rgb

GROUND = (70, 255, 70)
OBSTACLE = (100, 100, 100)
# the first colours of the peer's AGENT_PALETTE and FLOWER_PALETTE, cycled
AGENT_COLOURS = ((255, 40, 40), (255, 96, 55), (255, 127, 80), (255, 69, 0), (255, 99, 71))
FLOWER_COLOURS = ((173, 255, 47), (154, 205, 50), (0, 255, 0), (50, 205, 50), (0, 250, 154))


def cell_colours(state, params) -> np.ndarray:
    """``(H, W, 3)`` uint8 colour of every cell's ground (obstacles grey)."""
    obstacle = np.asarray(state.obstacle)
    ratio = np.asarray(state.pollution, np.float64) / float(params.max_pollution)
    green = 255 - (ratio * 110).astype(int)
    ground = np.stack(np.broadcast_arrays(GROUND[0], green, GROUND[2]), axis=-1)
    return np.where(obstacle[..., None], np.array(OBSTACLE), ground).astype(np.uint8)


def render_grid(env, state, params) -> np.ndarray:
    """``(height, width, 3)`` uint8 picture of ``state``."""
    from matplotlib.figure import Figure

    height, width = np.asarray(state.obstacle).shape
    fig = Figure(figsize=(0.5 * width + 1, 0.5 * height + 1), dpi=80)
    ax = fig.subplots()
    ax.imshow(cell_colours(state, params), interpolation="nearest")
    kind, stage = np.asarray(state.flower_type), np.asarray(state.flower_stage)
    last = np.asarray(params.last_stage)
    for row, col in zip(*np.nonzero(kind != NO_FLOWER)):
        growth = stage[row, col] / max(1, last[kind[row, col]])
        colour = np.array(FLOWER_COLOURS[kind[row, col] % len(FLOWER_COLOURS)]) / 255
        ax.scatter(col, row, s=60 * (0.5 + 0.5 * growth) ** 2 * 4, color=colour * (0.5 + 0.5 * growth),
                   edgecolors="k", linewidths=0.3)  # fmt: skip
    for i, (row, col) in enumerate(np.asarray(state.position)):
        colour = np.array(AGENT_COLOURS[i % len(AGENT_COLOURS)]) / 255
        ax.scatter(col, row, marker="s", s=120, color=colour, edgecolors="k", linewidths=0.5)
        ax.annotate(str(i), (col, row), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(width))
    ax.set_yticks(range(height))
    ax.set_title(f"{env.name}, turn {int(np.asarray(state.time))}", fontsize=9)
    return figure_to_rgb(fig)
