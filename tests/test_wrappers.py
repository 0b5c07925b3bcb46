"""Wrappers: episode statistics, and the centralised single-agent view."""

import jax
import jax.numpy as jnp
import numpy as np
from toy_envs import Tanks

import jaxgrid
from jaxgrid.testing import check_env
from jaxgrid.wrappers import CentralisedWrapper, LogWrapper

KEY = jax.random.PRNGKey(11)


def wobble(key, obs):
    """A policy that fills half-empty tanks and drains the others, with noise."""
    level = obs[..., :1]
    return jnp.where(level < 0.5, 0.15, -0.15) + 0.05 * jax.random.normal(key, level.shape)


def test_log_wrapper_reports_the_sums_of_each_finished_episode():
    env = LogWrapper(Tanks(num_agents=2, horizon=5))
    params = env.default_params()
    check_env(env, params, num_steps=50)
    traj = jax.jit(lambda k: jaxgrid.rollout(env, params, wobble, k, 23))(KEY)
    reward = np.asarray(traj.reward)  # (T, agents)
    vector = np.asarray(traj.info["reward_vector"])
    costs = np.asarray(traj.info["costs"])
    ended = np.asarray(traj.info["returned_episode"])
    assert ended.sum() == 4  # truncated every 5 steps
    start = 0
    for t in np.flatnonzero(ended):
        np.testing.assert_allclose(
            traj.info["episode_return"][t], reward[start : t + 1].sum(0), rtol=1e-5
        )
        np.testing.assert_allclose(
            traj.info["episode_objectives"][t], vector[start : t + 1].sum(0), rtol=1e-5
        )
        np.testing.assert_allclose(
            traj.info["episode_costs"][t], costs[start : t + 1].sum(0), rtol=1e-5
        )
        assert traj.info["episode_length"][t] == t + 1 - start
        start = t + 1


def test_centralised_controller_sets_every_agent_and_earns_their_mean_reward():
    inner = Tanks(num_agents=3)
    env = CentralisedWrapper(inner)
    params = env.default_params()
    check_env(env, params, num_steps=50)
    assert env.num_agents == 1
    assert env.action_space(params).shape == (1, 3)
    assert env.observation_space(params).shape == (1, 6)

    k_reset, k_step = jax.random.split(KEY)
    obs, state = env.reset(k_reset, params)
    inner_obs, inner_state = inner.reset(k_reset, params)
    np.testing.assert_array_equal(obs, inner_obs.reshape(1, -1))
    action = jnp.array([[0.1, -0.2, 0.05]])
    obs, state, reward, *_, info = env.step(k_step, state, action, params)
    inner_obs, inner_state, inner_reward, *_, inner_info = inner.step(
        k_step, inner_state, action.reshape(3, 1), params
    )
    np.testing.assert_allclose(state.level, inner_state.level)
    np.testing.assert_allclose(reward, [np.mean(inner_reward)], rtol=1e-6)
    np.testing.assert_allclose(
        info["reward_vector"][0], inner_info["reward_vector"].mean(0), rtol=1e-6
    )
    np.testing.assert_allclose(info["costs"][0], inner_info["costs"].mean(0), rtol=1e-6)
