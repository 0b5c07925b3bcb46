"""Abort conditions: bounds on named state variables end an episode, with the reason."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only, sampled

import jaxgrid
from jaxgrid.rewards.abort import AbortConditions, check_abort
from jaxgrid.testing import check_env

KEY = jax.random.PRNGKey(0)


def test_check_abort_by_hand():
    cond = AbortConditions.create(("a", "b", "c"), a=(0.0, 1.0), c=(-np.inf, 5.0))
    assert [bool(x) for x in check_abort(jnp.array([0.5, 99.0, 4.0]), cond)[:1]] == [False]
    aborted, reason = check_abort(jnp.array([1.5, 0.0, 6.0]), cond)
    assert bool(aborted) and int(reason) == 0
    aborted, reason = check_abort(jnp.array([0.5, 0.0, 6.0]), cond)
    assert bool(aborted) and int(reason) == 2
    assert int(check_abort(jnp.array([0.5, 0.0, 0.0]), cond)[1]) == -1
    with pytest.raises(ValueError, match="no abort variable named"):
        AbortConditions.create(("a",), b=(0, 1))
    with pytest.raises(ValueError, match="low <= high"):
        AbortConditions.create(("a",), a=(1, 0))


@pytest.mark.parametrize(
    "name, bounds, reason",
    sampled(
        [
            ("voltage33-v0", {"min_vm_pu": (0.97, np.inf)}, 0),
            ("dso33-v0", {"max_vm_pu": (-np.inf, 1.04)}, 1),
            ("arbitrage-v0", {"soc": (0.45, 0.55)}, 0),
            ("ders33-v0", {"min_battery_soc": (0.45, 1.0)}, 2),
        ],
        keep=[("arbitrage-v0", {"soc": (0.45, 0.55)}, 0)],
    ),
)
def test_environments_terminate_with_the_reason(name, bounds, reason):
    env, params = jaxgrid.make(name, abort=bounds)
    space = env.action_space(params)
    traj = jax.jit(
        lambda k: jaxgrid.rollout(env, params, lambda k, o: space.sample(k), k, 2 * env.horizon)
    )(KEY)
    # a power flow without solution also ends an episode (voltage33 under random actions)
    collapsed = np.asarray(traj.info.get("power_flow_failed", False))
    terminated = np.asarray(traj.terminated) & ~collapsed
    assert terminated.any()
    reasons = np.asarray(traj.info["abort_reason"])
    np.testing.assert_array_equal(reasons[terminated], reason)
    assert np.all(reasons[~terminated & ~collapsed] == -1)
    # without conditions the same run never aborts (arbitrage's day still ends terminated)
    env, params = jaxgrid.make(name)
    traj = jax.jit(
        lambda k: jaxgrid.rollout(env, params, lambda k, o: space.sample(k), k, 2 * env.horizon)
    )(KEY)
    assert np.all(np.asarray(traj.info["abort_reason"]) == -1)
    day_end = (np.arange(2 * env.horizon) + 1) % env.horizon == 0
    collapsed = np.asarray(traj.info.get("power_flow_failed", False))
    assert not (np.asarray(traj.terminated) & ~collapsed)[~day_end].any()


@full_only
@full_only
def test_check_env_with_aborts():
    env, params = jaxgrid.make(
        "voltage33-v0", abort={"min_vm_pu": (0.97, np.inf)}, solver="lindistflow"
    )
    check_env(env, params, num_steps=150, num_envs=4)
