"""opf14-v0 and opf118-v0: the step against pandapower's power flow and MATPOWER's cost
table, the AC-OPF oracle stepped through the environment, violations by hand, failed
power flows as events, and batching. ``check_env`` runs in ``test_registered.py``."""

import copy
import warnings

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only

import jaxgrid
from jaxgrid.envs.opf import day_oracle
from jaxgrid.rollout import is_controller

KEY = jax.random.PRNGKey(0)
CASE_DIR = "jaxgrid/grid/cases/transmission"


@pytest.fixture(scope="module")
def opf14():
    env, params = jaxgrid.make("opf14-v0")
    return env, params, jax.jit(env.step_env)


def _start(env, params, day: int):
    """A reset state on ``day`` (its first profile row)."""
    _, state = env.reset(KEY, params)
    return state.replace(start=jnp.asarray(day * env.horizon, jnp.int32))


def _pandapower(env, params, state, action):
    """pandapower's Newton-Raphson power flow of the step from ``state`` with ``action``'s
    setpoints, on the MATPOWER file itself, and the file's cost table: ``(net, gencost)``."""
    import pandapower as pp
    from pandapower.converter.pypower.from_ppc import from_ppc

    from jaxgrid.grid.matpower import load_case

    mpc = load_case(f"{CASE_DIR}/case14.m")
    bus = np.asarray(mpc["bus"], float).copy()
    gen = np.asarray(mpc["gen"], float).copy()
    bus[bus[:, 9] <= 0, 9] = 1.0  # BASE_KV 0: any base gives the same pu
    shapes = np.asarray(params.profiles.load[int(state.start + state.time)], float)
    factor = float(params.demand_floor) + (1 - float(params.demand_floor)) * (
        np.asarray(params.load_weights, float) @ shapes
    )
    bus[:, 2] *= factor  # PD
    bus[:, 3] *= factor  # QD
    a = np.asarray(action, float)
    share = (a + 1) / 2
    gen[:, 1] = gen[:, 9] + share[:, 0] * (gen[:, 8] - gen[:, 9])  # PG from PMIN..PMAX
    vmin, vmax = bus[gen[:, 0].astype(int) - 1, 12], bus[gen[:, 0].astype(int) - 1, 11]
    gen[:, 5] = vmin + share[:, 1] * (vmax - vmin)  # VG
    ppc = {
        "version": "2",
        "baseMVA": float(mpc["baseMVA"]),
        "bus": bus,
        "branch": np.asarray(mpc["branch"], float),
        "gen": gen,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = copy.deepcopy(from_ppc(ppc, f_hz=60))
        pp.runpp(net, algorithm="nr", tolerance_mva=1e-10, max_iteration=50)
    return net, np.asarray(mpc["gencost"], float)


def test_step_is_pandapowers_power_flow_and_the_cost_tables(opf14):
    from pandapower.pypower.totcost import totcost

    env, params, step = opf14
    state = _start(env, params, day=4)
    action = jnp.array([[0.9, 1.0], [-0.2, 0.6], [0.1, 0.3], [-0.8, 0.8], [0.4, 0.5]])
    _, new, reward, _, _, info = step(KEY, state, action, params)
    net, gencost = _pandapower(env, params, state, action)
    np.testing.assert_allclose(info["vm_pu"], net.res_bus.vm_pu.to_numpy(), atol=2e-5)
    # the slack generator (bus 1) takes the balance; the others produce their setpoints
    pg = np.concatenate([net.res_ext_grid.p_mw.to_numpy(), net.res_gen.p_mw.to_numpy()])
    np.testing.assert_allclose(info["pg_mw"], pg, atol=0.02)
    qg = np.concatenate([net.res_ext_grid.q_mvar.to_numpy(), net.res_gen.q_mvar.to_numpy()])
    np.testing.assert_allclose(info["qg_mvar"], qg, atol=0.02)
    # reward: -(MATPOWER cost of the outputs, currency/h) * 0.5 h / 1000, for every agent
    expected = -totcost(gencost, pg).sum() * 0.5 / 1000
    np.testing.assert_allclose(reward, np.full(5, expected), rtol=2e-5)
    np.testing.assert_allclose(info["reward_vector"][:, 0], reward)
    # reactive limits by hand from pandapower's outputs and the file's QMIN/QMAX
    qmin, qmax = np.asarray(params.qmin_mvar), np.asarray(params.qmax_mvar)
    excess = np.maximum(np.maximum(qg - qmax, qmin - qg), 0)
    np.testing.assert_allclose(info["costs"][0, 2], excess[excess > 0.1].sum(), atol=0.05)
    assert new.time == 1


def test_slack_agents_active_power_entry_is_ignored(opf14):
    env, params, step = opf14
    state = _start(env, params, day=9)
    action = jnp.zeros((5, 2))
    a = step(KEY, state, action, params)
    b = step(KEY, state, action.at[0, 0].set(0.7), params)
    chex.assert_trees_all_equal(a[1], b[1])


@full_only
def test_oracle_setpoints_cost_nothing_and_earn_the_acopf_cost(opf14):
    env, params, step = opf14
    test = params.replace(profiles=params.profiles.for_testing())
    day = int(test.profiles.days[3])
    state = _start(env, test, day)
    oracle = day_oracle(env, test, int(state.start))
    assert oracle.converged.all()
    rewards = []
    for t in range(env.horizon):
        action = env.encode(jnp.asarray(oracle.pg_mw[t]), jnp.asarray(oracle.vg_pu[t]), test)
        _, state, reward, terminated, _, info = step(KEY, state, action, test)
        assert not info["power_flow_failed"]
        np.testing.assert_array_equal(info["costs"], 0.0)
        rewards.append(float(reward[0]))
    assert terminated
    np.testing.assert_allclose(rewards, -oracle.cost_per_h * 0.5 / 1000, rtol=1e-5)
    start = _start(env, test, day)
    np.testing.assert_allclose(env.oracle_return(test, start), sum(rewards), rtol=1e-5)


@full_only
def test_baselines_pay_more_than_the_oracle(opf14):
    env, params, _ = opf14
    from jaxgrid.train.evaluate import evaluate

    day = int(params.profiles.held_out[0])
    one_day = params.replace(profiles=params.profiles.replace(days=jnp.array([day])))
    oracle = env.oracle_return(one_day, _start(env, one_day, day))
    results = {
        name: evaluate(policy, env, one_day, KEY, episodes=1, test_days=False)
        for name, policy in env.baselines(one_day).items()
        if not is_controller(policy)  # mpc: tests/control/test_mpc_baselines.py
    }
    # the AC-OPF of each step (float32) is the oracle's dispatch, violation-free
    np.testing.assert_allclose(results["acopf"]["return"], oracle, rtol=1e-4)
    assert results["acopf"]["violation_rate"] == 0
    for name in ("proportional", "economic_dispatch", "random"):
        assert results[name]["return"] < oracle or results[name]["violation_rate"] > 0


@full_only
def test_voltage_and_thermal_violations_by_hand(opf14):
    env, params, step = opf14
    state = _start(env, params, day=20)
    action = jnp.zeros((5, 2)).at[:, 1].set(0.5)  # every generator bus at 1.03 pu
    _, _, _, _, _, calm = step(KEY, state, action, params)
    assert calm["costs"][0, 0] == 0
    # bus 14 allowed at most 1.0 pu, branch 0 (bus 1-2) rated 10 MVA
    tight = params.replace(
        vmax_pu=params.vmax_pu.at[13].set(1.0), rate_mva=params.rate_mva.at[0].set(10.0)
    )
    _, _, _, _, _, info = step(KEY, state, action, tight)
    vm = np.asarray(info["vm_pu"])
    assert vm[13] > 1.0 + 1e-3
    np.testing.assert_allclose(info["costs"][:, 0], vm[13] - 1.0, rtol=1e-5)
    _, _, r = env.power_flow(state, action, tight)
    flow = max(np.hypot(r.p_from_mw[0], r.q_from_mvar[0]), np.hypot(r.p_to_mw[0], r.q_to_mvar[0]))
    np.testing.assert_allclose(info["costs"][:, 1], flow - 10.0, rtol=1e-5)
    # the costs are a separate channel: the reward does not see them
    np.testing.assert_allclose(info["reward_vector"], calm["reward_vector"])


def test_failed_power_flow_is_an_event(opf14):
    env, params, step = opf14
    state = _start(env, params, day=30)
    state = jax.tree_util.tree_map(lambda x: x, state).replace(time=jnp.asarray(10, jnp.int32))
    heavy = params.replace(pd_mw=params.pd_mw * 8, qd_mvar=params.qd_mvar * 8)
    obs, new, reward, terminated, _, info = step(KEY, state, jnp.zeros((5, 2)), heavy)
    assert info["power_flow_failed"] and terminated
    np.testing.assert_allclose(reward, -float(params.power_flow_penalty) * (env.horizon - 10))
    expected = np.zeros((5, len(env.cost_names)))
    expected[:, env.cost_names.index("power_flow")] = 1
    np.testing.assert_array_equal(info["costs"], expected)
    for leaf in jax.tree_util.tree_leaves((obs, new, reward)):
        assert np.all(np.isfinite(leaf))
    # the state keeps the last solved operating point
    np.testing.assert_array_equal(new.vm_pu, state.vm_pu)
    np.testing.assert_array_equal(new.pg_mw, state.pg_mw)


@full_only
def test_vmap_jit_and_one_trace(opf14):
    env, params, _ = opf14

    @jax.jit
    @chex.assert_max_traces(n=1)
    def rollout(keys):
        obs, states = jax.vmap(env.reset, (0, None))(keys, params)

        def body(states, key):
            actions = jax.random.uniform(key, (keys.shape[0], 5, 2), minval=-1, maxval=1)
            step_keys = jax.random.split(key, keys.shape[0])
            obs, states, reward, *_ = jax.vmap(env.step, (0, 0, 0, None))(
                step_keys, states, actions, params
            )
            return states, (obs, reward)

        return jax.lax.scan(body, states, jax.random.split(keys[0], 6))

    keys = jax.random.split(KEY, 8)
    _, (obs, reward) = rollout(keys)
    _, (obs2, _) = rollout(jax.random.split(jax.random.PRNGKey(1), 8))  # no retrace
    assert obs.shape == (6, 8, 5, 17) and reward.shape == (6, 8, 5)
    assert np.all(np.isfinite(obs)) and np.all(reward < 0)
    # one environment of the batch is the same environment alone
    one = env.reset(keys[3], params)[0]
    np.testing.assert_allclose(jax.vmap(env.reset, (0, None))(keys, params)[0][3], one, rtol=1e-6)


def test_observation_names_and_units(opf14):
    env, params, _ = opf14
    names = env.observation_names(params)
    obs, state = env.reset(KEY, params)
    assert obs.shape == (5, len(names))
    row = dict(zip(names, np.asarray(obs[1])))
    assert row["pmax_pu"] == pytest.approx(1.4)  # gen at bus 2: 140 MW on 100 MVA
    assert row["is_slack"] == 0 and obs[0, names.index("is_slack")] == 1
    assert 0.4 <= row["load_factor"] <= 1.0


@full_only
def test_opf118_oracle_setpoints_cost_nothing():
    env, params = jaxgrid.make("opf118-v0")
    step = jax.jit(env.step_env)
    state = _start(env, params, day=int(params.profiles.held_out[0]))
    oracle = day_oracle(env, params, int(state.start))
    assert oracle.converged.all()
    for t in range(0, env.horizon, 8):
        s = state.replace(time=jnp.asarray(t, jnp.int32))
        action = env.encode(jnp.asarray(oracle.pg_mw[t]), jnp.asarray(oracle.vg_pu[t]), params)
        _, _, reward, _, _, info = step(KEY, s, action, params)
        np.testing.assert_array_equal(info["costs"], 0.0)
        np.testing.assert_allclose(reward[0], -oracle.cost_per_h[t] * 0.5 / 1000, rtol=1e-5)


FLOAT64_AFTER_FLOAT32 = """
import jax
import jax.numpy as jnp
import jaxgrid

env, params = jaxgrid.make("opf14-v0")
jax.jit(env.reset)(jax.random.key(0), params)  # float32, as check_env's first passes
jax.config.update("jax_enable_x64", True)  # then its float64 pass, on the same env
params = jax.tree_util.tree_map(
    lambda x: jnp.asarray(x, jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x,
    params,
)
obs, _ = jax.jit(env.reset)(jax.random.key(0), params)
assert obs.dtype == jnp.float64, obs.dtype
"""


def test_observation_in_float64_after_a_float32_trace_of_the_same_env():
    """check_env's float64 pass after its float32 ones: the observation divided float64
    arrays by the network's NumPy float64 base MVA, which JAX had cached as a float32
    constant in the first trace, and ``lax.div`` refused the mixed dtypes. In a fresh
    process, so that the suite's other traces cannot hide it."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", FLOAT64_AFTER_FLOAT32], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
