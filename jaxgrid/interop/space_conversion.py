"""jaxgrid spaces as Gymnasium spaces (Gymnasium's spaces are PettingZoo's too)."""

from __future__ import annotations

import gymnasium
import numpy as np

from jaxgrid import spaces


def to_gymnasium(space: spaces.Space, index: tuple = ()) -> gymnasium.spaces.Space:
    """The Gymnasium space of ``space``, or of its entry ``space[index]`` along the leading
    (agent) axes, with NumPy bounds."""
    if isinstance(space, spaces.Box):
        low, high = (np.asarray(b, space.dtype)[index] for b in space._bounds())
        return gymnasium.spaces.Box(low, high, low.shape, np.dtype(space.dtype))
    if isinstance(space, spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec)[index]
        if nvec.ndim == 0:
            return gymnasium.spaces.Discrete(int(nvec))
        return gymnasium.spaces.MultiDiscrete(nvec, dtype=np.dtype(space.dtype))
    if isinstance(space, spaces.Dict):
        return gymnasium.spaces.Dict({k: to_gymnasium(s, index) for k, s in space.spaces.items()})
    raise TypeError(f"no Gymnasium equivalent for {space}")
