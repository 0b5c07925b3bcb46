"""The Sauté wrapper: budget bookkeeping against the wrapped environment stepped alone,
the reward cut, resets, sweeps over budgets, the contract, and its errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toy_envs
from conftest import full_only

import jaxgrid
from jaxgrid.rollout import is_controller
from jaxgrid.testing import check_env
from jaxgrid.validation import ParamsError
from jaxgrid.wrappers import Saute

KEY = jax.random.PRNGKey(0)


def _fill(env, params):
    """Always fill: every tank overflows after a few steps."""
    return jnp.full(env.action_space(params).shape, 0.2)


def test_budget_left_and_the_reward_cut_follow_the_costs():
    tanks = toy_envs.Tanks(num_agents=3, horizon=12)
    wrapped = Saute(tanks, {"overflow": 0.25}, unsafe_reward=-5.0)
    params = wrapped.default_params()
    obs, state = wrapped.reset(KEY, params)
    inner_obs, inner_state = tanks.reset(KEY, params.env)
    np.testing.assert_array_equal(obs[:, :2], inner_obs)
    np.testing.assert_array_equal(obs[:, 2], 1.0)
    spent = np.zeros(3)
    ever_unsafe = 0
    for t in range(10):
        key = jax.random.fold_in(KEY, t)
        action = _fill(tanks, params.env)
        obs, state, reward, _, _, info = wrapped.step_env(key, state, action, params)
        inner = tanks.step_env(key, inner_state, action, params.env)
        inner_obs, inner_state, inner_reward, _, _, inner_info = inner
        spent += np.asarray(inner_info["costs"][:, 0])
        left = 1.0 - spent / 0.25  # written out here, not taken from the wrapper
        unsafe = left <= 0.0
        ever_unsafe += int(unsafe.any())
        np.testing.assert_allclose(state.budget_left[:, 0], left, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(obs[:, 2], np.clip(left, -1.0, 1.0), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(info["saute_unsafe"], unsafe)
        np.testing.assert_allclose(reward, np.where(unsafe, -5.0, inner_reward))
        np.testing.assert_array_equal(info["costs"], inner_info["costs"])  # passed through
    assert ever_unsafe >= 3  # the budget was spent on some steps and the test saw it


def test_an_episode_end_restores_the_budget():
    tanks = toy_envs.Tanks(num_agents=2, horizon=4)
    wrapped = Saute(tanks, {"overflow": 0.01}, unsafe_reward=-5.0)
    params = wrapped.default_params()
    _, state = wrapped.reset(KEY, params)
    for t in range(4):
        obs, state, _, terminated, truncated, info = wrapped.step(
            jax.random.fold_in(KEY, t), state, _fill(tanks, params.env), params
        )
        if bool(terminated | truncated):
            break
    assert bool(terminated | truncated)
    assert np.all(np.asarray(info["final_observation"][:, 2]) < 1.0)  # spent in the episode
    np.testing.assert_array_equal(obs[:, 2], 1.0)
    np.testing.assert_array_equal(state.budget_left, 1.0)


def test_budgets_are_params_leaves_swept_by_vmap():
    tanks = toy_envs.Tanks(num_agents=3, horizon=12)
    wrapped = Saute(tanks, {"overflow": 0.25}, unsafe_reward=-5.0)
    params = wrapped.default_params()
    budgets = jnp.asarray([[0.05], [0.25], [100.0]])
    swept = jax.vmap(lambda b: params.replace(budget=b))(budgets)

    def episode(p):
        _, state = wrapped.reset(KEY, p)

        def step(state, t):
            out = wrapped.step_env(jax.random.fold_in(KEY, t), state, _fill(tanks, p.env), p)
            return out[1], jnp.sum(out[5]["saute_unsafe"])

        return jnp.sum(jax.lax.scan(step, state, jnp.arange(10))[1])

    unsafe_steps = np.asarray(jax.jit(jax.vmap(episode))(swept))
    assert unsafe_steps[0] > unsafe_steps[1] > unsafe_steps[2] == 0


@full_only
def test_the_contract_holds_and_baselines_read_their_own_entries():
    env, params = jaxgrid.make("arbitrage-v0")
    wrapped = Saute(env, {env.cost_names[0]: 1.0}, unsafe_reward=-100.0)
    check_env(wrapped, num_steps=96, num_envs=4)
    p = wrapped.default_params()
    names = wrapped.observation_names(p)
    assert names[-1] == f"budget_left[{env.cost_names[0]}]"
    assert len(names) == wrapped.observation_space(p).shape[1]
    obs, _ = wrapped.reset(KEY, p)
    inner_obs, _ = env.reset(KEY, params)
    inner = {n: b for n, b in env.baselines(params).items() if not is_controller(b)}
    assert set(wrapped.baselines(p)) == set(inner)  # controllers (mpc) stay inside
    for name, policy in inner.items():
        ours = wrapped.baselines(p)[name](KEY, obs)
        np.testing.assert_array_equal(ours, policy(KEY, inner_obs))


def test_bad_budgets_are_refused():
    tanks = toy_envs.Tanks()
    with pytest.raises(ValueError, match=r"no cost \['voltage'\]; its costs are \['overflow'\]"):
        Saute(tanks, {"voltage": 1.0}, unsafe_reward=-1.0)
    with pytest.raises(ValueError, match="at least one budget"):
        Saute(tanks, {}, unsafe_reward=-1.0)
    with pytest.raises(ParamsError, match="budget"):
        Saute(tanks, {"overflow": 0.0}, unsafe_reward=-1.0)
