"""How far a joint bidding policy is from an equilibrium, and what the market costs.

:func:`deviation_gains` is an ε-Nash check: for each company in turn, every constant bid
of a grid (a share of its markup range) replaces its policy while the others keep
theirs, on the same episodes (same days, same keys); the company's gain is the best
deviation's mean episode profit less its profit under the joint policy. No gain above ε
for any company means the joint policy is an ε-Nash equilibrium *against constant
deviations*; a policy that reacts to what it observes could gain more, so ε is a lower
bound on the true best-response gain.

:func:`market_outcome` sums what a joint policy earns and costs over episodes: each
company's profit, the true generation cost, what consumers pay and the load shed, so
that a policy's market can be compared with truthful bidding's on the same days.

Both run on the host around jitted, vmapped rollouts (one compiled programme each).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.types import float_dtype

OUTCOMES = ("profit", "generation_cost", "consumer_payment", "load_shed")


class DeviationCheck(NamedTuple):
    """The result of :func:`deviation_gains` (means over episodes, currency per episode).

    Attributes:
        profit: ``(n,)`` each company's profit under the joint policy.
        best_profit: ``(n,)`` its profit under its best constant deviation.
        best_share: ``(n,)`` that deviation: the share of the markup range it bids.
        gain: ``(n,)`` ``best_profit - profit`` (negative where the policy beats every
            constant bid).
        epsilon: the largest gain, or 0 if none is positive.
        shares: ``(k,)`` the constant bids tried.
    """

    profit: np.ndarray
    best_profit: np.ndarray
    best_share: np.ndarray
    gain: np.ndarray
    epsilon: float
    shares: np.ndarray


def episode_outcome(env, params, policy: Callable, k_reset, k_run) -> dict:
    """Sums over one episode (traceable): ``profit`` ``(n,)`` (the profit objective),
    ``generation_cost``, ``consumer_payment`` (currency) and ``load_shed`` (MWh). Steps
    after the episode ends (a failed clearing) count nothing."""
    obs, state = env.reset(k_reset, params)

    def body(carry, key):
        obs, state, alive = carry
        k_act, k_step = jax.random.split(key)
        obs, state, _, terminated, truncated, info = env.step_env(
            k_step, state, policy(k_act, obs), params
        )
        live = alive.astype(float_dtype())
        out = {
            "profit": info["reward_vector"][:, 0] * live,
            "generation_cost": info["generation_cost"] * live,
            "consumer_payment": info["consumer_payment"] * live,
            "load_shed": info["costs"][0, 0] * live,
        }
        return (obs, state, alive & ~(terminated | truncated)), out

    keys = jax.random.split(k_run, env.horizon)
    _, per_step = jax.lax.scan(body, (obs, state, jnp.array(True)), keys)
    return jax.tree_util.tree_map(lambda x: jnp.sum(x, axis=0), per_step)


def _episode_keys(key, episodes: int):
    keys = jax.vmap(jax.random.split)(jax.random.split(key, episodes))
    return keys[:, 0], keys[:, 1]


def _params_for(params, test_days: bool):
    return params.replace(profiles=params.profiles.for_testing()) if test_days else params


def market_outcome(
    env, params, policy: Callable, key, episodes: int = 32, test_days: bool = True
) -> dict:
    """Means over ``episodes`` episodes (held-out days unless ``test_days`` is False) of
    :func:`episode_outcome` under ``policy(key, obs) -> action``, as host numbers."""
    params = _params_for(params, test_days)
    run = jax.jit(
        lambda k: jax.vmap(lambda a, b: episode_outcome(env, params, policy, a, b))(
            *_episode_keys(k, episodes)
        )
    )
    totals = jax.device_get(run(key))
    return {k: np.mean(np.asarray(v, np.float64), axis=0) for k, v in totals.items()}


def deviate(policy: Callable, agent, share) -> Callable:
    """``policy`` with company ``agent`` bidding the constant ``share`` instead (both may
    be traced)."""

    def deviated(key, obs):
        action = policy(key, obs)
        return action.at[agent, 0].set(jnp.asarray(share, action.dtype))

    return deviated


def deviation_gains(
    env,
    params,
    policy: Callable,
    key,
    episodes: int = 16,
    shares=None,
    test_days: bool = True,
) -> DeviationCheck:
    """Each company's best constant deviation from the joint ``policy`` and its gain
    (see the module docstring), over ``episodes`` episodes and the constant bids
    ``shares`` (default 0, 0.1, ..., 1: shares of the markup range)."""
    params = _params_for(params, test_days)
    shares = np.linspace(0.0, 1.0, 11) if shares is None else np.asarray(shares, float)
    k_reset, k_run = _episode_keys(key, episodes)

    def profits(agent, share):
        chosen = deviate(policy, agent, share)
        run = jax.vmap(lambda a, b: episode_outcome(env, params, chosen, a, b)["profit"])
        return jnp.mean(run(k_reset, k_run), axis=0)[agent]

    def joint():
        run = jax.vmap(lambda a, b: episode_outcome(env, params, policy, a, b)["profit"])
        return jnp.mean(run(k_reset, k_run), axis=0)

    agents = jnp.arange(env.num_agents)
    grid = jnp.asarray(shares, float_dtype())
    every = jax.vmap(lambda g: jax.vmap(lambda s: profits(g, s))(grid))  # (n, k)
    base, deviations = jax.device_get(jax.jit(lambda: (joint(), every(agents)))())
    base, deviations = np.asarray(base, np.float64), np.asarray(deviations, np.float64)
    best = np.argmax(deviations, axis=1)
    best_profit = deviations[np.arange(env.num_agents), best]
    gain = best_profit - base
    return DeviationCheck(
        profit=base,
        best_profit=best_profit,
        best_share=shares[best],
        gain=gain,
        epsilon=float(max(0.0, np.max(gain))),
        shares=shares,
    )
