"""Adapters checked by the ecosystems' own checkers, and against the environment itself."""

import jax
import numpy as np
import pytest
from conftest import full_only, sampled

import jaxgrid
from jaxgrid.interop import JaxMARLEnv

gymnasium = pytest.importorskip("gymnasium")
pettingzoo = pytest.importorskip("pettingzoo")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from pettingzoo.test import api_test, parallel_api_test  # noqa: E402

from jaxgrid.interop import GymnasiumEnv, PettingZooEnv, aec_env  # noqa: E402
from jaxgrid.wrappers import CentralisedWrapper  # noqa: E402

ONE_PER_FAMILY = ["arbitrage-v0", "dso33-v0", "ders33-v0", "voltage33-v0", "smartgrid-v0"]


@pytest.mark.parametrize("name", sampled(ONE_PER_FAMILY, keep=("arbitrage-v0", "voltage33-v0")))
def test_gymnasium_checker_passes(name):
    env, params = jaxgrid.make(name)
    check_env(GymnasiumEnv(env, params), skip_render_check=True)


@pytest.mark.parametrize(
    "name", sampled([*ONE_PER_FAMILY, "gardeners-v0"], keep=("voltage33-v0", "gardeners-v0"))
)
def test_pettingzoo_parallel_api_test_passes(name):
    env, params = jaxgrid.make(name)
    parallel_api_test(PettingZooEnv(env, params), num_cycles=60)


@pytest.mark.parametrize("name", ["gardeners-v0", "voltage33-v0"])
def test_pettingzoo_aec_api_test_passes(name):
    env, params = jaxgrid.make(name)
    api_test(aec_env(env, params), num_cycles=30)


def test_aec_turn_equals_one_step_of_the_environment():
    env, params = jaxgrid.make("gardeners-v0")
    game = aec_env(env, params)
    game.reset(seed=3)
    parallel = game.env.env  # order enforcing -> parallel_to_aec -> PettingZooEnv
    state, key = parallel._state, jax.random.split(parallel._key)[1]
    actions = {}
    for agent in game.agent_iter(len(env.agents)):
        obs, *_ = game.last()
        actions[agent] = int(np.flatnonzero(obs["action_mask"])[-1])  # the last legal one
        game.step(actions[agent])
    stacked = np.array([actions[a] for a in env.agents])
    _, _, reward, *_ = env.step_env(key, state, stacked, params)
    np.testing.assert_allclose([game.rewards[a] for a in env.agents], reward, rtol=1e-6)
    assert any(a != 5 for a in actions.values())  # not only WAIT: the turn did something


def test_gymnasium_step_is_the_centralised_environment_step():
    env, params = jaxgrid.make("voltage33-v0")
    gym_env = GymnasiumEnv(env, params)
    obs, _ = gym_env.reset(seed=3)
    action = np.linspace(-1, 1, 6, dtype=np.float32)
    key_before, state_before = gym_env._key, gym_env._state
    obs, reward, terminated, truncated, info = gym_env.step(action)
    _, key = jax.random.split(key_before)
    central = CentralisedWrapper(env)
    want = central.step_env(key, state_before, action[None], params)
    np.testing.assert_allclose(obs, np.asarray(want[0][0]), rtol=1e-6)
    assert reward == pytest.approx(float(want[2][0]), rel=1e-6)
    assert (terminated, truncated) == (bool(want[3]), bool(want[4]))
    np.testing.assert_allclose(info["reward_vector"], np.asarray(want[5]["reward_vector"][0]))
    # the same seed gives the same episode
    again = GymnasiumEnv(env, params)
    np.testing.assert_array_equal(again.reset(seed=3)[0], gym_env.reset(seed=3)[0])


def test_pettingzoo_keeps_every_agent_s_own_numbers():
    env, params = jaxgrid.make("voltage33-v0")
    pz = PettingZooEnv(env, params)
    pz.reset(seed=0)
    # a different action per agent, so a mix-up of agents changes the numbers
    actions = {a: np.array([x], np.float32) for a, x in zip(pz.agents, np.linspace(-1, 1, 6))}
    key_before, state_before = pz._key, pz._state
    obs, rewards, _, _, infos = pz.step(actions)
    _, key = jax.random.split(key_before)
    stacked = np.stack([actions[a] for a in env.agents])
    want_obs, _, want_reward, _, _, want_info = env.step_env(key, state_before, stacked, params)
    for i, agent in enumerate(env.agents):
        np.testing.assert_allclose(obs[agent], np.asarray(want_obs[i]), rtol=1e-6)
        assert rewards[agent] == pytest.approx(float(want_reward[i]), rel=1e-6)
        np.testing.assert_allclose(infos[agent]["costs"], np.asarray(want_info["costs"][i]))
    a, b = env.agents[:2]
    assert not np.allclose(obs[a], obs[b])  # agents do see different things here


def test_pettingzoo_names_a_missing_action():
    env, params = jaxgrid.make("voltage33-v0")
    pz = PettingZooEnv(env, params)
    pz.reset(seed=0)
    with pytest.raises(ValueError, match=env.agents[0]):
        pz.step({a: np.zeros(1, np.float32) for a in env.agents[1:]})


@full_only
def test_jaxmarl_api_is_jittable_and_matches_the_stacked_step():
    env, params = jaxgrid.make("ders33-v0")
    marl = JaxMARLEnv(env, params)
    key = jax.random.PRNGKey(0)
    obs, state = jax.jit(marl.reset)(key)
    assert set(obs) == set(env.agents)  # (jit returns dicts with sorted keys)
    actions = {
        a: marl.action_space(a).sample(jax.random.PRNGKey(i)) for i, a in enumerate(marl.agents)
    }
    obs2, state2, rewards, dones, info = jax.jit(marl.step)(key, state, actions)
    stacked = np.stack([actions[a] for a in env.agents])
    want_obs, _, want_reward, *_ = env.step(key, state, stacked, params)
    for i, agent in enumerate(env.agents):
        np.testing.assert_allclose(obs2[agent], want_obs[i], rtol=1e-6)
        assert float(rewards[agent]) == pytest.approx(float(want_reward[i]), rel=1e-6)
        assert marl.observation_space(agent).contains(obs2[agent])
    assert set(dones) == set(env.agents) | {"__all__"}
    avail = marl.get_avail_actions(state2)
    assert all(bool(np.all(avail[a])) for a in env.agents)  # boxes: everything allowed


def test_jaxmarl_episode_end_sets_all_done():
    env, params = jaxgrid.make("arbitrage-v0")
    marl = JaxMARLEnv(env, params)
    key = jax.random.PRNGKey(1)
    _, state = marl.reset(key)
    step = jax.jit(marl.step)
    zero = {a: np.zeros(marl.action_space(a).shape, np.float32) for a in marl.agents}
    for t in range(env.horizon):
        _, state, _, dones, _ = step(jax.random.fold_in(key, t), state, zero)
        assert bool(dones["__all__"]) == (t == env.horizon - 1)
