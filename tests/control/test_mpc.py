"""Receding-horizon MPC on the environment's own model: near the perfect-foresight optimum
of arbitrage-v0 (an independent MILP), actions inside the box, batched as one by one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only

import jaxgrid
from jaxgrid.control import MPCConfig, mpc_controller
from jaxgrid.control.mpc import enact, initial_plan, mpc_step
from jaxgrid.train.evaluate import evaluate, oracle


def test_arbitrage_mpc_reaches_99_percent_of_the_milp_oracle():
    env, params = jaxgrid.make("arbitrage-v0")
    key = jax.random.PRNGKey(0)
    episodes = 8
    mpc = env.baselines(params)["mpc"]
    earned = evaluate(mpc, env, params, key, episodes)
    best = oracle(env, params, key, episodes)  # HiGHS on the same held-out days
    idle = evaluate(env.baselines(params)["idle"], env, params, key, episodes)
    assert idle["return"] == 0.0 and best > 50.0  # days worth trading
    assert earned["return"] >= 0.99 * best, (earned["return"], best)
    assert earned["return"] <= best + 1e-3 * abs(best)  # the MILP is an upper bound


def test_plans_stay_in_the_action_box_and_shift_by_one_step():
    env, params = jaxgrid.make("arbitrage-v0")
    _, state = env.reset(jax.random.PRNGKey(1), params)
    config = MPCConfig(horizon=6, iterations=30, learning_rate=0.5)
    plan = initial_plan(env, params, config)
    action, next_plan = jax.jit(
        lambda s, u: mpc_step(env, params, s, u, config, jax.random.PRNGKey(2))
    )(state, plan)
    assert action.shape == (1, 1) and next_plan.shape == (6, 1, 1)
    assert env.action_space(params).contains(action)
    # extreme plan values still enact actions inside [-1, 1]
    u = jnp.array([-1e4, -3.0, 0.0, 3.0, 1e4]).reshape(5, 1, 1)
    extreme = np.asarray(enact(u, env.action_space(params))).ravel()
    assert np.all(np.abs(extreme) <= 1.0) and extreme[2] == 0.0 and extreme[0] == -1.0
    # the next plan is this one shifted by a step, its last action repeated
    np.testing.assert_array_equal(next_plan[-1], next_plan[-2])


@full_only
def test_vmapped_controller_equals_one_by_one():
    env, params = jaxgrid.make("arbitrage-v0")
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    states = jax.vmap(env.reset, (0, None))(keys, params)[1]
    config = MPCConfig(horizon=4, iterations=10)
    plan = initial_plan(env, params, config)
    step = jax.jit(lambda s: mpc_step(env, params, s, plan, config, jax.random.PRNGKey(0))[0])
    batched = jax.jit(jax.vmap(step))(states)
    for i in range(3):
        one = step(jax.tree_util.tree_map(lambda x, i=i: x[i], states))
        np.testing.assert_allclose(batched[i], one, rtol=1e-5, atol=1e-6)


def test_controller_runs_in_rollout_with_its_plan_carried():
    env, params = jaxgrid.make("arbitrage-v0")
    mpc = mpc_controller(env, params, MPCConfig(horizon=24, iterations=20))
    trajectory = jax.jit(lambda k: jaxgrid.rollout(env, params, mpc, k, 3))(jax.random.PRNGKey(0))
    assert trajectory.action.shape == (3, 1, 1)
    assert np.all(np.isfinite(np.asarray(trajectory.reward)))


def test_discrete_actions_are_refused():
    env, params = jaxgrid.make("gardeners-v0")
    with pytest.raises(TypeError, match="continuous"):
        mpc_controller(env, params)


def test_bad_config_is_refused():
    env, params = jaxgrid.make("arbitrage-v0")
    with pytest.raises(ValueError, match="horizon"):
        mpc_controller(env, params, MPCConfig(horizon=0))


def test_wrappers_leave_the_controller_out():
    # a controller plans on the inner environment's state, params and reward
    from jaxgrid.wrappers import Forecast, LogWrapper

    env, params = jaxgrid.make("arbitrage-v0")
    assert "mpc" in env.baselines(params)
    logged = LogWrapper(env)
    assert "mpc" not in logged.baselines(params) and "threshold" in logged.baselines(params)
    forecast = Forecast(env, horizon_steps=4)
    assert "mpc" not in forecast.baselines(forecast.default_params())


def test_forecast_params_perturb_only_the_planned_rows_with_the_forecast_spread():
    from jaxgrid.control.mpc import forecast_params

    env, params = jaxgrid.make("arbitrage-v0")
    _, state = env.reset(jax.random.PRNGKey(1), params)
    config = MPCConfig(horizon=5, forecast_error_std=0.1, forecast_error_growth=0.5)
    row = int(state.start + state.time)
    truth = np.asarray(params.profiles.price)
    draw = jax.jit(jax.vmap(lambda k: forecast_params(params, state, config, k).profiles.price))
    forecasts = np.asarray(draw(jax.random.split(jax.random.PRNGKey(0), 4000)))
    changed = np.any(forecasts != truth, axis=(0, 2))
    # the current step's inputs are known; leads 1..4 are forecast; nothing else moves
    assert np.flatnonzero(changed).tolist() == list(range(row + 1, row + 5))
    for lead in range(1, 5):
        ratio = forecasts[:, row + lead, :] / truth[row + lead, :] - 1.0
        spread = 0.1 * lead**0.5
        assert np.std(ratio) == pytest.approx(spread, rel=0.05)
        assert abs(np.mean(ratio)) < 4 * spread / np.sqrt(ratio.size)


@full_only
def test_mpc_on_noisy_forecasts_earns_less_than_with_perfect_foresight():
    env, params = jaxgrid.make("arbitrage-v0")
    key, episodes = jax.random.PRNGKey(0), 4
    perfect = env.baselines(params)["mpc"]
    noisy = mpc_controller(env, params, perfect.config._replace(forecast_error_std=0.3))
    earned = evaluate(perfect, env, params, key, episodes)["return"]
    guessed = evaluate(noisy, env, params, key, episodes)["return"]
    idle = evaluate(env.baselines(params)["idle"], env, params, key, episodes)["return"]
    assert idle < guessed < earned, (idle, guessed, earned)


def test_forecast_errors_need_exogenous_series():
    env, params = jaxgrid.make("smartgrid-v0")  # its buildings' own series
    with pytest.raises(ValueError, match="profiles"):
        mpc_controller(env, params, MPCConfig(horizon=2, forecast_error_std=0.1))
    env, params = jaxgrid.make("arbitrage-v0")
    with pytest.raises(ValueError, match="forecast_error_std"):
        mpc_controller(env, params, MPCConfig(forecast_error_std=-0.1))


def test_a_decaying_step_settles_on_a_kink_that_a_constant_step_keeps_crossing():
    from toy_envs import Tanks, TanksState

    from jaxgrid.control.mpc import optimise_plan, plan_return

    # one tank at 0.4 with target 0.5, tracking weight 1 and effort weight 0.5: the best
    # fill is the kink of |level - target|, about 0.1 (the step's noise moves it)
    env = Tanks(num_agents=1, horizon=3)
    params = env.default_params()
    weights = jnp.array([1.0, 0.5])
    params = params.replace(scalarisation=params.scalarisation.replace(weights=weights))
    state = TanksState(level=jnp.array([0.4]), time=jnp.zeros((), jnp.int32))
    key = jax.random.PRNGKey(0)
    constant = MPCConfig(horizon=1, iterations=200, learning_rate=0.1, cost_weight=0.0)
    decaying = constant._replace(final_learning_rate=1e-4)
    grid = jnp.linspace(-3.0, 3.0, 60001).reshape(-1, 1, 1, 1)  # plan values, a fine search
    best = jnp.max(jax.vmap(lambda u: plan_return(env, params, state, u, constant, key))(grid))
    gaps = {}
    for config in (constant, decaying):
        plan = initial_plan(env, params, config)
        _, value = jax.jit(lambda c=config, u=plan: optimise_plan(env, params, state, u, c, key))()
        gaps[config.final_learning_rate] = float(best - value)
    assert gaps[1e-4] < 2e-5 and gaps[None] > 1e-4, gaps


def test_a_final_learning_rate_above_the_first_is_refused():
    env, params = jaxgrid.make("arbitrage-v0")
    with pytest.raises(ValueError, match="final_learning_rate"):
        mpc_controller(env, params, MPCConfig(learning_rate=0.1, final_learning_rate=0.2))
