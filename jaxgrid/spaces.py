"""Observation and action spaces with jittable ``sample``, ``contains`` and ``distribution``.

Every space knows the distrax distribution its ``sample`` draws from, so a random
policy is ``space.distribution().sample(seed=key)`` and its entropy is a baseline for
free. Multi-agent spaces are ordinary spaces whose leading axis is the agent axis, for
example ``Box(-1, 1, (num_agents, act_dim))`` or ``Discrete(7, shape=(num_agents,))``.

Bounds may be NumPy arrays (constants) or JAX arrays computed from environment params,
so a space built inside ``jit`` or ``vmap`` works as well.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

import distrax
import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.types import Array, PRNGKey, float_dtype

_MASKED_LOGIT = -1e9  # logit of a masked choice: a row with no allowed choice stays uniform


class Space(abc.ABC):
    """A set of arrays of one shape and dtype."""

    shape: tuple[int, ...]
    dtype: jnp.dtype

    @abc.abstractmethod
    def distribution(self, mask: Any = None) -> distrax.Distribution:
        """The distribution ``sample`` draws from (restricted to ``mask`` where given)."""

    def sample(self, key: PRNGKey, mask: Any = None) -> Array:
        """Draw one element (jittable)."""
        return self.distribution(mask).sample(seed=key).astype(self.dtype)

    @abc.abstractmethod
    def contains(self, x: Any) -> Array:
        """Whether ``x`` has this space's shape and dtype and lies within its bounds."""

    @abc.abstractmethod
    def project(self, x: Array) -> tuple[Array, Array, Array]:
        """Map ``x`` into the space.

        Returns ``(x_in_space, clipped, nonfinite)`` where the two masks (shape of ``x``)
        flag entries that were outside the bounds and entries that were NaN or inf
        (replaced by 0, then clipped).
        """

    def _same_structure(self, x: Any) -> bool:
        return (
            hasattr(x, "shape")
            and tuple(x.shape) == self.shape
            and jnp.dtype(x.dtype) == jnp.dtype(self.dtype)
        )


def _is_concrete(a: Any) -> bool:
    return not isinstance(a, jax.core.Tracer)


class Box(Space):
    """A box ``[low, high]`` of real numbers.

    ``low`` and ``high`` broadcast to ``shape`` (given, or theirs). ``sample`` draws
    uniformly, so every bound must be finite to sample; an unbounded box still checks
    membership.
    """

    def __init__(self, low: Any, high: Any, shape: tuple[int, ...] | None = None, dtype=None):
        self.dtype = jnp.dtype(dtype) if dtype is not None else float_dtype()
        if not jnp.issubdtype(self.dtype, jnp.floating):
            raise ValueError(f"Box dtype must be a float dtype, got {self.dtype}")
        if shape is None:
            shape = jnp.broadcast_shapes(jnp.shape(low), jnp.shape(high))
        self.shape = tuple(int(s) for s in shape)
        for name, bound in (("low", low), ("high", high)):
            try:
                jnp.broadcast_shapes(jnp.shape(bound), self.shape)
            except ValueError:
                raise ValueError(
                    f"Box {name} of shape {jnp.shape(bound)} does not broadcast to {self.shape}"
                ) from None
        if _is_concrete(low) and _is_concrete(high):
            if np.any(np.isnan(np.asarray(low))) or np.any(np.isnan(np.asarray(high))):
                raise ValueError("Box bounds must not be NaN")
            if np.any(np.asarray(low) > np.asarray(high)):
                raise ValueError(f"Box needs low <= high, got low={low}, high={high}")
        self.low = low
        self.high = high

    def _bounds(self) -> tuple[Array, Array]:
        low = jnp.broadcast_to(jnp.asarray(self.low, self.dtype), self.shape)
        high = jnp.broadcast_to(jnp.asarray(self.high, self.dtype), self.shape)
        return low, high

    def distribution(self, mask: Any = None) -> distrax.Distribution:
        if mask is not None:
            raise ValueError("Box spaces take no action mask")
        if _is_concrete(self.low) and _is_concrete(self.high):
            if not (np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high))):
                raise ValueError("a Box with infinite bounds has no uniform distribution")
        low, high = self._bounds()
        return distrax.Independent(distrax.Uniform(low, high), len(self.shape))

    def contains(self, x: Any) -> Array:
        if not self._same_structure(x):
            return jnp.asarray(False)
        low, high = self._bounds()
        return jnp.all((x >= low) & (x <= high))

    def project(self, x: Array) -> tuple[Array, Array, Array]:
        low, high = self._bounds()
        x = jnp.asarray(x, self.dtype)
        nonfinite = ~jnp.isfinite(x)
        inside = jnp.clip(jnp.where(nonfinite, 0.0, x), low, high)
        return inside, (inside != x) & ~nonfinite, nonfinite

    def __repr__(self) -> str:
        return f"Box(low={self.low}, high={self.high}, shape={self.shape}, dtype={self.dtype})"


class MultiDiscrete(Space):
    """An array of choices where entry ``i`` takes values ``0 .. nvec[i]-1``."""

    def __init__(self, nvec: Any, dtype=jnp.int32):
        nvec = np.asarray(nvec, dtype=np.int64)
        if np.any(nvec < 1):
            raise ValueError(f"MultiDiscrete needs every nvec >= 1, got {nvec.tolist()}")
        self.nvec = nvec
        self.shape = tuple(nvec.shape)
        self.dtype = jnp.dtype(dtype)

    def distribution(self, mask: Any = None) -> distrax.Distribution:
        n_max = int(self.nvec.max())
        valid = np.arange(n_max) < self.nvec[..., None]
        if mask is not None:
            valid = valid & jnp.broadcast_to(mask, valid.shape)
        logits = jnp.where(valid, 0.0, _MASKED_LOGIT)
        return distrax.Independent(
            distrax.Categorical(logits=logits, dtype=self.dtype), len(self.shape)
        )

    def contains(self, x: Any) -> Array:
        if not self._same_structure(x):
            return jnp.asarray(False)
        return jnp.all((x >= 0) & (x < self.nvec))

    def project(self, x: Array) -> tuple[Array, Array, Array]:
        """Float actions are accepted (a policy's output, a NaN from a bug): each entry goes
        to the nearest choice, and one that was not a whole number (``2.7`` becomes 3)
        counts as clipped, like one outside ``0 .. nvec - 1``; NaN/inf become 0."""
        x = jnp.asarray(x)
        high = self.nvec - 1
        if jnp.issubdtype(x.dtype, jnp.floating):
            nonfinite = ~jnp.isfinite(x)
            x = jnp.clip(jnp.where(nonfinite, 0, x), -1, self.nvec)
            fractional = jnp.round(x) != x
            x = jnp.round(x)
        else:
            nonfinite = fractional = jnp.zeros(x.shape, bool)
        clipped = ((x < 0) | (x > high) | fractional) & ~nonfinite
        return jnp.clip(x, 0, high).astype(self.dtype), clipped, nonfinite

    def __repr__(self) -> str:
        return f"MultiDiscrete(nvec={self.nvec.tolist()}, dtype={self.dtype})"


class Discrete(MultiDiscrete):
    """Integers ``0 .. n-1``; with ``shape``, an array of independent such choices."""

    def __init__(self, n: int, shape: tuple[int, ...] = (), dtype=jnp.int32):
        if int(n) < 1:
            raise ValueError(f"Discrete needs n >= 1, got {n}")
        super().__init__(np.full(tuple(int(s) for s in shape), int(n)), dtype)
        self.n = int(n)

    def __repr__(self) -> str:
        return f"Discrete(n={self.n}, shape={self.shape}, dtype={self.dtype})"


class Dict(Space):
    """A dictionary of named sub-spaces; samples, masks and distributions are dicts too."""

    def __init__(self, spaces: Mapping[str, Space]):
        if not spaces:
            raise ValueError("Dict space needs at least one sub-space")
        self.spaces = dict(spaces)
        self.shape = ()
        self.dtype = None

    def __getitem__(self, name: str) -> Space:
        return self.spaces[name]

    def distribution(self, mask: Any = None) -> distrax.Distribution:
        mask = mask or {}
        return distrax.Joint({k: s.distribution(mask.get(k)) for k, s in self.spaces.items()})

    def sample(self, key: PRNGKey, mask: Any = None) -> dict[str, Array]:
        mask = mask or {}
        keys = jax.random.split(key, len(self.spaces))
        return {k: s.sample(kk, mask.get(k)) for kk, (k, s) in zip(keys, self.spaces.items())}

    def contains(self, x: Any) -> Array:
        if not isinstance(x, Mapping) or set(x) != set(self.spaces):
            return jnp.asarray(False)
        return jnp.all(jnp.stack([s.contains(x[k]) for k, s in self.spaces.items()]))

    def project(self, x: Any) -> tuple[Any, Any, Any]:
        if not isinstance(x, Mapping) or set(x) != set(self.spaces):
            raise ValueError(f"expected a dict with keys {sorted(self.spaces)}")
        out = {k: s.project(x[k]) for k, s in self.spaces.items()}
        return tuple({k: v[i] for k, v in out.items()} for i in range(3))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {s!r}" for k, s in self.spaces.items())
        return f"Dict({{{inner}}})"


def agent_space(space: Space, i: int) -> Space:
    """Agent ``i``'s share of a stacked space (leading axis = agents)."""
    if isinstance(space, Box):
        low, high = space._bounds()
        return Box(low[i], high[i], tuple(space.shape[1:]), space.dtype)
    if isinstance(space, MultiDiscrete):
        nvec = np.asarray(space.nvec)[i]
        if nvec.ndim == 0:
            return Discrete(int(nvec), dtype=space.dtype)
        return MultiDiscrete(nvec, space.dtype)
    if isinstance(space, Dict):
        return Dict({k: agent_space(s, i) for k, s in space.spaces.items()})
    raise TypeError(f"cannot split {space} by agent")
