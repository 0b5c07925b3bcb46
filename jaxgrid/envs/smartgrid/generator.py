"""The local energy pool of each hour and the productions of the buildings."""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.envs.smartgrid.types import RANDOM, REALISTIC, EnergyGenerator, SmartgridParams
from jaxgrid.hashing import hash_bits, hash_randint
from jaxgrid.numerics import one_hot_take

POOL_STREAM = 0x706F6F6C  # counter that separates pool draws from productions


def available_energy(key, generator: EnergyGenerator, total_need, t, max_need, dtype):
    """Energy of the pool at hour ``t`` (Wh, an integer value) given the current total need.

    A random pool is a uniform integer in ``[int(lower * need), int(upper * need)]``
    (24 random bits hashed from ``key`` and the hour: ranges of up to millions of Wh stay
    practically unbiased).
    """
    low = jnp.trunc(generator.lower * total_need)
    high = jnp.trunc(generator.upper * total_need)
    u = (hash_bits(key, t, POOL_STREAM) >> 8).astype(dtype) * (2.0**-24)
    drawn = low + jnp.floor(u * (high - low + 1.0))
    entry = generator.series[t % generator.series.shape[0]]
    realistic = jnp.trunc(entry * max_need)
    return jnp.select(
        [generator.kind == RANDOM, generator.kind == REALISTIC],
        [drawn, realistic.astype(dtype)],
        entry.astype(dtype),
    )


def productions(production_key, params: SmartgridParams, t, dtype):
    """Each agent's production at hour ``t`` (Wh): drawn per profile, shared by its agents.

    As in EthicalSmartGrid, a profile's production is a series of uniform integers in
    ``[0, production_high]`` that repeats with the profile; here the series is a function
    of the episode's ``production_key``, hashed by profile and hour
    (:mod:`jaxgrid.hashing`), so it is reproducible and never stored.
    """
    prof = params.profiles
    n_profiles = prof.needs.shape[0]
    hour = t % prof.length  # (n_profiles,)
    drawn = hash_randint(production_key, jnp.arange(n_profiles), hour, prof.production_high)
    explicit = prof.productions[jnp.arange(n_profiles), hour]
    per_profile = jnp.where(params.explicit_production, explicit, drawn.astype(explicit.dtype))
    return one_hot_take(per_profile.astype(dtype), params.agent_profile)


def needs(params: SmartgridParams, t, dtype):
    """Each agent's need at hour ``t`` (Wh), from its profile's table."""
    prof = params.profiles
    hour = t % prof.length
    per_profile = prof.needs[jnp.arange(prof.needs.shape[0]), hour]
    return one_hot_take(per_profile.astype(dtype), params.agent_profile)
