"""The environment contract shared by every jaxgrid environment.

```python
env, params = jaxgrid.make("voltage33-v0")
obs, state = env.reset(key, params)
obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)
```

- ``state`` and ``params`` are immutable pytrees. Every number a scenario may vary is a
  leaf of ``params`` (so ``vmap`` over params sweeps scenarios); sizes that fix shapes
  (agents, buses, horizon) are static attributes of the environment object.
- Every environment is multi-agent with stacked arrays: ``obs`` ``(num_agents, obs_dim)``
  (or a dict of such arrays), ``action`` ``(num_agents, act_dim)`` or ``(num_agents,)``,
  ``reward`` ``(num_agents,)``, ``terminated``/``truncated`` scalar booleans.
- ``info["reward_vector"]`` ``(num_agents, n_objectives)`` holds one column per
  ``env.objective_names``; ``reward`` is its scalarisation by ``params.scalarisation``.
  ``info["objective_mask"]`` says which objectives are active (schedules can switch them).
- ``info["costs"]`` ``(num_agents, n_costs)`` holds one column per ``env.cost_names``;
  a constraint that concerns the whole network (a voltage band) is charged to every agent.
  Costs never enter the reward unless the scalarisation sets ``cost_weights``: then the
  reward is less ``info["cost_penalty"]``.
- Actions are sanitised: NaN/inf entries become 0, out-of-range entries are clipped to
  the action space, and a float given for a discrete choice goes to the nearest choice
  (a fraction such as 2.7 counts as clipped; the dtype is never refused, so a policy's
  float output works); ``info["action_nonfinite"]`` and ``info["action_clipped"]`` count
  them per agent.
- Params are validated on the host (:mod:`jaxgrid.validation`) by ``jaxgrid.make``,
  scenario files, :meth:`Environment.with_scalarisation` and the trainer: finite, in
  physical range, float32-representable.
- Optional abort conditions (``env.abort_names``, ``params.abort``) terminate an episode
  when a named state variable leaves its bounds; ``info["abort_reason"]`` says which.
- Physics that fails is an event, never a number. An environment whose step solves a
  power flow reports a solve that did not converge (voltage collapse: the loading has
  no solution) as ``Transition.failed``; the step then terminates the episode,
  ``info["power_flow_failed"]`` is True, the only cost is ``power_flow`` = 1 (a column of
  ``env.cost_names``), every objective is 0 and the reward is the documented, bounded
  ``-`` :meth:`Environment.failure_penalty` (less any cost penalty) instead of anything
  computed from the failed solve: ``params.power_flow_penalty`` for the failed step and
  for every step the episode loses, so that ending an episode this way never beats
  continuing at ``-power_flow_penalty`` a step (gym-ANM charges a terminal state the
  worst reward for all the steps it cuts off, in the same spirit). The environment keeps
  its state and observation free of the failed numbers
  (:func:`~jaxgrid.grid.solvers.hold_failed`). ``info["steps_lost"]`` counts the steps
  the failure cuts off, the failed one included (0 on every other step), so that a
  learner can charge its constraint costs for them as the penalty charges the reward.
- ``step`` auto-resets: it splits ``key`` into ``(key_step, key_reset)``, computes both
  ``step_env(key_step, ...)`` and ``reset_env(key_reset, params)`` and selects the reset
  when the episode ended. ``info["final_observation"]`` is the observation before the
  reset, so a time-limit truncation can bootstrap from it.
- ``reset``, ``step_env`` and ``step`` are jitted once per environment object, so an
  eager call runs one compiled program (inside a caller's ``jit``/``vmap``/``grad`` they
  are traced into the caller's program).
- ``reset``, ``step_env`` and ``step`` trace every matrix product at the dtype's full
  precision (:func:`~jaxgrid.numerics.full_precision`): on GPUs float32 products would
  otherwise run in TF32, too coarse for the power-flow sweeps.

A subclass defines the model: ``default_params``, the spaces, ``reset_env``, ``observe``
and ``transition`` (one step with an already-sanitised action). The base class adds
sanitising, scalarisation and auto-reset, so no environment repeats them.
"""

from __future__ import annotations

import abc
from typing import Any, Generic, NamedTuple, TypeVar

import jax
import jax.numpy as jnp

from jaxgrid import spaces
from jaxgrid.gc_pause import gc_paused
from jaxgrid.masked import masked_apply
from jaxgrid.numerics import full_precision
from jaxgrid.rewards.abort import check_abort
from jaxgrid.rewards.scalarise import cost_penalty, scalarise
from jaxgrid.types import Array, PRNGKey, PyTree
from jaxgrid.validation import validate_params

TState = TypeVar("TState")
TParams = TypeVar("TParams")


class Transition(NamedTuple):
    """What a model step returns before the contract's bookkeeping.

    Attributes:
        obs: observation after the step.
        state: state after the step.
        reward_vector: ``(num_agents, n_objectives)`` objective values.
        costs: ``(num_agents, n_costs)`` constraint costs (>= 0 by convention).
        terminated: ``()`` bool, the episode reached a terminal state.
        truncated: ``()`` bool, the episode was cut (time limit).
        info: extra named diagnostics (fixed structure across steps).
        objective_mask: ``(num_agents, n_objectives)`` bool, active objectives
            (``None``: all active).
        failed: ``()`` bool, the step's physics failed (a power flow that did not
            converge); ``None`` for environments without such physics. See
            :meth:`Environment.step_env` for what a failed step returns.
    """

    obs: PyTree
    state: PyTree
    reward_vector: Array
    costs: Array
    terminated: Array
    truncated: Array
    info: dict[str, Any]
    objective_mask: Array | None = None
    failed: Array | None = None


POWER_FLOW = (
    "power_flow"  # the cost of a failed power flow, in every feeder environment's cost_names
)


class Environment(abc.ABC, Generic[TState, TParams]):
    """Base class of all jaxgrid environments (see the module docstring for the contract).

    Subclasses set ``agents``, ``agent_types``, ``objective_names``, ``cost_names`` and
    ``horizon`` (steps per episode), name their action entries (``action_names``) and
    observation entries (:meth:`observation_names`) and implement the abstract methods. Their params
    carry a :class:`jaxgrid.rewards.Scalarisation`, in a ``scalarisation`` field unless
    :meth:`scalarisation` says otherwise.
    """

    agents: tuple[str, ...]
    agent_types: tuple[str, ...]
    objective_names: tuple[str, ...]
    cost_names: tuple[str, ...]
    horizon: int
    abort_names: tuple[str, ...] = ()
    action_names: tuple[str, ...] | None = None  # an agent's action entries (or choices)
    # relative accuracy of an iterative solver a step runs to a tolerance (an optimisation
    # frozen once converged), which batching may move by more than round-off; None: none
    solver_rtol: float | None = None

    def observation_names(self, params: TParams) -> tuple[str, ...]:
        """Names of an agent's observation entries (the last axis of the stacked
        observation, or of its ``"observation"`` entry), so that scenario files and exports
        can name them."""
        raise NotImplementedError(f"{self.name} does not name its observation entries")

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    forecast_names: tuple[str, ...] = ()  # exogenous series a forecast can show, with units
    _name: str | None = None  # set by environments built under a registered name
    _default_params: Any = None  # set by environments given their defaults when built

    @property
    def name(self) -> str:
        """The name the environment was built under, else its class name."""
        return self._name or type(self).__name__

    def default_params(self) -> TParams:
        """The environment's default scenario (``self._default_params`` unless overridden)."""
        if self._default_params is None:
            raise NotImplementedError(
                f"{type(self).__name__}: set self._default_params or override default_params()"
            )
        return self._default_params

    # -- the model, defined by each environment -------------------------------------

    @abc.abstractmethod
    def observation_space(self, params: TParams) -> spaces.Space:
        """Space of the stacked observation ``(num_agents, ...)``."""

    @abc.abstractmethod
    def action_space(self, params: TParams) -> spaces.Space:
        """Space of the stacked action ``(num_agents, ...)``."""

    @abc.abstractmethod
    def reset_env(self, key: PRNGKey, params: TParams) -> tuple[PyTree, TState]:
        """Initial ``(obs, state)`` of an episode, drawn from ``key``."""

    @abc.abstractmethod
    def observe(self, state: TState, params: TParams) -> PyTree:
        """The stacked observation of ``state``."""

    @abc.abstractmethod
    def transition(
        self, key: PRNGKey, state: TState, action: PyTree, params: TParams
    ) -> Transition:
        """One step of the model with an action already inside the action space."""

    def scalarisation(self, params: TParams):
        """The :class:`~jaxgrid.rewards.Scalarisation` in ``params`` (its ``scalarisation`` field)."""
        return params.scalarisation

    def with_scalarisation(self, params: TParams, scalarisation) -> TParams:
        """``params`` with ``scalarisation`` in the place :meth:`scalarisation` reads,
        validated (:func:`~jaxgrid.validation.validate_params`; traced leaves are skipped)."""
        params = params.replace(scalarisation=scalarisation)
        validate_params(self, params)
        return params

    def baselines(self, params: TParams) -> dict[str, Any]:
        """Reference policies ``policy(key, obs) -> action`` by name; ``random`` for every env
        (uniform over the actions the observation's ``action_mask`` allows, where it has one).
        A baseline that needs the state (model-predictive control) is a
        :class:`~jaxgrid.rollout.Controller` instead."""
        space = self.action_space(params)

        def random(key, obs):
            return space.sample(key, obs.get("action_mask") if isinstance(obs, dict) else None)

        return {"random": random}

    def oracle_return(self, params: TParams, state: TState) -> float | None:
        """The best return (mean over agents) an episode from ``state`` can earn with
        perfect foresight, or ``None`` where no oracle exists. Runs on the host, untraced."""
        return None

    def policy_metrics(self, policy, params: TParams, key, episodes: int) -> dict | None:
        """Metrics of a trained ``policy(key, obs) -> action`` that need more than its own
        episodes (a market's ε-Nash check), on held-out days, as JSON-ready numbers; or
        ``None`` where the environment has none. Runs on the host, around compiled
        rollouts; ``jaxgrid eval`` reports them beside each seed's results."""
        return None

    def render(self, state: TState, params: TParams | None = None, step: int | None = None):
        """A ``(height, width, 3)`` uint8 picture of ``state``, titled with ``step`` (the
        steps of its episode; default ``state.time`` where the state has it): the feeder
        coloured by bus voltage with the devices marked (feeder environments), else each
        agent's observation. Drawn on the host with matplotlib; not jittable."""
        from jaxgrid.viz import render_state

        params = self.default_params() if params is None else params
        return render_state(self, state, params, step)

    def abort_values(self, state: TState, params: TParams) -> Array:
        """``(len(abort_names),)`` values of the abort variables in ``state``."""
        raise NotImplementedError(f"{self.name} names abort variables but does not compute them")

    def world_state(self, state: TState, params: TParams) -> Array:
        """A critic's global view ``(world_dim,)``; by default all observations, flattened."""
        leaves = jax.tree_util.tree_leaves(self.observe(state, params))
        return jnp.concatenate([jnp.ravel(x).astype(jnp.result_type(float)) for x in leaves])

    def exogenous_ahead(self, state: TState, params: TParams, steps: Array) -> Array:
        """``(len(steps), len(forecast_names))`` the exogenous series (loads, PV, prices:
        :attr:`forecast_names`) ``steps`` steps after the inputs of the state's next step,
        as they will be; :class:`~jaxgrid.wrappers.Forecast` adds forecast errors."""
        raise NotImplementedError(f"{self.name} has no exogenous series to forecast")

    # -- the contract, shared by all environments -------------------------------------

    @gc_paused
    @full_precision
    def reset(self, key: PRNGKey, params: TParams | None = None) -> tuple[PyTree, TState]:
        """Start an episode: ``(obs, state)``."""
        if params is None:
            params = self.default_params()
        return self._compiled("reset_env")(key, params)

    @gc_paused
    @full_precision
    def step_env(
        self, key: PRNGKey, state: TState, action: PyTree, params: TParams | None = None
    ) -> tuple[PyTree, TState, Array, Array, Array, dict[str, Any]]:
        """One step without auto-reset: ``(obs, state, reward, terminated, truncated, info)``."""
        if params is None:
            params = self.default_params()
        return self._compiled("_step_env")(key, state, action, params)

    def _step_env(self, key, state, action, params):
        action, clipped, nonfinite = self._sanitise(action, params)
        tr = self.transition(key, state, action, params)
        mask = tr.objective_mask
        if mask is None:
            mask = jnp.ones(tr.reward_vector.shape, bool)
        scalarisation = self.scalarisation(params)
        reward_vector, costs, terminated = tr.reward_vector, tr.costs, tr.terminated
        info = dict(tr.info)
        if tr.failed is not None:
            reward_vector, costs = self._failure_outcome(tr.failed, reward_vector, costs)
            terminated = terminated | tr.failed
            info["power_flow_failed"] = tr.failed
            info["steps_lost"] = jnp.where(tr.failed, self.steps_lost(state, params), 0).astype(
                jnp.int32
            )
        reward = scalarise(reward_vector, mask, scalarisation)
        if tr.failed is not None:
            penalty = jnp.asarray(self.failure_penalty(state, params), reward.dtype)
            reward = jnp.where(tr.failed, -penalty, reward)
        if scalarisation.cost_weights is not None:
            n = jnp.shape(scalarisation.cost_weights)[-1]
            if n != len(self.cost_names):
                raise ValueError(
                    f"{self.name}: cost_weights has {n} entries; the costs are {self.cost_names}"
                )
            info["cost_penalty"] = cost_penalty(costs, scalarisation)
            reward = reward - info["cost_penalty"]
        if self.abort_names:
            aborted, reason = check_abort(self.abort_values(tr.state, params), params.abort)
            terminated = terminated | aborted
            info["abort_reason"] = reason
        info.update(
            reward_vector=reward_vector,
            objective_mask=mask,
            costs=costs,
            action_clipped=clipped,
            action_nonfinite=nonfinite,
        )
        return tr.obs, tr.state, reward, terminated, tr.truncated, info

    @gc_paused
    @full_precision
    def step(
        self, key: PRNGKey, state: TState, action: PyTree, params: TParams | None = None
    ) -> tuple[PyTree, TState, Array, Array, Array, dict[str, Any]]:
        """One step with auto-reset: ``(obs, state, reward, terminated, truncated, info)``.

        Where the episode ended (``terminated | truncated``), ``obs`` and ``state`` are a
        new episode's, drawn from ``key``, and ``info["final_observation"]`` is the last
        observation of the ended one. The reset is computed only where an episode ended,
        also under ``jax.vmap(env.step)`` (:func:`~jaxgrid.masked.masked_apply`).
        """
        if params is None:
            params = self.default_params()
        return self._compiled("_step")(key, state, action, params)

    def _step(self, key, state, action, params):
        key_step, key_reset = jax.random.split(key)
        obs_step, state_step, reward, terminated, truncated, info = self.step_env(
            key_step, state, action, params
        )
        reset_env = self._compiled("reset_env")
        obs_reset, state_reset = jax.eval_shape(reset_env, key_reset, params)
        _check_same_layout(self.name, "state", state_reset, state_step)
        _check_same_layout(self.name, "observation", obs_reset, obs_step)
        obs, state = masked_apply(
            reset_env, terminated | truncated, (obs_step, state_step), key_reset, params
        )
        info["final_observation"] = obs_step
        return obs, state, reward, terminated, truncated, info

    def _compiled(self, method: str):
        """``jax.jit`` of this environment's method named ``method``, made once per object.

        ``reset``, ``step_env`` and ``step`` call through it, as gymnax's jit theirs:
        called eagerly (a notebook, a test) a step is then one compiled program instead
        of hundreds of operations dispatched one by one, each compiled on first use
        (``voltage13-v0``'s first eager reset took 23 s, jitted 4.8 s; a later eager step
        1.9 s, jitted 1 ms). Inside a caller's ``jit``/``vmap``/``grad`` it is traced
        into the caller's program as before, and a method traced twice at the same shapes
        (the auto-reset's ``reset_env`` inside ``step``) is traced once.
        """
        cache = vars(self).setdefault("_jit_cache", {})
        bound, jitted = cache.get(method, (None, None))
        if bound is None or bound.__self__ is not self:  # a copy of an environment
            bound = getattr(self, method)
            jitted = jax.jit(bound)
            cache[method] = (bound, jitted)
        return jitted

    def step_batch(
        self, keys: PRNGKey, states: TState, actions: PyTree, params: TParams | None = None
    ) -> tuple[PyTree, TState, Array, Array, Array, dict[str, Any]]:
        """``jax.vmap(env.step)`` over a batch (leading axis) with shared ``params``: the same
        program, kept for code written against it (resets cost only where episodes ended
        either way)."""
        if params is None:
            params = self.default_params()
        return jax.vmap(self.step, in_axes=(0, 0, 0, None))(keys, states, actions, params)

    def steps_lost(self, state: TState, params: TParams) -> Array:
        """``()`` int: the steps an episode loses when the step from ``state`` fails, the
        failed step included (``horizon - state.time``)."""
        return self.horizon - state.time

    def failure_penalty(self, state: TState, params: TParams) -> Array:
        """``()`` reward lost, per agent, when the step from ``state`` fails:
        ``params.power_flow_penalty`` for each of :meth:`steps_lost`."""
        return params.power_flow_penalty * self.steps_lost(state, params)

    def _failure_outcome(self, failed: Array, reward_vector: Array, costs: Array):
        """Objectives and costs of a step whose physics failed: every objective 0, the only
        cost ``power_flow`` = 1 (see the module docstring)."""
        if POWER_FLOW not in self.cost_names:
            raise ValueError(
                f"{self.name} reports failed physics but has no {POWER_FLOW!r} cost; its "
                f"costs are {self.cost_names}"
            )
        column = jnp.arange(len(self.cost_names)) == self.cost_names.index(POWER_FLOW)
        failure_costs = jnp.broadcast_to(column.astype(costs.dtype), costs.shape)
        return (
            jnp.where(failed, jnp.zeros_like(reward_vector), reward_vector),
            jnp.where(failed, failure_costs, costs),
        )

    def _sanitise(self, action: PyTree, params: TParams) -> tuple[PyTree, Array, Array]:
        """Project ``action`` into the action space; count clipped and non-finite entries per agent."""
        space = self.action_space(params)
        _check_action_shape(self.name, space, action)
        action, clipped, nonfinite = space.project(action)

        def per_agent(mask_tree):
            counts = [
                jnp.sum(m.reshape(self.num_agents, -1), axis=1, dtype=jnp.int32)
                for m in jax.tree_util.tree_leaves(mask_tree)
            ]
            return sum(counts[1:], counts[0])

        return action, per_agent(clipped), per_agent(nonfinite)


def _check_same_layout(env_name: str, what: str, after_reset: PyTree, after_step: PyTree) -> None:
    """Raise if a step changes the structure, shapes or dtypes of the state or observation."""
    reset_leaves, reset_tree = jax.tree_util.tree_flatten_with_path(after_reset)
    step_leaves, step_tree = jax.tree_util.tree_flatten(after_step)
    if reset_tree != jax.tree_util.tree_structure(after_step):
        raise TypeError(
            f"{env_name}: the {what} after a step has structure {step_tree}, "
            f"after reset {reset_tree}"
        )
    for (path, a), b in zip(reset_leaves, step_leaves):
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            raise TypeError(
                f"{env_name}: {what} leaf {jax.tree_util.keystr(path)} is {b.dtype}{list(b.shape)} "
                f"after a step but {a.dtype}{list(a.shape)} after reset; shapes and dtypes "
                "must never change"
            )


def _check_action_shape(env_name: str, space: spaces.Space, action: PyTree) -> None:
    if isinstance(space, spaces.Dict):
        if not isinstance(action, dict) or set(action) != set(space.spaces):
            raise ValueError(f"{env_name}: action must be a dict with keys {sorted(space.spaces)}")
        for k, sub in space.spaces.items():
            _check_action_shape(f"{env_name}[{k!r}]", sub, action[k])
        return
    shape = tuple(jnp.shape(action))
    if shape != space.shape:
        raise ValueError(
            f"{env_name}: action has shape {shape}, expected {space.shape} "
            f"(num_agents first) for {space}"
        )
