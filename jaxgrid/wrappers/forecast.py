"""Forecasts of an environment's exogenous series in every agent's observation.

PowerZoo's forecast wrapper: each agent sees, after its own observation entries, a
forecast of the next ``H`` steps of the environment's exogenous series
(``env.forecast_names``: loads, PV, prices; :meth:`~jaxgrid.env.Environment.exogenous_ahead`
gives their true values). The forecast of lead ``h`` (``h = 1 ... H`` steps after the
inputs of the step the agent is about to take) is::

    forecast_h = truth_h * (1 + error_std * h ** error_growth * eps),   eps ~ N(0, 1)

drawn afresh at every step (a new forecast each time, as a forecaster issues them), so
its error grows with lead time; ``error_std = 0`` gives perfect forecasts. Both numbers
are params leaves (:class:`ForecastParams`), so one ``vmap`` compares forecast qualities.
Every agent sees the same forecast (the series are the network's).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxgrid.types import Array
from jaxgrid.validation import Range, declare, validate_params
from jaxgrid.wrappers.augmented import AugmentedObservation


def forecast_factors(key, leads: Array, shape, dtype, error_std, error_growth) -> Array:
    """``(len(leads), *shape)`` of ``dtype``: the factors ``1 + error_std * h ** error_growth * eps`` that
    turn true values ``h`` steps ahead (``leads``) into a forecast of them (the module
    docstring's noise model; :class:`Forecast` and the forecast-driven MPC of
    :mod:`jaxgrid.control.mpc` share it). ``eps ~ N(0, 1)`` drawn with ``key``."""
    leads = jnp.asarray(leads)
    spread = error_std * leads.astype(dtype) ** error_growth
    eps = jax.random.normal(key, (leads.shape[0], *shape), dtype)
    return 1.0 + spread.reshape(-1, *([1] * len(shape))).astype(dtype) * eps


@struct.dataclass
class ForecastParams:
    """Attributes:
    env: the wrapped environment's params.
    error_std: ``()`` relative standard deviation of the one-step-ahead forecast.
    error_growth: ``()`` exponent of its growth with lead time ``h`` (0.5: a random walk).
    """

    env: object
    error_std: Array
    error_growth: Array


declare(
    ForecastParams,
    Range("error_std", ge=0, le=1, unit="(relative to the true value)"),
    Range("error_growth", ge=0, le=2),
)


class Forecast(AugmentedObservation):
    """``horizon_steps`` steps of forecasts of ``env.forecast_names`` appended to each
    agent's observation (see the module docstring).

    Args:
        env: an environment with exogenous series and an array observation.
        horizon_steps: ``H``, steps forecast (static).
        error_std, error_growth: the default noise model (params leaves).

    Raises:
        ValueError: ``env`` has no exogenous series, its observation is not one array, or
            ``horizon_steps < 1``.
    """

    def __init__(self, env, horizon_steps: int, error_std: float = 0.0, error_growth: float = 0.5):
        if not env.forecast_names:
            raise ValueError(f"Forecast: {env.name} has no exogenous series (forecast_names)")
        if int(horizon_steps) < 1:
            raise ValueError(f"Forecast: horizon_steps must be >= 1, got {horizon_steps}")
        super().__init__(env, "Forecast")
        inner = env.default_params()
        self.horizon_steps = int(horizon_steps)
        params = ForecastParams(
            env=inner,
            error_std=jnp.asarray(float(error_std), jnp.float32),
            error_growth=jnp.asarray(float(error_growth), jnp.float32),
        )
        validate_params(self, params)
        self._default_params = params

    def extra_names(self) -> tuple[str, ...]:
        ahead = range(1, self.horizon_steps + 1)
        return tuple(f"forecast[{n}][+{h}]" for h in ahead for n in self.env.forecast_names)

    def extra_bounds(self) -> tuple[float, float]:
        return -jnp.inf, jnp.inf

    def abort_values(self, state, params: ForecastParams):
        return self.env.abort_values(state, params.env)

    def world_state(self, state, params: ForecastParams):
        return self.env.world_state(state, params.env)

    def failure_penalty(self, state, params: ForecastParams):
        return self.env.failure_penalty(state, params.env)

    def steps_lost(self, state, params: ForecastParams):
        return self.env.steps_lost(state, params.env)

    def oracle_return(self, params: ForecastParams, state):
        return self.env.oracle_return(params.env, state)

    # -- the observation ------------------------------------------------------------------

    def forecast(self, key, state, params: ForecastParams) -> Array:
        """``(H, len(forecast_names))`` one forecast of the next ``H`` steps (the truth when
        ``key`` is None)."""
        leads = jnp.arange(1, self.horizon_steps + 1)
        truth = self.env.exogenous_ahead(state, params.env, leads)
        if key is None:
            return truth
        factors = forecast_factors(
            key, leads, truth.shape[1:], truth.dtype, params.error_std, params.error_growth
        )
        return truth * factors

    def _observe(self, key, obs: Array, state, params: ForecastParams) -> Array:
        ahead = self.forecast(key, state, params).reshape(-1).astype(obs.dtype)
        return jnp.concatenate([obs, jnp.broadcast_to(ahead, (obs.shape[0], ahead.size))], axis=1)

    def reset_env(self, key, params: ForecastParams):
        key_env, key_forecast = jax.random.split(key)
        obs, state = self.env.reset_env(key_env, params.env)
        return self._observe(key_forecast, obs, state, params), state

    def observe(self, state, params: ForecastParams):
        """The observation with the truth as its forecast (no key to draw errors with)."""
        return self._observe(None, self.env.observe(state, params.env), state, params)

    def step_env(self, key, state, action, params: ForecastParams | None = None):
        params = self.default_params() if params is None else params
        key_env, key_forecast = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = self.env.step_env(
            key_env, state, action, params.env
        )
        obs = self._observe(key_forecast, obs, state, params)
        return obs, state, reward, terminated, truncated, info
