"""dcmg-v0: the contract, the accounting of one step, and the perfect-foresight oracle."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only, sampled

import jaxgrid
from jaxgrid.envs.dcmg import episode_oracle, plan_actions
from jaxgrid.testing import check_env

KEY = jax.random.PRNGKey(0)


def replay(env, params, start, actions):
    """Run the day from profile row ``start`` with given actions: (return, objectives, costs)."""
    _, state = env.reset(KEY, params)
    state = state.replace(start=jnp.int32(start))
    step = jax.jit(env.step_env)
    total, objectives, costs = 0.0, np.zeros(3), np.zeros(4)
    for action in actions:
        _, state, reward, terminated, _, info = step(KEY, state, jnp.asarray(action), params)
        total += float(reward[0])
        objectives += np.asarray(info["reward_vector"][0])
        costs += np.asarray(info["costs"][0])
    assert bool(terminated)
    return total, objectives, costs


@full_only
def test_check_env():
    env, params = jaxgrid.make("dcmg-v0")
    check_env(env, params, num_steps=300, num_envs=8)


def test_one_step_balances_power_and_prices_it():
    env, params = jaxgrid.make("dcmg-v0")
    _, state = env.reset(KEY, params)
    # idle GPUs, hottest setpoint, battery idle, diesel off: the hall at 22 °C drifts up
    # under 0.3 MW of idle IT power, so no cooling is needed and p_dc = 0.3 MW
    action = jnp.array([[0.0, 0.0, 1.0, 0.0, -1.0]])
    _, new, reward, _, _, info = env.step_env(KEY, state, action, params)
    row = int(state.start)
    pv = float(params.profiles.pv[row, params.pv_column]) * float(params.pv_mw)
    price = float(params.profiles.price[row, params.price_column])
    dt = 5 / 60
    np.testing.assert_allclose(float(info["p_dc_mw"]), 0.3, rtol=1e-6)
    np.testing.assert_allclose(float(info["p_grid_mw"]), 0.3 - pv, rtol=1e-5, atol=1e-6)
    grid = 0.3 - pv
    expected = [-price * grid * dt, -0.4 * max(grid, 0.0) * dt, 0.0]
    np.testing.assert_allclose(info["reward_vector"][0], expected, rtol=1e-5, atol=1e-7)
    weights = np.asarray(params.scalarisation.weights)
    np.testing.assert_allclose(float(reward[0]), weights @ np.array(expected), rtol=1e-5)
    # nothing served: this step's arrivals wait
    arrivals = np.asarray(params.workload_gpu_h[row])
    np.testing.assert_allclose(new.datacentre.backlog_gpu_h, arrivals, rtol=1e-6)


@pytest.mark.parametrize(
    ("day", "cap"), sampled([(4, 1.0), (99, 1.0), (204, 0.4)], keep=[(4, 1.0)])
)
def test_oracle_plan_replayed_in_the_env_earns_the_oracle_value(day, cap):
    with __import__("conftest").x64():
        env, params = jaxgrid.make("dcmg-v0", import_cap_mw=cap)
        start = day * env.horizon
        plan = episode_oracle(env, params, start)
        earned, objectives, costs = replay(env, params, start, plan_actions(env, params, plan))
    assert earned == pytest.approx(plan.value, rel=1e-7, abs=1e-6)
    np.testing.assert_allclose(objectives, plan.objectives, rtol=1e-7, atol=1e-6)
    np.testing.assert_allclose(costs, 0.0, atol=1e-3)  # the oracle violates nothing
    if cap < 1.0:  # a tight cap makes the diesel run: its commitment replays too
        assert plan.diesel_running.any()


@full_only
def test_no_baseline_beats_the_oracle_on_held_out_days():
    env, params = jaxgrid.make("dcmg-v0")
    test = params.replace(profiles=params.profiles.for_testing())
    baselines = env.baselines(test)
    keys = jax.random.split(KEY, 3)
    for name in ("rule_based", "greedy"):
        policy = baselines[name]
        run = jax.jit(jax.vmap(lambda k, p=policy: jaxgrid.rollout(env, test, p, k, env.horizon)))
        earned = np.asarray(run(keys).reward.sum(axis=(1, 2)))
        for i, k in enumerate(keys):
            k_reset, _ = jax.random.split(k)
            state = env.reset(k_reset, test)[1]
            assert earned[i] <= env.oracle_return(test, state) + 1e-2, (name, int(state.start))


def test_make_rejects_bad_scenarios():
    with pytest.raises(ValueError, match="unknown price"):
        jaxgrid.make("dcmg-v0", price="spot")
    with pytest.raises(ValueError, match="deadline_hours"):
        jaxgrid.make("dcmg-v0", deadline_hours=(8.0, 0.0))
    with pytest.raises(ValueError, match="import_cap_mw"):
        jaxgrid.make("dcmg-v0", import_cap_mw=-1.0)
