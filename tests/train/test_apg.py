"""APG and IAPG: learning a differentiable toy from the gradient of its return (and
nothing without that gradient), a failed step that cannot poison the gradient, a run
resumed to the uninterrupted result bit for bit, the command line, and refusals."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only, sampled
from flax import struct
from toy_envs import Doors

from jaxgrid import spaces
from jaxgrid.cli import main
from jaxgrid.env import Environment, Transition
from jaxgrid.rewards import Scalarisation
from jaxgrid.train import apg, iapg
from jaxgrid.train.evaluate import batch_totals, evaluate, summarise
from jaxgrid.train.logger import read_metrics
from jaxgrid.train.run import RunConfig, train_run

KEY = jax.random.PRNGKey(0)
MAKE = {"apg": apg.make_train, "iapg": iapg.make_train}


@struct.dataclass
class ReachState:
    position: jax.Array  # (num_agents,)
    time: jax.Array  # () int32


@struct.dataclass
class ReachParams:
    target: jax.Array
    power_flow_penalty: jax.Array
    scalarisation: Scalarisation


class Reach(Environment):
    """Each agent moves a point on a line by ``0.3 x`` its action in [-1, 1] and is paid
    ``-(position - target)^2`` after each move; the episode terminates after ``horizon``
    steps. Start in [-1, 1]: the best policy moves straight to the target."""

    objective_names = ("distance",)
    cost_names = ("power_flow",)

    def __init__(self, num_agents: int = 2, horizon: int = 8):
        self.agents = tuple(f"point_{i}" for i in range(num_agents))
        self.agent_types = ("point",) * num_agents
        self.horizon = horizon

    def default_params(self):
        return ReachParams(
            target=jnp.float32(0.5),
            power_flow_penalty=jnp.float32(0.0),
            scalarisation=Scalarisation.create(1),
        )

    def observation_space(self, params):
        return spaces.Box(-5.0, 5.0, (self.num_agents, 2))

    def action_space(self, params):
        return spaces.Box(-1.0, 1.0, (self.num_agents, 1))

    def observe(self, state, params):
        t = jnp.full(self.num_agents, state.time / self.horizon, jnp.float32)
        return jnp.stack([state.position, t], axis=1)

    def reset_env(self, key, params):
        state = ReachState(
            position=jax.random.uniform(key, (self.num_agents,), minval=-1.0, maxval=1.0),
            time=jnp.zeros((), jnp.int32),
        )
        return self.observe(state, params), state

    def reward_vector(self, position, params):
        return -((position - params.target) ** 2)[:, None]

    def transition(self, key, state, action, params):
        position = state.position + 0.3 * action[:, 0]
        state = ReachState(position=position, time=state.time + 1)
        return Transition(
            obs=self.observe(state, params),
            state=state,
            reward_vector=self.reward_vector(position, params),
            costs=jnp.zeros((self.num_agents, 1)),
            terminated=state.time >= self.horizon,
            truncated=jnp.zeros((), bool),
            info={},
        )


class ReachWithoutGradient(Reach):
    """Reach whose reward passes no gradient back (``stop_gradient``)."""

    def reward_vector(self, position, params):
        return jax.lax.stop_gradient(super().reward_vector(position, params))


class ReachCollapses(Reach):
    """Reach whose 'physics' fails on the third step of every episode: the failed step's
    objectives are computed from a NaN (as from an unsolved power flow), which the
    contract replaces by the failure penalty; their derivative stays NaN."""

    def transition(self, key, state, action, params):
        tr = super().transition(key, state, action, params)
        failed = tr.state.time == 3
        # NaN where failed (and so its derivative), finite elsewhere
        garbage = jnp.sqrt(1.0 + tr.state.position**2 - 100.0 * failed)[:, None]
        return tr._replace(
            reward_vector=jnp.where(failed, garbage, tr.reward_vector), failed=failed
        )


def best_policy(key, obs):
    """Straight to the target, written independently of the learner."""
    return jnp.clip((0.5 - obs[:, :1]) / 0.3, -1.0, 1.0)


def _config(**overrides) -> apg.APGConfig:
    fields = dict(
        total_steps=16 * 8 * 40,  # 40 windows of 16 whole episodes
        num_envs=16,
        num_steps=8,
        hidden=(16, 16),
        actor_lr=1e-2,
        critic_epochs=2,
        critic_minibatches=2,
    )
    return apg.APGConfig(**{**fields, **overrides})


def _returns(env, fns, runner) -> dict:
    """Held-out-style returns (32 episodes) of the learned, the initial and the best
    policy; the first two share one compiled evaluation."""
    params = env.default_params()

    totals = jax.jit(lambda r: batch_totals(fns.policy(r), env, params, KEY, 32))
    return {
        "learned": summarise(totals(runner), env)["return"],
        "initial": summarise(totals(fns.init(KEY)), env)["return"],
        "best": evaluate(best_policy, env, params, KEY, episodes=32, test_days=False)["return"],
    }


@pytest.mark.parametrize("algo", sampled(["apg", "iapg"], keep=("apg",)))
def test_learns_reach_from_the_gradient_of_its_return(algo):
    env = Reach()
    fns = MAKE[algo](_config(), env)
    runner, metrics = jax.jit(fns.train)(KEY)
    results = _returns(env, fns, runner)
    gap = results["best"] - results["initial"]
    assert gap > 0.5, results
    # measured: 0.97 (apg) and 0.98 (iapg) of the way from the initial policy to the best
    assert results["learned"] > results["initial"] + 0.9 * gap, results
    assert float(np.sum(metrics["nonfinite_gradient"])) == 0.0
    assert np.all(np.asarray(metrics["grad_norm"]) > 0)


@full_only
def test_without_the_gradient_of_the_reward_nothing_is_learned():
    """The windows are whole episodes that terminate (nothing to bootstrap): with the
    reward's gradient stopped the actor's gradient is 0 and it does not move at all."""
    env = ReachWithoutGradient()
    fns = apg.make_train(_config(), env)
    runner, metrics = jax.jit(fns.train)(KEY)
    np.testing.assert_array_equal(np.asarray(metrics["grad_norm"]), 0.0)
    jax.tree_util.tree_map(
        np.testing.assert_array_equal, runner.actor.params, fns.init(KEY).actor.params
    )
    results = _returns(env, fns, runner)  # the observation statistics moved, a little
    gap = results["best"] - results["initial"]
    assert abs(results["learned"] - results["initial"]) < 0.01 * gap, results


def test_a_failed_step_does_not_poison_the_gradient(monkeypatch):
    """Episodes fail on their third step. The gradient of the rest of the window stays
    finite, and the policy still learns the steps before the failure; without the guard
    on the cotangents every update would be skipped."""
    env = ReachCollapses(horizon=8)
    config = _config(total_steps=16 * 8 * 20, num_steps=8)
    fns = apg.make_train(config, env)
    runner, metrics = jax.jit(fns.train)(KEY)
    assert float(np.sum(metrics["nonfinite_gradient"])) == 0.0
    assert int(np.sum(metrics["episodes"])) == 16 * (20 * 8 // 3)  # each ends in a failure
    results = _returns(env, fns, runner)
    assert results["learned"] > results["initial"] + 0.1, results

    monkeypatch.setattr(apg, "finite_cotangent", lambda tree: tree)
    unguarded_fns = apg.make_train(config, env)
    skipped, unguarded = jax.jit(unguarded_fns.train)(KEY)
    np.testing.assert_array_equal(np.asarray(unguarded["nonfinite_gradient"]), 1.0)
    # every update skipped: the actor and its optimiser are where they started
    start = unguarded_fns.init(KEY).actor
    jax.tree_util.tree_map(
        np.testing.assert_array_equal,
        (skipped.actor.params, skipped.actor.opt_state),
        (start.params, start.opt_state),
    )


@full_only
def test_an_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, capsys):
    """jaxgrid train --algo apg: 6 updates of 2 seeds, a checkpoint every 2; stopped after
    4 and resumed, the logs and the evaluation equal the uninterrupted run's bit for bit
    (actor, critic, target critic, both optimisers, the statistics and the environments
    are in the checkpoints)."""
    settings = dict(num_envs=8, num_steps=24, hidden=[16], critic_epochs=2, log_every=1)
    args = ["train", "--env", "arbitrage-v0", "--algo", "apg", "--total-steps", "1152"]
    args += ["--seeds", "2", "--checkpoint-every", "2", "--eval-episodes", "4", "--no-progress"]
    for name, value in settings.items():
        args += ["--set", f"{name}={json.dumps(value)}"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert main([*args, "--out", str(whole)]) == 0
    printed = capsys.readouterr().out
    assert "arbitrage-v0 · apg" in printed and "| oracle |" in printed
    for name in ("config.json", "metrics.jsonl", "metrics.csv", "eval.json", "learning_curve.png"):
        assert (whole / name).stat().st_size > 0, name
    saved = json.loads((whole / "config.json").read_text())
    assert "ppo" not in saved and "sac" not in saved and saved["apg"]["critic_epochs"] == 2
    config = RunConfig.from_json(saved)
    assert config.algo_config().num_updates == 6
    assert train_run(config, parts, progress=False, stop_after=4) is None
    assert sorted(p.name for p in (parts / "checkpoints").iterdir()) == ["2", "4"]
    report = train_run(config, parts, progress=False)

    rows = {(r["member"], r["update"]): r for r in read_metrics(whole / "metrics.jsonl")}
    resumed = {(r["member"], r["update"]): r for r in read_metrics(parts / "metrics.jsonl")}
    assert sorted(rows) == sorted(resumed) == [(m, u) for m in (0, 1) for u in range(1, 7)]
    for key, row in rows.items():
        assert row["env_steps"] == 8 * 24 * key[1] and row["grad_norm"] > 0
        for name, value in row.items():
            if name not in ("wall_time_s", "env_steps_per_s"):
                assert resumed[key][name] == value, (key, name)
    first = json.loads((whole / "eval.json").read_text())
    assert report["env_steps_per_member"] == 1152
    assert report["scenarios"][0]["results"] == first["scenarios"][0]["results"]
    assert report["scenarios"][0]["scores"] == first["scenarios"][0]["scores"]


def test_refuses_discrete_actions_and_cost_budgets(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"needs continuous \(Box\) actions; Doors has"):
        iapg.make_train(_config(), Doors())
    out = tmp_path / "run"
    assert main(["train", "--env", "gardeners-v0", "--algo", "apg", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(
        "jaxgrid: error: --algo apg cannot train gardeners-v0: apg needs continuous (Box) "
        "actions, as it follows the gradient of the return with respect to the actions; "
        "gardeners-v0 has Discrete("
    ), err
    assert not out.exists()  # refused before anything is written
    args = ["train", "--env", "arbitrage-v0", "--algo", "iapg", "--out", str(out)]
    assert main([*args, "--cost-budget", "device_limits=0"]) == 2
    assert "APG takes no cost budgets" in capsys.readouterr().err
    with pytest.raises(ValueError, match="critic_minibatches"):
        apg.APGConfig(num_envs=3, num_steps=1, critic_minibatches=2)
