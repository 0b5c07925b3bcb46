"""SAC and ISAC: the squashed Gaussian's density, the replay buffer's contents by hand,
finite losses and shapes, learning the tank task, a cost budget that binds, one trace of
the update, float64, refusals, and a run resumed to the uninterrupted result."""

import json

import chex
import distrax
import flashbax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only, sampled
from toy_envs import Doors, LoudTanks, Tanks

from jaxgrid.cli import main
from jaxgrid.train import isac, sac
from jaxgrid.train.distributions import BoundedPolicy
from jaxgrid.train.evaluate import evaluate
from jaxgrid.train.logger import read_metrics
from jaxgrid.train.run import RunConfig, train_run

KEY = jax.random.PRNGKey(0)
MAKE = {"sac": sac.make_train, "isac": isac.make_train}


def _small(**overrides) -> sac.SACConfig:
    fields = dict(
        total_steps=2_048,
        num_envs=8,
        gradient_steps=2,
        batch_size=32,
        buffer_size=1_024,
        learning_starts=64,
        hidden=(16, 16),
    )
    return sac.SACConfig(**{**fields, **overrides})


def test_squashed_gaussian_log_prob_is_the_density_of_the_squashed_action():
    out = jax.random.normal(KEY, (1000, 2, 6))  # mean and raw log std of 3 entries
    policy = BoundedPolicy("tanh_gaussian", out, None, -jnp.ones(3), jnp.ones(3))
    action, raw = policy.sample(jax.random.PRNGKey(1))
    np.testing.assert_allclose(action, jnp.tanh(raw), atol=1e-6)  # the box is [-1, 1] here
    mean, raw_log_std = jnp.split(out, 2, axis=-1)
    log_std = -5.0 + 3.5 * (jnp.tanh(raw_log_std) + 1.0)  # bounded to [-5, 2]
    reference = distrax.Transformed(distrax.Normal(mean, jnp.exp(log_std)), distrax.Tanh())
    expected = jnp.sum(reference.log_prob(jnp.tanh(raw)), axis=-1)
    # distrax inverts tanh, which loses digits near +-1: compare where it is accurate
    inside = np.all(np.abs(np.asarray(action)) < 0.99, axis=-1)
    assert inside.mean() > 0.5
    np.testing.assert_allclose(
        np.asarray(policy.log_prob(raw))[inside], np.asarray(expected)[inside], rtol=1e-3, atol=1e-3
    )

    # the draw is reparameterised: its gradient reaches the network's outputs
    def total(o):
        return jnp.sum(BoundedPolicy("tanh_gaussian", o, None, -1.0, 1.0).sample(KEY)[0])

    grad = np.asarray(jax.grad(total)(out))
    # the mean moves every action up, the spread moves them (but where tanh saturates)
    assert np.all(grad[..., :3] >= 0) and np.mean(grad[..., :3] > 0) > 0.95
    assert np.mean(grad[..., 3:] != 0) > 0.9


def test_the_buffer_keeps_the_newest_transitions_in_a_ring_and_samples_written_ones():
    """2 environments, 2 warm-up steps, a ring of 6: after the warm-up rows 0-3 hold steps
    0, 0, 1, 1 (environment-major within a step); update 1 writes step 2 into rows 4-5,
    update 2 overwrites rows 0-1 with step 3."""
    env = Tanks(num_agents=1, horizon=50)
    params = env.default_params().replace(stop_level=jnp.float32(2.0))  # never terminates
    config = sac.SACConfig(
        num_envs=2, learning_starts=4, buffer_size=6, batch_size=2, gradient_steps=1, hidden=(8,)
    )
    fns = sac.make_train(config, env, params)
    runner = jax.jit(fns.init)(KEY)
    step_of = lambda obs: np.rint(np.asarray(obs[:, 0, 1]) * 50).astype(int)  # noqa: E731
    written = runner.buffer.experience
    np.testing.assert_array_equal(step_of(written.obs[0])[:4], [0, 0, 1, 1])
    assert int(runner.buffer.current_index) == 4 and not bool(runner.buffer.is_full)

    # only written rows are drawn
    sampler = flashbax.make_item_buffer(6, 1, 6, add_sequences=True)
    draws = jax.vmap(sampler.sample, in_axes=(None, 0))(runner.buffer, jax.random.split(KEY, 100))
    assert set(step_of(draws.experience.obs.reshape(600, 1, 2))) == {0, 1}

    update = jax.jit(fns.update_step)
    runner, _ = update(runner)
    runner, _ = update(runner)
    rows = jax.tree_util.tree_map(lambda x: x[0], runner.buffer.experience)
    np.testing.assert_array_equal(step_of(rows.obs), [3, 3, 1, 1, 2, 2])
    np.testing.assert_array_equal(step_of(rows.next_obs), [4, 4, 2, 2, 3, 3])
    assert int(runner.buffer.current_index) == 2 and bool(runner.buffer.is_full)
    # actions in the policy's [-1, 1] units: random ones spread over it, the policy's inside
    assert np.all(np.abs(np.asarray(rows.action)) <= 1.0)
    # the level after the step is the level before plus the action (0.2 per unit) and noise
    level_change = np.asarray(rows.next_obs[:, 0, 0] - rows.obs[:, 0, 0])
    np.testing.assert_allclose(level_change, 0.2 * np.asarray(rows.action[:, 0, 0]), atol=0.05)


@pytest.mark.parametrize("algo", sampled(["sac", "isac"], keep=("isac",)))
def test_shapes_and_finite_losses(algo):
    env = Tanks(num_agents=3)
    fns = MAKE[algo](_small(), env)
    runner, metrics = jax.jit(fns.train)(KEY)
    agents = 1 if algo == "sac" else 3
    assert runner.temperature.params["log_alpha"].shape == (agents,)
    kernel = runner.critic.params["params"]["head_0"]["kernel"]
    assert kernel.shape == (2, 16, 1)  # twin Q-functions stacked, one output (no budgets)
    chex.assert_trees_all_equal_shapes(runner.critic.params, runner.target_critic)
    assert runner.buffer.experience.obs.shape == (1, 1_024, agents, 6 if algo == "sac" else 2)
    n = _small().num_updates
    assert n == (2_048 - 64) // 8
    for name in ("actor_loss", "value_loss", "entropy", "q_value", "alpha"):
        assert metrics[name].shape == (n,) and np.all(np.isfinite(np.asarray(metrics[name])))
    assert int(metrics["env_steps"][-1]) == _small().env_steps == 2_048
    action = fns.policy(runner)(KEY, env.reset(KEY)[0])
    assert action.shape == (3, 1) and np.all(np.abs(np.asarray(action)) <= 0.2)
    # the target Q-functions trail the learned ones (Polyak averaging), they are not copies
    assert not np.allclose(kernel, runner.target_critic["params"]["head_0"]["kernel"])


def go_to_target(key, obs):
    """The optimal tank policy, written independently: step towards the target level."""
    return jnp.clip(0.5 - obs[:, :1], -0.2, 0.2)


def random_policy(key, obs):
    return jax.random.uniform(key, (2, 1), minval=-0.2, maxval=0.2)


# a short run that learns the tank task (seconds on 2 cores)
TANK_SETTINGS = dict(
    total_steps=4_000,
    gradient_steps=4,
    batch_size=128,
    buffer_size=20_000,
    learning_starts=256,
    hidden=(32, 32),
    gamma=0.9,
    lr=1e-3,
)


@pytest.mark.parametrize("algo", sampled(["sac", "isac"], keep=("sac",)))
def test_learns_the_tank_task_far_beyond_random(algo):
    env = Tanks(num_agents=2, horizon=8)
    params = env.default_params()
    config = _small(**TANK_SETTINGS)
    fns = MAKE[algo](config, env, params)
    runner, metrics = jax.jit(fns.train)(KEY)
    results = {
        name: evaluate(policy, env, params, KEY, episodes=64, test_days=False)["return"]
        for name, policy in [
            ("learned", fns.policy(runner)),
            ("best", go_to_target),
            ("random", random_policy),
        ]
    }
    gap = results["best"] - results["random"]
    assert gap > 1.0
    # measured: 0.81 (sac) and 0.91 (isac) of the way from random to the optimum
    assert results["learned"] > results["random"] + 0.6 * gap, results
    assert float(metrics["alpha"][-1]) < 0.5  # the temperature fell from 1 with the entropy


@full_only  # the default suite keeps PPO's (test_lagrangian.py): the same multiplier
def test_a_binding_cost_budget_lowers_the_cost_learned():
    """Tanks whose target (1.0) lies above the overflow limit (0.8), as in the PPO-Lagrangian
    test: without a budget ISAC overflows, with a budget of 0 much less."""
    env = Tanks(num_agents=2, horizon=16)
    params = env.default_params().replace(target=np.float32(1.0), limit=np.float32(0.8))

    def overflow(budgets):
        config = _small(
            **TANK_SETTINGS,
            cost_budgets=budgets,
            lagrange_lr=0.05,
        )
        runner, metrics = jax.jit(isac.make_train(config, env, params).train)(KEY)
        policy = isac.make_train(config, env, params).policy(runner)
        result = evaluate(policy, env, params, KEY, episodes=64, test_days=False)
        return result["costs"]["overflow"], runner, metrics

    free, _, _ = overflow(())
    kept, runner, metrics = overflow((("overflow", 0.0),))
    assert free > 0.2
    assert kept < 0.25 * free, (free, kept)
    assert float(runner.lagrange.multiplier[0]) > 0.0
    assert np.asarray(metrics["lagrange"]).shape[-1] == 1  # per cost name


def test_a_loose_budget_on_a_loud_cost_leaves_the_policy_to_the_reward():
    """As for PPO (test_lagrangian): with a budget its multiplier never leaves 0 for, ISAC
    learns as without one. Before the Q-functions learnt a cost's values in units of its
    scale, a cost counted 1e4 times the reward filled their loss: return -2.15 against
    -0.32."""
    env = LoudTanks(num_agents=2, horizon=8)
    params = env.default_params()

    def learned(budgets):
        config = _small(**TANK_SETTINGS, cost_budgets=budgets)
        fns = isac.make_train(config, env, params)
        runner, _ = jax.jit(fns.train)(KEY)
        return runner, evaluate(fns.policy(runner), env, params, KEY, episodes=64, test_days=False)[
            "return"
        ]

    _, free = learned(())
    runner, loose = learned((("overflow", 1e9),))
    np.testing.assert_array_equal(runner.lagrange.multiplier, 0.0)
    assert abs(loose - free) < 0.1, (loose, free)


def test_the_sac_update_step_compiles_once():
    # chex counts traces by the definition's stack and source: named apart from PPO's test
    fns = sac.make_train(_small(), Tanks())

    @jax.jit
    @chex.assert_max_traces(n=1)
    def sac_update(runner):
        return fns.update_step(runner)

    runner = fns.init(KEY)
    for _ in range(3):
        runner, _ = sac_update(runner)
    assert int(runner.update) == 3


@full_only  # the default suite keeps PPO's (test_ppo.py)
def test_trains_in_float64():
    from conftest import x64

    with x64():
        fns = isac.make_train(_small(total_steps=256), Tanks())
        runner, metrics = jax.jit(fns.train)(KEY)
        assert runner.buffer.experience.obs.dtype == jnp.float64
        assert runner.temperature.params["log_alpha"].dtype == jnp.float64
        assert np.all(np.isfinite(np.asarray(metrics["value_loss"])))


def test_refuses_discrete_actions_and_bad_settings():
    with pytest.raises(ValueError, match=r"SAC needs continuous \(Box\) actions; Doors has"):
        isac.make_train(_small(), Doors())
    with pytest.raises(ValueError, match="buffer_size"):
        sac.SACConfig(buffer_size=16, batch_size=256)
    with pytest.raises(ValueError, match="tau"):
        sac.SACConfig(tau=0.0)
    with pytest.raises(ValueError, match=r"has no cost \['voltage'\]"):
        sac.make_train(_small(cost_budgets=(("voltage", 1.0),)), Tanks())


def test_an_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, capsys):
    """jaxgrid train --algo sac: 6 updates of 2 seeds, a checkpoint every 2; stopped after
    4 and resumed, the logs and the evaluation equal the uninterrupted run's (the replay
    buffer, targets and temperature are in the checkpoints)."""
    settings = dict(
        num_envs=8, hidden=[16], learning_starts=64, batch_size=32, buffer_size=512, log_every=1
    )
    args = ["train", "--env", "arbitrage-v0", "--algo", "sac", "--total-steps", "112"]
    args += ["--seeds", "2", "--checkpoint-every", "2", "--eval-episodes", "4", "--no-progress"]
    for name, value in settings.items():
        args += ["--set", f"{name}={json.dumps(value)}"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert main([*args, "--out", str(whole)]) == 0
    assert "| oracle |" in capsys.readouterr().out
    saved = json.loads((whole / "config.json").read_text())
    assert "ppo" not in saved and saved["sac"]["gradient_steps"] == 8  # tuned, not ours
    config = RunConfig.from_json(saved)
    assert config.algo_config().num_updates == 6
    assert train_run(config, parts, progress=False, stop_after=4) is None
    report = train_run(config, parts, progress=False)

    rows = {(r["member"], r["update"]): r for r in read_metrics(whole / "metrics.jsonl")}
    resumed = {(r["member"], r["update"]): r for r in read_metrics(parts / "metrics.jsonl")}
    assert sorted(rows) == sorted(resumed) == [(m, u) for m in (0, 1) for u in range(1, 7)]
    for key, row in rows.items():
        assert row["env_steps"] == 64 + 8 * key[1] and row["alpha"] > 0
        for name, value in row.items():
            if name not in ("wall_time_s", "env_steps_per_s"):
                np.testing.assert_allclose(
                    resumed[key][name], value, rtol=1e-5, err_msg=f"{key} {name}"
                )
    first = json.loads((whole / "eval.json").read_text())["scenarios"][0]
    assert report["env_steps_per_member"] == 112
    np.testing.assert_allclose(
        [report["scenarios"][0]["scores"][s] for s in ("seed0", "seed1")],
        [first["scores"][s] for s in ("seed0", "seed1")],
        rtol=1e-5,
    )


def test_runs_take_sac_settings_from_the_command_line_and_scenario_files(tmp_path):
    from jaxgrid.cli import ALGO_NAMES, _run_config, build_parser
    from jaxgrid.errors import UserError
    from jaxgrid.train.run import ALGOS

    assert ALGO_NAMES == list(ALGOS)  # --algo offers every algorithm of runs
    scenario = tmp_path / "safe.toml"
    scenario.write_text('env = "arbitrage-v0"\n[reward]\ncost_budget = { device_limits = 0.5 }\n')
    args = ["train", "--config", str(scenario), "--algo", "isac", "--set", "tau=0.01"]
    config = _run_config(build_parser().parse_args(args))
    assert config.sac["cost_budgets"] == [["device_limits", 0.5]] and config.sac["tau"] == 0.01
    assert config.ppo == {} and "ppo" not in config.to_json()
    assert RunConfig.from_json(config.to_json()) == config
    with pytest.raises(ValueError, match=r"ppo settings \['lr'\] given to a run of sac"):
        RunConfig(env="arbitrage-v0", algo="sac", ppo={"lr": 1e-3})
    with pytest.raises(ValueError, match=r"unknown SAC settings \['clip_eps'\]"):
        RunConfig(env="arbitrage-v0", algo="sac", sac={"clip_eps": 0.2})
    with pytest.raises(ValueError, match="SAC setting tau must be float"):
        RunConfig(env="arbitrage-v0", algo="sac", sac={"tau": "x"})
    with pytest.raises(UserError, match="--cost-budget: arbitrage-v0 has no cost"):
        _run_config(build_parser().parse_args([*args, "--cost-budget", "nope=1"]))
