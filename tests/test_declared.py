"""Declared observations and actions (ETA Ctrl's ``[[observations]]`` / ``[[actions]]``):
agents see the named entries scaled and bounded, control the named actions in their own
units, and bad declarations are refused with one error naming the entry."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import float64_leaves, full_only, x64
from toy_envs import Doors

import jaxgrid
from jaxgrid.config import ConfigError, make_from_config
from jaxgrid.testing import check_env
from jaxgrid.wrappers.declared import ActionEntry, DeclaredSpaces, ObservationEntry

KEY = jax.random.PRNGKey(7)


@pytest.fixture(scope="module")
def voltage():
    return jaxgrid.make("voltage33-v0")


@pytest.fixture(scope="module")
def ders():
    return jaxgrid.make("ders33-v0")


def test_agents_see_the_named_entries_scaled_and_clipped(voltage):
    env, params = voltage
    declared = DeclaredSpaces(
        env,
        [
            ObservationEntry("vm_pu", -0.3, 0.3, scale_add=-1.0, scale_mult=20.0),
            ObservationEntry("zone_vm_pu[*]"),
            ObservationEntry("p_pv_mw", scale_mult=1000.0),  # kW
        ],
    )
    obs, state = declared.reset(KEY, params)
    _, state, *_ = declared.step(KEY, state, jnp.zeros((env.num_agents, 1)), params)
    obs = np.asarray(declared.observe(state, params))
    # the reference: the state itself, not the environment's observation layout
    own_vm = np.asarray(state.vm_pu)[np.asarray(params.pv_bus)]
    np.testing.assert_allclose(obs[:, 0], np.clip((own_vm - 1.0) * 20.0, -0.3, 0.3), rtol=1e-6)
    assert np.any(np.abs((own_vm - 1.0) * 20.0) > 0.3)  # the clip is exercised
    zone, mask = np.asarray(params.zone_buses), np.asarray(params.zone_mask)
    np.testing.assert_allclose(
        obs[:, 1 : 1 + env.zone_size], np.where(mask, np.asarray(state.vm_pu)[zone], 0.0)
    )
    _, _, p_pv = env.exogenous(state.start + state.time, params)
    np.testing.assert_allclose(obs[:, -1], np.asarray(p_pv) * 1000.0, rtol=1e-6)
    assert declared.observation_names(params)[0] == "vm_pu"
    assert len(declared.observation_names(params)) == obs.shape[1] == 2 + env.zone_size
    assert declared.observation_space(params).contains(jnp.asarray(obs))


def test_an_action_in_agent_units_reaches_the_environment_rescaled(voltage):
    env, params = voltage
    # agents act in [-50, 50] percent of the reactive headroom, limited to +-20 %
    declared = DeclaredSpaces(env, actions=[ActionEntry("q_share", -20.0, 20.0, 0.0, 100.0)])
    space = declared.action_space(params)
    np.testing.assert_array_equal(space._bounds()[0], -20.0)
    _, state = env.reset(KEY, params)
    agent_action = jnp.linspace(-30.0, 30.0, env.num_agents)[:, None]
    wrapped = declared.step_env(KEY, state, agent_action, params)
    direct = env.step_env(KEY, state, jnp.clip(agent_action, -20.0, 20.0) / 100.0, params)
    np.testing.assert_allclose(wrapped[1].q_mvar, direct[1].q_mvar, rtol=1e-6)
    np.testing.assert_allclose(wrapped[2], direct[2], rtol=1e-6)  # same reward
    assert int(np.sum(wrapped[5]["action_clipped"])) == 2  # -30 and 30 were out of range


def test_declared_observations_trace_in_float64_after_float32(voltage):
    """check_env runs float32 and then float64 in one process; the second trace must not
    inherit an index dtype from the first."""
    env, params = voltage
    declared = DeclaredSpaces(env, [ObservationEntry("*vm_pu*", 0.0, 2.0)])
    _, state = declared.reset(KEY, params)
    assert jax.jit(declared.observe)(state, params).dtype == jnp.float32
    with x64():
        wide = float64_leaves((state, params))
        assert jax.jit(declared.observe)(*wide).dtype == jnp.float64


@full_only
def test_fixed_actions_and_rescaled_baselines(ders):
    env, params = ders
    declared = DeclaredSpaces(
        env, actions=[ActionEntry("dispatch[0]"), ActionEntry("dispatch[1]", fixed=0.0)]
    )
    assert declared.action_names == ("dispatch[0]",)
    _, state = env.reset(KEY, params)
    a = jax.random.uniform(KEY, (env.num_agents, 1), minval=-1.0, maxval=1.0)
    wrapped = declared.step_env(KEY, state, a, params)
    full = jnp.concatenate([a, jnp.zeros_like(a)], axis=1)
    direct = env.step_env(KEY, state, env.action_space(params).project(full)[0], params)
    for x, y in zip(jax.tree_util.tree_leaves(wrapped[1]), jax.tree_util.tree_leaves(direct[1])):
        np.testing.assert_allclose(x, y, rtol=1e-6)
    # the environment's rule-based baseline, its first action entry kept
    obs, _ = env.reset(KEY, params)
    rules = env.baselines(params)["rules"](KEY, obs)
    np.testing.assert_allclose(declared.baselines(params)["rules"](KEY, obs), rules[:, :1])


@full_only
def test_declared_voltage_env_passes_the_test_kit(voltage):
    env, params = voltage
    declared = DeclaredSpaces(
        env,
        [ObservationEntry("*vm_pu*", 0.0, 2.0), ObservationEntry("q_mvar")],
        [ActionEntry("q_share", -0.5, 0.5)],
    )
    assert set(declared.baselines(params)) == {"random"}  # the droop reads undeclared entries
    check_env(declared, params, num_steps=40, num_envs=4, whole_episode=False)


BAD = [
    (dict(observations=[ObservationEntry("voltage")]), r"observations\[0\]\.name: 'voltage' is not an observation entry of voltage33-v0; expected one of \[zone_p_load_mw\[0\]"),
    (dict(observations=[ObservationEntry("vm_pu"), ObservationEntry("*vm_pu")]), r"observations\[1\]\.name: 'vm_pu' is declared twice"),
    (dict(observations=[ObservationEntry("vm_pu", scale_mult=0.0)]), r"observations\[0\]\.scale_mult: must not be 0"),
    (dict(observations=[ObservationEntry("vm_pu", 1.1, 0.9)]), r"observations\[0\]: expected low <= high"),
    (dict(observations=[ObservationEntry("vm_pu", scale_add=float("nan"))]), r"observations\[0\]: numbers must be finite"),
    (dict(actions=[ActionEntry("p")]), r"actions\[0\]\.name: 'p' is not an action of voltage33-v0; expected one of \['q_share'\]"),
    (dict(actions=[ActionEntry("q_share", -2.0, 0.5)]), r"actions\[0\]\.low: -2\.0 is outside 'q_share''s range in agent units \[-1, 1\]"),
    (dict(actions=[ActionEntry("q_share", fixed=3.0)]), r"actions\[0\]\.fixed: 3\.0 is outside 'q_share''s range"),
    (dict(actions=[ActionEntry("q_share", fixed=0.0)]), r"actions: every action is fixed"),
    (dict(actions=[ActionEntry("q_share", low=0.0, fixed=0.0)]), r"actions\[0\]: a fixed action takes no low or high"),
    (dict(actions=[ActionEntry("q_share"), ActionEntry("q_share")]), r"actions\[1\]\.name: 'q_share' is declared twice"),
]  # fmt: skip


@pytest.mark.parametrize("declaration, message", BAD)
def test_bad_declarations_name_the_entry(voltage, declaration, message):
    env, params = voltage
    with pytest.raises(ValueError, match=message):
        DeclaredSpaces(env, params=params, **declaration)


def test_every_action_must_be_declared_once_any_is(ders):
    env, params = ders
    with pytest.raises(ValueError, match=r"actions: \['dispatch\[1\]'\] not declared"):
        DeclaredSpaces(env, actions=[ActionEntry("dispatch[0]")])


def test_discrete_actions_cannot_be_declared():
    env = Doors()
    with pytest.raises(ValueError, match="declared actions need named Box actions"):
        DeclaredSpaces(env, actions=[ActionEntry("open")])


SCENARIO = """env = "voltage33-v0"

[[observations]]
name = "vm_pu"
scale_add = -1.0
scale_mult = 20.0

[[observations]]
name = "zone_vm_pu[*]"

[[actions]]
name = "q_share"
low = -0.5
high = 0.5
"""


def test_scenario_file_declares_observations_and_actions(tmp_path, voltage):
    path = tmp_path / "declared.toml"
    path.write_text(SCENARIO)
    env, params = make_from_config(path)
    inner, _ = voltage
    assert env.observation_names(params) == (
        "vm_pu",
        *(f"zone_vm_pu[{j}]" for j in range(inner.zone_size)),
    )
    np.testing.assert_array_equal(env.action_space(params)._bounds()[1], 0.5)
    obs, state = env.reset(KEY, params)
    own_vm = np.asarray(state.vm_pu)[np.asarray(params.pv_bus)]
    np.testing.assert_allclose(obs[:, 0], (own_vm - 1.0) * 20.0, rtol=1e-5, atol=1e-6)


MALFORMED = [
    ('[[observations]]\nname = "vm_pu"\nscale = 2.0\n', r"observations\[0\]\.scale: unknown key; expected some of \['name', 'low', 'high', 'scale_add', 'scale_mult'\]"),
    ('[[observations]]\nname = "vm_pu"\nlow = "zero"\n', r"observations\[0\]\.low: Input should be a valid number"),
    ('[[observations]]\nname = "vm_pu"\nscale_mult = nan\n', r"observations\[0\]\.scale_mult: Input should be a finite number"),
    ('[[observations]]\nlow = 0.0\n', r"observations\[0\]\.name: Field required"),
    ('[[observations]]\nname = "voltage"\n', r"observations\[0\]\.name: 'voltage' is not an observation entry of voltage33-v0"),
    ("[observations]\nname = 3\n", r"observations: expected an array of tables \(\[\[observations\]\] entries\)"),
    ('[[actions]]\nname = "q_share"\nlow = -0.5\n\n[[actions]]\nname = "q_share"\nfixed = true\n', r"actions\[1\]\.fixed: Input should be a valid number"),
    ('[[actions]]\nname = "q_share"\nhigh = 1.5\n', r"actions\[0\]\.high: 1\.5 is outside 'q_share''s range in agent units"),
]  # fmt: skip


@pytest.mark.parametrize("body, message", MALFORMED)
def test_malformed_declarations_in_a_scenario_file(tmp_path, body, message):
    path = tmp_path / "bad.toml"
    path.write_text(f'env = "voltage33-v0"\n\n{body}')
    with pytest.raises(ConfigError, match=message) as err:
        make_from_config(path)
    assert str(err.value).startswith(f"{path}: ")
    assert err.value.__cause__ is None
