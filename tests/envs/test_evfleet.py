"""evfleet33-v0 (check_env: tests/envs/test_registered.py): overnight sessions, the step worked by hand, fairness at the end of the
day, the perfect-foresight oracle against HiGHS's own objective and a hand-worked
cheapest-hours bill, baselines, validation, jit and vmap."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only, reset_on_days

import jaxgrid
from jaxgrid.devices import overnight_sessions, served_share
from jaxgrid.envs.evfleet import day_plan, make_evfleet
from jaxgrid.envs.evfleet.oracle import plan_actions, rollout_plan
from jaxgrid.rollout import is_controller
from jaxgrid.validation import ParamsError, validate_params

KEY = jax.random.PRNGKey(0)


def bits(n):
    """Random bits for ``n`` vehicles' sessions, as a reset draws them."""
    return jax.random.bits(KEY, (2 * n,), jnp.uint32)


@pytest.fixture(scope="module")
def fleet():
    return jaxgrid.make("evfleet33-v0")


def test_sessions_without_spread_fall_on_the_hour_worked_by_hand():
    # arrive 18:00 and leave 07:30 next day, episode from noon in half hours:
    # (18 - 12) / 0.5 = 12 and (24 + 7.5 - 12) / 0.5 = 39
    arrival, departure = overnight_sessions(bits(3), 18.0, 0.0, 7.5, 0.0, 12, 0.5, 48)
    np.testing.assert_array_equal(arrival, [12, 12, 12])
    np.testing.assert_array_equal(departure, [39, 39, 39])


def test_sessions_follow_their_statistics_and_stay_in_the_episode():
    arrival, departure = overnight_sessions(bits(20000), 18.0, 1.5, 7.5, 1.0, 12, 0.5, 48)
    arrival, departure = np.asarray(arrival), np.asarray(departure)
    assert abs(arrival.mean() - 12.0) < 0.06 and abs(arrival.std() - 3.0) < 0.06
    assert abs(departure.mean() - 39.0) < 0.06 and abs(departure.std() - 2.0) < 0.06
    assert abs(np.corrcoef(arrival, departure)[0, 1]) < 0.03  # drawn independently
    assert (0 <= arrival).all() and (arrival < departure).all() and (departure <= 48).all()
    # a wide spread is clipped into the episode, never out of order
    arrival, departure = overnight_sessions(bits(5000), 18.0, 20.0, 7.5, 20.0, 12, 0.5, 48)
    assert (0 <= arrival).all() and (arrival < departure).all() and (departure <= 48).all()


def test_served_share_by_hand():
    share = served_share(
        jnp.array([0.9, 0.5, 0.2, 0.7]), jnp.array([0.3, 0.3, 0.4, 0.7]), jnp.array(0.9)
    )
    # needs 0.6, 0.6, 0.5 and 0.2: received all, a third, less than nothing, nothing
    np.testing.assert_allclose(share, [1.0, 1 / 3, 0.0, 0.0], atol=1e-6)
    assert float(served_share(jnp.array(0.95), jnp.array(0.95), jnp.array(0.9))) == 1.0


def _plugged_state(env, params, arrival, departure, soc):
    _, state = env.reset(KEY, params)
    n = env.num_agents
    return state.replace(
        arrival=jnp.full(n, arrival, jnp.int32),
        departure=jnp.full(n, departure, jnp.int32),
        soc=jnp.full(n, soc),
        soc_arrival=jnp.full(n, soc),
    )


def test_one_step_by_hand():
    env, params = make_evfleet(vehicles_per_bus=1, v2g=False)
    n = env.num_agents
    state = _plugged_state(env, params, 0, 1, 0.5)  # everyone leaves after this step
    action = jnp.linspace(-1.0, 1.0, n)[:, None]
    _, new, _, _, _, info = env.step_env(KEY, state, action, params)
    # charger 11 kW, battery 60 kWh, efficiency 0.92, half an hour; no V2G: negative
    # requests enact nothing and are clipped
    request = np.linspace(-1.0, 1.0, n) * 0.011
    p = np.maximum(request, 0.0)
    soc = 0.5 + p * 0.92 * 0.5 / 0.060
    np.testing.assert_allclose(new.soc, soc, rtol=1e-5)
    row = int(state.start)
    price = float(np.asarray(params.profiles.price)[row, int(params.price_column)])
    vector = np.asarray(info["reward_vector"])[0]
    np.testing.assert_allclose(vector[0], -price * p.sum() * 0.5, rtol=1e-5)
    costs = np.asarray(info["costs"])
    np.testing.assert_allclose(costs[:, 3], np.abs(request - p), atol=1e-7)  # device_limits
    unmet = np.maximum(0.9 - soc, 0) * 0.060  # MWh short of the target at departure
    np.testing.assert_allclose(costs[:, 0], unmet, atol=1e-7)
    np.testing.assert_allclose(vector[3], -unmet.sum(), rtol=1e-5)  # service
    # the feeder carries the fleet at the vehicles' buses
    base = 1.5 * float(np.asarray(params.profiles.load)[row, 0])
    loads = base * np.asarray(params.feeder.p_load_mw)
    np.add.at(loads, np.asarray(params.vehicle_bus), p)
    flow = env.power_flow(jnp.asarray(loads), base * params.feeder.q_load_mvar, params)
    np.testing.assert_allclose(info["import_mw"], flow.p_import_mw, rtol=1e-5)


def test_fairness_is_the_hoover_index_of_served_shares_on_the_last_step():
    env, params = make_evfleet(vehicles_per_bus=1)
    n = env.num_agents
    state = _plugged_state(env, params, 0, 48, 0.3).replace(time=jnp.int32(47))
    # half the fleet charges, half idles: shares of the 0.6 need received
    action = jnp.where(jnp.arange(n) % 2 == 0, 1.0, 0.0)[:, None]
    _, new, _, _, truncated, info = env.step_env(KEY, state, action, params)
    received = 0.011 * 0.92 * 0.5 / 0.060
    shares = np.where(np.arange(n) % 2 == 0, received / 0.6, 0.0)
    hoover = np.abs(shares - shares.mean()).sum() / (2 * shares.sum())
    assert bool(truncated)
    np.testing.assert_allclose(np.asarray(info["reward_vector"])[0, 1], -hoover, rtol=1e-5)
    # and no fairness term before the last step
    _, _, _, _, _, info = env.step_env(KEY, state.replace(time=jnp.int32(10)), action, params)
    assert float(np.asarray(info["reward_vector"])[0, 1]) == 0.0


def test_oracle_plan_pays_what_highs_found_and_serves_every_vehicle(fleet):
    env, params = fleet
    for seed in (1, 2):
        _, state = env.reset(jax.random.PRNGKey(seed), params)
        plan = day_plan(env, params, state)
        rewards, costs, info = rollout_plan(env, params, state, plan_actions(plan, params))
        paid = -float(np.sum(np.asarray(info["reward_vector"])[:, 0, 0]))
        np.testing.assert_allclose(paid, plan.energy_cost, rtol=1e-4, atol=1e-3)
        assert float(np.sum(np.asarray(costs)[..., 0])) < 1e-6  # no unmet energy
        assert float(np.sum(np.asarray(costs)[..., 3])) < 1e-6  # nothing clipped


def test_oracle_charges_in_the_cheapest_hours_worked_by_hand():
    # without V2G and with the network far from its limits, the cheapest plan buys each
    # vehicle's need at the night price (60 per MWh, 00:00-07:00), through the
    # charging efficiency: sum_i (0.9 - soc_i) 60 kWh / 0.92 * 60 per MWh
    # on a spring day (105) whose base load stays inside the band and the transformer's
    # rating; on winter evenings it alone leaves both (the docs' base-load costs)
    env, params = make_evfleet(vehicles_per_bus=1, v2g=False)
    state = reset_on_days(env, params, [105], jax.random.PRNGKey(3))
    state = jax.tree_util.tree_map(lambda x: x[0], state)
    soc = np.asarray(state.soc_arrival, np.float64)
    need_mwh = (0.9 - soc) * 0.060
    # precondition: every vehicle stays long enough after midnight (step 24) at 11 kW
    hours_after_midnight = (np.asarray(state.departure) - 24) * 0.5
    assert (hours_after_midnight * 0.011 * 0.92 >= need_mwh).all()
    assert (np.asarray(state.arrival) <= 24).all()
    plan = day_plan(env, params, state)
    np.testing.assert_allclose(plan.energy_cost, np.sum(need_mwh / 0.92) * 60.0, rtol=1e-7)
    assert plan.slack < 1e-9


@full_only
def test_oracle_beats_every_baseline(fleet):
    env, params = fleet

    def episode(policy, state, key):
        def body(carry, k):
            s, total = carry
            action = policy(k, env.observe(s, params))
            _, s, reward, *_ = env.step_env(k, s, action, params)
            return (s, total + jnp.mean(reward)), None

        (_, total), _ = jax.lax.scan(body, (state, 0.0), jax.random.split(key, env.horizon))
        return total

    run = jax.jit(episode, static_argnums=0)
    for seed in (4, 5):
        key = jax.random.PRNGKey(seed)
        _, state = env.reset(key, params)
        best = env.oracle_return(params, state)
        # the reactive rules (mpc plans on the state: tests/control/test_mpc_baselines.py)
        rules = {n: p for n, p in env.baselines(params).items() if not is_controller(p)}
        scores = {name: float(run(p, state, key)) for name, p in rules.items()}
        assert all(best >= s - 1e-3 for s in scores.values()), (best, scores)
        assert scores["price_threshold"] > scores["charge_on_arrival"]


def test_bad_params_are_refused_by_name():
    env, params = make_evfleet()
    bad = params.replace(soc_arrival_range=jnp.array([0.7, 0.2]))
    with pytest.raises(ParamsError, match="soc_arrival_range"):
        validate_params(env, bad)
    with pytest.raises(ValueError, match="vehicles_per_bus"):
        make_evfleet(vehicles_per_bus=0)
    with pytest.raises(ValueError, match="charger_kw"):
        make_evfleet(charger_kw=-1.0)


@full_only
def test_vmap_over_targets_and_batches_compile_once(fleet):
    env, params = fleet

    @jax.jit
    @chex.assert_max_traces(n=1)
    def observed_target(target, key):
        p = params.replace(ev=params.ev.replace(target_soc=jnp.full(env.num_agents, target)))
        _, state = env.reset(key, p)
        obs = env.observe(state, p)
        return obs[:, 6]

    targets = jnp.array([0.6, 0.8, 1.0])
    out = jax.vmap(observed_target, in_axes=(0, None))(targets, KEY)
    np.testing.assert_allclose(out[:, 0], targets, rtol=1e-6)
    keys = jax.random.split(KEY, 4)
    obs, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    actions = jnp.ones((4, env.num_agents, 1))
    obs, states, reward, *_ = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))(
        keys, states, actions, params
    )
    assert reward.shape == (4, env.num_agents) and np.isfinite(np.asarray(reward)).all()
