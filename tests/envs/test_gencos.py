"""gencos5-v0: the contract, the market clearing against HiGHS, hand-worked settlements,
market power, the baselines and the ε-Nash deviation check."""

import sys
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only, x64

import jaxgrid
from jaxgrid.envs.gencos import deviation_gains, market_outcome
from jaxgrid.grid import network_from_matpower
from jaxgrid.testing import check_env
from jaxgrid.validation import ParamsError, validate_params

sys.path.insert(0, str(Path(__file__).parents[1] / "dispatch"))
from highs_dcopf import solve  # noqa: E402  (the independent DC-OPF of the dispatch tests)

KEY = jax.random.PRNGKey(0)
DT_H = 0.5
RISE = 0.1  # the documented default: marginal cost climbs 10 % from 0 to pmax


def case5_costs():
    """The true cost curves as the card defines them, from MATPOWER's case5 tables."""
    net = network_from_matpower("case5")
    poly = np.array(net.cost_poly, float)
    poly[:, 0] = RISE * poly[:, 1] / (2 * np.asarray(net.pmax_mw, float))
    return net, poly


def flat_day(load_scale):
    """gencos5-v0 with every bus at its base load all day (no profile)."""
    return jaxgrid.make("gencos5-v0", load_scale=load_scale, base_share=1.0)


def step_at(env, params, markup, row=0):
    """One clearing from a reset state moved to profile row ``row``, with ``markup``."""
    _, state = env.reset(KEY, params)
    state = state.replace(start=jnp.int32(row))
    span = params.markup_max - params.markup_min
    action = ((jnp.asarray(markup) - params.markup_min) / span)[:, None]
    return jax.jit(env.step_env)(KEY, state, action.astype(params.pd_mw.dtype), params)


@full_only
def test_check_env_on_a_variant():
    env, params = jaxgrid.make("gencos5-v0", markup_range=(-0.5, 1.0), base_share=0.3)
    check_env(env, params, num_steps=50, num_envs=4)


def test_agents_spaces_and_names():
    env, params = jaxgrid.make("gencos5-v0")
    assert env.agents == ("gen_0", "gen_1", "gen_2", "gen_3", "gen_4")
    assert env.horizon == 48 and env.objective_names == ("profit",)
    obs, _ = env.reset(KEY, params)
    assert obs.shape == (5, len(env.observation_names(params)))


def test_clearing_equals_highs_on_random_days_and_bids():
    rng = np.random.default_rng(7)
    with x64():
        env, params = jaxgrid.make("gencos5-v0")
        net, poly = case5_costs()
        for _ in range(6):
            markup = rng.uniform(0.0, 2.0, 5)
            row = int(rng.integers(0, params.profiles.load.shape[0]))
            _, _, reward, _, _, info = step_at(env, params, markup, row)
            pd = np.asarray(info["demand_mw"])
            load = np.asarray(params.profiles.load, float)[row]
            by_hand = sum(  # buses 2, 3, 4 follow households, commerce, business
                p * (0.5 + 0.5 * load[c]) for p, c in ((300, 0), (300, 1), (400, 2))
            )
            assert pd == pytest.approx(by_hand, rel=1e-12)
            bus_load = np.array([0, 300, 300, 400, 0]) * (0.5 + 0.5 * load[[0, 0, 1, 2, 0]])
            offers = poly * (1 + markup)[:, None]
            offers[:, 2] = 0.0
            ref = solve(net, bus_load, cost_poly=offers)
            assert ref["status"] == "Optimal"
            np.testing.assert_allclose(info["pg_mw"], ref["pg_mw"], atol=1e-4)
            np.testing.assert_allclose(info["lmp"], ref["lmp"], atol=1e-3)
            pg, price = ref["pg_mw"], ref["lmp"][np.asarray(net.gen_bus)]
            cost = poly[:, 0] * pg**2 + poly[:, 1] * pg + poly[:, 2]
            # prices agree to 1e-3 /MWh: profits to that times an output of up to 600 MW
            np.testing.assert_allclose(reward, (price * pg - cost) * DT_H, rtol=1e-6, atol=0.3)


def test_truthful_settlement_by_hand_at_400_mw():
    # 400 MW, no line at its limit: gen 4 (10/MWh, 600 MW, bus 5) serves it all and sets
    # every price at its marginal cost 10 + 2 c2 400 with c2 = 0.1 * 10 / 1200
    env, params = flat_day(0.4)
    _, _, reward, _, _, info = step_at(env, params, np.zeros(5))
    c2 = RISE * 10 / (2 * 600)
    price = 10 + 2 * c2 * 400
    np.testing.assert_allclose(info["pg_mw"], [0, 0, 0, 0, 400], atol=0.05)
    np.testing.assert_allclose(info["lmp"], np.full(5, price), atol=0.01)
    profit = (price * 400 - (c2 * 400**2 + 10 * 400)) * DT_H  # = c2 400^2 dt
    np.testing.assert_allclose(reward, [0, 0, 0, 0, profit], atol=0.1)
    assert float(info["generation_cost"]) == pytest.approx((c2 * 400**2 + 4000) * DT_H, rel=1e-4)
    assert float(info["consumer_payment"]) == pytest.approx(price * 400 * DT_H, rel=1e-4)


def test_a_pivotal_generator_raises_its_price_by_its_markup():
    # alone at 400 MW, gen 4 keeps all the load while its offer stays below gen 0's 14/MWh,
    # so the price follows its markup: (1 + m) times its marginal cost of 10.667
    env, params = flat_day(0.4)
    prices, profits = [], []
    for m in (0.0, 0.1, 0.25):
        _, _, reward, _, _, info = step_at(env, params, np.array([0, 0, 0, 0, m]))
        prices.append(float(info["lmp"][4]))
        profits.append(float(reward[4]))
        assert float(info["pg_mw"][4]) == pytest.approx(400, abs=0.05)
    np.testing.assert_allclose(prices, (1 + np.array([0.0, 0.1, 0.25])) * (10 + 2 / 3), atol=0.01)
    assert profits[0] < profits[1] < profits[2]
    # a markup past 14/MWh lets gens 0 and 1 in: gen 4 sells less, at a higher price
    _, _, _, _, _, info = step_at(env, params, np.array([0, 0, 0, 0, 0.5]))
    assert float(info["pg_mw"][4]) < 390 and float(info["lmp"][4]) > prices[-1]


def test_uniform_markup_leaves_the_dispatch_and_scales_every_price():
    # the same markup for every offer scales the whole objective: the least-cost dispatch
    # is unchanged and every price is (1 + m) times truthful's
    env, params = jaxgrid.make("gencos5-v0")
    _, _, _, _, _, truthful = step_at(env, params, np.zeros(5), row=500)
    _, _, _, _, _, marked = step_at(env, params, np.full(5, 0.6), row=500)
    np.testing.assert_allclose(marked["pg_mw"], truthful["pg_mw"], atol=0.05)
    np.testing.assert_allclose(marked["lmp"], 1.6 * truthful["lmp"], rtol=1e-3)


@full_only
def test_baselines_run_and_truthful_is_cheapest():
    env, params = jaxgrid.make("gencos5-v0")
    outcomes = {
        name: market_outcome(env, params, policy, KEY, episodes=4)
        for name, policy in env.baselines(params).items()
    }
    assert set(outcomes) == {"random", "truthful", "uniform_mid", "max_markup"}
    cost = {n: float(o["generation_cost"]) for n, o in outcomes.items()}
    paid = {n: float(o["consumer_payment"]) for n, o in outcomes.items()}
    # truthful offers are the true costs: their least-cost dispatch is the cheapest there is
    assert cost["truthful"] <= cost["random"] * (1 + 1e-5)
    assert cost["uniform_mid"] == pytest.approx(cost["truthful"], rel=1e-4)
    assert paid["uniform_mid"] == pytest.approx(2 * paid["truthful"], rel=1e-3)  # markup 1
    assert paid["max_markup"] == pytest.approx(3 * paid["truthful"], rel=1e-3)  # markup 2
    assert all(float(o["load_shed"]) == 0 for o in outcomes.values())
    # the days come from the held-out set: the truthful profits are positive and finite
    assert np.all(np.isfinite(outcomes["truthful"]["profit"]))


def highs_profit(net, poly, bus_load, markup):
    """A company's profit per hour, each settled at HiGHS's prices for the offers."""
    offers = poly * (1 + markup)[:, None]
    offers[:, 2] = 0.0
    ref = solve(net, bus_load, cost_poly=offers)
    pg, price = ref["pg_mw"], ref["lmp"][np.asarray(net.gen_bus)]
    return price * pg - (poly[:, 0] * pg**2 + poly[:, 1] * pg + poly[:, 2])


@full_only
def test_deviation_check_finds_the_pivotal_generators_best_markup():
    # a flat 400 MW day: against truthful rivals gen 4 profits from any markup up to its
    # best; the others do not run at truthful prices and gain nothing by bidding higher
    shares = np.array([0.0, 0.1, 0.2, 0.3, 0.5])
    env, params = flat_day(0.4)
    truthful = env.baselines(params)["truthful"]
    check = deviation_gains(env, params, truthful, KEY, episodes=2, shares=shares)
    net, poly = case5_costs()
    bus_load = 0.4 * np.asarray(net.pd_mw, float)
    hourly = np.array([highs_profit(net, poly, bus_load, np.eye(5)[4] * 2 * s)[4] for s in shares])
    per_day = hourly * DT_H * env.horizon
    assert check.best_share[4] == shares[np.argmax(per_day)]
    assert check.best_profit[4] == pytest.approx(per_day.max(), rel=1e-3)
    assert check.gain[4] == pytest.approx(per_day.max() - per_day[0], rel=1e-3)
    assert check.epsilon == check.gain[4] > 1000
    np.testing.assert_allclose(check.gain[:4], 0.0, atol=1.0)


@full_only
def test_bids_sweep_under_vmap_and_jit_traces_once():
    env, params = jaxgrid.make("gencos5-v0")
    obs, state = env.reset(KEY, params)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(key, state, action, params):
        return env.step(key, state, action, params)

    for share in (0.0, 0.5, 1.0):
        step(KEY, state, jnp.full((5, 1), share), params)
    step(KEY, state, jnp.full((5, 1), 0.5), params.replace(markup_max=params.markup_max / 2))
    ranges = jnp.array([0.5, 1.0, 2.0])  # three scenarios' markup caps, one program
    swept = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (3, *jnp.shape(x))), params)
    swept = swept.replace(markup_max=jnp.broadcast_to(ranges[:, None], (3, 5)))
    out = jax.jit(jax.vmap(env.step, in_axes=(None, None, None, 0)))(
        KEY, state, jnp.ones((5, 1)), swept
    )
    lmp = np.asarray(out[5]["lmp"])
    np.testing.assert_allclose(lmp[1] / lmp[0], 2.0 / 1.5, rtol=1e-3)  # uniform markups
    np.testing.assert_allclose(lmp[2] / lmp[0], 3.0 / 1.5, rtol=1e-3)


def test_bad_params_are_refused_before_compiling():
    env, params = jaxgrid.make("gencos5-v0")
    with pytest.raises(ParamsError, match=r"params.markup_min\[0\] = -1"):
        validate_params(env, params.replace(markup_min=params.markup_min - 1.0))
    with pytest.raises(ParamsError, match="params.voll = nan"):
        validate_params(env, params.replace(voll=jnp.asarray(np.nan, jnp.float32)))
    with pytest.raises(ParamsError, match="markup_max"):
        validate_params(env, params.replace(markup_max=params.markup_min - 0.5))
    with pytest.raises(ValueError, match="voll"):
        jaxgrid.make("gencos5-v0", voll=100.0)
    with pytest.raises(ValueError, match="markup_range"):
        jaxgrid.make("gencos5-v0", markup_range=(1.0, 0.5))


def test_forecast_is_the_demand_that_clears():
    env, params = jaxgrid.make("gencos5-v0")
    names = env.observation_names(params)
    obs, state = env.reset(KEY, params)
    base = float(jnp.sum(params.pd_mw))
    step = jax.jit(env.step_env)
    for _ in range(2):
        ahead = float(obs[0, names.index("demand[+1]")])
        now = float(obs[0, names.index("demand")])
        obs, state, _, _, _, info = step(KEY, state, jnp.zeros((5, 1)), params)
        assert float(info["demand_mw"]) / base == pytest.approx(now, rel=1e-5)
        assert float(obs[0, names.index("demand")]) == pytest.approx(ahead, rel=1e-5)
        assert float(obs[4, names.index("lmp_own")]) * 100 == pytest.approx(
            float(info["lmp"][4]), rel=1e-5
        )


@full_only
def test_policy_metrics_for_the_evaluation_report():
    # a uniform markup of 1 (uniform_mid) keeps truthful's dispatch and doubles every price
    env, params = jaxgrid.make("gencos5-v0")
    metrics = env.policy_metrics(env.baselines(params)["uniform_mid"], params, KEY, episodes=1)
    assert metrics["generation_cost_vs_truthful"] == pytest.approx(1.0, rel=1e-4)
    assert metrics["consumer_payment_vs_truthful"] == pytest.approx(2.0, rel=1e-3)
    assert metrics["epsilon"] == max(0.0, max(metrics["deviation_gain"])) > 0
    assert len(metrics["best_deviation_share"]) == 5
