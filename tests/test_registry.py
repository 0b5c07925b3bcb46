"""The registry: make, register, list_envs and their errors."""

import pytest
import toy_envs

import jaxgrid
from jaxgrid import registry


@pytest.fixture
def tanks_registered():
    def factory(num_agents: int = 3, horizon: int = 7):
        env = toy_envs.Tanks(num_agents=num_agents, horizon=horizon)
        return env, env.default_params()

    jaxgrid.register("tanks-v0", factory)
    yield
    registry._REGISTRY.pop("tanks-v0")


def test_make_builds_env_and_params(tanks_registered):
    env, params = jaxgrid.make("tanks-v0", num_agents=5)
    assert env.num_agents == 5 and env.horizon == 7
    assert "tanks-v0" in jaxgrid.list_envs()
    assert jaxgrid.list_envs() == sorted(jaxgrid.list_envs())


def test_an_env_registered_without_a_name_takes_its_id(tanks_registered):
    env, _ = jaxgrid.make("tanks-v0")
    assert env.name == "tanks-v0"  # was the class name, "Tanks"
    named, _ = jaxgrid.make("smartgrid-scarce-v0")
    assert named.name == "smartgrid-scarce-v0"  # a name the factory set is kept


def test_unknown_name_suggests_close_matches(tanks_registered):
    with pytest.raises(ValueError, match=r"unknown environment 'tank-v0'; did you mean 'tanks-v0'"):
        jaxgrid.make("tank-v0")


def test_unknown_override_is_an_error_not_ignored(tanks_registered):
    with pytest.raises(
        ValueError,
        match=r"unexpected keyword argument 'agents'.*accepted overrides: \['num_agents', 'horizon'\]",
    ):
        jaxgrid.make("tanks-v0", agents=4)


def test_registering_twice_needs_overwrite(tanks_registered):
    with pytest.raises(ValueError, match="already registered"):
        jaxgrid.register("tanks-v0", lambda: None)
    jaxgrid.register("tanks-v0", registry._REGISTRY["tanks-v0"], overwrite=True)
