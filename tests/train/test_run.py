"""Runs: the CLI trains, checkpoints, resumes (to the same numbers) and re-evaluates;
it refuses what it cannot do in one line naming what is wrong."""

import dataclasses
import json
import os
import platform
import re
import sys

import jax
import jaxlib
import numpy as np
import pytest

import jaxgrid
from jaxgrid.cli import main
from jaxgrid.errors import UserError
from jaxgrid.train.logger import read_metrics
from jaxgrid.train.ppo import PPOConfig
from jaxgrid.train.run import Run, RunConfig, RunWarning, format_table, train_run

# 6 updates of 8 one-day episodes, a checkpoint every 2
TINY = [
    "train",
    "--env", "arbitrage-v0", "--algo", "ppo", "--total-steps", "1152", "--seeds", "2",
    "--set", "num_envs=8", "--set", "hidden=[16]", "--set", "log_every=1",
    "--checkpoint-every", "2", "--eval-episodes", "4", "--no-progress",
]  # fmt: skip


def _config(**overrides) -> RunConfig:
    fields = dict(
        env="arbitrage-v0",
        algo="ppo",
        seeds=2,
        ppo=dict(total_steps=1152, num_envs=8, hidden=[16], log_every=1),
        checkpoint_every=2,
        eval_episodes=4,
    )
    return RunConfig(**{**fields, **overrides})


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, capsys):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert main([*TINY, "--out", str(whole)]) == 0
    printed = capsys.readouterr().out
    for name in ("config.json", "metrics.jsonl", "metrics.csv", "eval.json", "learning_curve.png"):
        assert (whole / name).stat().st_size > 0, name
    assert sorted(p.name for p in (whole / "checkpoints").iterdir()) == ["2", "4", "6"]
    assert "| oracle |" in printed and "score" in printed
    assert "compiling" in printed.split("\n| policy")[0]

    # stopped after 4 updates (checkpoints at 2 and 4), then checkpoint 4 damaged: the
    # rerun warns in one line and resumes from 2
    assert train_run(_config(), parts, progress=False, stop_after=4) is None
    assert sorted(p.name for p in (parts / "checkpoints").iterdir()) == ["2", "4"]
    assert not (parts / "eval.json").exists()
    metadata = parts / "checkpoints" / "4" / "default" / "_METADATA"
    metadata.write_text(metadata.read_text()[:100])
    capsys.readouterr()
    assert main([*TINY, "--out", str(parts)]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("jaxgrid: warning: skipped damaged checkpoint(s) 4 (JSONDecodeError")
    assert err.count("\n") == 1 and err.endswith("; using checkpoint 2\n")
    assert "resuming from checkpoint 2 of 6 updates" in out

    rows = {(r["member"], r["update"]): r for r in read_metrics(whole / "metrics.jsonl")}
    resumed = {(r["member"], r["update"]): r for r in read_metrics(parts / "metrics.jsonl")}
    assert sorted(rows) == sorted(resumed) == [(m, u) for m in (0, 1) for u in range(1, 7)]
    for key, row in rows.items():
        assert row["wall_time_s"] > 0
        for name, value in row.items():
            if name not in ("wall_time_s", "env_steps_per_s"):
                np.testing.assert_allclose(
                    resumed[key][name], value, rtol=1e-5, err_msg=f"{key} {name}"
                )
    assert rows[(0, 6)]["wall_time_s"] > rows[(0, 1)]["wall_time_s"]
    assert rows[(0, 1)]["env_steps_per_s"] is None and rows[(0, 6)]["env_steps_per_s"] > 0
    report = json.loads((whole / "eval.json").read_text())
    again = json.loads((parts / "eval.json").read_text())
    np.testing.assert_allclose(
        again["scenarios"][0]["scores"]["seed1"],
        report["scenarios"][0]["scores"]["seed1"],
        rtol=1e-5,
    )

    # the score is the policy's return placed between idle (0) and the LP oracle (1)
    scenario = report["scenarios"][0]
    idle = scenario["results"]["idle"]["return"]
    seed0 = scenario["results"]["seed0"]["return"]
    assert idle == 0.0
    assert scenario["scores"]["seed0"] == pytest.approx(
        (seed0 - idle) / (scenario["oracle_return"] - idle)
    )

    # jaxgrid eval re-evaluates the newest checkpoint to the same numbers
    assert main(["eval", "--run", str(whole)]) == 0
    assert "policy (mean over seeds)" in capsys.readouterr().out
    reevaluated = json.loads((whole / "eval.json").read_text())
    assert reevaluated["scenarios"][0]["scores"] == pytest.approx(scenario["scores"], rel=1e-5)
    # without the oracle: the best baseline is the score's 1
    assert main(["eval", "--run", str(whole), "--no-oracle"]) == 0
    assert "| oracle |" not in capsys.readouterr().out
    without = json.loads((whole / "eval.json").read_text())["scenarios"][0]
    assert without["oracle_return"] is None and without["score_best"] != "oracle"
    # a run trained without it (its config says so, as `jaxgrid train --no-oracle`
    # writes it) leaves it out, and --oracle solves it anyway
    written = json.loads((whole / "config.json").read_text())
    (whole / "config.json").write_text(json.dumps({**written, "eval_oracle": False}))
    assert main(["eval", "--run", str(whole)]) == 0
    assert json.loads((whole / "eval.json").read_text())["scenarios"][0]["oracle_return"] is None
    assert main(["eval", "--run", str(whole), "--oracle"]) == 0
    solved = json.loads((whole / "eval.json").read_text())["scenarios"][0]
    assert solved["oracle_return"] == pytest.approx(scenario["oracle_return"], rel=1e-6)
    capsys.readouterr()
    assert _refusal(["eval", "--run", str(whole), "--oracle", "--no-oracle"], capsys)

    # the three runs of one config in this process, the resumed one included (arrays
    # restored from a checkpoint), compiled the training program once
    assert Run(_config()).sweep.compiled_chunk._cache_size() == 1


def test_config_json_reproduces_the_run_and_a_run_directory_refuses_another(tmp_path):
    config = _config(env_kwargs={"degradation_cost": 0.5})
    train_run(config, tmp_path, progress=False, stop_after=0)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert set(saved["ppo"]) == {f.name for f in dataclasses.fields(PPOConfig)}
    assert saved["env_kwargs"] == {"degradation_cost": 0.5}
    assert (saved["env"], saved["seeds"], saved["seed"]) == ("arbitrage-v0", 2, 0)
    assert saved["versions"] == {
        "jaxgrid": jaxgrid.__version__,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "python": platform.python_version(),
    }
    assert RunConfig.from_json(saved) == config

    train_run(config, tmp_path, progress=False, stop_after=0)  # the same config resumes
    saved["versions"]["jax"] = "0.4.30"  # the run started under another jax: said, not refused
    (tmp_path / "config.json").write_text(json.dumps(saved))
    with pytest.warns(RunWarning, match=f"with jax {jax.__version__} \\(started with 0.4.30\\)$"):
        train_run(config, tmp_path, progress=False, stop_after=0)
    other = _config(seed=1, env_kwargs={"degradation_cost": 0.5}, ppo={**config.ppo, "lr": 1e-3})
    expected = "another config (ppo.lr: 0.0003 there, 0.001 here; seed: 0 there, 1 here); rerun"
    with pytest.raises(UserError, match="^" + re.escape(f"{tmp_path} holds a run with {expected}")):
        train_run(other, tmp_path, progress=False, stop_after=0)


TRAIN = ["train", "--env", "arbitrage-v0", "--set", "num_envs=8", "--no-progress"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--env", "voltage34-v0"], "argument --env: unknown environment 'voltage34-v0'; did you mean 'voltage33-v0'"),
        (["demo", "--env", "voltage34-v0"], "argument --env: unknown environment 'voltage34-v0'; did you mean 'voltage33-v0'"),
        (["train", "--algo", "ppo"], "give --env NAME"),
        ([*TRAIN, "--seeds", "0"], "argument --seeds: must be >= 1, got 0"),
        ([*TRAIN, "--total-steps", "0"], "argument --total-steps: must be >= 1, got 0"),
        ([*TRAIN, "--total-steps", "-1152"], "argument --total-steps: must be >= 1, got -1152"),
        ([*TRAIN, "--total-steps", "1e6"], "argument --total-steps: invalid integer value: '1e6'"),
        ([*TRAIN, "--set", "total_steps=0"], "total_steps must be >= 1, got 0"),
        ([*TRAIN, "--set", "lr=fast"], "PPO setting lr must be float, got 'fast'"),
        ([*TRAIN, "--set", "learning_rate=1"], "unknown PPO settings \\['learning_rate'\\]"),
        ([*TRAIN, "--set", "lr"], "--set needs NAME=VALUE, got 'lr'"),
        ([*TRAIN, "--set", "num_minibatches=5"], "divisible by num_minibatches"),
        ([*TRAIN, "--env-kwargs", "{degradation_cost: 1}"], "argument --env-kwargs: not valid JSON"),
        ([*TRAIN, "--env-kwargs", '{"bogus": 1}'], "unexpected keyword argument 'bogus'"),
        ([*TRAIN, "--weights", "1,x"], "argument --weights: expected rows of numbers"),
        ([*TRAIN, "--config", "missing.json"], "--config missing.json: No such file or directory"),
    ],
)  # fmt: skip
def test_bad_command_lines_are_one_line_naming_what_is_wrong(tmp_path, capsys, args, message):
    assert main([*args, "--out", str(tmp_path / "run")] if args[0] == "train" else args) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxgrid: error: ") and err.count("\n") == 1, err
    assert re.search(message, err), err
    assert not (tmp_path / "run").exists()  # refused before anything is written


def _refusal(args, capsys) -> str:
    """The one line ``jaxgrid`` prints on stderr as it refuses ``args``."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_eval_of_a_non_run_is_refused(tmp_path, capsys):
    expected = f"jaxgrid: error: {tmp_path} is not a run directory (no config.json)\n"
    assert _refusal(["eval", "--run", str(tmp_path)], capsys) == expected


def test_an_out_that_cannot_be_a_run_directory_is_refused(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("someone's file")
    err = _refusal([*TRAIN, "--out", str(taken)], capsys)
    assert err == f"jaxgrid: error: cannot write the run directory {taken}: File exists\n"
    err = _refusal([*TRAIN, "--out", str(taken / "run")], capsys)
    assert err == f"jaxgrid: error: cannot write the run directory {taken}/run: Not a directory\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_out_is_refused(tmp_path, capsys):
    tmp_path.chmod(0o555)
    try:
        err = _refusal([*TRAIN, "--out", str(tmp_path)], capsys)
    finally:
        tmp_path.chmod(0o755)
    expected = f"jaxgrid: error: cannot write the run directory {tmp_path}: Permission denied\n"
    assert err == expected


def test_a_missing_optional_extra_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import fails: not installed
    err = _refusal([*TRAIN, "--tensorboard", "--out", str(tmp_path)], capsys)
    expected = (
        "jaxgrid: error: --tensorboard needs tensorboardX: pip install 'jaxgrid[tensorboard]'\n"
    )
    assert err == expected


def test_tuned_defaults_fill_what_the_config_leaves_out():
    config = RunConfig(env="voltage33-v0", algo="ippo", env_kwargs={"q_weight": 0.05})
    assert config.env_kwargs == {"barrier": "bowl", "q_weight": 0.05}
    assert config.ppo["num_steps"] == 96
    assert RunConfig.from_json(json.loads(json.dumps(config.to_json()))) == config


def test_tuned_defaults_carry_a_cost_penalty_a_config_can_override():
    config = RunConfig(env="opf14-v0", algo="ippo", cost_penalty={"voltage": 5.0})
    assert config.cost_penalty["reactive_limit"] == 0.1
    assert config.cost_penalty["voltage"] == 5.0
    assert config.ppo["gamma"] == 0.0
    env, params = config.make_env()
    weights = dict(zip(env.cost_names, params.scalarisation.cost_weights.tolist()))
    assert weights["voltage"] == 5.0 and weights["active_limit"] == pytest.approx(0.1)
    assert RunConfig.from_json(json.loads(json.dumps(config.to_json()))) == config


def test_train_takes_a_scenario_file(tmp_path):
    from jaxgrid.cli import _run_config, build_parser

    scenario = tmp_path / "cheap_battery.toml"
    scenario.write_text('env = "arbitrage-v0"\n[params]\ndegradation_cost = 0.5\n')
    args = build_parser().parse_args(["train", "--config", str(scenario), "--algo", "ppo"])
    config = _run_config(args)
    assert config.env == "arbitrage-v0"
    assert config.env_kwargs == {"degradation_cost": 0.5}
    scenario.write_text('env = "arbitrage-v0"\n[params]\ndegradation_cost = -0.5\n')
    with pytest.raises(UserError, match=r"cheap_battery\.toml: params\.degradation_cost"):
        _run_config(build_parser().parse_args(["train", "--config", str(scenario)]))


def test_a_run_trains_on_the_declared_observations_and_actions(tmp_path):
    from jaxgrid.cli import _run_config, build_parser

    scenario = tmp_path / "declared.toml"
    scenario.write_text(
        'env = "arbitrage-v0"\n[[observations]]\nname = "price*"\n'
        '[[observations]]\nname = "soc"\n[[actions]]\nname = "p_share"\nlow = -0.5\nhigh = 0.5\n'
    )
    config = _run_config(build_parser().parse_args(["train", "--config", str(scenario)]))
    saved = json.loads(json.dumps(config.to_json()))  # config.json keeps the declarations
    assert RunConfig.from_json(saved).to_json() == saved
    env, params = config.make_env()
    names = env.observation_names(params)
    assert names[-1] == "soc" and names[0] == "price" and len(names) == 1 + 1 + env.forecast
    np.testing.assert_array_equal(env.action_space(params)._bounds()[1], 0.5)
    run = Run(config)
    runners = run.fresh_runners()  # the learner's networks take the declared sizes
    kernel = runners.train_state.params["net"]["params"]["type_0"]["MLP_0"]["Dense_0"]["kernel"]
    assert kernel.shape[-2] == len(names)


def test_train_still_takes_a_json_run_config(tmp_path):
    from jaxgrid.cli import _run_config, build_parser

    run_config = tmp_path / "run.json"
    run_config.write_text(json.dumps({"env": "arbitrage-v0", "algo": "ppo", "seeds": 3}))
    config = _run_config(build_parser().parse_args(["train", "--config", str(run_config)]))
    assert (config.env, config.seeds) == ("arbitrage-v0", 3)


def test_train_keeps_the_environment_s_scalarisation_method(tmp_path):
    from jaxgrid.cli import _run_config, build_parser

    scenario = tmp_path / "min.toml"
    scenario.write_text('env = "arbitrage-v0"\n[reward]\nscalarisation = "min"\n')
    with pytest.raises(UserError, match=r"min\.toml: reward\.scalarisation: a training run keeps"):
        _run_config(build_parser().parse_args(["train", "--config", str(scenario)]))


def _report(seeds: int) -> dict:
    """An evaluation report of ``seeds`` seeds, in the shape ``run`` writes it."""
    result = {"return": 1.0, "objectives": {"profit": 1.0}, "costs": {}, "metrics": {}}
    results = {f"seed{i}": result for i in range(seeds)} | {"idle": result}
    scenario = {"policy": result, "results": results, "oracle_return": 2.0}
    scenario |= {"score_reference": "idle", "score_best": "oracle"}
    scenario |= {"score_mean": 0.5, "score_std": 0.1 * (seeds - 1)}
    return {"env": "arbitrage-v0", "algo": "ppo", "scenarios": [scenario]}


def test_the_table_of_one_seed_shows_no_mean_over_seeds():
    one = format_table(_report(1))
    assert "| policy |" in one and "mean over seeds" not in one
    assert "score 0.500 (0 = idle, 1 = oracle)" in one
    two = format_table(_report(2))
    assert "| policy (mean over seeds) |" in two and "score 0.500 ± 0.100" in two


def test_no_mpc_leaves_the_controllers_out_of_a_runs_evaluation():
    from jaxgrid.cli import _run_config, build_parser

    args = build_parser().parse_args(["train", "--env", "arbitrage-v0", "--no-mpc"])
    assert _run_config(args).eval_mpc is False
    assert _run_config(build_parser().parse_args(["train", "--env", "arbitrage-v0"])).eval_mpc


def test_no_oracle_leaves_the_optimum_out_of_a_runs_evaluation():
    from jaxgrid.cli import _run_config, build_parser

    args = build_parser().parse_args(["train", "--env", "arbitrage-v0", "--no-oracle"])
    assert _run_config(args).eval_oracle is False
    assert _run_config(build_parser().parse_args(["train", "--env", "arbitrage-v0"])).eval_oracle


KEEP = """
import sys
from jaxgrid.cli import use_compilation_cache
from jaxgrid.train.run import RunConfig, train_run
use_compilation_cache()
config = RunConfig(env="arbitrage-v0", algo="ppo", seeds=2,
                   ppo=dict(total_steps=1152, num_envs=8, hidden=[16], log_every=1))
train_run(config, sys.argv[1], progress=False, stop_after=2)
"""


def test_the_training_program_is_kept_in_the_users_compilation_cache(tmp_path):
    """The CLI's runs keep their compiled training program between processes: it calls no
    host callback (JAX's persistent cache keeps no program that calls one), and the cache
    is on by default, in the user's cache folder."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(
        XDG_CACHE_HOME=str(tmp_path / "cache"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0"
    )
    subprocess.run([sys.executable, "-c", KEEP, str(tmp_path / "run")], env=env, check=True)
    kept = os.listdir(tmp_path / "cache" / "jaxgrid" / "jax")
    assert any(name.startswith("jit__run_chunk-") for name in kept), sorted(kept)
    assert len(read_metrics(tmp_path / "run" / "metrics.jsonl")) == 2 * 2  # members x updates


def test_an_unwritable_cache_folder_is_one_warning_and_no_cache(tmp_path, monkeypatch):
    from jaxgrid.cli import use_compilation_cache

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    before = jax.config.jax_compilation_cache_dir
    with pytest.warns(UserWarning, match=r"no compilation cache: cannot create .*not-a-folder"):
        use_compilation_cache()
    assert jax.config.jax_compilation_cache_dir == before


def test_a_cache_folder_the_user_names_is_left_to_jax(tmp_path, monkeypatch):
    from jaxgrid.cli import use_compilation_cache

    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "theirs"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    before = jax.config.jax_compilation_cache_dir
    use_compilation_cache()
    assert jax.config.jax_compilation_cache_dir == before
    assert not (tmp_path / "xdg").exists()
