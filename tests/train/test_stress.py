"""Stress splits, violation rates and bootstrap intervals of the evaluation protocol."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toy_envs

import jaxgrid
from jaxgrid.train.evaluate import evaluate, held_out
from jaxgrid.train.stress import bootstrap_ci, stress_splits
from jaxgrid.wrappers import Saute


def test_splits_change_what_they_name_on_the_held_out_days():
    env, params = jaxgrid.make("voltage33-v0")
    test = held_out(params)
    splits = stress_splits(test)
    assert list(splits) == [
        "in_distribution",
        "load_stress",
        "high_demand",
        "low_renewable",
        "tight_lines",
    ]
    p = test.profiles
    np.testing.assert_allclose(splits["load_stress"].profiles.load, 1.2 * np.asarray(p.load))
    np.testing.assert_allclose(splits["low_renewable"].profiles.pv, 0.5 * np.asarray(p.pv))
    np.testing.assert_allclose(
        splits["tight_lines"].feeder.rate_mva, 0.8 * np.asarray(test.feeder.rate_mva)
    )
    # high demand: the top quarter of the held-out days by mean load, nothing else
    held = np.asarray(p.days)
    per_day = p.n_steps // (len(held) + len(np.asarray(p.held_out)))
    demand = {d: float(np.asarray(p.load)[d * per_day : (d + 1) * per_day].mean()) for d in held}
    kept = set(np.asarray(splits["high_demand"].profiles.days).tolist())
    assert kept <= set(held.tolist()) and len(kept) == round(0.25 * len(held))
    assert min(demand[d] for d in kept) >= max(demand[d] for d in set(held) - kept)


def test_wrapped_params_are_changed_inside_and_splits_that_do_not_apply_are_left_out():
    env, params = jaxgrid.make("voltage33-v0")
    wrapped = Saute(env, {"voltage_band": 1.0}, unsafe_reward=-1.0)
    splits = stress_splits(held_out(wrapped.default_params()))
    assert "load_stress" in splits
    inner = splits["load_stress"].env.profiles.load
    np.testing.assert_allclose(inner, 1.2 * np.asarray(held_out(params).profiles.load))
    tanks = toy_envs.Tanks()
    assert list(stress_splits(tanks.default_params())) == ["in_distribution"]


@pytest.mark.parametrize("toy", [toy_envs.Tanks, toy_envs.Collapses])
def test_the_violation_rate_counts_steps_with_a_cost(toy):
    env = toy(num_agents=2, horizon=10)
    params = env.default_params()

    def fill(key, obs):
        return jnp.full((2, 1), 0.2)

    result = evaluate(fill, env, params, jax.random.PRNGKey(0), episodes=1)
    # the same episode stepped by hand (evaluate's keys for one episode)
    keys = jax.vmap(jax.random.split)(jax.random.split(jax.random.PRNGKey(0), 1))
    obs, state = env.reset(keys[0, 0], params)
    with_cost = steps = 0
    per_cost = np.zeros(len(env.cost_names))
    for key in jax.random.split(keys[0, 1], env.horizon):
        _, k_step = jax.random.split(key)
        obs, state, _, terminated, truncated, info = env.step_env(
            k_step, state, fill(None, obs), params
        )
        steps += 1
        with_cost += bool(jnp.any(info["costs"] > 0))
        per_cost += np.any(np.asarray(info["costs"]) > 0, axis=0)
        if bool(terminated | truncated):
            break
    assert with_cost > 0  # the fill overflows at some point
    assert result["violation_rate"] == pytest.approx(with_cost / steps)
    assert list(result["cost_rates"]) == list(env.cost_names)
    if len(per_cost) > 1:  # costs on different steps: a rate pooled over costs would differ
        assert np.any(per_cost != with_cost)
    np.testing.assert_allclose(list(result["cost_rates"].values()), per_cost / steps)


def test_bootstrap_interval_of_a_mean():
    assert bootstrap_ci([0.3, 0.3, 0.3]) == (0.3, 0.3)
    values = np.tile([0.0, 1.0], 50)  # mean 0.5, standard error 0.05
    low, high = bootstrap_ci(values)
    assert low == pytest.approx(0.5 - 1.96 * 0.05, abs=0.02)
    assert high == pytest.approx(0.5 + 1.96 * 0.05, abs=0.02)


def test_eval_with_stress_records_every_split_the_command_and_the_config(tmp_path):
    import json

    from jaxgrid.train.run import RunConfig, evaluate_run, format_table, train_run

    config = RunConfig(
        env="arbitrage-v0",
        seeds=2,
        ppo=dict(total_steps=8 * 48 * 2, num_envs=8, num_steps=48, hidden=[16]),
        eval_episodes=2,
    )
    train_run(config, tmp_path, progress=False)
    report = evaluate_run(tmp_path, episodes=2, stress=True)
    stress = report["scenarios"][0]["stress"]
    assert list(stress) == ["in_distribution", "load_stress", "high_demand", "low_renewable"]
    for split in stress.values():
        assert len(split["seeds"]) == 2 and "idle" in split["baselines"]
        assert 0.0 <= split["policy"]["violation_rate"] <= 1.0
    saved = json.loads((tmp_path / "eval.json").read_text())
    assert saved["config"]["env"] == "arbitrage-v0" and saved["command"]
    assert saved["scenarios"][0]["score_ci95"] is not None
    assert "| load_stress |" in format_table(report)
