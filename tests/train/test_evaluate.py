"""Evaluation: episode sums, baselines and the normalised score, against hand-computed values.

``Doors`` is deterministic: door 1 always pays 0.5 (4.0 over 8 steps); the best open door
pays 1.0 on even steps and 0.5 on odd ones (oracle: 6.0); the random baseline draws
uniformly among the open doors: 0.45 on even steps, (0.1 + 0.5 + 0.2) / 3 on odd ones
(door 2 is locked), 2.867 per episode (standard deviation 0.55 for the mean of 2 agents).
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from toy_envs import Collapses, Doors, Tanks

from jaxgrid.train.evaluate import (
    batch_totals,
    compare,
    evaluate,
    evaluate_baselines,
    oracle,
    score,
)

KEY = jax.random.PRNGKey(5)


class DoorsWithOracle(Doors):
    def oracle_return(self, params, state):
        return 6.0


def door(n):
    return lambda key, obs: jnp.full(obs["action_mask"].shape[:-1], n, jnp.int32)


def test_episode_sums_of_a_fixed_policy():
    env = Doors()
    result = evaluate(door(1), env, env.default_params(), KEY, episodes=3)
    assert result["return"] == pytest.approx(4.0)
    assert result["objectives"] == {"value": pytest.approx(4.0)}
    assert result["metrics"]["locked_opened"] == 0.0
    # door 2: 4 x 1.0 + 4 x -10, and both agents hit the lock on half the steps
    result = evaluate(door(2), env, env.default_params(), KEY, episodes=3)
    assert result["return"] == pytest.approx(-36.0)
    assert result["metrics"]["locked_opened"] == pytest.approx(1.0)


def test_score_places_the_policy_between_random_and_the_oracle():
    env = DoorsWithOracle()
    report = compare(door(1), env, env.default_params(), KEY, episodes=1000)
    random_return = report["results"]["random"]["return"]
    assert random_return == pytest.approx(1.8 + 3.2 / 3, abs=0.09)  # 5 standard errors
    assert report["oracle_return"] == 6.0
    assert report["score_reference"] == "random" and report["score_best"] == "oracle"
    assert report["score"] == pytest.approx((4.0 - random_return) / (6.0 - random_return))


def test_the_oracle_solves_each_initial_state_once():
    """Doors starts every episode in one state: one solve for five episodes; Tanks draws
    its levels: a solve per episode, each returning its own value."""
    solved = []

    def counting(cls):
        class Counted(cls):
            def oracle_return(self, params, state):
                solved.append(state)
                return float(len(solved))

        return Counted()

    env = counting(Doors)
    assert oracle(env, env.default_params(), KEY, episodes=5) == 1.0
    assert len(solved) == 1
    solved.clear()
    env = counting(Tanks)
    calls = []
    mean = oracle(env, env.default_params(), KEY, episodes=5, progress=lambda *a: calls.append(a))
    assert mean == pytest.approx(3.0)  # 1..5
    assert len(solved) == 5
    assert calls == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]


def test_score_without_oracle_uses_the_best_baseline():
    baselines = {
        "no_control": {"return": -3.0},
        "random": {"return": -9.0},
        "droop": {"return": -1.0},
    }
    report = score({"a": {"return": -2.0}, "b": {"return": -3.0}}, baselines, None)
    assert report["score_reference"] == "no_control" and report["score_best"] == "droop"
    assert report["scores"] == {"a": pytest.approx(0.5), "b": pytest.approx(0.0)}


def test_no_score_where_random_is_the_only_baseline():
    report = score({"a": {"return": 5.0}}, {"random": {"return": 1.0}}, None)
    assert report["score_reference"] == report["score_best"] == "random"
    assert report["scores"] == {"a": None}  # undefined, and null in eval.json (not NaN)
    assert json.loads(json.dumps(report, allow_nan=False))["scores"] == {"a": None}


def test_an_episode_that_terminates_stops_counting():
    env = Tanks(num_agents=2, horizon=7)
    params = env.default_params().replace(stop_level=jnp.float32(-1.0))  # every level is above
    totals = batch_totals(lambda k, o: jnp.zeros((2, 1)), env, params, KEY, 4)
    np.testing.assert_array_equal(totals["steps"], np.ones(4))
    # the return is the first step's alone: equal weights, no effort -> half the tracking
    np.testing.assert_allclose(totals["return"], 0.5 * totals["objectives"][:, 0], rtol=1e-6)
    assert np.all(totals["objectives"][:, 0] > -0.5 - 0.05)  # levels start in [0, 0.6]


def test_failed_power_flows_end_the_episode_and_add_to_no_figure():
    """The toy fails on its fourth step: each episode has 4 steps, 1 failed, whose reward
    is the penalty 9 and whose garbage loss (1e6) reaches no average."""
    env = Collapses(num_agents=2, horizon=7)
    params = env.default_params()
    still = lambda key, obs: jnp.zeros((2, 1))  # noqa: E731
    result = evaluate(still, env, params, KEY, episodes=4)
    assert result["metrics"]["power_flow_failed"] == pytest.approx(0.25)
    assert result["metrics"]["loss_mw"] == pytest.approx(1.0)
    assert result["costs"]["power_flow"] == pytest.approx(1.0)
    tracking = evaluate(still, Tanks(num_agents=2, horizon=7), params, KEY, episodes=4)
    assert result["return"] < -9.0 < tracking["return"]


class AlternatingDoor:
    """A controller whose memory counts steps: door 1 on even steps, door 0 on odd ones."""

    reads_state = True

    def init(self, state):
        return jnp.zeros((), jnp.int32)

    def act(self, key, obs, state, memory):
        door_now = jnp.where(memory % 2 == 0, 1, 0)
        return jnp.full(obs["action_mask"].shape[:-1], door_now, jnp.int32), memory + 1


class DoorsWithBaselines(Doors):
    def baselines(self, params):
        return {
            "door1": door(1),
            "door2_as_float": lambda key, obs: door(2)(key, obs).astype(jnp.float32),
            "alternating": AlternatingDoor(),
            **super().baselines(params),
        }


def test_baselines_evaluated_in_one_program_equal_each_evaluated_alone(monkeypatch):
    import jaxgrid.train.evaluate as evaluate_module

    env = DoorsWithBaselines()
    params = env.default_params()
    traces = []
    traced = evaluate_module.batch_totals
    monkeypatch.setattr(
        evaluate_module, "batch_totals", lambda *a, **k: traces.append(1) or traced(*a, **k)
    )
    together = evaluate_baselines(env, params, KEY, episodes=5)
    assert len(traces) == 1  # one program for the four baselines
    monkeypatch.undo()
    assert list(together) == ["door1", "door2_as_float", "alternating", "random"]
    for name, policy in env.baselines(params).items():
        assert together[name] == evaluate(policy, env, params, KEY, episodes=5), name
    assert together["door1"]["return"] == pytest.approx(4.0)
    assert together["door2_as_float"]["return"] == pytest.approx(-36.0)


def test_baselines_without_the_controllers_leave_out_only_mpc():
    import jaxgrid

    env, params = jaxgrid.make("arbitrage-v0")
    results = evaluate_baselines(env, params, KEY, episodes=2, controllers=False)
    assert set(results) == set(env.baselines(params)) - {"mpc"}


def test_the_oracle_counts_its_solves_on_a_terminal_only(monkeypatch):
    import io
    import sys

    from jaxgrid.train.run import _oracle_progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream, expected in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        _oracle_progress(1, 2)
        _oracle_progress(2, 2)
        text = stream.getvalue()
        if expected:
            assert (
                text
                == "oracle: 1 of 2 initial states solved\roracle: 2 of 2 initial states solved\n"
            )
        else:
            assert text == ""
