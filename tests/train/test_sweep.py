"""Sweeps over seeds and reward weightings equal the trainings they stack."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from toy_envs import Tanks

import jaxgrid
from jaxgrid.train import ppo
from jaxgrid.train.sweep import Sweep, with_weights

KEY = jax.random.PRNGKey(3)


def test_each_sweep_member_equals_its_own_training():
    env = Tanks(num_agents=2)
    params = env.default_params()
    fns = ppo.make_train(ppo.PPOConfig(total_steps=3 * 8 * 8, num_envs=8, num_steps=8), env)
    weightings = [[1.0, 0.0], [0.2, 0.8]]
    scenarios = with_weights(env, params, weightings)
    sweep = Sweep(fns, seeds=2, scenarios=scenarios)
    runners, metrics = sweep.train(KEY)
    assert metrics["episode_return"].shape == (2, 2, 3)  # scenarios, seeds, updates
    seed_keys = jax.random.split(KEY, 2)
    train = jax.jit(fns.train)
    for s, scenario in enumerate(scenarios):
        for k in range(2):
            alone, alone_metrics = train(seed_keys[k], scenario, s * 2 + k)
            np.testing.assert_allclose(
                metrics["episode_return"][s, k], alone_metrics["episode_return"], rtol=1e-5
            )
            np.testing.assert_allclose(
                runners.train_state.params["net"]["params"]["type_0"]["Dense_0"]["kernel"][s, k],
                alone.train_state.params["net"]["params"]["type_0"]["Dense_0"]["kernel"],
                rtol=1e-5,
                atol=1e-6,
            )
            assert int(runners.member[s, k]) == s * 2 + k
    # the weighting is really used: the first scenario's reward is the tracking objective alone
    objectives = np.asarray(metrics["episode_objectives"])  # (2, 2, updates, n_objectives)
    returns = np.asarray(metrics["episode_return"])
    np.testing.assert_allclose(returns[0], objectives[0, ..., 0], rtol=1e-5)
    np.testing.assert_allclose(returns[1], objectives[1] @ np.array([0.2, 0.8]), rtol=1e-5)


def test_bad_weightings_are_refused():
    env = Tanks()
    with pytest.raises(ValueError, match="needs 2 weights"):
        with_weights(env, env.default_params(), [[1.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="finite"):
        with_weights(env, env.default_params(), [[1.0, float("nan")]])


def test_weightings_go_where_the_environment_keeps_its_scalarisation():
    env, params = jaxgrid.make("smartgrid33-v0")  # the society's params hold it
    n = len(env.objective_names)
    weights = np.eye(n)[0] * 0.5 + 0.5 / n
    (scenario,) = with_weights(env, params, [weights])
    np.testing.assert_allclose(scenario.society.scalarisation.weights, weights, rtol=1e-6)
    assert not hasattr(scenario, "scalarisation")


def test_chunks_of_one_size_share_one_compiled_program():
    """Checkpointing every K updates (and resuming from any update) must not recompile:
    not for a NumPy integer as the first update, nor for runners read back from a
    checkpoint (strongly typed arrays, where a fresh ``TrainState.step`` was a weakly
    typed 0)."""
    env = Tanks()
    fns = ppo.make_train(ppo.PPOConfig(total_steps=4 * 8 * 8, num_envs=8, num_steps=8), env)
    sweep = Sweep(fns, seeds=2)
    runners = sweep.init(KEY)
    for first in (np.int64(0), 1, 2):
        runners, _ = sweep.run_updates(runners, 1, first)
    restored = jax.tree_util.tree_map(lambda x: jnp.asarray(np.asarray(x)), runners)
    sweep.run_updates(restored, 1, 3)
    assert sweep.compiled_updates._cache_size() == 1
