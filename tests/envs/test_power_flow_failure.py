"""A power flow that fails is an event, never a number: in every feeder environment it
ends the episode with the documented penalty, the ``power_flow`` cost and
``info["power_flow_failed"]``, and nothing is computed from the failed solve.

The judge test rolls ``voltage33-v0`` under random actions and asks pandapower about the
steps: where the environment reported a failure, the loading must have no AC solution
(pandapower with load continuation); where it did not, pandapower's voltages must be the
environment's. The default suite judges a sample; ``JAXGRID_VALIDATE=full`` judges every
step of 10,000 (about 20 minutes on 2 cores)::

    JAXGRID_VALIDATE=full python -m pytest tests/envs/test_power_flow_failure.py -n 0
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import FULL, ac_loadability, ac_network, assert_tree_finite, sampled

import jaxgrid
from jaxgrid.devices.renewable import inverter_q_mvar
from jaxgrid.rewards.scalarise import Scalarisation

FEEDER_ENVS = [
    "voltage33-v0",
    "voltage69-v0",
    "voltage141-v0",
    "ders33-v0",
    "ders141-v0",
    "dso33-v0",
    "smartgrid33-v0",
]
KEY = jax.random.PRNGKey(3)


def overloaded(params, factor=40.0):
    """``params`` with every base load of the feeder ``factor`` times larger: no feeder
    carries that (case33bw collapses at about 3.6x its load)."""
    feeder = params.feeder
    return params.replace(
        feeder=feeder.replace(
            p_load_mw=factor * feeder.p_load_mw, q_load_mvar=factor * feeder.q_load_mvar
        )
    )


@pytest.mark.parametrize("name", sampled(FEEDER_ENVS, keep=("dso33-v0",)))
def test_a_failed_power_flow_ends_the_episode_with_the_penalty(name):
    env, params = jaxgrid.make(name)
    assert "power_flow" in env.cost_names
    _, state = env.reset(KEY, params)
    action = env.action_space(params).sample(KEY)
    step_env = jax.jit(env.step_env)

    _, after, reward, terminated, _, info = step_env(KEY, state, action, params)
    assert not bool(info["power_flow_failed"]) and not bool(terminated)
    assert int(info["steps_lost"]) == 0
    assert np.all(np.asarray(info["costs"])[:, env.cost_names.index("power_flow")] == 0)

    obs, after, reward, terminated, _, info = step_env(KEY, state, action, overloaded(params))
    assert bool(info["power_flow_failed"]) and bool(terminated)
    steps_left = env.horizon - int(getattr(state, "society", state).time)  # this one included
    np.testing.assert_allclose(reward, -float(params.power_flow_penalty) * steps_left, rtol=1e-6)
    assert int(info["steps_lost"]) == steps_left  # what a learner charges its costs for
    np.testing.assert_array_equal(info["reward_vector"], 0.0)
    only_power_flow = np.arange(len(env.cost_names)) == env.cost_names.index("power_flow")
    np.testing.assert_array_equal(
        info["costs"], np.broadcast_to(only_power_flow, info["costs"].shape).astype(float)
    )
    np.testing.assert_array_equal(after.vm_pu, state.vm_pu)  # the last solved voltages
    assert_tree_finite((obs, after, info), f"{name} after a failed power flow")
    # with auto-reset the next observation is a new episode's, the final one is finite
    _, _, _, terminated, _, info = jax.jit(env.step)(KEY, state, action, overloaded(params))
    assert bool(terminated)
    assert_tree_finite(info["final_observation"], "the final observation")


def _overloaded_any(name, params):
    """``params`` under which no power flow of ``name`` has a solution."""
    if name == "voltage13-v0":  # three-phase: loads scale by a params leaf
        return params.replace(load_scale=jnp.float32(100.0))
    return overloaded(params)


@pytest.mark.parametrize(
    "name", sampled([*FEEDER_ENVS, "voltage13-v0"], keep=("voltage33-v0", "voltage13-v0"))
)
def test_a_start_without_a_power_flow_solution_fails_the_first_step(name):
    """An episode whose first operating point has no power-flow solution (the reset's
    solve failed) is a failure too: the reset's state says so (its voltages 1.0 pu,
    finite, computed from nothing), and the first step ends the episode as a failed step
    with the penalty, even where that step's own solve converges."""
    env, params = jaxgrid.make(name)
    obs, state = jax.jit(env.reset)(KEY, _overloaded_any(name, params))
    assert bool(state.start_failed)
    np.testing.assert_array_equal(state.vm_pu, 1.0)
    assert_tree_finite((obs, state), f"{name}'s reset without a solution")
    action = env.action_space(params).sample(KEY)
    _, after, reward, terminated, _, info = jax.jit(env.step_env)(KEY, state, action, params)
    assert bool(info["power_flow_failed"]) and bool(terminated)
    assert not bool(after.start_failed)
    assert int(info["steps_lost"]) == env.horizon
    np.testing.assert_allclose(reward, -float(params.power_flow_penalty) * env.horizon, rtol=1e-6)
    # the same episode started where the feeder has a solution: nothing failed
    _, solved = jax.jit(env.reset)(KEY, params)
    assert not bool(solved.start_failed)
    *_, info = jax.jit(env.step_env)(KEY, solved, action, params)
    assert not bool(info["power_flow_failed"])


def test_cost_weights_add_to_the_penalty():
    env, params = jaxgrid.make("voltage33-v0")
    params = env.with_scalarisation(
        params, Scalarisation.create(2, "weighted_sum", [1.0, 0.1], cost_weights=[2.0, 7.0])
    )
    _, state = env.reset(KEY, params)
    action = jnp.zeros((env.num_agents, 1))
    *_, reward, _, _, info = env.step_env(KEY, state, action, overloaded(params))
    np.testing.assert_allclose(reward, -0.1 * 96 - 7.0, rtol=1e-6)


def voltage33_steps(num_envs, num_steps, seed=0):
    """A random-action rollout of ``voltage33-v0``: per step the profile row, the steps
    left in the episode, the action, whether the power flow failed, the reported voltages
    and the reward."""
    env, params = jaxgrid.make("voltage33-v0")
    space = env.action_space(params)

    def run(key):
        k_reset, k_run = jax.random.split(key)
        _, state = env.reset(k_reset, params)

        def body(state, key):
            k_act, k_step = jax.random.split(key)
            action = space.sample(k_act)
            row, steps_left = state.start + state.time, env.horizon - state.time
            _, state, reward, _, _, info = env.step(k_step, state, action, params)
            failed = info["power_flow_failed"]
            return state, (row, steps_left, action[:, 0], failed, info["vm_pu"], reward)

        return jax.lax.scan(body, state, jax.random.split(k_run, num_steps))[1]

    keys = jax.random.split(jax.random.PRNGKey(seed), num_envs)
    out = jax.device_get(jax.jit(jax.vmap(run))(keys))
    return env, params, [np.reshape(x, (num_envs * num_steps, *x.shape[2:])) for x in out]


def bus_loads(params, row, action):
    """The step's bus loads (MW, Mvar), rebuilt by hand from the profiles and the action."""
    prof = params.profiles
    row = int(row) % prof.load.shape[0]
    scale = float(params.load_scale) * np.asarray(prof.load)[row][np.asarray(params.load_profile)]
    p = scale * np.asarray(params.feeder.p_load_mw, float)
    q = scale * np.asarray(params.feeder.q_load_mvar, float)
    p_pv = np.asarray(params.pv_p_max_mw) * np.asarray(prof.pv)[row][np.asarray(params.pv_profile)]
    q_pv = np.asarray(inverter_q_mvar(jnp.asarray(action), p_pv, params.pv_s_max_mva))
    bus = np.asarray(params.pv_bus)
    np.subtract.at(p, bus, p_pv)
    np.subtract.at(q, bus, q_pv)
    return p, q


def test_voltage33_failures_are_exactly_the_loadings_without_an_ac_solution():
    env, params, (row, steps_left, action, failed, vm, reward) = voltage33_steps(100, 100)
    assert 0.02 < failed.mean() < 0.3  # random reactive power does collapse this feeder
    # no reward from a failed solve: every failed step pays exactly the penalty
    penalty = float(params.power_flow_penalty) * steps_left[failed]
    np.testing.assert_allclose(
        reward[failed], -np.broadcast_to(penalty[:, None], reward[failed].shape), rtol=1e-6
    )
    rng = np.random.default_rng(0)
    sample = 5 if not FULL else None
    failed_steps, solved_steps = np.flatnonzero(failed), np.flatnonzero(~failed)
    if sample:
        failed_steps = rng.choice(failed_steps, sample, replace=False)
        solved_steps = rng.choice(solved_steps, sample, replace=False)
    feeder = jax.device_get(params.feeder)
    net = ac_network(feeder)
    for i in failed_steps:
        share, _ = ac_loadability(feeder, *bus_loads(params, row[i], action[i]), net=net)
        assert share < 1.0, f"step {i} failed, but pandapower solves it"
    for i in solved_steps:
        share, _ = ac_loadability(feeder, *bus_loads(params, row[i], action[i]), net=net)
        assert share == 1.0
        np.testing.assert_allclose(vm[i], net.res_bus.vm_pu.to_numpy(), atol=2e-5)
