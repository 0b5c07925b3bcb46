"""Ethical Gardeners (the ``ethical-gardeners`` package) in JAX: one jittable step is one
full turn of the peer's AEC game.

**Agents.** ``n`` gardeners (``agent_0 ..``) on an ``H x W`` grid of ground and
obstacles, each with money and seeds of each of ``T`` flower types.

**State.** The grid (obstacles, pollution, flowers and their growth stages, the agent
each cell records) and each agent's position, money, seeds, flowers planted and
harvested and turns without income (:class:`~.types.GardenersState`).

**Action.** ``(n,)`` int32 in ``[0, 6 + T)``: ``UP``, ``DOWN``, ``LEFT``, ``RIGHT``,
``HARVEST``, ``WAIT``, ``PLANT_TYPE_0 ..`` (:mod:`.actions`). Out-of-range indices are
clipped (``info["action_clipped"]``); a masked action is refused as the peer refuses it
(``info["action_refused"]``).

**Transition.** The agents act one after the other in index order, each seeing what the
ones before it did (a ``lax.scan`` over agents); then the world updates once
(pollution at the flowers' current stages, then growth: :mod:`.world`).

**Observation.** ``{"observation": (n, H, W, 7) or (n, 2r + 1, 2r + 1, 7) in [0, 1],
"action_mask": (n, 6 + T) bool}`` after the turn (:mod:`jaxgrid.envs.gardeners.observation`); the mask is
the peer's and suits the trainer's masked categorical policy.

**Objectives.** ``ecology``, ``wellbeing``, ``biodiversity`` (:mod:`.rewards`), each
agent's as the peer hands them to it for its action of the turn: the first ``n - 1``
agents' right after their action, the last agent's after the world update. The default
reward is their mean (the peer's ``total``).

**Episode.** ``horizon`` turns, then truncated (the peer's ``num_iterations`` counts
agent steps: ``horizon = num_iterations / n``); never terminated.

**Info.** ``action_refused``, ``money`` and the peer's metrics (:mod:`.metrics`).

Differences from the package: the ``RANDOM_ONCE`` seed rule draws per episode from the
reset key (the package draws once per world); ``pollution_increment`` is honoured (the
package's cells always add 1, ignoring it: keep 1 for its dynamics); a random grid and
random seed returns come from the JAX key, never the package's NumPy stream.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid import spaces
from jaxgrid.env import Environment, Transition
from jaxgrid.envs.gardeners import observation
from jaxgrid.envs.gardeners.actions import act, action_mask, action_names
from jaxgrid.envs.gardeners.metrics import metrics
from jaxgrid.envs.gardeners.rewards import OBJECTIVES, biodiversity, ecology, impact, wellbeing
from jaxgrid.envs.gardeners.types import (
    MAX_SEED_RETURNS,
    MIN_SEED_RETURNS,
    NO_AGENT,
    RANDOM_ONCE,
    GardenersParams,
    GardenersState,
)
from jaxgrid.envs.gardeners.world import random_layout, update_world
from jaxgrid.types import float_dtype

OBSERVATIONS = ("total", "partial")


class Gardeners(Environment):
    """Gardeners planting and harvesting flowers on a polluted grid (see the module docstring).

    Args:
        default_params: the scenario.
        shape: ``(H, W)`` of the grid.
        num_agents, num_flower_types: ``n`` and ``T``.
        random_grid: draw obstacles and agent positions from the reset key
            (``params.obstacles_ratio``), else start from ``params.layout``.
        observation: ``"total"`` or ``"partial"`` (with ``view_radius``).
        horizon: turns per episode.
    """

    objective_names = OBJECTIVES
    cost_names = ()

    def __init__(
        self,
        default_params: GardenersParams,
        shape: tuple[int, int],
        num_agents: int,
        num_flower_types: int,
        random_grid: bool = True,
        observation: str = "partial",
        view_radius: int = 1,
        horizon: int = 500,
        name: str = "Gardeners",
    ):
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS}, got {observation!r}")
        self.shape = tuple(int(s) for s in shape)
        self.agents = tuple(f"agent_{i}" for i in range(num_agents))
        self.agent_types = ("gardener",) * num_agents
        self.action_names = action_names(num_flower_types)
        self.random_grid = bool(random_grid)
        self.observation_kind = observation
        self.view_radius = int(view_radius)
        self.horizon = int(horizon)
        self._default_params = default_params
        self._name = name

    @property
    def view_shape(self) -> tuple[int, int]:
        """Cells an agent sees: ``(H, W)`` or ``(2r + 1, 2r + 1)``."""
        if self.observation_kind == "total":
            return self.shape
        return (2 * self.view_radius + 1,) * 2

    def observation_names(self, params: GardenersParams) -> tuple[str, ...]:
        """The features of each viewed cell (the last axis of the grid view)."""
        return observation.FEATURES

    def action_space(self, params: GardenersParams) -> spaces.Discrete:
        return spaces.Discrete(len(self.action_names), (self.num_agents,))

    def observation_space(self, params: GardenersParams) -> spaces.Dict:
        n, a = self.num_agents, len(self.action_names)
        view = (n,) + self.view_shape + (len(observation.FEATURES),)
        return spaces.Dict(
            {
                "observation": spaces.Box(0.0, 1.0, view),
                "action_mask": spaces.MultiDiscrete(np.full((n, a), 2), jnp.bool_),
            }
        )

    def observe(self, state: GardenersState, params: GardenersParams):
        dtype = float_dtype()
        if self.observation_kind == "total":
            view = observation.total(state, params, dtype)
        else:
            view = observation.partial(state, params, self.view_radius, dtype)
        return {"observation": view, "action_mask": action_mask(state, params)}

    # -- the model -------------------------------------------------------------------

    def reset_env(self, key, params: GardenersParams):
        k_layout, k_seeds = jax.random.split(key)
        if self.random_grid:
            layout = random_layout(k_layout, params, self.shape, self.num_agents)
        else:
            layout = params.layout
        rule = params.seeds_returned
        once = jax.random.randint(k_seeds, (), MIN_SEED_RETURNS, MAX_SEED_RETURNS, jnp.int32)
        pos = layout.position
        dtype = float_dtype()
        state = GardenersState(
            obstacle=layout.obstacle,
            pollution=jnp.where(layout.obstacle, 0.0, params.initial_pollution).astype(dtype),
            flower_type=layout.flower_type,
            flower_stage=layout.flower_stage,
            occupant=jnp.full(self.shape, NO_AGENT, jnp.int32)
            .at[pos[:, 0], pos[:, 1]]
            .set(jnp.arange(self.num_agents, dtype=jnp.int32)),
            position=pos,
            money=params.money.astype(dtype),
            seeds=params.seeds,
            flowers_planted=jnp.zeros_like(params.seeds),
            flowers_harvested=jnp.zeros_like(params.seeds),
            turns_without_income=jnp.zeros(self.num_agents, jnp.int32),
            seeds_returned=jnp.where(rule == RANDOM_ONCE, once, rule).astype(jnp.int32),
            time=jnp.zeros((), jnp.int32),
        )
        return self.observe(state, params), state

    def transition(self, key, state: GardenersState, action, params: GardenersParams) -> Transition:
        def one_agent(world, xs):
            agent, chosen, k = xs
            after, refused = act(world, agent, chosen, k, params)
            kind, amount = impact(world, after, agent, chosen, params)
            rewards = (
                wellbeing(world, after, agent, chosen, params),
                biodiversity(after, agent, chosen, params),
            )
            return after, (refused, kind, amount) + rewards

        agents = jnp.arange(self.num_agents, dtype=jnp.int32)
        keys = jax.random.split(key, self.num_agents)
        acted, (refused, kind, amount, well, bio) = jax.lax.scan(
            one_agent, state, (agents, action, keys)
        )
        new = update_world(acted, params).replace(time=state.time + 1)
        # actions leave pollution alone, so each agent's ecology sees the turn's pollution,
        # the last agent's (rewarded after the world update) the updated one
        row, col = new.position[:, 0], new.position[:, 1]
        last = agents == self.num_agents - 1
        seen = jnp.where(last, new.pollution[row, col], state.pollution[row, col])
        dtype = float_dtype()
        reward_vector = jnp.stack([ecology(kind, amount, seen, params), well, bio], axis=1)
        n = self.num_agents
        return Transition(
            obs=self.observe(new, params),
            state=new,
            reward_vector=reward_vector.astype(dtype),
            costs=jnp.zeros((n, 0), dtype),
            terminated=jnp.zeros((), bool),
            truncated=new.time >= self.horizon,
            info={"action_refused": refused, "money": new.money, **metrics(new, params)},
        )

    def render(self, state: GardenersState, params: GardenersParams | None = None):
        """A ``(height, width, 3)`` uint8 picture of the grid: pollution, obstacles,
        flowers by type and growth, agents (see :func:`.viewer.render_grid`)."""
        from jaxgrid.envs.gardeners.viewer import render_grid

        return render_grid(self, state, self.default_params() if params is None else params)
