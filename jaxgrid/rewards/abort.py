"""Abort conditions: bounds on named state variables that terminate an episode.

An environment that supports them names its variables (``env.abort_names``, e.g.
``min_vm_pu``, ``max_vm_pu``, ``min_soc``) and computes them from a state
(``env.abort_values``); ``params.abort`` holds a lower and an upper bound per variable.
A step whose new state leaves a bound terminates the episode and reports
``info["abort_reason"]``, the index of the first variable out of its bounds (-1: none).
Bounds of ``-inf``/``+inf`` disable a condition, which is the default.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid.types import Array


@struct.dataclass
class AbortConditions:
    """Attributes:
    low, high: ``(k,)`` bounds of each named variable (``-inf``/``inf``: no bound).
    """

    low: Array
    high: Array

    @classmethod
    def create(cls, names: tuple[str, ...], **bounds: tuple[float, float]) -> AbortConditions:
        """Conditions for ``names`` with ``name=(low, high)`` bounds; the rest disabled."""
        unknown = set(bounds) - set(names)
        if unknown:
            raise ValueError(f"no abort variable named {sorted(unknown)}; available: {list(names)}")
        low = np.array([bounds.get(n, (-np.inf, np.inf))[0] for n in names], np.float64)
        high = np.array([bounds.get(n, (-np.inf, np.inf))[1] for n in names], np.float64)
        if np.any(np.isnan(low)) or np.any(np.isnan(high)) or np.any(low > high):
            raise ValueError(f"abort bounds need low <= high, got {bounds}")
        return cls(low=low, high=high)


def check_abort(values: Array, conditions: AbortConditions) -> tuple[Array, Array]:
    """``(terminated, reason)``: whether any value left its bounds, and the first one's index."""
    outside = (values < conditions.low) | (values > conditions.high)
    return jnp.any(outside), jnp.where(jnp.any(outside), jnp.argmax(outside), -1).astype(jnp.int32)
