"""Unit commitment with a purely continuous action (``tso118-continuous-v0``).

The same model as :class:`~jaxgrid.envs.tso.env.TSO`; the action is one Box ``(1, 2 n_gen)``
in [-1, 1] that Gaussian policies can emit: the first ``n_gen`` entries request each unit
on where positive (off at 0 or below), the last ``n_gen`` are the dispatch adjustment.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid import spaces
from jaxgrid.envs.tso.env import TSO
from jaxgrid.types import Array, float_dtype


class TSOContinuous(TSO):
    """:class:`TSO` with a Box action (see the module docstring)."""

    def action_space(self, params):
        return spaces.Box(-1.0, 1.0, (1, 2 * self.n_gen))

    def request(self, action) -> tuple[Array, Array]:
        """``(commit, adjust)``: positive first-half entries request a unit on."""
        return action[0, : self.n_gen] > 0, action[0, self.n_gen :]

    def encode(self, request: Array, adjust: Array):
        """The Box action for status ``request`` and adjustment ``adjust`` (each ``(n_gen,)``)."""
        half = jnp.where(request, 1.0, -1.0)
        return jnp.concatenate([half, adjust]).astype(float_dtype())[None]
