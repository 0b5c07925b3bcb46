"""The bounded action distributions: samples follow the laws they claim (scipy as reference)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxgrid.train.distributions import BoundedPolicy, sample_beta, sample_gamma

KEY = jax.random.PRNGKey(42)


@pytest.mark.parametrize("alpha", [0.3, 1.0, 2.5, 40.0])
def test_gamma_samples_follow_the_gamma_law(alpha):
    x = np.asarray(sample_gamma(KEY, jnp.full((20_000,), alpha)))
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    assert stats.kstest(x, stats.gamma(alpha).cdf).pvalue > 1e-3


@pytest.mark.parametrize("a, b", [(1.0, 1.0), (1.3, 7.0), (12.0, 2.0)])
def test_beta_samples_follow_the_beta_law(a, b):
    x = np.asarray(sample_beta(KEY, jnp.full((20_000,), a), jnp.full((20_000,), b)))
    assert np.all((x >= 0) & (x <= 1))
    assert stats.kstest(x, stats.beta(a, b).cdf).pvalue > 1e-3


def test_gaussian_samples_follow_each_entrys_normal_law():
    mean = jnp.array([[-0.5, 0.0, 2.0], [1.0, 0.3, -1.0]])  # (agents, entries)
    log_std = jnp.log(jnp.array([[0.1, 1.0, 3.0], [0.5, 2.0, 0.2]]))
    out = jnp.broadcast_to(mean, (20_000, 2, 3))
    policy = BoundedPolicy("gaussian", out, log_std, -10.0 * jnp.ones(3), 10.0 * jnp.ones(3))
    _, raw = policy.sample(KEY)
    z = np.asarray((raw - mean) / jnp.exp(log_std))  # standard normal, entry by entry
    for agent in range(2):
        for entry in range(3):
            assert stats.kstest(z[:, agent, entry], stats.norm.cdf).pvalue > 1e-3
    # entries are independent draws, not copies
    assert abs(np.corrcoef(z[:, 0, 0], z[:, 1, 2])[0, 1]) < 0.03


@pytest.mark.parametrize("kind", ["beta", "gaussian"])
def test_actions_stay_in_the_box_and_fixed_entries_carry_no_probability(kind):
    low = jnp.array([[0.0, -2.0, 3.0]])
    high = jnp.array([[1.0, 2.0, 3.0]])  # the last entry is fixed (masked)
    n_out = 6 if kind == "beta" else 3
    out = 3.0 * jax.random.normal(KEY, (500, 1, n_out))
    log_std = jnp.zeros((1, 3)) if kind == "gaussian" else None
    policy = BoundedPolicy(kind, out, log_std, low, high)
    action, raw = policy.sample(jax.random.PRNGKey(1))
    assert np.all((action >= low) & (action <= high))
    np.testing.assert_array_equal(action[..., 2], 3.0)
    moved = raw.at[..., -1].set(0.37)  # another raw value of the fixed entry
    np.testing.assert_allclose(policy.log_prob(moved), policy.log_prob(raw))
    mode = policy.mode()
    assert np.all((mode >= low) & (mode <= high))
