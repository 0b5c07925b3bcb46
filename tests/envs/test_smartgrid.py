"""smartgrid-v0 and variants: the contract, the model's rules, and the fixes to the peer."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only, jaxpr_equations

import jaxgrid
from jaxgrid.devices import prosumer
from jaxgrid.envs.smartgrid import OBJECTIVES, OBSERVATION_FIELDS, make_smartgrid
from jaxgrid.numerics import median, sort_last_axis
from jaxgrid.rewards.equity import hoover, hoover_without_each
from jaxgrid.testing import check_env

KEY = jax.random.PRNGKey(0)


@full_only
def test_check_env_with_every_objective():
    env, params = make_smartgrid(
        households=4, offices=1, schools=1, objectives=OBJECTIVES, horizon=50
    )
    check_env(env, params, num_steps=120, num_envs=8)


def test_enact_follows_the_peer_order_by_hand():
    # one Household: battery 400 of 500, payoff 3; wants to buy 95, store 50, sell 120,
    # consume 100 from the battery, give 300, consume 70 from the grid
    state = prosumer.ProsumerState(*(jnp.array([v], jnp.float32) for v in (400, 0, 0, 0, 0, 3)))
    action = jnp.array([[70.0, 100.0, 50.0, 300.0, 95.0, 120.0]])
    new, enacted = prosumer.enact(state, action.T, jnp.array([500.0]))
    # buy: price ceil(9.5) = 10 but only 3 + 10000 ... the payoff floor is -10000, so 10 is paid
    # and floor(10 / 0.1) = 100 Wh arrive: 400 + 100 + 50 = 550; sell 120 -> 430, +12 payoff;
    # consume 100 -> 330; give 300 -> 30; no overflow
    np.testing.assert_allclose(enacted[:, 0], [70, 100, 50, 300, 100, 120])
    assert float(new.storage[0]) == 30 and float(new.payoff[0]) == 3 - 10 + 12
    assert float(new.previous_storage[0]) == 400


def test_enact_limits_and_overflow_by_hand():
    # payoff at the floor: nothing can be bought; selling more than stored sells what is there;
    # storing beyond capacity is consumed
    state = prosumer.ProsumerState(*(jnp.array([v], jnp.float32) for v in (50, 0, 0, 0, 0, -10000)))
    action = jnp.array([[0.0, 0.0, 1000.0, 0.0, 500.0, 0.0]])
    new, enacted = prosumer.enact(state, action.T, jnp.array([500.0]))
    np.testing.assert_allclose(
        enacted[:, 0], [0, 550, 1000, 0, 0, 0]
    )  # 1050 - 500 overflow consumed
    assert float(new.storage[0]) == 500
    state = state.replace(payoff=jnp.array([9999.0]))
    new, enacted = prosumer.enact(state, jnp.array([[0, 0, 0, 0, 0, 800.0]]).T, jnp.array([500.0]))
    assert float(enacted[5, 0]) == 50 and float(new.payoff[0]) == 10000  # 9999 + 5, capped


def test_comfort_curves_match_the_richards_formula():
    x = np.linspace(0, 1.5, 7)
    for q, b, v, m in [(0.1, 20, 2, 0.5), (1, 10, 1, 0.5), (10, 16, 0.7, 0.5)]:
        ours = prosumer.richard_comfort(jnp.asarray(x), jnp.ones(7), q, b, v, m)
        expected = 1 / (1 + q * np.exp(-b * (x - m))) ** (1 / v)
        np.testing.assert_allclose(ours, expected, rtol=1e-5)
    # no need and no consumption is a ratio of 0 (not NaN), consumption without need is full comfort
    assert float(prosumer.richard_comfort(jnp.float32(0), jnp.float32(0), 1, 10, 1, 0.5)) > 0
    assert float(prosumer.richard_comfort(jnp.float32(5), jnp.float32(0), 1, 10, 1, 0.5)) == 1.0


def test_the_enacted_actions_are_the_steps_not_the_states():
    """The next step never reads the enacted actions, so the state does not carry them
    (carrying them cost the step 11 %: see the environment's module docstring); the step
    returns them in ``info``, the enactment of the sanitised action."""
    env, params = jaxgrid.make("smartgrid-v0")
    _, state = env.reset(KEY, params)
    assert "enacted" not in {f.name for f in dataclasses.fields(state)}
    action = env.action_space(params).sample(KEY)
    _, _, _, _, _, info = env.step(KEY, state, action, params)
    _, enacted = prosumer.enact(state.buildings, action.T, params.capacity.astype(action.dtype))
    np.testing.assert_array_equal(info["enacted_action"], enacted.T)


def test_comfort_curve_is_a_log_and_exps_within_float32_resolution():
    """The curve avoids ``log1p`` and powers (slow on XLA's CPU backend: see
    ``richard_comfort``) and stays within float32's resolution of the float64 formula,
    also where ``q exp(..)`` is far below float32's epsilon."""
    x = np.linspace(0.0, 3.0, 3001)
    for q, b, v, m in [(0.1, 20, 2, 0.5), (1, 10, 1, 0.5), (10, 16, 0.7, 0.5)]:
        curve = functools.partial(prosumer.richard_comfort, q=q, b=b, v=v, m=m)
        ours = np.asarray(curve(jnp.asarray(x, jnp.float32), jnp.ones(x.size, jnp.float32)))
        expected = 1 / (1 + q * np.exp(-b * (x - m))) ** (1 / v)
        np.testing.assert_allclose(ours, expected, rtol=0, atol=3e-7)
        jaxpr = jax.make_jaxpr(curve)(jnp.ones(4), jnp.ones(4)).jaxpr
        names = {e.primitive.name for e in jaxpr_equations(jaxpr)}
        assert "log" in names and not names & {"log1p", "pow"}


def test_equity_helpers_by_hand():
    c = jnp.array([0.2, 0.4, 0.6, 0.8])
    # mean 0.5, |dev| = 0.3 0.1 0.1 0.3 -> 0.8 / (2 * 2.0) = 0.2
    assert float(hoover(c)) == pytest.approx(0.2)
    loo = np.asarray(hoover_without_each(c))
    for j in range(4):
        others = np.delete(np.asarray(c), j)
        assert loo[j] == pytest.approx(
            np.abs(others - others.mean()).sum() / (2 * others.sum()), rel=1e-6
        )
    assert float(hoover(jnp.zeros(3))) == 0.0


@pytest.mark.parametrize("n", [1, 2, 26, 100])
def test_leave_one_out_hoover_equals_numpy(n):
    values = jax.random.uniform(jax.random.PRNGKey(n), (3, n))
    values = values.at[0, : n // 2].set(values[0, :1])  # ties
    loo = np.asarray(hoover_without_each(values))
    for row, x in zip(loo, np.asarray(values, np.float64)):
        for j in range(n):
            others = np.delete(x, j)
            spread = np.abs(others - others.mean()).sum() if n > 1 else 0.0
            expected = spread / (2 * others.sum()) if n > 1 else 0.0
            assert row[j] == pytest.approx(expected, rel=2e-5, abs=1e-7)


def test_leave_one_out_hoover_writes_no_n_by_n_table():
    # the n x n terms are summed in one pass each over (..., n), never stacked (the
    # table written out and summed cost a sixth of smartgrid-v0's step)
    jaxpr = jax.make_jaxpr(hoover_without_each)(jnp.ones((8, 26))).jaxpr
    shapes = {tuple(v.aval.shape) for e in jaxpr_equations(jaxpr) for v in e.outvars}
    assert (8, 26, 26) not in shapes and (8, 26) in shapes


@pytest.mark.parametrize("n", [1, 2, 3, 5, 26, 27, 100])
def test_sorting_network_and_median_equal_numpy(n):
    values = jax.random.uniform(jax.random.PRNGKey(n), (50, n))
    values = values.at[:, : n // 2].set(values[:, :1])  # ties
    np.testing.assert_array_equal(sort_last_axis(values), np.sort(np.asarray(values), axis=1))
    np.testing.assert_allclose(median(values), np.median(np.asarray(values), axis=1), rtol=1e-6)


def test_productions_come_from_the_reset_key():
    env, params = jaxgrid.make("smartgrid-v0")
    run = jax.jit(lambda k: jaxgrid.rollout(env, params, lambda k, o: jnp.zeros((26, 6)), k, 30))
    a, b, c = run(KEY), run(KEY), run(jax.random.PRNGKey(1))
    np.testing.assert_array_equal(a.obs, b.obs)
    assert not np.array_equal(a.obs, c.obs)
    # productions are uniform integers in [0, int(0.1 * capacity)], shared within a profile
    _, state = env.reset(KEY, params)
    prod = np.asarray(state.buildings.production)
    assert np.all(prod == np.round(prod)) and np.all(prod[:20] == prod[0])
    assert prod[:20].max() <= 50 and prod[20:25].max() <= 250 and prod[25] <= 1000


def test_instances_do_not_share_observation_state():
    """The peer caches global observations in a class attribute: two envs interfere there."""
    env_a, params_a = jaxgrid.make("smartgrid-v0")
    env_b, params_b = jaxgrid.make("smartgrid-scarce-v0")
    obs_a, _ = env_a.reset(KEY, params_a)
    env_b.reset(jax.random.PRNGKey(7), params_b)
    obs_a2, _ = env_a.reset(KEY, params_a)
    np.testing.assert_array_equal(obs_a, obs_a2)


def test_energy_loss_is_fixed_and_the_peer_value_is_available():
    env, params = make_smartgrid(households=2, offices=0, schools=0, horizon=20)
    obs, state = env.reset(KEY, params)
    k = OBSERVATION_FIELDS.index("energy_loss")
    action = jnp.zeros((2, 6)).at[:, 0].set(200.0)  # take 400 Wh from a pool of ~ the need
    obs, state, *_ = env.step_env(KEY, state, action, params)
    pool = float(state.available_energy)
    assert 0 < pool  # the pool of the next hour; the step judged the previous one
    assert float(obs[0, k]) >= 0.0
    peer_params = params.replace(peer_energy_loss=jnp.bool_(True))
    obs_peer, *_ = env.step_env(KEY, env.reset(KEY, peer_params)[1], action, peer_params)
    assert float(obs_peer[0, k]) == 0.0


def test_observation_views_and_bounds():
    env, params = jaxgrid.make("smartgrid-v0")
    obs, state = env.reset(KEY, params)
    view = env.split_observation(obs)
    assert view["global"].shape == (8,) and view["local"].shape == (26, 3)
    np.testing.assert_array_equal(view["local"], obs[:, :3])
    assert bool(env.observation_space(params).contains(obs))


@pytest.mark.parametrize(
    "name, lo, hi",
    [
        ("smartgrid-v0", 0.8, 1.2),
        ("smartgrid-scarce-v0", 0.6, 0.8),
        ("smartgrid-generous-v0", 1.0, 1.2),
    ],
)
def test_random_pools_follow_their_proportions(name, lo, hi):
    from jaxgrid.envs.smartgrid.buildings import openei_profile

    env, params = jaxgrid.make(name)
    policy = lambda k, o: jnp.zeros((26, 6))  # noqa: E731
    traj = jax.jit(lambda k: jaxgrid.rollout(env, params, policy, k, 400))(KEY)
    pool = np.asarray(traj.info["available_energy"])  # the pool drawn for hours 1..400
    hours = np.arange(1, 401)
    need = sum(
        count * openei_profile(p)["needs"][hours % 8760]
        for p, count in (("Household", 20), ("Office", 5), ("School", 1))
    )
    assert np.all(pool >= np.trunc(lo * need)) and np.all(pool <= np.trunc(hi * need))
    ratio = pool / need  # uniform in [lo, hi]: mean (lo + hi) / 2, spread over the range
    assert abs(ratio.mean() - (lo + hi) / 2) < 0.02
    assert ratio.min() < lo + 0.05 and ratio.max() > hi - 0.05


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(households=0, offices=0, schools=0), "at least one agent"),
        (dict(generator="sunny"), "unknown generator"),
        (dict(generator="realistic"), "needs energy_series"),
        (dict(objectives=("equity", "kindness")), "objectives must be distinct names"),
        (dict(schedule={"supply_security": {"start": 3}}), "not among the objectives"),
        (dict(judgments="fuzzy"), "judgments must map"),
        (dict(period="weekly"), "unknown profile period"),
        (dict(productions={"Household": np.zeros(5)}), r"must be 8760 finite values"),
    ],
)
def test_bad_options_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_smartgrid(**kwargs)
