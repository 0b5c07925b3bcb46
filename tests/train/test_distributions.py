"""The bounded action distributions: samples follow the laws they claim (scipy as reference)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import jaxpr_equations, jaxpr_loops
from scipy import stats

from jaxgrid.train.distributions import (
    BoundedPolicy,
    beta_entropy,
    beta_log_prob,
    sample_beta,
    sample_gamma,
)

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


CONCENTRATIONS = [(1.0, 1.0), (1.3, 7.0), (12.0, 2.0), (150.0, 320.0)]


@pytest.mark.parametrize("a, b", CONCENTRATIONS)
def test_beta_log_density_and_entropy_match_scipy(a, b):
    x = np.linspace(1e-4, 1.0 - 1e-4, 201).astype(np.float32)  # scipy at the same points
    want = stats.beta(a, b)
    got_lp = beta_log_prob(jnp.asarray(x), jnp.full(x.shape, a), jnp.full(x.shape, b))
    # float32 lgamma of a + b ~ 470: a few ulps of 2.4e3 absolute
    np.testing.assert_allclose(got_lp, want.logpdf(x.astype(np.float64)), rtol=1e-5, atol=2e-3)
    np.testing.assert_allclose(
        beta_entropy(jnp.float32(a), jnp.float32(b)), want.entropy(), atol=2e-3
    )


def test_policy_beta_log_prob_and_entropy_are_the_betas_of_its_concentrations():
    out = jnp.array([[[0.3, -1.0, 2.0, 0.5]]])  # (batch, agent, 2 x 2 entries)
    policy = BoundedPolicy("beta", out, None, jnp.zeros(2), jnp.ones(2))
    a, b = (
        np.asarray(jax.nn.softplus(out[..., :2]) + 1.0),
        np.asarray(jax.nn.softplus(out[..., 2:]) + 1.0),
    )
    raw = jnp.array([[[0.2, 0.9]]])
    np.testing.assert_allclose(
        policy.log_prob(raw), stats.beta(a, b).logpdf(raw).sum(-1), rtol=1e-5
    )
    np.testing.assert_allclose(policy.entropy(), stats.beta(a, b).entropy().sum(-1), rtol=1e-5)


def test_beta_compiles_small():
    """One rejection loop draws both Gammas, and the loss's gradient applies each special
    function to the stacked concentrations once per use: every call is its own XLA kernel.
    With distrax's Beta (three lgamma and three digamma, their gradients as many again)
    and a loop per Gamma, PPO's update on arbitrage-v0 was 604 fusions; now 520."""
    alpha = jnp.full((64, 3), 2.0)
    assert len(jaxpr_loops(jax.make_jaxpr(sample_beta)(KEY, alpha, alpha).jaxpr)) == 1

    def loss(out):
        policy = BoundedPolicy("beta", out, None, jnp.zeros(3), jnp.ones(3))
        return jnp.sum(policy.log_prob(jnp.full((64, 3), 0.4))) + jnp.sum(policy.entropy())

    eqns = jaxpr_equations(jax.make_jaxpr(jax.grad(loss))(jnp.ones((64, 6))).jaxpr)
    special = [
        e.primitive.name for e in eqns if e.primitive.name in ("lgamma", "digamma", "polygamma")
    ]
    # lgamma in log_prob and entropy, digamma in entropy and as lgamma's derivative twice,
    # polygamma as digamma's derivative
    assert sorted(special) == ["digamma"] * 3 + ["lgamma"] * 2 + ["polygamma"], special


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
