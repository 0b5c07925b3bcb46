"""Running mean and variance for normalisation (the trainer's learner state, the
:class:`~jaxgrid.wrappers.NormalizeObservation` wrapper's environment state).

:class:`RunningStats` merges batch moments into running ones (Chan et al.'s parallel
algorithm). Observations are normalised to ``(x - mean) / std``, clipped to +-10 by
default; the trainer divides rewards by the standard deviation of the running discounted
return, as in Stable-Baselines3's ``VecNormalize``.
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from jaxgrid.types import Array

EPS = 1e-8
CLIP = 10.0


@struct.dataclass
class RunningStats:
    """Mean and variance of everything merged so far, entry by entry; ``count`` samples
    (starting from a tiny prior count, so that the first sample needs no special case)."""

    mean: Array
    var: Array
    count: Array

    @classmethod
    def create(cls, shape, dtype=jnp.float32) -> RunningStats:
        return cls(
            mean=jnp.zeros(shape, dtype), var=jnp.ones(shape, dtype), count=jnp.asarray(EPS, dtype)
        )

    def update(self, batch: Array) -> RunningStats:
        """Merge ``batch`` (leading axes: samples) into the statistics."""
        axes = tuple(range(batch.ndim - self.mean.ndim))
        n = jnp.asarray(jnp.prod(jnp.array([batch.shape[a] for a in axes])), self.mean.dtype)
        mean = jnp.mean(batch, axis=axes)
        var = jnp.var(batch, axis=axes)
        total = self.count + n
        delta = mean - self.mean
        new_mean = self.mean + delta * n / total
        m2 = self.var * self.count + var * n + delta**2 * self.count * n / total
        return RunningStats(mean=new_mean, var=m2 / total, count=total)

    def normalize(self, x: Array, epsilon: float = EPS, clip: float = CLIP) -> Array:
        """``(x - mean) / sqrt(var + epsilon)``, clipped to ``[-clip, clip]``."""
        return jnp.clip((x - self.mean) / jnp.sqrt(self.var + epsilon), -clip, clip)
