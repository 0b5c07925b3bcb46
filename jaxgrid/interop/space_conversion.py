"""jaxgrid spaces as Gymnasium spaces (Gymnasium's spaces are PettingZoo's too)."""

from __future__ import annotations

import gymnasium
import numpy as np

from jaxgrid import spaces


def to_gymnasium(space: spaces.Space) -> gymnasium.spaces.Space:
    """The Gymnasium space of ``space``, with NumPy bounds (one agent's share of a stacked
    space comes from :func:`jaxgrid.spaces.agent_space`)."""
    if isinstance(space, spaces.Box):
        low, high = (np.asarray(b, space.dtype) for b in space._bounds())
        return gymnasium.spaces.Box(low, high, low.shape, np.dtype(space.dtype))
    if isinstance(space, spaces.Discrete):
        return gymnasium.spaces.Discrete(space.n)
    if isinstance(space, spaces.MultiDiscrete) and np.dtype(space.dtype) == np.bool_:
        # a mask: PettingZoo and Gymnasium carry masks as int8 MultiBinary
        return gymnasium.spaces.MultiBinary(np.shape(space.nvec))
    if isinstance(space, spaces.MultiDiscrete):
        return gymnasium.spaces.MultiDiscrete(space.nvec, dtype=np.dtype(space.dtype))
    if isinstance(space, spaces.Dict):
        return gymnasium.spaces.Dict({k: to_gymnasium(s) for k, s in space.spaces.items()})
    raise TypeError(f"no Gymnasium equivalent for {space}")
