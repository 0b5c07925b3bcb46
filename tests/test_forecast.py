"""The forecast wrapper: perfect forecasts are the future the environment then shows,
errors grow with lead time as specified, the noise is a params leaf, and the contract."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toy_envs
from conftest import full_only

import jaxgrid
from jaxgrid.testing import check_env
from jaxgrid.validation import ParamsError
from jaxgrid.wrappers import Forecast

KEY = jax.random.PRNGKey(0)


def test_a_perfect_price_forecast_is_the_price_seen_later():
    env, params = jaxgrid.make("arbitrage-v0", forecast=0)  # the env shows today's price only
    wrapped = Forecast(env, horizon_steps=6)
    p = wrapped.default_params()
    names = wrapped.observation_names(p)
    price = names.index("price")
    obs, state = wrapped.reset(KEY, p)
    forecasts = [np.asarray(obs[0, -6:])]
    seen = [float(obs[0, price])]
    action = jnp.zeros(wrapped.action_space(p).shape)
    for t in range(12):
        obs, state, *_ = wrapped.step_env(jax.random.fold_in(KEY, t), state, action, p)
        forecasts.append(np.asarray(obs[0, -6:]))
        seen.append(float(obs[0, price]))
    seen = np.asarray(seen) * 100.0  # the env shows prices in hundreds (PRICE_SCALE)
    for t in range(6):
        np.testing.assert_allclose(forecasts[t], seen[t + 1 : t + 7], rtol=1e-5)


@full_only
def test_load_and_pv_forecasts_come_from_the_profiles_ahead():
    env, params = jaxgrid.make("voltage33-v0")
    wrapped = Forecast(env, horizon_steps=3)
    p = wrapped.default_params()
    obs, state = wrapped.reset(KEY, p)
    prof = params.profiles
    rows = (int(state.start + state.time) + np.arange(1, 4)) % prof.load.shape[0]
    load = np.asarray(prof.load)[rows][:, np.asarray(params.load_profile)]
    load_mw = float(params.load_scale) * load @ np.asarray(params.feeder.p_load_mw)
    pv = np.asarray(prof.pv)[rows][:, np.asarray(params.pv_profile)]
    pv_mw = pv @ np.asarray(params.pv_p_max_mw)
    expected = np.stack([load_mw, pv_mw], axis=1).reshape(-1)
    np.testing.assert_allclose(obs[0, -6:], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(obs[1:, -6:], jnp.broadcast_to(obs[0, -6:], (5, 6)))


def test_errors_grow_with_lead_time_as_specified():
    env, _ = jaxgrid.make("arbitrage-v0")
    wrapped = Forecast(env, horizon_steps=4, error_std=0.1, error_growth=0.5)
    p = wrapped.default_params()
    _, state = wrapped.reset(KEY, p)
    keys = jax.random.split(KEY, 4000)
    noisy = jax.vmap(lambda k: wrapped.forecast(k, state, p))(keys)[..., 0]  # (4000, 4)
    truth = wrapped.forecast(None, state, p)[:, 0]
    relative = np.asarray(noisy / truth - 1.0)
    expected = 0.1 * np.sqrt(np.arange(1, 5))
    np.testing.assert_allclose(relative.std(axis=0), expected, rtol=0.06)
    assert np.all(np.abs(relative.mean(axis=0)) < 4 * expected / np.sqrt(4000))


@full_only
def test_forecast_quality_is_a_params_leaf_and_the_contract_holds():
    env, _ = jaxgrid.make("dso33-v0")
    wrapped = Forecast(env, horizon_steps=2, error_std=0.2)
    p = wrapped.default_params()
    stds = jnp.asarray([0.0, 0.2])
    obs = jax.jit(jax.vmap(lambda s: wrapped.reset(KEY, p.replace(error_std=s))[0]))(stds)
    _, state = env.reset(jax.random.split(KEY)[0], p.env)
    truth = env.exogenous_ahead(state, p.env, jnp.arange(1, 3)).reshape(-1)
    np.testing.assert_allclose(obs[0, 0, -2:], truth, rtol=1e-6)  # perfect
    assert float(jnp.max(jnp.abs(obs[1, 0, -2:] / truth - 1.0))) > 1e-3  # noisy
    check_env(wrapped, num_steps=60, num_envs=2)


def test_bad_requests_are_refused():
    with pytest.raises(ValueError, match="no exogenous series"):
        Forecast(toy_envs.Tanks(), horizon_steps=2)
    env, _ = jaxgrid.make("arbitrage-v0")
    with pytest.raises(ValueError, match="horizon_steps must be >= 1"):
        Forecast(env, horizon_steps=0)
    with pytest.raises(ParamsError, match="error_std"):
        Forecast(env, horizon_steps=2, error_std=-0.1)
