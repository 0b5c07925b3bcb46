"""The peer's three objectives, each in [-1, 1], computed for the agent that just acted.

``before`` is the world before the agent's action, ``after`` the world the peer hands
the reward from: after the action, and for the last agent of a turn also after the world
update (which changes only pollution and growth stages, so only ecology sees it).

- **ecology**: planting (any ``PLANT_TYPE_i`` that leaves a flower on the agent's cell,
  whoever planted it) scores ``sum(reductions) / (pollution - max + 0.01)`` over
  ``(max - min) / 0.01``; a successful harvest scores ``last reduction x (pollution - min)``
  over ``max - min``; everything else 0.
- **wellbeing**: a successful harvest scores ``price / highest price``, a refused harvest
  0; every other action ``-min(turns_without_income / max_penalty_turns, 1)``.
- **biodiversity**: planting that leaves a flower of type ``f`` on the agent's cell scores
  the change of the Shannon index of the flowers planted (``flowers_planted`` summed over
  agents) from one fewer ``f`` to now, over ``log(T)``; everything else 0.

Where the peer divides by zero or takes the log of a negative number (a pollution of
exactly ``max - 0.01`` when planting; planted counts that harvests of a grid file's
initial flowers made zero or negative) and so raises, these give 0 instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.envs.gardeners.actions import HARVEST, PLANT
from jaxgrid.envs.gardeners.types import NO_FLOWER, GardenersParams, GardenersState

OBJECTIVES = ("ecology", "wellbeing", "biodiversity")
NO_IMPACT, PLANTED, HARVESTED = 0, 1, 2  # kinds of ecological impact


def shannon(counts):
    """Shannon-Wiener index ``-sum p log p`` over the positive ``counts`` ``(..., T)``."""
    total = jnp.sum(counts, axis=-1, keepdims=True)
    share = counts / jnp.where(total > 0, total, 1)
    terms = jnp.where(
        (counts > 0) & (total > 0), share * jnp.log(jnp.where(share > 0, share, 1)), 0
    )
    return -jnp.sum(terms, axis=-1)


def impact(before: GardenersState, after: GardenersState, agent, action, params: GardenersParams):
    """``(kind, amount)`` of the agent's ecological impact, to be scaled by the pollution of
    its cell when the reward is handed out (:func:`ecology`)."""
    row, col = after.position[agent, 0], after.position[agent, 1]
    now, then = after.flower_type[row, col], before.flower_type[row, col]
    planted = (action >= PLANT) & (now != NO_FLOWER)
    harvested = (action == HARVEST) & (now == NO_FLOWER) & (then != NO_FLOWER)
    reduction = params.pollution_reduction
    total = jnp.sum(reduction, axis=1)[jnp.maximum(now, 0)]
    then = jnp.maximum(then, 0)
    last = reduction[then, params.last_stage[then]]
    kind = jnp.where(planted, PLANTED, jnp.where(harvested, HARVESTED, NO_IMPACT))
    return kind, jnp.where(planted, total, jnp.where(harvested, last, 0.0))


def ecology(kind, amount, pollution, params: GardenersParams):
    """Ecology reward of impacts ``(kind, amount)`` on cells of ``pollution`` (any shape)."""
    p_min, p_max = params.min_pollution, params.max_pollution
    span = p_max - p_min
    ok_span = span > 0
    # the barrier keeps XLA from folding ``- p_max + 0.01`` into one constant when params
    # are constants: near p_max that loses the float32 precision of the difference
    gap = jax.lax.optimization_barrier(pollution - p_max) + 0.01
    plant = amount / jnp.where(gap != 0, gap, 1) / jnp.where(ok_span, span * 1 / 0.01, 1)
    plant = jnp.where(gap != 0, plant, 0.0)
    harvest = amount * (pollution - p_min) / jnp.where(ok_span, span, 1)
    value = jnp.where(kind == PLANTED, plant, jnp.where(kind == HARVESTED, harvest, 0.0))
    return jnp.where(ok_span, value, 0.0)


def wellbeing(
    before: GardenersState, after: GardenersState, agent, action, params: GardenersParams
):
    """Wellbeing reward of the agent's action."""
    row, col = after.position[agent, 0], after.position[agent, 1]
    now, then = after.flower_type[row, col], before.flower_type[row, col]
    sold = (now == NO_FLOWER) & (then != NO_FLOWER)
    price = params.price[jnp.maximum(then, 0)] / jnp.max(params.price)
    idle = after.turns_without_income[agent] / params.max_penalty_turns
    return jnp.where(action == HARVEST, jnp.where(sold, price, 0.0), -jnp.minimum(idle, 1.0))


def biodiversity(after: GardenersState, agent, action, params: GardenersParams):
    """Biodiversity reward of the agent's action."""
    row, col = after.position[agent, 0], after.position[agent, 1]
    now = after.flower_type[row, col]
    num_types = params.price.shape[0]
    counts = jnp.sum(after.flowers_planted, axis=0)
    previous = counts - (jnp.arange(num_types) == now)
    change = shannon(counts) - shannon(previous)
    scale = jnp.log(num_types) if num_types > 1 else 1.0
    gain = change / scale if num_types > 1 else 0.0 * change
    return jnp.where((action >= PLANT) & (now != NO_FLOWER), gain, 0.0)
