"""compute_dtype="bfloat16": products and activations in bfloat16, parameters, optimiser
state and losses in float32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgrid
from jaxgrid.train.networks import ActorCritic
from jaxgrid.train.ppo import PPOConfig, make_train

KEY = jax.random.PRNGKey(0)


def test_bfloat16_network_keeps_float32_parameters_and_outputs():
    obs = jax.random.normal(KEY, (5, 3, 7))
    net = ActorCritic(agent_type=(0, 0, 1), n_out=4, hidden=(32, 32))
    mixed = ActorCritic(agent_type=(0, 0, 1), n_out=4, hidden=(32, 32), compute_dtype="bfloat16")
    params = net.init(KEY, obs)
    mixed_params = mixed.init(KEY, obs)
    leaves = jax.tree_util.tree_leaves(mixed_params)
    assert leaves and all(leaf.dtype == jnp.float32 for leaf in leaves)
    (out, value), (mixed_out, mixed_value) = net.apply(params, obs), mixed.apply(params, obs)
    assert mixed_out.dtype == jnp.float32 and mixed_value.dtype == jnp.float32
    # the same parameters, bfloat16 products: close (8 bits of mantissa), not equal
    np.testing.assert_allclose(mixed_value, value, atol=0.05)
    np.testing.assert_allclose(mixed_out, out, atol=0.01)
    assert not np.array_equal(mixed_value, value)


def test_ppo_trains_in_mixed_precision_with_float32_state():
    env, params = jaxgrid.make("arbitrage-v0")
    config = PPOConfig(
        total_steps=2 * 8 * 16, num_envs=8, num_steps=16, num_minibatches=2,
        compute_dtype="bfloat16",
    )  # fmt: skip
    fns = make_train(config, env, params)
    runner = jax.jit(fns.init)(KEY, params)
    runner, metrics = jax.jit(fns.run_updates, static_argnums=(2,))(runner, params, 2)
    dtypes = {leaf.dtype for leaf in jax.tree_util.tree_leaves(runner.train_state)}
    assert jnp.bfloat16 not in dtypes
    # the trainer's network does compute in bfloat16
    net_params = runner.train_state.params["net"]
    obs = jnp.zeros((4, env.num_agents, env.observation_space(params).shape[-1]))
    forward = jax.make_jaxpr(runner.train_state.apply_fn)(net_params, obs)
    assert "bf16" in str(forward)
    assert all(np.all(np.isfinite(np.asarray(m))) for m in jax.tree_util.tree_leaves(metrics))


def test_compute_dtype_is_checked():
    with pytest.raises(ValueError, match="compute_dtype must be 'float32' or 'bfloat16'"):
        PPOConfig(compute_dtype="float16")
