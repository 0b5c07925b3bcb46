"""The local energy pool of each hour and the productions of the buildings."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxgrid.envs.smartgrid.types import RANDOM, REALISTIC, EnergyGenerator, SmartgridParams


def available_energy(key, generator: EnergyGenerator, total_need, t, max_need, dtype):
    """Energy of the pool at hour ``t`` (Wh, an integer value) given the current total need."""
    low = jnp.trunc(generator.lower * total_need).astype(jnp.int32)
    high = jnp.trunc(generator.upper * total_need).astype(jnp.int32)
    drawn = jax.random.randint(key, (), low, high + 1)
    entry = generator.series[t % generator.series.shape[0]]
    realistic = jnp.trunc(entry * max_need)
    return jnp.select(
        [generator.kind == RANDOM, generator.kind == REALISTIC],
        [drawn.astype(dtype), realistic.astype(dtype)],
        entry.astype(dtype),
    )


def productions(production_key, params: SmartgridParams, t, dtype):
    """Each agent's production at hour ``t`` (Wh): drawn per profile, shared by its agents.

    As in EthicalSmartGrid, a profile's production is a series of uniform integers in
    ``[0, production_high]`` that repeats with the profile; here the series is a function
    of the episode's ``production_key`` (``fold_in`` by profile and hour), so it is
    reproducible and never stored.
    """
    prof = params.profiles
    n_profiles = prof.needs.shape[0]
    hour = t % prof.length  # (n_profiles,)
    keys = jax.vmap(lambda p, h: jax.random.fold_in(jax.random.fold_in(production_key, p), h))(
        jnp.arange(n_profiles), hour
    )
    high = prof.production_high.astype(jnp.int32)
    drawn = jax.vmap(lambda k, hi: jax.random.randint(k, (), 0, hi + 1))(keys, high)
    explicit = prof.productions[jnp.arange(n_profiles), hour]
    per_profile = jnp.where(params.explicit_production, explicit, drawn.astype(explicit.dtype))
    return per_profile[params.agent_profile].astype(dtype)


def needs(params: SmartgridParams, t, dtype):
    """Each agent's need at hour ``t`` (Wh), from its profile's table."""
    prof = params.profiles
    hour = t % prof.length
    per_profile = prof.needs[jnp.arange(prof.needs.shape[0]), hour]
    return per_profile[params.agent_profile].astype(dtype)
