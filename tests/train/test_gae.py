"""Truncation-aware GAE against a hand-computed example and a plain Python loop."""

import jax.numpy as jnp
import numpy as np

from jaxgrid.train.gae import gae


def test_hand_computed_episode_with_a_truncation_and_a_termination():
    # step 0: ordinary; step 1: truncated (bootstrap from the final observation's value 9);
    # step 2: ordinary; step 3: terminated (its next value 7 must be ignored)
    rewards = jnp.array([1.0, 2.0, 3.0, 4.0])
    values = jnp.array([0.5, 1.0, 1.5, 2.0])
    next_values = jnp.array([1.0, 9.0, 2.0, 7.0])
    terminated = jnp.array([False, False, False, True])
    truncated = jnp.array([False, True, False, False])
    # gamma 0.9, lambda 0.8 (gamma * lambda = 0.72), by hand:
    # deltas: 1 + .9*1 - .5 = 1.4;  2 + .9*9 - 1 = 9.1;  3 + .9*2 - 1.5 = 3.3;  4 - 2 = 2
    # A3 = 2;  A2 = 3.3 + .72*2 = 4.74;  A1 = 9.1 (episode boundary);  A0 = 1.4 + .72*9.1
    advantages, returns = gae(rewards, values, next_values, terminated, truncated, 0.9, 0.8)
    np.testing.assert_allclose(advantages, [7.952, 9.1, 4.74, 2.0], rtol=1e-6)
    np.testing.assert_allclose(returns, [8.452, 10.1, 6.24, 4.0], rtol=1e-6)


def test_batched_gae_matches_a_python_loop():
    rng = np.random.default_rng(0)
    shape = (50, 3, 2)  # time, environments, agents
    rewards, values, next_values = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    terminated = rng.random(shape[:2]) < 0.1
    truncated = (rng.random(shape[:2]) < 0.1) & ~terminated
    terminated = np.broadcast_to(terminated[..., None], shape)
    truncated = np.broadcast_to(truncated[..., None], shape)
    gamma, lam = 0.97, 0.9
    expected = np.zeros(shape)
    running = np.zeros(shape[1:])
    for t in reversed(range(shape[0])):
        bootstrap = np.where(terminated[t], 0.0, next_values[t])
        delta = rewards[t] + gamma * bootstrap - values[t]
        running = delta + gamma * lam * np.where(terminated[t] | truncated[t], 0.0, running)
        expected[t] = running
    advantages, returns = gae(
        jnp.asarray(rewards),
        jnp.asarray(values),
        jnp.asarray(next_values),
        jnp.asarray(terminated),
        jnp.asarray(truncated),
        gamma,
        lam,
    )
    np.testing.assert_allclose(advantages, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(returns, expected + values, rtol=1e-4, atol=1e-5)
