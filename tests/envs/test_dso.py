"""dso33-v0: the contract, the flexible loads on the feeder, and the objectives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only

import jaxgrid
from jaxgrid.grid import distflow
from jaxgrid.testing import check_env

KEY = jax.random.PRNGKey(0)


@full_only
def test_check_env_with_lindistflow():
    # the registered distflow is checked in test_registered.py; the solver is a params
    # leaf, so at the same sizes these are its programs, from the compilation cache
    env, params = jaxgrid.make("dso33-v0", solver="lindistflow")
    check_env(env, params)


def test_shape_matches_powerzoo_dso():
    env, params = jaxgrid.make("dso33-v0")
    assert env.action_space(params).shape == (1, 12)
    assert env.observation_space(params).shape == (1, 195)
    assert env.horizon == 48 and float(params.dt_h) == 0.5
    np.testing.assert_array_equal(
        np.asarray(params.feeder.bus_ids)[np.asarray(params.flex_bus)], [6, 14, 18, 22, 28, 33]
    )


def test_step_solves_the_feeder_with_the_dispatched_flexible_loads():
    env, params = jaxgrid.make("dso33-v0")
    _, state = env.reset(KEY, params)
    # curtail 50 % of each capacity, defer nothing
    action = jnp.concatenate([jnp.full(6, 0.5), jnp.zeros(6)])[None]
    obs, new_state, reward, _, _, info = env.step_env(KEY, state, action, params)
    row = int(state.start)
    scale = (
        float(params.load_scale)
        * np.asarray(params.profiles.load)[row][np.asarray(params.load_profile)]
    )
    p = scale * np.asarray(params.feeder.p_load_mw)
    q = scale * np.asarray(params.feeder.q_load_mvar)
    bus = np.asarray(params.flex_bus)
    cut = np.minimum(0.5 * np.asarray(params.flex.curtail_cap_mw), p[bus])
    q[bus] *= (p[bus] - cut) / p[bus]
    p[bus] -= cut
    expected = distflow(
        params.feeder, jnp.asarray(p, jnp.float32), jnp.asarray(q, jnp.float32), iterations=5
    )
    np.testing.assert_allclose(info["vm_pu"], expected.vm_pu, atol=1e-5)
    rv = np.asarray(info["reward_vector"])[0]
    np.testing.assert_allclose(
        rv, [-float(expected.loss_mw) * 0.5, -cut.sum() * 0.5, 0.0], rtol=1e-4, atol=1e-7
    )


def test_deferred_demand_comes_back_within_the_window():
    env, params = jaxgrid.make("dso33-v0")
    _, state = env.reset(KEY, params)
    defer = jnp.concatenate([jnp.zeros(6), jnp.ones(6)])[None]
    idle = jnp.zeros((1, 12))
    total_flex, total_demand = 0.0, 0.0
    for t in range(10):
        row = int(state.start + state.time)
        scale = (
            float(params.load_scale)
            * np.asarray(params.profiles.load)[row][np.asarray(params.load_profile)]
        )
        total_demand += float(
            (scale * np.asarray(params.feeder.p_load_mw))[np.asarray(params.flex_bus)].sum()
        )
        _, state, _, _, _, info = env.step_env(KEY, state, defer if t < 3 else idle, params)
        total_flex += float(info["flex_p_mw"].sum())
    assert float(state.buffer.sum()) == 0.0
    assert total_flex == pytest.approx(total_demand, rel=1e-5)


@full_only
def test_no_control_violates_the_band_sometimes():
    env, params = jaxgrid.make("dso33-v0")
    run = jax.jit(
        jax.vmap(lambda k: jaxgrid.rollout(env, params, env.baselines(params)["no_control"], k, 48))
    )
    traj = run(jax.random.split(KEY, 32))
    share = float(traj.info["violation"].mean())
    assert 0.01 < share < 0.3
