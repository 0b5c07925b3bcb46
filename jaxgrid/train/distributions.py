"""Action distributions for bounded continuous and masked discrete actions (distrax).

- ``beta``: a Beta per action entry, scaled to ``[low, high]``; entries with
  ``low == high`` (masked) are fixed and carry no probability mass or entropy.
- ``gaussian``: a diagonal Gaussian with a state-independent log standard deviation;
  the sample is clipped to the bounds by the environment, the log-probability is of the
  raw sample (as in PureJaxRL).
- ``categorical``: logits with an optional mask of allowed choices.
"""

from __future__ import annotations

from typing import NamedTuple

import distrax
import jax
import jax.numpy as jnp

from jaxgrid.types import Array


class BoundedPolicy(NamedTuple):
    """Distribution over actions ``(..., n_agents, act_dim)`` within ``[low, high]``."""

    kind: str
    params: Array  # raw network output (..., n_agents, n_out)
    log_std: Array | None
    low: Array
    high: Array

    def _free(self):
        return self.high > self.low

    def _base(self):
        if self.kind == "beta":
            a, b = jnp.split(self.params, 2, axis=-1)
            return distrax.Beta(jax.nn.softplus(a) + 1.0, jax.nn.softplus(b) + 1.0)
        return distrax.Normal(self.params, jnp.exp(self.log_std))

    def sample(self, key) -> Array:
        raw = self._base().sample(seed=key)
        return self.to_action(raw), raw

    def to_action(self, raw: Array) -> Array:
        if self.kind == "beta":
            return self.low + (self.high - self.low) * raw
        return raw

    def log_prob(self, raw: Array) -> Array:
        """Log-probability of a raw sample, summed over free action entries: ``(..., n_agents)``."""
        if self.kind == "beta":
            raw = jnp.clip(raw, 1e-6, 1.0 - 1e-6)
        lp = self._base().log_prob(raw)
        return jnp.sum(jnp.where(self._free(), lp, 0.0), axis=-1)

    def entropy(self) -> Array:
        ent = jnp.broadcast_to(
            self._base().entropy(),
            jnp.broadcast_shapes(self.params.shape[:-1] + self.low.shape[-1:], self.low.shape),
        )
        return jnp.sum(jnp.where(self._free(), ent, 0.0), axis=-1)

    def mode(self) -> Array:
        if self.kind == "beta":
            a, b = jnp.split(self.params, 2, axis=-1)
            alpha, beta = jax.nn.softplus(a) + 1.0, jax.nn.softplus(b) + 1.0
            return self.to_action(alpha / (alpha + beta))  # the mean: smooth and inside the box
        return jnp.clip(self.params, self.low, self.high)


def n_outputs(kind: str, act_dim: int) -> int:
    """Network outputs per agent for a distribution over ``act_dim`` entries."""
    return 2 * act_dim if kind == "beta" else act_dim
