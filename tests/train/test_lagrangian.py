"""Constrained PPO/IPPO (PPO-Lagrangian): the multiplier updates by hand, a budget that
binds lowers the cost a policy learns to incur, a loose one leaves its multiplier at 0,
and budgets reach training from the CLI, run configs and scenario files."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toy_envs
from conftest import full_only, sampled

from jaxgrid.train import ippo, ppo
from jaxgrid.train.lagrangian import (
    LagrangeState,
    budget_metrics,
    charge_lost_steps,
    combine_advantages,
    dual_step,
    update_multipliers,
)


def test_dual_ascent_by_hand():
    state = LagrangeState.create(2, 0.5, jnp.float32)
    new = update_multipliers(state, jnp.asarray([3.0, 0.0]), jnp.asarray([1.0, 1.0]), 0.1, None)
    # 0.5 + 0.1 * (3 - 1) = 0.7;  max(0, 0.5 + 0.1 * (0 - 1)) = 0.4
    np.testing.assert_allclose(new.multiplier, [0.7, 0.4], rtol=1e-6)
    low = update_multipliers(state, jnp.asarray([0.0, 0.0]), jnp.asarray([9.0, 9.0]), 0.1, None)
    np.testing.assert_array_equal(low.multiplier, [0.0, 0.0])  # never below 0


def test_pid_by_hand():
    state = LagrangeState.create(1, 0.0, jnp.float32).replace(
        integral=jnp.asarray([1.0]), last_cost=jnp.asarray([2.0])
    )
    new = update_multipliers(state, jnp.asarray([3.0]), jnp.asarray([1.0]), 0.1, (1.0, 0.5, 2.0))
    # violation 2, integral 1 + 2 = 3, rise 3 - 2 = 1: 1 * 2 + 0.5 * 3 + 2 * 1 = 5.5
    np.testing.assert_allclose(new.multiplier, [5.5])
    np.testing.assert_allclose(new.integral, [3.0])
    np.testing.assert_allclose(new.last_cost, [3.0])


def test_a_capped_multiplier_and_its_integral_stop_at_the_cap_by_hand():
    state = LagrangeState.create(1, 0.0, jnp.float32).replace(integral=jnp.asarray([8.0]))
    # dual ascent: 0 + 1 * (30 - 0) = 30, capped at 5
    new = update_multipliers(state, jnp.asarray([30.0]), jnp.asarray([0.0]), 1.0, None, 5.0)
    np.testing.assert_allclose(new.multiplier, [5.0])
    # PID (kp, ki, kd) = (0, 0.5, 0): integral 8 + 30 = 38, capped at 5 / 0.5 = 10
    new = update_multipliers(
        state, jnp.asarray([30.0]), jnp.asarray([0.0]), 1.0, (0.0, 0.5, 0.0), 5.0
    )
    np.testing.assert_allclose(new.integral, [10.0])
    np.testing.assert_allclose(new.multiplier, [5.0])
    # the cost falls below budget: the capped integral unwinds at once (10 - 4 = 6 -> 3)
    new = update_multipliers(new, jnp.asarray([0.0]), jnp.asarray([4.0]), 1.0, (0, 0.5, 0), 5.0)
    np.testing.assert_allclose(new.multiplier, [3.0])
    with pytest.raises(ValueError, match="lagrange_max must be > 0"):
        ppo.PPOConfig(lagrange_max=0.0)


def test_episode_cost_estimate_and_metrics_by_hand():
    """Ended episodes give the mean episode cost; with none ended, the cost per step times
    the horizon; the log puts each estimate under its cost's name."""
    config = ppo.PPOConfig(cost_budgets=(("b", 1.0),), lagrange_lr=0.1)
    state = LagrangeState.create(1, 0.0, jnp.float32)
    costs = jnp.full((4, 2, 1, 1), 0.25)  # (steps, envs, agents, budgeted)
    index = np.asarray([1])  # budgeted cost "b" is the second of ("a", "b")
    ended = {"episodes": jnp.asarray(2.0), "episode_costs": jnp.asarray([9.0, 6.0])}
    new, estimate = dual_step(state, ended, costs, index, 10, config)
    np.testing.assert_allclose(estimate, [3.0])  # 6 / 2 episodes
    np.testing.assert_allclose(new.multiplier, [0.2])  # 0.1 * (3 - 1)
    none = {"episodes": jnp.asarray(0.0), "episode_costs": jnp.zeros(2)}
    _, estimate = dual_step(state, none, costs, index, 10, config)
    np.testing.assert_allclose(estimate, [2.5])  # 0.25 per step x 10 steps
    logged = budget_metrics(new, jnp.asarray([3.0]), index, 2)
    np.testing.assert_allclose(logged["lagrange"], [0.0, 0.2])
    np.testing.assert_allclose(logged["cost_estimate"], [0.0, 3.0])


def test_a_failed_step_is_charged_for_the_steps_it_cut_off_by_hand():
    state = LagrangeState.create(2, 0.0, jnp.float32).replace(cost_ceiling=jnp.asarray([0.5, 3.0]))
    costs = jnp.asarray([[1.0, 2.0], [0.2, 0.1], [0.0, 0.0]])  # three steps, two costs
    steps_lost = jnp.asarray([0, 0, 4])  # the third step failed, cutting off 4 steps
    new, charged = charge_lost_steps(state, costs, steps_lost, gamma=0.9)
    # ceilings: max(0.5, 1.0) = 1.0 and max(3.0, 2.0) = 3.0, from the solved steps only
    np.testing.assert_allclose(new.cost_ceiling, [1.0, 3.0])
    # the episode: 4 steps at the ceilings; the critics: the ceilings for ever, discounted
    # (1 / (1 - 0.9) = 10 times each)
    np.testing.assert_allclose(charged.episode, [[1.0, 2.0], [0.2, 0.1], [4.0, 12.0]])
    np.testing.assert_allclose(charged.value, [[1.0, 2.0], [0.2, 0.1], [10.0, 30.0]], rtol=1e-6)
    np.testing.assert_array_equal(new.multiplier, state.multiplier)


def test_a_collapse_does_not_dodge_a_budget_no_policy_can_meet():
    """``Cliff``: a zero budget on a cost no walk avoids drives the multiplier up; were a
    failure free of cost, stepping off the cliff at once would be the best policy under
    it (it was: every episode ended at its first step). Charged for the steps it cuts
    off, a failure costs more than walking on at ``a = 0``, so the walker stays on."""
    env = toy_envs.Cliff()
    config = ppo.PPOConfig(
        total_steps=64 * 16 * 120,
        num_envs=64,
        num_steps=16,
        cost_budgets=(("hazard", 0.0),),
        pid_gains=(1.0, 0.5, 0.5),
    )
    runner, metrics = jax.jit(ppo.make_train(config, env, env.default_params()).train)(
        jax.random.PRNGKey(0)
    )
    failed_share = np.asarray(metrics["episode_costs"])[-10:, 1]  # power_flow per episode
    assert float(runner.lagrange.multiplier[0]) > 10.0  # the budget is not met
    assert float(np.mean(failed_share)) < 0.3
    np.testing.assert_allclose(runner.lagrange.cost_ceiling, [1.0], rtol=0.05)


def test_advantages_combine_by_hand():
    combined = combine_advantages(
        jnp.asarray([1.0, -2.0]), jnp.asarray([[2.0, 0.0], [1.0, 4.0]]), jnp.asarray([0.5, 1.0])
    )
    # (1 - 0.5*2 - 1*0) / 2.5 = 0;  (-2 - 0.5*1 - 1*4) / 2.5 = -2.6
    np.testing.assert_allclose(combined, [0.0, -2.6], rtol=1e-6)


def _tanks():
    """Tanks whose target (1.0) lies above the overflow limit (0.8): reward and cost pull
    apart, so an unconstrained policy overflows."""
    env = toy_envs.Tanks(num_agents=2, horizon=16)
    return env, env.default_params().replace(target=np.float32(1.0), limit=np.float32(0.8))


def _train(make, budgets, pid=None):
    env, params = _tanks()
    config = ppo.PPOConfig(
        total_steps=64 * 16 * 120,
        num_envs=64,
        num_steps=16,
        cost_budgets=budgets,
        lagrange_lr=1.0,
        pid_gains=pid,
    )
    runner, metrics = jax.jit(make(config, env, params).train)(jax.random.PRNGKey(0))
    cost = float(np.mean(np.asarray(metrics["episode_costs"])[-10:]))
    return runner, metrics, cost


@pytest.mark.parametrize(
    "make", sampled([ippo.make_train, ppo.make_train], keep=[ppo.make_train]), ids=["ippo", "ppo"]
)
def test_a_binding_budget_lowers_the_cost_learned(make):
    _, _, free = _train(make, ())
    runner, metrics, kept = _train(make, (("overflow", 0.0),), pid=(1.0, 0.5, 0.5))
    assert free > 0.2  # without a budget the policy overflows
    assert kept < 0.25 * free
    assert float(runner.lagrange.multiplier[0]) > 0.1
    assert np.asarray(metrics["lagrange"]).shape[-1] == 1  # per cost name


@full_only
def test_a_loose_budget_keeps_its_multiplier_at_zero():
    runner, metrics, _ = _train(ippo.make_train, (("overflow", 100.0),))
    np.testing.assert_array_equal(np.asarray(metrics["lagrange"]), 0.0)
    estimate = np.asarray(metrics["cost_estimate"])[-10:, 0]
    logged = np.asarray(metrics["episode_costs"])[-10:, 0]
    np.testing.assert_allclose(estimate, logged, rtol=1e-4)  # episodes end in every update


@full_only
def test_a_loose_budget_on_a_loud_cost_leaves_the_policy_to_the_reward():
    """With a budget its multiplier never leaves 0 for, the policy's advantages are the
    reward's alone, so it must learn as without a budget. Before the cost critics learnt
    standardised values, their squared errors (1e7) filled the gradient's global norm,
    clipped to ``max_grad_norm``, and left the policy a sliver of it: return -1.31
    against -0.74 without the budget (on voltage33-v0: CR 0.23 against 0.82)."""
    env = toy_envs.LoudTanks(num_agents=2, horizon=16)

    def final_return(budgets):
        config = ppo.PPOConfig(
            total_steps=64 * 16 * 120, num_envs=64, num_steps=16, cost_budgets=budgets
        )
        runner, metrics = jax.jit(ippo.make_train(config, env, env.default_params()).train)(
            jax.random.PRNGKey(0)
        )
        return runner, float(np.mean(np.asarray(metrics["episode_return"])[-10:]))

    _, free = final_return(())
    runner, loose = final_return((("overflow", 1e9),))
    np.testing.assert_array_equal(runner.lagrange.multiplier, 0.0)
    assert abs(loose - free) < 0.15, (loose, free)
    # the statistics the cost critic's targets are standardised by are the loud ones
    assert float(runner.cost_value_stats.mean[0]) > 1e3


def test_each_cost_has_a_critic_of_its_own():
    """A budgeted cost's critic shares no parameter with the actor or the return's critic:
    perturbing it changes that cost's value only."""
    from jaxgrid.train.networks import ActorCritic

    net = ActorCritic(agent_type=(0, 0), n_out=2, hidden=(8,), n_costs=2)
    obs = jax.random.normal(jax.random.PRNGKey(1), (5, 2, 3))
    params = net.init(jax.random.PRNGKey(0), obs)
    out, value = net.apply(params, obs)
    assert value.shape == (5, 2, 3)
    cost_0 = params["params"]["type_0"]["cost_0"]
    moved = jax.tree_util.tree_map(lambda x: x + 1.0, cost_0)
    params["params"]["type_0"]["cost_0"] = moved
    out2, value2 = net.apply(params, obs)
    np.testing.assert_array_equal(out2, out)
    np.testing.assert_array_equal(value2[..., [0, 2]], value[..., [0, 2]])
    assert not np.allclose(value2[..., 1], value[..., 1])


def test_bad_budgets_are_refused():
    env, params = _tanks()
    with pytest.raises(
        ValueError, match=r"has no cost \['voltage'\]; its costs are \['overflow'\]"
    ):
        ppo.make_train(ppo.PPOConfig(cost_budgets=(("voltage", 1.0),)), env, params)
    with pytest.raises(ValueError, match="cost budget overflow must be >= 0"):
        ppo.PPOConfig(cost_budgets=(("overflow", -1.0),))
    with pytest.raises(ValueError, match="pid_gains must be three gains"):
        ppo.PPOConfig(pid_gains=(1.0, -1.0, 0.0))


def test_budgets_from_the_cli_run_configs_and_scenario_files(tmp_path):
    from jaxgrid.cli import UserError, _run_config, build_parser
    from jaxgrid.config import run_fields
    from jaxgrid.train.run import RunConfig

    parser = build_parser()
    args = parser.parse_args(
        ["train", "--env", "voltage33-v0", "--cost-budget", "voltage_band=0.5"]
    )
    config = _run_config(args)
    assert config.ppo["cost_budgets"] == [["voltage_band", 0.5]]
    capped = parser.parse_args(["train", "--env", "voltage33-v0", "--set", "lagrange_max=10"])
    assert _run_config(capped).algo_config().lagrange_max == 10.0
    again = RunConfig.from_json(config.to_json())  # config.json round trip
    assert again.algo_config().cost_budgets == (("voltage_band", 0.5),)
    for bad in ("voltage_band", "voltage_band=x", "nope=1"):
        args = parser.parse_args(["train", "--env", "voltage33-v0", "--cost-budget", bad])
        with pytest.raises(UserError, match="cost-budget"):
            _run_config(args)
    scenario = tmp_path / "safe.toml"
    scenario.write_text('env = "voltage33-v0"\n[reward]\ncost_budget = { voltage_band = 0.25 }\n')
    assert run_fields(scenario)["ppo"]["cost_budgets"] == [["voltage_band", 0.25]]


@full_only
def test_a_budgeted_run_resumes_its_multipliers_and_reports_the_budget(tmp_path):
    """Multipliers live in the checkpointed learner state: a run stopped after 2 updates
    and resumed logs the same multipliers as one run straight through."""
    import json

    from jaxgrid.train.logger import read_metrics
    from jaxgrid.train.run import RunConfig, format_table, train_run

    def config():
        return RunConfig(
            env="arbitrage-v0",
            ppo=dict(
                total_steps=8 * 48 * 4,
                num_envs=8,
                num_steps=48,
                hidden=[16],
                log_every=1,
                cost_budgets=[["device_limits", 0.0]],
            ),
            checkpoint_every=2,
            eval_episodes=2,
        )

    whole, parts = tmp_path / "whole", tmp_path / "parts"
    report = train_run(config(), whole, progress=False)
    assert train_run(config(), parts, progress=False, stop_after=2) is None
    train_run(config(), parts, progress=False)
    name = "lagrange/device_limits"
    straight = [row[name] for row in read_metrics(whole / "metrics.jsonl")]
    resumed = [row[name] for row in read_metrics(parts / "metrics.jsonl")]
    assert len(straight) == 4 and straight[-1] > 0
    np.testing.assert_allclose(resumed, straight, rtol=1e-6)
    budget = json.loads((whole / "eval.json").read_text())["scenarios"][0]["budgets"]
    cost = report["scenarios"][0]["policy"]["costs"]["device_limits"]
    assert budget == {"device_limits": {"budget": 0.0, "policy": cost, "met": cost <= 0.0}}
    assert "budget device_limits <= 0:" in format_table(report)
