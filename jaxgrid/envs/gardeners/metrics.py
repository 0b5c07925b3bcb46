"""The peer's ``MetricsCollector`` figures after a turn, per agent and for the grid.

Per agent: ``planted_flowers`` (flowers planted less harvested, the peer's
``num_planted_flowers_per_agent``) and ``harvested_flowers``. Global: their totals, the
average pollution of ground cells (the peer's ``avg_pollution_percent``, in pollution
units) and the number of ground cells whose pollution exceeds 25, 50, 75 and 90 % of
``max_pollution``. Rewards and their running sums are in the step's reward and the
``LogWrapper``'s returns.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.envs.gardeners.types import GardenersParams, GardenersState

THRESHOLDS_PERCENT = (25, 50, 75, 90)


def metrics(state: GardenersState, params: GardenersParams) -> dict:
    """The metrics of ``state`` (a dict of arrays of fixed shapes)."""
    ground = ~state.obstacle
    planted = jnp.sum(state.flowers_planted, axis=1)
    harvested = jnp.sum(state.flowers_harvested, axis=1)
    percent = state.pollution * 100 / params.max_pollution
    above = jnp.stack(
        [jnp.sum(ground & (percent > t), dtype=jnp.int32) for t in THRESHOLDS_PERCENT]
    )
    return {
        "planted_flowers": planted,
        "harvested_flowers": harvested,
        "total_planted_flowers": jnp.sum(planted),
        "total_harvested_flowers": jnp.sum(harvested),
        "avg_pollution": jnp.sum(jnp.where(ground, state.pollution, 0))
        / jnp.maximum(jnp.sum(ground), 1),
        "cells_pollution_above": above,
    }
