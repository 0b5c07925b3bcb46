"""PPO and IPPO: learning on toy tasks with known optima, masks, per-type networks, traces."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import sampled
from toy_envs import Doors, PublicGoods, Tanks

from jaxgrid.train import ippo, ppo
from jaxgrid.train.evaluate import evaluate

KEY = jax.random.PRNGKey(0)


def go_to_target(key, obs):
    """The optimal tank policy, written independently: step towards the target level."""
    return jnp.clip(0.5 - obs[:, :1], -0.2, 0.2)


@pytest.mark.parametrize(
    "algo, distribution",
    sampled([("ppo", "beta"), ("ippo", "beta"), ("ippo", "gaussian")], keep=[("ippo", "gaussian")]),
)
def test_learns_the_tank_task_close_to_the_hand_written_optimum(algo, distribution):
    env = Tanks(num_agents=2, horizon=8)
    params = env.default_params()
    config = ppo.PPOConfig(
        total_steps=120_000,
        num_envs=32,
        num_steps=32,
        hidden=(32, 32),
        lr=1e-3,
        gamma=0.9,
        distribution=distribution,
    )
    make = ppo.make_train if algo == "ppo" else ippo.make_train
    fns = make(config, env, params)
    runner, metrics = jax.jit(fns.train)(KEY)
    learned = evaluate(fns.policy(runner), env, params, KEY, episodes=64, test_days=False)
    best = evaluate(go_to_target, env, params, KEY, episodes=64, test_days=False)
    idle = evaluate(lambda k, o: jnp.zeros((2, 1)), env, params, KEY, episodes=64, test_days=False)
    # the tracking objective of the optimum is far from doing nothing; PPO closes 80% of the gap
    gap = best["objectives"]["tracking"] - idle["objectives"]["tracking"]
    assert gap > 0.5
    assert learned["objectives"]["tracking"] >= idle["objectives"]["tracking"] + 0.8 * gap
    curve = np.asarray(metrics["episode_return"])
    assert curve[-5:].mean() > curve[:5].mean()


def test_masked_choices_are_never_taken_and_the_best_open_door_is_learned():
    env = Doors(num_agents=2, horizon=8)
    params = env.default_params()
    config = ppo.PPOConfig(total_steps=40_000, num_envs=16, num_steps=16, hidden=(16,), lr=3e-3)
    fns = ippo.make_train(config, env, params)
    runner, metrics = jax.jit(fns.train)(KEY)
    # any masked choice would pay -10: every training episode's return stays >= 0
    returns = np.asarray(metrics["episode_return"])
    assert np.all(returns[np.asarray(metrics["episodes"]) > 0] > 0)
    result = evaluate(fns.policy(runner), env, params, KEY, episodes=8, test_days=False)
    assert result["metrics"]["locked_opened"] == 0
    # best possible: door 2 (1.0) on even steps, door 1 (0.5) on odd ones
    assert result["return"] == pytest.approx(4 * 1.0 + 4 * 0.5, abs=1e-6)


class TwoKinds(Tanks):
    """Tanks of two device types: the first two share a network, the third has its own."""

    def __init__(self):
        super().__init__(num_agents=3)
        self.agent_types = ("small", "small", "large")


def test_team_spirit_turns_a_social_dilemma_from_keeping_to_contributing():
    env = PublicGoods(num_agents=2)
    params = env.default_params()
    contributed = {}
    for spirit in (0.0, 1.0):
        config = ppo.PPOConfig(
            total_steps=30_000, num_envs=16, num_steps=16, hidden=(16,), lr=3e-3,
            team_spirit=spirit,
        )  # fmt: skip
        fns = ippo.make_train(config, env, params)
        runner, _ = jax.jit(fns.train)(KEY)
        result = evaluate(fns.policy(runner), env, params, KEY, episodes=8, test_days=False)
        contributed[spirit] = result["metrics"]["contributed"]
    # alone, keeping pays 0.25 more per step; as a team, contributing pays 0.5 more
    assert contributed[0.0] < 0.1
    assert contributed[1.0] > 0.9


def test_gaussian_policy_starts_from_the_configured_spread():
    env = Tanks(num_agents=2)
    config = ppo.PPOConfig(num_envs=4, num_steps=4, distribution="gaussian", log_std_init=-1.5)
    runner = ippo.make_train(config, env).init(KEY)
    np.testing.assert_array_equal(runner.train_state.params["log_std"], np.full((2, 1), -1.5))


@pytest.mark.parametrize("algo", ["ippo", "ppo"])
@pytest.mark.parametrize("distribution", sampled(["beta", "gaussian"], keep=("gaussian",)))
def test_policy_starts_at_the_baselines_mean_action_per_agent_type(algo, distribution):
    import jaxgrid

    env, params = jaxgrid.make("ders33-v0")
    config = ppo.PPOConfig(
        num_envs=8, num_steps=4, init_action="no_control", distribution=distribution
    )
    fns = {"ippo": ippo.make_train, "ppo": ppo.make_train}[algo](config, env, params)
    runner = fns.init(KEY)
    # no control: batteries and PV idle, flexible loads served, EVs charged at full power,
    # the same action for every agent of a type; as a share of each entry's range:
    low, high = env.action_space(params)._bounds()
    baseline = env.baselines(params)["no_control"]
    obs, _ = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(KEY, 3), params)
    action = np.asarray(jax.vmap(baseline)(jax.random.split(KEY, 3), obs))
    share = np.where(high > low, (action - low) / np.where(high > low, high - low, 1.0), 0.5)
    expected = np.clip(share.mean(axis=0), 0.05, 0.95)
    expected = np.asarray(low + (high - low) * expected)
    started = np.asarray(fns.policy(runner)(KEY, obs[0])).reshape(expected.shape)
    free = np.broadcast_to(np.asarray(high > low), expected.shape)
    # the head's kernel is 0.01-orthogonal: the outputs sit within a few hundredths of the bias
    np.testing.assert_allclose(started[free], expected[free], atol=0.03)


def test_a_beta_start_keeps_its_concentration_and_both_parameters_above_one():
    from jaxgrid.train.distributions import starting_outputs

    out = np.asarray(starting_outputs("beta", jnp.array([0.5, 0.0, 1.0]), 20.0))
    alpha, beta = np.log1p(np.exp(out[:3])) + 1.0, np.log1p(np.exp(out[3:])) + 1.0
    np.testing.assert_allclose(alpha / (alpha + beta), [0.5, 0.05, 0.95], rtol=1e-5)
    np.testing.assert_allclose(alpha[0] + beta[0], 20.0, rtol=1e-5)
    assert np.all(alpha > 1.0) and np.all(beta > 1.0)
    np.testing.assert_allclose(np.minimum(alpha, beta)[1:], 1.05, rtol=1e-4)


def test_a_log_reports_every_episode_ended_since_the_previous_log():
    env = Tanks(num_agents=2, horizon=5)
    params = env.default_params().replace(stop_level=jnp.float32(2.0))  # never terminates
    config = ppo.PPOConfig(
        total_steps=4 * 4 * 6, num_envs=4, num_steps=4, log_every=3, distribution="gaussian"
    )
    logged = []
    fns = ippo.make_train(config, env, params, log=lambda m: logged.append(jax.device_get(m)))
    metrics = jax.device_get(jax.jit(fns.train)(KEY)[1])
    jax.effects_barrier()
    # 4-step updates, 5-step episodes: episodes end at steps 5, 10 (updates 2, 3) and
    # 15, 20 (updates 4, 5) in each of the 4 environments; logs come after updates 3 and 6
    np.testing.assert_array_equal(metrics["episodes"], [0, 4, 4, 4, 4, 0])
    assert [int(m["update"]) for m in logged] == [3, 6]
    assert [int(m["episodes"]) for m in logged] == [8, 8]
    for log, updates in zip(logged, ([1, 2], [3, 4])):
        np.testing.assert_allclose(
            log["episode_return"], np.mean(metrics["episode_return"][updates]), rtol=1e-6
        )
        np.testing.assert_allclose(
            log["episode_objectives"],
            np.mean(metrics["episode_objectives"][updates], axis=0),
            rtol=1e-6,
        )


@pytest.mark.parametrize("algo", [ppo, ippo])
def test_staggered_starts_spread_the_environments_uniformly_over_the_episode(algo):
    from scipy import stats

    env = Tanks(num_agents=2, horizon=40)
    params = env.default_params().replace(stop_level=jnp.float32(2.0))  # never terminates
    config = ppo.PPOConfig(num_envs=512, num_steps=4, distribution="gaussian")
    fresh = algo.make_train(config, env, params).init(KEY)
    assert np.all(np.asarray(fresh.env_state.env_state.time) == 0)

    staggered = dataclasses.replace(config, stagger_starts=True)
    runner = jax.jit(algo.make_train(staggered, env, params).init)(KEY)
    time = np.asarray(runner.env_state.env_state.time)
    # each environment sits at its own offset, uniform on 0 .. horizon - 1
    counts = np.bincount(time, minlength=env.horizon)
    assert counts.size == env.horizon
    assert stats.chisquare(counts).pvalue > 1e-3
    # the observation the policy sees first is that of the staggered state
    obs = np.asarray(runner.obs).reshape(512, env.num_agents, 2)
    np.testing.assert_allclose(obs[..., 1], np.repeat(time[:, None], 2, 1) / env.horizon)
    np.testing.assert_allclose(obs[..., 0], np.asarray(runner.env_state.env_state.level))
    # the first logged episode counts the random steps: its length is the offset
    np.testing.assert_array_equal(np.asarray(runner.env_state.episode_length), time)


def test_one_network_per_agent_type():
    env = TwoKinds()
    config = ppo.PPOConfig(total_steps=256, num_envs=4, num_steps=8, agent_ids=False)
    runner = ippo.make_train(config, env).init(KEY)
    net = runner.train_state.params["net"]
    assert sorted(net["params"]) == ["type_0", "type_1"]
    same = jnp.broadcast_to(jnp.array([0.3, 0.1]), (3, 2))  # every agent sees the same
    out, value = runner.train_state.apply_fn(net, same)
    assert out.shape == (3, 2) and value.shape == (3,)
    np.testing.assert_array_equal(out[0], out[1])  # one type, one network
    assert not np.allclose(out[0], out[2])  # another type, another network


def test_interleaved_agent_types_give_the_same_outputs_as_grouped_ones():
    from jaxgrid.train.networks import ActorCritic

    obs = jax.random.normal(KEY, (5, 3, 4))  # (envs, agents, obs)
    interleaved = ActorCritic(agent_type=(0, 1, 0), n_out=2, hidden=(8,))  # gathers
    grouped = ActorCritic(agent_type=(0, 0, 1), n_out=2, hidden=(8,))  # slices
    params = interleaved.init(KEY, obs)
    order = np.array([0, 2, 1])  # the interleaved agents, grouped by type
    out_i, value_i = interleaved.apply(params, obs)
    out_g, value_g = grouped.apply(params, obs[:, order])
    np.testing.assert_allclose(out_i[:, order], out_g, rtol=1e-6)
    np.testing.assert_allclose(value_i[:, order], value_g, rtol=1e-6)


def test_shared_torso_puts_both_heads_on_one_mlp_and_trains():
    env = TwoKinds()
    config = ppo.PPOConfig(total_steps=256, num_envs=4, num_steps=8, shared_torso=True)
    fns = ippo.make_train(config, env)
    runner = fns.init(KEY)
    for kind in ("type_0", "type_1"):
        assert sorted(runner.train_state.params["net"]["params"][kind]) == [
            "Dense_0",
            "Dense_1",
            "MLP_0",
        ]
    _, metrics = jax.jit(fns.train)(KEY)
    assert np.all(np.isfinite(np.asarray(metrics["value_loss"])))


def test_update_step_compiles_once():
    env = Tanks()
    fns = ppo.make_train(ppo.PPOConfig(total_steps=1024, num_envs=8, num_steps=8), env)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def update(runner):
        return fns.update_step(runner)

    runner = fns.init(KEY)
    for _ in range(3):
        runner, _ = update(runner)
    assert int(runner.update) == 3


def test_trains_in_float64():
    from conftest import x64

    with x64():
        env = Tanks()
        fns = ppo.make_train(ppo.PPOConfig(total_steps=512, num_envs=8, num_steps=8), env)
        runner, metrics = jax.jit(fns.train)(KEY)
        assert runner.obs_stats.mean.dtype == jnp.float64
        assert np.all(np.isfinite(np.asarray(metrics["value_loss"])))


def test_normalisation_statistics_count_every_observation_and_return_seen():
    env = Tanks(num_agents=2)
    fns = ippo.make_train(ppo.PPOConfig(total_steps=2 * 8 * 8, num_envs=8, num_steps=8), env)
    runner, _ = jax.jit(fns.train)(KEY)
    seen = 2 * 8 * 8 * 2  # updates x steps x environments x agents
    assert float(runner.obs_stats.count) == pytest.approx(seen, rel=1e-5)
    assert float(runner.return_stats.count) == pytest.approx(seen, rel=1e-5)


@pytest.mark.parametrize("algo", sampled(["ppo", "ippo"], keep=("ippo",)))
def test_gradients_summed_over_microbatches_equal_the_whole_minibatch_gradient(algo):
    env = Tanks(num_agents=2)
    make = ppo.make_train if algo == "ppo" else ippo.make_train
    results = []
    for rows in (None, 8):  # minibatch 32 transitions: 32 or 64 rows in one pass, or 4-8
        config = ppo.PPOConfig(
            total_steps=512, num_envs=8, num_steps=8, num_minibatches=2, microbatch_rows=rows
        )
        fns = make(config, env)
        start = fns.init(KEY)
        results.append(jax.jit(fns.update_step)(start))
    (whole, whole_metrics), (chunked, chunked_metrics) = results
    # 8 Adam steps of ~lr = 3e-4 each; a wrong gradient moves parameters by ~1e-3
    chex.assert_trees_all_close(whole.train_state.params, chunked.train_state.params, atol=1e-6)
    for loss in ("actor_loss", "value_loss", "entropy"):
        np.testing.assert_allclose(chunked_metrics[loss], whole_metrics[loss], rtol=1e-5)
    moved = jax.tree_util.tree_map(
        lambda a, b: np.abs(a - b).max(), whole.train_state.params, start.train_state.params
    )
    assert max(jax.tree_util.tree_leaves(moved)) > 1e-3


@pytest.mark.parametrize("chunks", [2, 5])
def test_chunked_gradient_equals_jax_grad_of_the_whole_batch(chunks):
    x = jax.random.normal(KEY, (20, 3))
    y = jax.random.normal(jax.random.PRNGKey(1), (20,))
    params = {"w": jnp.array([0.3, -1.0, 2.0]), "b": jnp.float32(0.5)}

    def loss(p, x, y):
        error = x @ p["w"] + p["b"] - y
        return jnp.mean(error**2), jnp.mean(error)

    grad_fn = jax.grad(loss, has_aux=True)
    grads, aux = ppo.chunked_gradient(grad_fn, chunks, params, x, y)
    error = x @ params["w"] + params["b"] - y  # by hand: d/dw mean(e^2) = 2 x^T e / n
    np.testing.assert_allclose(grads["w"], 2 * x.T @ error / 20, rtol=1e-5)
    np.testing.assert_allclose(grads["b"], 2 * error.mean(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(aux, error.mean(), rtol=1e-5, atol=1e-7)


def test_microbatches_are_the_fewest_equal_chunks_within_the_row_limit():
    # 96 transitions x 2 agents = 192 rows
    assert ppo.microbatch_count(96, 2, None) == 1
    assert ppo.microbatch_count(96, 2, 192) == 1
    assert ppo.microbatch_count(96, 2, 100) == 2  # 96 rows each
    assert ppo.microbatch_count(96, 2, 40) == 6  # 5 does not divide 96: 32 rows each
    assert ppo.microbatch_count(96, 2, 1) == 96  # one transition (2 rows) at a time


def test_rejects_bad_settings():
    with pytest.raises(ValueError, match="divisible"):
        ppo.PPOConfig(num_envs=3, num_steps=3, num_minibatches=2)
    with pytest.raises(ValueError, match="microbatch_rows"):
        ppo.PPOConfig(microbatch_rows=0)
    with pytest.raises(ValueError, match="team_spirit"):
        ppo.PPOConfig(team_spirit=1.5)
    with pytest.raises(ValueError, match="distribution"):
        ppo.PPOConfig(distribution="laplace")
    with pytest.raises(ValueError, match="init_concentration"):
        ppo.PPOConfig(init_concentration=2.0)
    with pytest.raises(ValueError, match="no baseline 'droop'"):
        ippo.make_train(ppo.PPOConfig(init_action="droop"), Tanks(num_agents=2))
