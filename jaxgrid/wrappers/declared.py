"""Observations and actions declared by name, the ETA Ctrl way: choose, scale and bound
what agents see and what they control.

An agent-facing value is ``(value + scale_add) * scale_mult`` of the environment's value,
for observations and actions alike (so an agent's action ``a`` reaches the environment as
``a / scale_mult - scale_add``).

- **Observations**: each :class:`ObservationEntry` names an entry of
  :meth:`~jaxgrid.env.Environment.observation_names`, or a pattern where ``*`` stands for
  any text (``zone_vm_pu[*]``: every entry of the zone). Agents see only the declared entries, in the order declared,
  scaled, and clipped to ``[low, high]`` (default: the environment's bounds, scaled).
- **Actions**: each :class:`ActionEntry` names one of ``env.action_names``. Once one
  action is declared every one must be: controlled by the agents within ``[low, high]``
  (agent units; default: the environment's bounds, scaled; never wider), or ``fixed`` at a
  value in the environment's units.

Rewards, costs, the critic's ``world_state`` and the episode are the environment's own.
Baselines: random actions in the declared space, and the environment's own baselines
(their actions rescaled) while observations are not declared — those read the
environment's observation entries.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from jaxgrid import spaces
from jaxgrid.env import Environment, Transition
from jaxgrid.rollout import is_controller
from jaxgrid.wrappers.base import Wrapper


@dataclasses.dataclass(frozen=True)
class ObservationEntry:
    """One declared observation: ``name`` (``*`` matches any text), bounds in agent units."""

    name: str
    low: float | None = None
    high: float | None = None
    scale_add: float = 0.0
    scale_mult: float = 1.0


@dataclasses.dataclass(frozen=True)
class ActionEntry:
    """One declared action: controlled within ``[low, high]`` (agent units) or ``fixed``
    (environment units)."""

    name: str
    low: float | None = None
    high: float | None = None
    scale_add: float = 0.0
    scale_mult: float = 1.0
    fixed: float | None = None


class DeclaredSpaces(Wrapper):
    """``env`` with the observations and actions of ``observations`` and ``actions``
    (either may be empty: that side is left as it is). Names are resolved against
    ``params`` (default: the environment's defaults); a bad declaration is a
    ``ValueError`` naming the entry."""

    def __init__(
        self,
        env: Environment,
        observations: Sequence[ObservationEntry] = (),
        actions: Sequence[ActionEntry] = (),
        params=None,
    ):
        super().__init__(env)
        params = env.default_params() if params is None else params
        self._see = _ObservationMap(env, params, observations) if observations else None
        self._act = _ActionMap(env, params, actions) if actions else None

    # -- names and spaces ----------------------------------------------------------------

    @property
    def action_names(self):
        return self.env.action_names if self._act is None else self._act.names

    def observation_names(self, params) -> tuple[str, ...]:
        return self.env.observation_names(params) if self._see is None else self._see.names

    def observation_space(self, params):
        inner = self.env.observation_space(params)
        if self._see is None:
            return inner
        if isinstance(inner, spaces.Dict):
            return spaces.Dict(
                {**inner.spaces, "observation": self._see.space(inner["observation"])}
            )
        return self._see.space(inner)

    def action_space(self, params):
        inner = self.env.action_space(params)
        return inner if self._act is None else self._act.space(inner)

    # -- the model -----------------------------------------------------------------------

    def _observe(self, obs):
        if self._see is None:
            return obs
        if isinstance(obs, dict):
            return {**obs, "observation": self._see(obs["observation"])}
        return self._see(obs)

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return self._observe(obs), state

    def observe(self, state, params):
        return self._observe(self.env.observe(state, params))

    def transition(self, key, state, action, params) -> Transition:
        if self._act is not None:
            inner = self.env.action_space(params)
            action, _, _ = inner.project(self._act.to_env(action, inner))
        tr = self.env.transition(key, state, action, params)
        return tr._replace(obs=self._observe(tr.obs))

    def baselines(self, params) -> dict:
        space = self.action_space(params)
        out = {"random": lambda key, obs: space.sample(key)}
        if self._see is not None:
            return out
        inner = {n: p for n, p in self.env.baselines(params).items() if not is_controller(p)}
        if self._act is None:
            return {**inner, **out}
        to_agent = self._act.to_agent
        adapted = {
            name: (lambda key, obs, p=policy: jnp.clip(to_agent(p(key, obs)), *space._bounds()))
            for name, policy in inner.items()
            if name != "random"
        }
        return {**adapted, **out}


def _scaled_bounds(low, high, add, mult):
    """The interval ``[low, high]`` mapped by ``(x + add) * mult`` (``mult`` may be < 0)."""
    a, b = (low + add) * mult, (high + add) * mult
    return jnp.minimum(a, b), jnp.maximum(a, b)


class _ObservationMap:
    """Selection, scaling and clipping of the declared observation entries."""

    def __init__(self, env, params, entries: Sequence[ObservationEntry]):
        available = list(env.observation_names(params))
        index, names, rows = [], [], []
        for i, entry in enumerate(entries):
            _check_scale(f"observations[{i}]", entry)
            pattern = re.compile(".*".join(map(re.escape, entry.name.split("*"))))
            matched = [n for n in available if pattern.fullmatch(n)]
            if not matched:
                raise ValueError(
                    f"observations[{i}].name: {entry.name!r} is not an observation entry of "
                    f"{env.name}; expected one of {_shortlist(available)}"
                )
            for name in matched:
                if name in names:
                    raise ValueError(f"observations[{i}].name: {name!r} is declared twice")
                index.append(available.index(name))
                names.append(name)
                rows.append(entry)
        self.names = tuple(names)
        # int32, not NumPy's int64: JAX (0.10) caches the index it derived from a NumPy
        # index in a float32 trace, and a later float64 trace (jax.enable_x64) then adds
        # an int64 offset to that cached int32 index and fails.
        self.index = np.asarray(index, dtype=np.int32)
        self.add = np.array([e.scale_add for e in rows])
        self.mult = np.array([e.scale_mult for e in rows])
        self.low = np.array([-np.inf if e.low is None else e.low for e in rows])
        self.high = np.array([np.inf if e.high is None else e.high for e in rows])
        self.given_low = np.array([e.low is not None for e in rows])
        self.given_high = np.array([e.high is not None for e in rows])

    def space(self, inner: spaces.Space) -> spaces.Box:
        if not isinstance(inner, spaces.Box):
            raise ValueError(f"declared observations need Box observations, got {inner}")
        low, high = (b[:, self.index] for b in inner._bounds())
        low, high = _scaled_bounds(low, high, self.add, self.mult)
        low = jnp.where(self.given_low, self.low, low)
        high = jnp.where(self.given_high, self.high, high)
        return spaces.Box(low, high, (inner.shape[0], len(self.names)), inner.dtype)

    def __call__(self, obs):
        dtype = obs.dtype
        x = (obs[:, self.index] + self.add.astype(dtype)) * self.mult.astype(dtype)
        return jnp.clip(x, self.low.astype(dtype), self.high.astype(dtype))


class _ActionMap:
    """The controlled action entries in agent units, and the fixed ones."""

    def __init__(self, env, params, entries: Sequence[ActionEntry]):
        inner = env.action_space(params)
        if not isinstance(inner, spaces.Box) or len(inner.shape) != 2 or env.action_names is None:
            raise ValueError(
                f"declared actions need named Box actions (num_agents, n); {env.name} has {inner}"
            )
        available = list(env.action_names)
        env_low, env_high = (np.asarray(b) for b in inner._bounds())
        seen: dict[str, int] = {}
        controlled, fixed = [], {}
        for i, entry in enumerate(entries):
            where = f"actions[{i}]"
            if entry.name not in available:
                raise ValueError(
                    f"{where}.name: {entry.name!r} is not an action of {env.name}; "
                    f"expected one of {available}"
                )
            if entry.name in seen:
                raise ValueError(f"{where}.name: {entry.name!r} is declared twice")
            seen[entry.name] = i
            j = available.index(entry.name)
            if entry.fixed is not None:
                if entry.low is not None or entry.high is not None:
                    raise ValueError(f"{where}: a fixed action takes no low or high")
                if not np.all((env_low[:, j] <= entry.fixed) & (entry.fixed <= env_high[:, j])):
                    raise ValueError(
                        f"{where}.fixed: {entry.fixed} is outside {entry.name!r}'s range "
                        f"[{env_low[:, j].min():g}, {env_high[:, j].max():g}]"
                    )
                fixed[j] = entry.fixed
                continue
            _check_scale(where, entry)
            controlled.append((j, entry))
        missing = [n for n in available if n not in seen]
        if missing:
            raise ValueError(
                f"actions: {missing} not declared; once actions are declared, each of "
                f"{available} must be controlled (low/high) or fixed"
            )
        if not controlled:
            raise ValueError("actions: every action is fixed; declare at least one without fixed")
        self.names = tuple(entry.name for _, entry in controlled)
        self.index = np.array([j for j, _ in controlled])
        self.add = np.array([e.scale_add for _, e in controlled])
        self.mult = np.array([e.scale_mult for _, e in controlled])
        self.fixed = np.zeros(len(available))
        for j, value in fixed.items():
            self.fixed[j] = value
        low, high = (
            np.array(b)
            for b in _scaled_bounds(
                env_low[:, self.index], env_high[:, self.index], self.add, self.mult
            )
        )
        for k, (_, entry) in enumerate(controlled):
            where = f"actions[{seen[entry.name]}]"
            for side, value in (("low", entry.low), ("high", entry.high)):
                if value is None:
                    continue
                if not np.all((low[:, k] - 1e-9 <= value) & (value <= high[:, k] + 1e-9)):
                    raise ValueError(
                        f"{where}.{side}: {value} is outside {entry.name!r}'s range in agent "
                        f"units [{low[:, k].min():g}, {high[:, k].max():g}]"
                    )
            if entry.low is not None:
                low[:, k] = entry.low
            if entry.high is not None:
                high[:, k] = entry.high
            if np.any(low[:, k] > high[:, k]):
                raise ValueError(f"{where}: expected low <= high, got [{entry.low}, {entry.high}]")
        self.low, self.high = low, high

    def space(self, inner: spaces.Box) -> spaces.Box:
        return spaces.Box(self.low, self.high, (inner.shape[0], len(self.names)), inner.dtype)

    def to_env(self, action, inner: spaces.Box):
        dtype = action.dtype
        values = action / self.mult.astype(dtype) - self.add.astype(dtype)
        full = jnp.broadcast_to(jnp.asarray(self.fixed, dtype), inner.shape)
        return full.at[:, self.index].set(values)

    def to_agent(self, env_action):
        dtype = env_action.dtype
        return (env_action[:, self.index] + self.add.astype(dtype)) * self.mult.astype(dtype)


def _check_scale(where: str, entry) -> None:
    values = (entry.scale_add, entry.scale_mult, entry.low, entry.high)
    if not all(v is None or np.isfinite(v) for v in values):
        raise ValueError(f"{where}: numbers must be finite, got {entry}")
    if entry.scale_mult == 0:
        raise ValueError(f"{where}.scale_mult: must not be 0")
    if entry.low is not None and entry.high is not None and entry.low > entry.high:
        raise ValueError(f"{where}: expected low <= high, got [{entry.low}, {entry.high}]")


def _shortlist(names: list[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}] ({len(names)} entries)"
