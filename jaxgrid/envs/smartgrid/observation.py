"""Observations of the smartgrid: 3 local measures per agent and 8 global ones.

The stacked observation ``(n, 11)`` keeps EthicalSmartGrid's field order
(:data:`OBSERVATION_FIELDS`): local fields first, then global ones (identical rows).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.devices.prosumer import BUY, GIVE, GRID, PAYOFF_MAX, PAYOFF_MIN, SELL, STORAGE, STORE
from jaxgrid.envs.smartgrid.types import SmartgridParams, SmartgridState
from jaxgrid.numerics import div_tiny, interp_unit, median
from jaxgrid.rewards.equity import hoover
from jaxgrid.types import Array

LOCAL_FIELDS = ("personal_storage", "comfort", "payoff")
GLOBAL_FIELDS = (
    "hour",
    "available_energy",
    "equity",
    "energy_loss",
    "autonomy",
    "exclusion",
    "well_being",
    "over_consumption",
)
OBSERVATION_FIELDS = LOCAL_FIELDS + GLOBAL_FIELDS


def local_observation(state: SmartgridState, params: SmartgridParams) -> Array:
    """``(n, 3)``: battery content over capacity, comfort, payoff mapped from [-10000, 10000] to [0, 1]."""
    b = state.buildings
    return jnp.stack(
        [
            div_tiny(b.storage, params.capacity.astype(b.storage.dtype)),
            b.comfort,
            interp_unit(b.payoff, PAYOFF_MIN, PAYOFF_MAX),
        ],
        axis=-1,
    )


def global_observation(state: SmartgridState, enacted: Array, params: SmartgridParams) -> Array:
    """``(8,)``: the measures of :data:`GLOBAL_FIELDS` of a post-step ``state`` and the
    step's ``enacted`` actions ``(6, n)`` (Wh, component-major), each in [0, 1].

    - hour: ``(t % 24) / 24``;
    - available_energy: the pool mapped from the generator's bounds to [0, 1];
    - equity: ``1 - hoover(comforts)``;
    - energy_loss: the share of the pool (plus energy given) that nobody took;
      EthicalSmartGrid's definition, always 0, with ``params.peer_energy_loss``;
    - autonomy: ``1 - transactions / all exchanges``;
    - exclusion: share of agents with a comfort below half the median comfort;
    - well_being: the median comfort;
    - over_consumption: energy taken beyond the pool and the gifts, over the energy taken.
    """
    e = enacted
    comfort = state.buildings.comfort
    dtype = comfort.dtype
    sum_taken = jnp.sum(e[GRID] + e[STORE])
    sum_given = jnp.sum(e[GIVE])
    sum_transactions = jnp.sum(e[BUY] + e[SELL])
    sum_consumed = jnp.sum(e[GRID] + e[STORAGE])
    sum_stored = jnp.sum(e[STORE])
    pool = state.available_energy
    bounds = params.generator.bounds.astype(dtype)
    over = div_tiny(jnp.maximum(0.0, sum_taken - sum_given - pool), sum_taken)
    unused = div_tiny(jnp.maximum(0.0, pool + sum_given - sum_taken), pool + sum_given)
    energy_loss = jnp.where(params.peer_energy_loss, jnp.maximum(0.0, -over), unused)
    autonomy = 1.0 - div_tiny(
        sum_transactions, sum_consumed + sum_stored + sum_given + sum_transactions
    )
    well_being = median(comfort)
    exclusion = jnp.mean((comfort < well_being / 2).astype(dtype))
    return jnp.stack(
        [
            (state.time % 24).astype(dtype) / 24,
            interp_unit(pool, bounds[0], bounds[1]),
            1.0 - hoover(comfort),
            energy_loss,
            autonomy,
            exclusion,
            well_being,
            over,
        ]
    ).astype(dtype)


def observe(state: SmartgridState, params: SmartgridParams) -> Array:
    """The stacked observation ``(n, 11)`` in :data:`OBSERVATION_FIELDS` order (the global
    part read from ``state.measures``)."""
    local = local_observation(state, params)
    shared = jnp.broadcast_to(state.measures, (local.shape[0], len(GLOBAL_FIELDS)))
    return jnp.concatenate([local, shared], axis=1)
