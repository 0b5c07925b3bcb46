"""Type aliases and the default floating-point dtype shared by the whole library."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

Array = jax.Array
PRNGKey = jax.Array
PyTree = Any


def float_dtype() -> jnp.dtype:
    """The default float dtype: float32, or float64 when ``jax_enable_x64`` is on."""
    return jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.float64))
