"""Devices grouped into agents: a group sees and sets its members' observations and
actions side by side, and earns its members' mean reward vector."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only

import jaxgrid
from jaxgrid.config import ConfigError, make_from_config
from jaxgrid.testing import check_env
from jaxgrid.wrappers.groups import GroupAgents

KEY = jax.random.PRNGKey(5)
HOMES = {
    "home_0": ["battery_0", "pv_0", "ev_0"],
    "home_1": ["battery_1", "pv_1", "ev_1"],
    "street": ["pv_2", "flexload_0", "flexload_1"],
}


@pytest.fixture(scope="module")
def ders():
    return jaxgrid.make("ders33-v0")


@pytest.fixture(scope="module")
def voltage():
    return jaxgrid.make("voltage33-v0")


@full_only
def test_homes_see_act_and_earn_as_their_devices(ders):
    env, params = ders
    homes = GroupAgents(env, HOMES)
    assert homes.agents == ("home_0", "home_1", "street")
    assert homes.agent_types == ("battery+pv+ev", "battery+pv+ev", "pv+flexload+flexload")
    index = {a: i for i, a in enumerate(env.agents)}
    _, state = env.reset(KEY, params)
    device_action = env.action_space(params).sample(jax.random.PRNGKey(1))
    home_action = jnp.stack(
        [jnp.concatenate([device_action[index[a]] for a in m]) for m in HOMES.values()]
    )
    obs, new, _, _, _, info = homes.step_env(KEY, state, home_action, params)
    ref_obs, ref, _, _, _, ref_info = env.step_env(KEY, state, device_action, params)
    for x, y in zip(jax.tree_util.tree_leaves(new), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(x, y)  # the devices did exactly what was asked
    for g, members in enumerate(HOMES.values()):
        rows = [np.asarray(ref_obs)[index[a]] for a in members]
        np.testing.assert_array_equal(obs[g], np.concatenate(rows))
        vectors = np.asarray(ref_info["reward_vector"])[[index[a] for a in members]]
        np.testing.assert_allclose(info["reward_vector"][g], vectors.mean(0), rtol=1e-6)
        costs = np.asarray(ref_info["costs"])[[index[a] for a in members]]
        np.testing.assert_allclose(info["costs"][g], costs.mean(0), rtol=1e-6, atol=1e-9)
    # the rule baseline acts for every device of a home
    device_obs, _ = env.reset(KEY, params)
    rules = env.baselines(params)["rules"](KEY, device_obs)
    home_obs = homes.observe(env.reset(KEY, params)[1], params)
    grouped_rules = homes.baselines(params)["rules"](KEY, home_obs)
    np.testing.assert_allclose(
        grouped_rules[2], np.concatenate([rules[index[a]] for a in HOMES["street"]])
    )


@full_only
def test_uneven_groups_are_padded_and_pass_the_test_kit(voltage):
    env, params = voltage
    groups = GroupAgents(env, {"a": ["pv_0", "pv_3"], "b": ["pv_1"], "c": ["pv_2", "pv_4", "pv_5"]})
    low, high = groups.action_space(params)._bounds()
    assert low.shape == (3, 3)
    np.testing.assert_array_equal(low[1, 1:], 0.0)  # b's two padded entries: fixed at 0
    np.testing.assert_array_equal(high[1, 1:], 0.0)
    np.testing.assert_array_equal(high[1, 0], 1.0)
    assert groups.observation_names(params)[-1] == "2.vm_pu"
    obs, state = env.reset(KEY, params)
    droop = env.baselines(params)["droop"](KEY, obs)
    grouped = groups.baselines(params)["droop"](KEY, groups.observe(state, params))
    np.testing.assert_allclose(grouped[2], np.asarray(droop)[[2, 4, 5], 0], rtol=1e-6)
    np.testing.assert_allclose(grouped[1], [droop[1, 0], 0.0, 0.0], rtol=1e-6)
    check_env(groups, params, num_steps=40, num_envs=4, whole_episode=False)


@pytest.mark.parametrize(
    "groups, message",
    [
        ({"a": ["pv_0", "pv_9"]}, r"groups\.a: 'pv_9' is not an agent of voltage33-v0"),
        ({"a": ["pv_0", "pv_1"], "b": ["pv_1"]}, r"groups\.b: 'pv_1' is already in group 'a'"),
        (
            {"a": ["pv_0", "pv_1", "pv_2", "pv_3"]},
            r"groups: agents \['pv_4', 'pv_5'\] are in no group",
        ),
        ({"a": []}, r"groups\.a: expected at least one agent"),
        ({}, r"groups: expected at least one group"),
    ],
)
def test_bad_groups_name_what_is_wrong(voltage, groups, message):
    env, _ = voltage
    with pytest.raises(ValueError, match=message):
        GroupAgents(env, groups)


SCENARIO = """env = "voltage33-v0"

[[agents]]
name = "north"
devices = ["pv_0", "pv_1", "pv_2"]

[[agents]]
name = "south"
devices = ["pv_3", "pv_4", "pv_5"]
"""


def test_scenario_file_groups_devices_into_agents(tmp_path):
    path = tmp_path / "groups.toml"
    path.write_text(SCENARIO)
    env, params = make_from_config(path)
    assert env.agents == ("north", "south")
    assert env.action_space(params).shape == (2, 3)
    path.write_text(SCENARIO.replace('"pv_5"', '"pv_6"'))
    with pytest.raises(ConfigError, match=r"groups\.toml: agents\.south: 'pv_6' is not an agent"):
        make_from_config(path)
    path.write_text(SCENARIO.replace("devices = [", "members = ["))
    with pytest.raises(
        ConfigError,
        match=r"agents\[0\]\.members: unknown key; expected some of \['name', 'devices'\]",
    ):
        make_from_config(path)
    path.write_text(SCENARIO.replace('name = "south"', 'name = "north"'))
    with pytest.raises(ConfigError, match=r"agents\[1\]\.name: 'north' names two agents"):
        make_from_config(path)
