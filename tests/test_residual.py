"""The residual-action wrapper: a zero residual plays the baseline, residuals reach the whole
box, the baselines play as unwrapped, the contract, the run config and its errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgrid
from jaxgrid.testing import check_env
from jaxgrid.train.evaluate import evaluate_baselines
from jaxgrid.wrappers import ResidualAction

KEY = jax.random.PRNGKey(0)


@pytest.fixture(scope="module")
def arbitrage():
    env, params = jaxgrid.make("arbitrage-v0")
    return env, params, ResidualAction(env, params, "threshold")


def test_a_zero_residual_plays_the_baseline(arbitrage):
    env, params, wrapped = arbitrage
    threshold = env.baselines(params)["threshold"]
    obs, state = env.reset(KEY, params)
    wrapped_obs, wrapped_state = wrapped.reset(KEY, params)
    zero = jnp.zeros(wrapped.action_space(params).shape)
    charged = 0
    for t in range(24):
        key = jax.random.fold_in(KEY, t)
        action = threshold(key, obs)
        charged += int(np.any(np.asarray(action) != 0))
        obs, state, reward, *_ = env.step_env(key, state, action, params)
        wrapped_obs, wrapped_state, wrapped_reward, *_ = wrapped.step_env(
            key, wrapped_state, zero, params
        )
        np.testing.assert_array_equal(wrapped_obs, obs)
        np.testing.assert_array_equal(wrapped_reward, reward)
    assert charged > 0  # the baseline acted, so a wrapper that ignored it would differ


def test_residuals_reach_both_ends_of_the_box():
    env, params = jaxgrid.make("tso14-continuous-v0")
    wrapped = ResidualAction(env, params, "merit_order")
    space = wrapped.action_space(params)
    np.testing.assert_array_equal(space.low, -2.0)  # [-1, 1] -> [-2, 2]
    np.testing.assert_array_equal(space.high, 2.0)
    obs, state = env.reset(KEY, params)
    listed = np.asarray(env.request(env.baselines(params)["merit_order"](KEY, obs))[0])
    assert listed.any() and not listed.all()  # a correction must turn units on and off
    for end in (-1.0, 1.0):  # every unit requested off, then on, whatever the list says
        shape = space.shape
        got = wrapped.step_env(KEY, state, jnp.full(shape, 2.0 * end), params)
        want = env.step_env(KEY, state, jnp.full(shape, end), params)
        np.testing.assert_array_equal(got[1].status, want[1].status)
        np.testing.assert_array_equal(got[1].pg_mw, want[1].pg_mw)


def test_the_baselines_play_as_unwrapped(arbitrage):
    env, params, wrapped = arbitrage
    got = evaluate_baselines(wrapped, params, KEY, episodes=4)
    want = evaluate_baselines(env, params, KEY, episodes=4, controllers=False)
    assert set(got) == set(want) == {"random", "idle", "threshold"}
    for name in got:
        assert got[name]["return"] == pytest.approx(want[name]["return"], rel=1e-6), name
    assert len({round(r["return"], 3) for r in got.values()}) == 3  # they differ


def test_the_oracle_is_the_wrapped_environments(arbitrage):
    env, params, wrapped = arbitrage
    _, state = env.reset(KEY, params)
    best = env.oracle_return(params, state)
    assert best is not None and wrapped.oracle_return(params, state) == best


def test_the_wrapped_environment_meets_the_contract(arbitrage):
    check_env(arbitrage[2], num_steps=100, num_envs=4)


def test_only_box_actions_and_known_baselines():
    env, params = jaxgrid.make("tso14-v0")
    with pytest.raises(ValueError, match="needs a Box action space; tso14-v0's is Dict"):
        ResidualAction(env, params, "merit_order")
    env, params = jaxgrid.make("arbitrage-v0")
    with pytest.raises(ValueError, match=r"no baseline 'best'.*\['idle', 'random', 'threshold'\]"):
        ResidualAction(env, params, "best")


def test_a_run_learns_residuals_on_the_baseline_it_names():
    from jaxgrid.cli import _run_config, build_parser
    from jaxgrid.errors import UserError

    args = ["train", "--env", "arbitrage-v0", "--residual", "threshold"]
    config = _run_config(build_parser().parse_args(args))
    assert config.residual == "threshold"
    assert isinstance(config.make_env()[0], ResidualAction)
    args[-1] = "best"
    with pytest.raises(UserError, match="--residual: arbitrage-v0 has no baseline 'best'"):
        _run_config(build_parser().parse_args(args))
