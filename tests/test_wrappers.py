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


def test_a_centralised_controller_s_episode_fails_with_its_agents_physics():
    """A failed power flow ends the centralised episode too, with the contract's failure
    outcome (the grouping used to drop ``Transition.failed``: steps went on after it)."""
    from toy_envs import Collapses

    inner = Collapses(num_agents=3)
    env = CentralisedWrapper(inner)
    params = env.default_params()
    obs, state = env.reset(KEY, params)
    inner_obs, inner_state = inner.reset(KEY, params)
    for step in range(4):  # the fourth step fails
        k = jax.random.fold_in(KEY, step)
        action = jnp.full((1, 3), 0.05)
        obs, state, reward, terminated, *_, info = env.step_env(k, state, action, params)
        inner_out = inner.step_env(k, inner_state, action.reshape(3, 1), params)
        inner_state = inner_out[1]
        assert bool(terminated) == bool(inner_out[3]) == (step == 3)
        assert bool(info["power_flow_failed"]) == (step == 3)
    np.testing.assert_allclose(reward, [np.mean(inner_out[2])], rtol=1e-6)
    assert float(reward[0]) < 0 and float(info["costs"][0, 1]) == 1.0


def test_normalize_uses_running_statistics_that_survive_episode_ends():
    from jaxgrid.wrappers import NormalizeObservation

    inner = Tanks(num_agents=2, horizon=5)
    env = NormalizeObservation(inner, clip=1e6)
    params = env.default_params()
    # (not check_env: carrying the statistics over a reset is exactly where its step
    # differs from step_env followed by reset_env)
    keys = jax.random.split(KEY, 13)
    obs, state = env.reset(keys[0], params)
    raw_obs, raw_state = inner.reset(keys[0], params)
    seen = [np.asarray(raw_obs)]  # what the statistics have seen: the first reset, then every step
    for t in range(1, 13):  # crosses two episode ends
        action = wobble(keys[t], raw_obs)
        obs, state, *_, info = env.step(keys[t], state, action, params)
        raw_obs, raw_state, *_, raw_info = inner.step(keys[t], raw_state, action, params)
        seen.append(np.asarray(raw_info["final_observation"]))
        history = np.stack(seen)
        want = (np.asarray(raw_obs) - history.mean(0)) / np.sqrt(history.var(0) + 1e-8)
        np.testing.assert_allclose(obs, want, rtol=1e-4, atol=1e-4)
    assert int(state.moments.count) == 13


def test_normalize_step_batch_equals_vmapped_step():
    from jaxgrid.wrappers import NormalizeObservation

    env = NormalizeObservation(Tanks(num_agents=2, horizon=3))
    params = env.default_params()
    keys = jax.random.split(KEY, 4)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    actions = jnp.full((4, 2, 1), 0.1)
    for t in range(5):
        step_keys = jax.random.split(jax.random.fold_in(KEY, t), 4)
        a = env.step_batch(step_keys, states, actions, params)
        b = jax.vmap(env.step, in_axes=(0, 0, 0, None))(step_keys, states, actions, params)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
        np.testing.assert_allclose(a[5]["final_observation"], b[5]["final_observation"], rtol=1e-6)
        states = a[1]


def test_flatten_keeps_masks_and_flattens_observations():
    from toy_envs import Doors

    from jaxgrid.wrappers import FlattenObservation

    env = FlattenObservation(Doors())
    params = env.default_params()
    check_env(env, params, num_steps=20)
    obs, _ = env.reset(KEY, params)
    inner_obs, _ = Doors().reset(KEY, params)
    n = Doors().num_agents
    np.testing.assert_array_equal(obs["observation"], inner_obs["observation"].reshape(n, -1))
    np.testing.assert_array_equal(obs["action_mask"], inner_obs["action_mask"])


def test_scalarise_reward_weights_the_objectives():
    from jaxgrid.wrappers import ScalariseReward

    env, params = jaxgrid.make("voltage33-v0")
    only_q = ScalariseReward(env, [0.0, 1.0])
    _, state = env.reset(KEY, params)
    action = jnp.full((6, 1), 0.5)
    _, _, reward, *_, info = only_q.step_env(KEY, state, action, params)
    np.testing.assert_allclose(reward, info["reward_vector"][:, 1], rtol=1e-6)
    _, _, default_reward, *_ = env.step_env(KEY, state, action, params)
    assert not np.allclose(reward, default_reward)
    import pytest

    with pytest.raises(ValueError, match="3 weights for 2 objectives"):
        ScalariseReward(env, [1.0, 0.0, 0.0])


def test_normalize_offers_no_baseline_that_reads_raw_observations():
    from jaxgrid.wrappers import NormalizeObservation

    inner, params = jaxgrid.make("voltage33-v0")
    assert "droop" in inner.baselines(params)
    assert set(NormalizeObservation(inner).baselines(params)) == {"random"}


def test_wrappers_pass_the_entry_names_on():
    from jaxgrid.wrappers import NormalizeObservation

    inner, params = jaxgrid.make("voltage33-v0")
    for env in (LogWrapper(inner), NormalizeObservation(LogWrapper(inner))):
        assert env.action_names == ("q_share",)
        assert env.observation_names(params) == inner.observation_names(params)
