"""Counter-based random integers from a key: cheap, reproducible, never stored.

For exogenous series that an episode draws once and reads hour by hour (a building's
production), storing a year of draws per environment costs memory and calling threefry
per value costs time. Here a value is a pure function of the episode's key and its
counters (profile, hour), mixed by MurmurHash3's 32-bit finaliser, a well-tested
avalanche mixer: the same key and counters always give the same value.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.types import Array, PRNGKey

# NumPy constants: a jnp constant would start JAX's backend at import, which must wait
# for jax.distributed.initialize on several hosts
_GOLDEN = np.uint32(0x9E3779B9)
_C1, _C2 = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)


def _fmix32(x):
    x = x ^ (x >> 16)
    x = x * _C1
    x = x ^ (x >> 13)
    x = x * _C2
    return x ^ (x >> 16)


def hash_bits(key: PRNGKey, a, b) -> Array:
    """32 pseudo-random bits (uint32) for counters ``a`` and ``b`` (broadcast) under ``key``."""
    words = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    words = words.astype(jnp.uint32).reshape(-1)
    a = jnp.asarray(a).astype(jnp.uint32)
    b = jnp.asarray(b).astype(jnp.uint32)
    x = _fmix32(words[-1] ^ (a * _GOLDEN) ^ _fmix32(b + _C2))
    return _fmix32(x ^ words[0])


def hash_randint(key: PRNGKey, a, b, high) -> Array:
    """Uniform integers in ``[0, high]`` (int32) for counters ``a``, ``b`` (``high`` < 2**24)."""
    u = (hash_bits(key, a, b) >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)
    return jnp.floor(u * (jnp.asarray(high, jnp.float32) + 1.0)).astype(jnp.int32)
