"""Type aliases and the default floating-point dtype shared by the whole library."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
PRNGKey = jax.Array
PyTree = Any
FLOAT32_MAX = float(np.finfo(np.float32).max)  # the largest finite float32, about 3.4e38


def float_dtype() -> jnp.dtype:
    """The default float dtype: float32, or float64 when ``jax_enable_x64`` is on."""
    return jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.float64))


def at_default_precision(tree):
    """``tree`` with every leaf a JAX array and every float leaf in :func:`float_dtype`
    (float32 data such as bundled profiles included, so that a float64 run is float64
    throughout); other leaves keep their dtype."""

    def cast(x):
        floating = np.issubdtype(np.asarray(x).dtype, np.floating)
        return jnp.asarray(x, float_dtype() if floating else None)

    return jax.tree_util.tree_map(cast, tree)
