"""arbitrage-v0: the contract, the battery accounting, and the perfect-foresight oracle."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgrid
from jaxgrid.envs.arbitrage import episode_oracle, optimal_schedule, price_threshold

KEY = jax.random.PRNGKey(0)


def replay(env, params, start, powers):
    """Run the environment from a chosen day with given powers (MW)."""
    _, state = env.reset(KEY, params)
    state = state.replace(start=jnp.int32(start))
    total = 0.0
    for p in powers:
        action = jnp.array([[p / float(params.battery.p_max_mw[0])]])
        _, state, reward, *_ = env.step_env(KEY, state, action, params)
        total += float(reward[0])
    return total, state


@pytest.mark.parametrize("day", [4, 99, 204, 364])
def test_oracle_schedule_replayed_in_the_env_earns_the_oracle_value(day):
    with __import__("conftest").x64():
        env, params = jaxgrid.make("arbitrage-v0")
        start = day * env.horizon
        best = episode_oracle(env, params, start)
        earned, state = replay(env, params, start, best.p_mw)
    assert earned == pytest.approx(best.profit, rel=1e-6, abs=1e-6)
    np.testing.assert_allclose(float(state.soc[0]), best.soc[-1], atol=1e-6)


def test_oracle_by_hand_on_two_prices():
    # buy 1 h at 10, sell 1 h at 100: 1 MW charges 0.9 MWh (of 2), discharging it gives
    # 0.9 * 0.9 = 0.81 MWh, capped by the 1 MW rating over 1 h: profit 0.81*100 - 10
    best = optimal_schedule(
        [10.0, 100.0],
        dt_h=1.0,
        capacity_mwh=2.0,
        p_max_mw=1.0,
        eta_charge=0.9,
        eta_discharge=0.9,
        soc_min=0.0,
        soc_max=1.0,
        degradation_cost=0.0,
        initial_soc=0.0,
    )
    np.testing.assert_allclose(best.p_mw, [1.0, -0.81], rtol=1e-7)
    assert best.profit == pytest.approx(0.81 * 100 - 10)


def test_oracle_never_burns_energy_at_negative_prices():
    # at -50 a plain LP would charge and discharge at once to waste energy; one setpoint cannot
    best = optimal_schedule(
        [-50.0],
        dt_h=1.0,
        capacity_mwh=2.0,
        p_max_mw=1.0,
        eta_charge=0.9,
        eta_discharge=0.9,
        soc_min=0.0,
        soc_max=1.0,
        degradation_cost=0.0,
        initial_soc=0.5,
    )
    assert best.profit == pytest.approx(50.0)  # charge 1 MW and be paid for it, no more


def test_no_policy_beats_the_oracle_on_held_out_days():
    env, params = jaxgrid.make("arbitrage-v0")
    test = params.replace(profiles=params.profiles.for_testing())
    run = jax.jit(jax.vmap(lambda k: jaxgrid.rollout(env, test, price_threshold(), k, env.horizon)))
    traj = run(jax.random.split(KEY, 20))
    earned = np.asarray(traj.reward.sum(axis=(1, 2)))  # (episodes,)
    for i, k in enumerate(jax.random.split(KEY, 20)):
        k_reset, _ = jax.random.split(k)
        start = int(env.reset(k_reset, test)[1].start)
        assert start // env.horizon in set(np.asarray(test.profiles.days).tolist())
        assert earned[i] <= episode_oracle(env, test, start).profit + 1e-3
    assert earned.mean() > 0  # the heuristic makes money, the oracle more


def test_make_rejects_bad_batteries():
    with pytest.raises(ValueError, match="initial_soc"):
        jaxgrid.make("arbitrage-v0", initial_soc=0.95)
    with pytest.raises(ValueError, match="unknown price"):
        jaxgrid.make("arbitrage-v0", price="spot")
