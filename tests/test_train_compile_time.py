"""``benchmarks/train_compile_time.py --learner`` takes the environment's physics out of a
trainer's update and keeps everything else."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxgrid
from jaxgrid.train.run import ALGOS, RunConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from train_compile_time import without_physics  # noqa: E402


def _batch(env, params, n=3):
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    action = jax.vmap(env.action_space(params).sample)(jax.random.split(jax.random.PRNGKey(1), n))
    return keys, obs, state, action


def test_without_physics_steps_and_resets_in_the_same_shapes_and_computes_nothing(monkeypatch):
    env, params = jaxgrid.make("dso33-v0")
    keys, obs, state, action = _batch(env, params)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    real = step(keys, state, action, params)
    physics, traced = type(env), []
    for name in ("step_env", "reset_env"):
        original = getattr(physics, name)
        monkeypatch.setattr(
            physics, name, lambda self, *a, _f=original: (traced.append(1), _f(self, *a))[1]
        )
    hollow = without_physics(env, params)
    traced.clear()  # the shapes are found once, before any timed trace
    assert hollow is env  # the same object, for a trainer that already holds it
    stood_in = step(keys, state, action, params)
    assert jax.tree_util.tree_structure(stood_in) == jax.tree_util.tree_structure(real)
    for a, b in zip(jax.tree_util.tree_leaves(stood_in), jax.tree_util.tree_leaves(real)):
        assert a.shape == b.shape and a.dtype == b.dtype
    # every observation is the mean of the environment's action: no power flow behind it
    mean = jnp.mean(action.reshape(action.shape[0], -1), axis=1)
    np.testing.assert_allclose(
        stood_in[0], jnp.broadcast_to(mean[:, None, None], real[0].shape), rtol=1e-6
    )
    # its physics no longer in the program: DistFlow's path products are gone
    jaxpr = str(jax.make_jaxpr(step)(keys, state, action, params))
    assert "dot_general" not in jaxpr
    assert not traced  # nor is the physics traced to find them again


def test_a_trainer_builds_its_update_around_an_environment_without_physics():
    config = RunConfig(env="arbitrage-v0", algo="ppo")
    env, params = jaxgrid.make("arbitrage-v0", **config.env_kwargs)
    fns = ALGOS["ppo"].make_train(config.algo_config(), without_physics(env, params), params)
    runner = jax.eval_shape(fns.init, jax.random.PRNGKey(0), params)
    after, _ = jax.eval_shape(fns.update_step, runner, params)
    assert jax.tree_util.tree_structure(after) == jax.tree_util.tree_structure(runner)
