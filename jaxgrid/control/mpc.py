"""Receding-horizon model-predictive control on the environment's own differentiable model.

At every step the controller optimises a plan of ``horizon`` actions by gradient ascent
on the return they earn in ``horizon`` steps of ``env.step_env`` from the current state,
enacts the plan's first action and keeps the rest, shifted by one step, as the next
step's starting plan (warm start). There is no second model: the planning model is the
environment itself, so its params and state hold the future exogenous series (prices,
loads, PV) and the controller has perfect foresight of them.

**Objective.** For a plan ``a_0 .. a_{H-1}`` from state ``s_0``:
``sum_h alive_h (mean_agents r_h - cost_weight * sum_costs mean_agents c_h)``, with
``r_h`` the reward and ``c_h`` the cost channel (``info["costs"]``) of step ``h``;
``alive_h`` is 0 after the episode ended inside the plan (a horizon longer than the
episode's rest plans to its end: shrinking horizon). Costs enter as a fixed quadratic-free
penalty (exact for costs that are distances outside a limit, such as a battery's clipped
request or a voltage band violation).

**Action space.** A plan is held as unconstrained numbers ``u`` and enacted as
``low + (high - low) * sigmoid(u)``, so every action a plan gives lies in the ``Box``
action space and the environment never clips it. A zero plan is the middle of the box.

**Forecasts.** With ``forecast_error_std > 0`` the plan is made on a forecast of the
exogenous series instead of the truth: at each step the controller replaces the next
``horizon - 1`` rows of every series of ``params.profiles`` (loads, PV, wind, prices) by a
fresh forecast with the noise model of :class:`jaxgrid.wrappers.Forecast` (relative error
``forecast_error_std * h ** forecast_error_growth`` at lead ``h``; the current step's
inputs are known) and plans on those params. The environment itself steps on the truth.

**Optimiser.** Adam (``optax.adam``) for a fixed number of iterations (no tolerance:
every environment of a batch does the same work, and the controller jits and
``vmap`` s over environments). The gradient goes through the environment's transitions:
through the battery model, the power flow (the DistFlow solvers' gradients come from
the implicit function theorem at the solution) and the reward.

:func:`mpc_controller` packs this as a reference policy that reads the state
(:class:`jaxgrid.rollout.Controller`), which is how ``arbitrage-v0`` and ``voltage33-v0``
list it among their baselines (``"mpc"``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxgrid import spaces
from jaxgrid.data.profiles import Profiles
from jaxgrid.env import Environment
from jaxgrid.types import Array, PRNGKey, PyTree
from jaxgrid.wrappers.forecast import forecast_factors


class MPCConfig(NamedTuple):
    """Attributes:
    horizon: steps planned ahead, ``H`` (static).
    iterations: Adam iterations per step (static; the first step of an episode too).
    learning_rate: Adam step size on the unconstrained plan ``u``.
    cost_weight: reward lost per unit of summed cost (mean over agents) in a planned step.
    forecast_error_std: relative standard deviation of the one-step-ahead forecast the plan
        is made on (0: perfect foresight).
    forecast_error_growth: exponent of the forecast error's growth with lead time.
    final_learning_rate: Adam's step size at the last iteration, reached by cosine decay
        from ``learning_rate`` (``None``: constant). A decaying step lets the plan settle
        on a kink of the objective (``|q|`` at 0, a band's edge) where a constant step
        keeps crossing it.
    """

    horizon: int = 24
    iterations: int = 100
    learning_rate: float = 0.1
    cost_weight: float = 3.0
    forecast_error_std: float = 0.0
    forecast_error_growth: float = 0.5
    final_learning_rate: float | None = None


def _box(env: Environment, params) -> spaces.Box:
    space = env.action_space(params)
    if not isinstance(space, spaces.Box):
        raise TypeError(f"MPC plans continuous actions; {env.name} has {space}")
    return space


def enact(u: Array, space: spaces.Box) -> Array:
    """Actions ``(..., *space.shape)`` of unconstrained plan values ``u``: inside the box."""
    low, high = space._bounds()
    return low + (high - low) * jax.nn.sigmoid(u.astype(space.dtype))


def plan_return(
    env: Environment, params, state: PyTree, u: Array, config: MPCConfig, key: PRNGKey
) -> Array:
    """``()`` the objective of plan ``u`` ``(H, *action_shape)`` from ``state`` (see the
    module docstring): the return of the planned steps less the cost penalty."""
    space = _box(env, params)

    def step(carry, inputs):
        state, alive = carry
        a, k = inputs
        _, state, reward, terminated, truncated, info = env.step_env(k, state, a, params)
        costs = jnp.sum(jnp.mean(info["costs"], axis=0))
        value = jnp.mean(reward) - config.cost_weight * costs
        return (state, alive & ~(terminated | truncated)), jnp.where(alive, value, 0.0)

    keys = jax.random.split(key, u.shape[0])
    _, values = jax.lax.scan(step, (state, jnp.array(True)), (enact(u, space), keys))
    return jnp.sum(values)


def optimise_plan(
    env: Environment, params, state: PyTree, u: Array, config: MPCConfig, key: PRNGKey
) -> tuple[Array, Array]:
    """``(plan, value)``: ``u`` ``(H, *action_shape)`` improved by ``config.iterations``
    Adam steps on :func:`plan_return`, and the improved plan's objective."""
    step_size = config.learning_rate
    if config.final_learning_rate is not None:
        step_size = optax.cosine_decay_schedule(
            config.learning_rate,
            config.iterations,
            alpha=config.final_learning_rate / config.learning_rate,
        )
    optimiser = optax.adam(step_size)
    loss = lambda u: -plan_return(env, params, state, u, config, key)  # noqa: E731

    def iteration(carry, _):
        u, opt_state = carry
        grad = jax.grad(loss)(u)
        updates, opt_state = optimiser.update(grad, opt_state, u)
        return (optax.apply_updates(u, updates), opt_state), None

    (u, _), _ = jax.lax.scan(iteration, (u, optimiser.init(u)), None, length=config.iterations)
    return u, -loss(u)


def initial_plan(env: Environment, params, config: MPCConfig) -> Array:
    """``(H, *action_shape)`` zeros: every planned action in the middle of the box."""
    space = _box(env, params)
    return jnp.zeros((config.horizon, *space.shape), space.dtype)


SERIES = ("load", "pv", "wind", "price")  # the forecast series of ``params.profiles``


def forecast_params(params, state: PyTree, config: MPCConfig, key: PRNGKey):
    """``params`` whose ``profiles`` hold, at the rows of the next ``horizon - 1`` steps
    after ``state``'s (``state.start + state.time + h``, wrapping around the series), one
    forecast of every series in :data:`SERIES` (see the module docstring, "Forecasts")."""
    profiles = params.profiles
    leads = jnp.arange(1, config.horizon)
    rows = (state.start + state.time + leads) % profiles.n_steps
    forecast = {}
    for i, name in enumerate(SERIES):
        series = getattr(profiles, name)
        factors = forecast_factors(
            jax.random.fold_in(key, i),
            leads,
            series.shape[1:],
            series.dtype,
            config.forecast_error_std,
            config.forecast_error_growth,
        )
        forecast[name] = series.at[rows].multiply(factors)
    return params.replace(profiles=profiles.replace(**forecast))


def mpc_step(
    env: Environment, params, state: PyTree, plan: Array, config: MPCConfig, key: PRNGKey
) -> tuple[Array, Array]:
    """``(action, next_plan)``: optimise ``plan`` from ``state`` (on a forecast of the
    exogenous series if ``config.forecast_error_std > 0``), enact its first action, and
    shift the rest by one step for the next call (the last planned action repeated)."""
    model = params
    if config.forecast_error_std > 0:
        model = forecast_params(params, state, config, jax.random.fold_in(key, 1))
    u, _ = optimise_plan(env, model, state, plan, config, key)
    action = enact(u[0], _box(env, params))
    return action, jnp.concatenate([u[1:], u[-1:]])


class MPC:
    """The receding-horizon controller as a reference policy that reads the state
    (:class:`jaxgrid.rollout.Controller`): ``init(state)`` gives the zero plan,
    ``act(key, obs, state, plan)`` one :func:`mpc_step`. Batch it over environments with
    ``jax.vmap`` like any policy (``jaxgrid.rollout`` and the evaluation do)."""

    reads_state = True

    def __init__(self, env: Environment, params, config: MPCConfig | None = None):
        config = MPCConfig() if config is None else config
        _box(env, params)
        if config.horizon < 1 or config.iterations < 1:
            raise ValueError(f"MPC needs horizon >= 1 and iterations >= 1, got {config}")
        if config.final_learning_rate is not None and not (
            0 < config.final_learning_rate <= config.learning_rate
        ):
            raise ValueError(f"MPC needs 0 < final_learning_rate <= learning_rate, got {config}")
        if config.forecast_error_std < 0:
            raise ValueError(f"MPC needs forecast_error_std >= 0, got {config}")
        if config.forecast_error_std > 0 and not isinstance(
            getattr(params, "profiles", None), Profiles
        ):
            raise ValueError(
                "MPC with forecast errors needs the exogenous series as a "
                f"jaxgrid.data.Profiles in params.profiles; {env.name}'s params have none"
            )
        self.env, self.params, self.config = env, params, config

    def init(self, state: PyTree) -> Array:
        """The zero plan ``(H, *action_shape)`` (every action in the middle of the box)."""
        return initial_plan(self.env, self.params, self.config)

    def act(self, key: PRNGKey, obs: PyTree, state: PyTree, plan: Array) -> tuple[Array, Array]:
        """``(action, next_plan)`` from ``state`` (``obs`` is not needed: the model is)."""
        return mpc_step(self.env, self.params, state, plan, self.config, key)


def mpc_controller(env: Environment, params, config: MPCConfig | None = None) -> MPC:
    """The receding-horizon MPC of ``env`` under ``params`` (see :class:`MPC`; default
    settings :class:`MPCConfig`)."""
    return MPC(env, params, config)
