"""The environment contract: auto-reset, sanitising, scalarisation, and check_env itself."""

import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toy_envs

from jaxgrid.rewards import Scalarisation, scalarise
from jaxgrid.testing import check_env

KEY = jax.random.PRNGKey(3)


def test_check_env_passes_on_a_correct_env():
    env = toy_envs.Tanks()
    check_env(env, num_steps=50, num_envs=8)


@pytest.mark.parametrize(
    "env_class, message",
    [
        (toy_envs.DtypeDrift, r"leaf \.time is float32\[\] after a step but int32\[\] after reset"),
        # baked-in constants differ between traces (and between the two resets of one trace)
        (toy_envs.TraceTimeRandomness, "two traces|step differs from step_env"),
        # the jitted step's cached trace must not hide it (check_env traces afresh)
        (toy_envs.TraceTimeRandomTransition, "two traces of the same rollout differ"),
        (toy_envs.GoesNaN, "NaN or inf"),
        (toy_envs.ObsOutOfSpace, "outside the observation space"),
        (toy_envs.LateTruncation, "truncation not exactly at the horizon"),
        (toy_envs.WrongCostShape, r"info\['costs'\] must be"),
        (toy_envs.BatchMixing, "vmap over 4 envs differs from a Python loop at env 0"),
        (toy_envs.Float32Only, r"does not run in float64: .*leaf \.level is float32"),
        (toy_envs.WeakTypeDrift, "traced more than once"),
        (toy_envs.WorldStateGoesNaN, "NaN or inf in state, observation, world_state"),
        (toy_envs.StepProductBelowFullPrecision, r"1 matrix products of reset/step run below"),
    ],
)
def test_check_env_catches_broken_envs(env_class, message):
    with pytest.raises(AssertionError, match=message):
        check_env(env_class(), num_steps=50, num_envs=4)


def test_vmap_against_the_loop_compares_rows_spread_over_the_batch():
    from jaxgrid.testing import VMAP_ROWS_COMPARED, _rows_compared

    rows = _rows_compared(64)
    assert len(rows) == VMAP_ROWS_COMPARED and rows[:2] == [0, 1] and rows[-1] == 63
    assert _rows_compared(4) == [0, 1, 2, 3]
    # a batching bug is still caught when only some rows are compared
    with pytest.raises(AssertionError, match="vmap over 32 envs differs from a Python loop"):
        check_env(toy_envs.BatchMixing(), num_steps=20, num_envs=32)


def test_auto_reset_comparison_allows_round_off_of_the_largest_entry_only():
    from jaxgrid.testing import _all_equal

    # gencos5 at XLA's optimisation level 0: a profit near zero beside profits of 9,000
    # differed by 2e-5 to 3e-5 between two traces of the same step
    profit = jnp.array([8983.29, 2.4675686, 5919.5, 0.437, 3.125])
    assert bool(_all_equal(profit + jnp.array([0, 0, 0, 3e-5, 0]), profit))
    # a difference beyond round-off of the leaf's largest entry is still caught
    assert not bool(_all_equal(profit + jnp.array([0, 0.2, 0, 0, 0]), profit))
    assert not bool(_all_equal(jnp.array([1.0, 2.0]), jnp.array([1.0, 2.001])))
    assert not bool(_all_equal(jnp.array([jnp.nan]), jnp.array([jnp.nan])))
    assert bool(_all_equal(jnp.zeros((0,)), jnp.zeros((0,))))


def test_step_auto_resets_with_the_documented_key_split():
    env = toy_envs.Tanks(horizon=2)
    params = env.default_params()
    obs, state = env.reset(KEY, params)
    action = jnp.zeros((3, 1))
    obs, state, *_ = env.step(jax.random.PRNGKey(1), state, action, params)
    assert int(state.time) == 1
    k = jax.random.PRNGKey(2)
    obs2, state2, reward, terminated, truncated, info = env.step(k, state, action, params)
    assert bool(truncated) and not bool(terminated)
    k_step, k_reset = jax.random.split(k)
    obs_end, state_end, *_ = env.step_env(k_step, state, action, params)
    obs_new, state_new = env.reset_env(k_reset, params)
    np.testing.assert_array_equal(info["final_observation"], obs_end)
    np.testing.assert_array_equal(obs2, obs_new)
    np.testing.assert_array_equal(state2.level, state_new.level)
    assert int(state2.time) == 0 and int(state_end.time) == 2


def test_vmap_of_step_takes_one_key_shared_by_the_batch():
    """``jax.vmap(env.step, in_axes=(None, 0, 0, None))``: one key for every environment
    (the auto-reset's arguments then unbatched, only which environments ended is), each
    environment's step that of its own with that key."""
    env = toy_envs.Tanks(horizon=2)
    params = env.default_params()
    keys = jax.random.split(KEY, 4)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    states = states.replace(time=jnp.asarray([0, 1, 0, 1], jnp.int32))  # two end this step
    action = jnp.zeros((4, 3, 1))
    step = jax.vmap(env.step, in_axes=(None, 0, 0, None))
    obs, new, *_ = jax.jit(step)(jax.random.PRNGKey(1), states, action, params)
    for i in range(4):
        state = jax.tree_util.tree_map(lambda v, i=i: v[i], states)
        want_obs, want, *_ = env.step(jax.random.PRNGKey(1), state, action[i], params)
        np.testing.assert_allclose(obs[i], want_obs, rtol=1e-6)
        np.testing.assert_allclose(new.level[i], want.level, rtol=1e-6)
    assert list(np.asarray(new.time)) == [1, 0, 1, 0]


def test_actions_are_sanitised_and_counted_per_agent():
    env = toy_envs.Tanks()
    params = env.default_params()
    _, state = env.reset(KEY, params)
    action = jnp.array([[jnp.nan], [5.0], [0.1]])
    _, new_state, _, _, _, info = env.step_env(KEY, state, action, params)
    np.testing.assert_array_equal(info["action_nonfinite"], [1, 0, 0])
    np.testing.assert_array_equal(info["action_clipped"], [0, 1, 0])
    # the enacted actions are 0, +0.2 (clipped) and 0.1: effort objective = -|a|
    np.testing.assert_allclose(info["reward_vector"][:, 1], [0.0, -0.2, -0.1], atol=1e-7)
    assert bool(jnp.all(jnp.isfinite(new_state.level)))


def test_a_float_for_a_discrete_choice_takes_the_nearest_and_is_counted():
    env = toy_envs.Doors()
    params = env.default_params()
    _, state = env.reset(KEY, params)
    *_, reward, _, _, info = env.step_env(KEY, state, jnp.array([2.7, 1.0]), params)
    np.testing.assert_array_equal(info["action_clipped"], [1, 0])
    np.testing.assert_allclose(reward, [0.2, 0.5])  # doors 3 and 1 (all open at step 0)


def test_wrong_action_shape_is_one_clear_error():
    env = toy_envs.Tanks()
    params = env.default_params()
    _, state = env.reset(KEY, params)
    with pytest.raises(ValueError, match=r"action has shape \(3,\), expected \(3, 1\)"):
        env.step(KEY, state, jnp.zeros(3), params)


def test_reward_is_the_scalarisation_of_the_reward_vector():
    env = toy_envs.Tanks()
    params = env.default_params().replace(
        scalarisation=Scalarisation.create(2, "weighted_sum", [2.0, 0.5])
    )
    _, state = env.reset(KEY, params)
    _, _, reward, _, _, info = env.step_env(KEY, state, jnp.full((3, 1), 0.1), params)
    rv = np.asarray(info["reward_vector"])
    np.testing.assert_allclose(reward, 2.0 * rv[:, 0] + 0.5 * rv[:, 1], rtol=1e-6)


def test_a_cost_penalty_is_taken_off_the_reward():
    env = toy_envs.Tanks()
    params = env.default_params().replace(
        limit=jnp.float32(0.3),  # tanks above 0.3 overflow
        scalarisation=Scalarisation.create(2, "weighted_sum", [2.0, 0.5], cost_weights=[4.0]),
    )
    state = env.reset(KEY, params)[1].replace(level=jnp.array([0.1, 0.5, 0.8]))
    _, _, reward, _, _, info = env.step_env(KEY, state, jnp.full((3, 1), 0.1), params)
    rv, costs = np.asarray(info["reward_vector"]), np.asarray(info["costs"])
    assert np.count_nonzero(costs) == 2  # two tanks overflow, one does not
    np.testing.assert_allclose(info["cost_penalty"], 4.0 * costs[:, 0], rtol=1e-6)
    np.testing.assert_allclose(
        reward, 2.0 * rv[:, 0] + 0.5 * rv[:, 1] - 4.0 * costs[:, 0], rtol=1e-6
    )
    # the penalty weight is a params leaf: one compiled run sweeps it
    weights = jnp.array([[0.0], [4.0], [8.0]])
    swept = jax.vmap(
        lambda w: env.step_env(
            KEY, state, jnp.full((3, 1), 0.1),
            params.replace(scalarisation=params.scalarisation.replace(cost_weights=w)),
        )[2]
    )(weights)  # fmt: skip
    np.testing.assert_allclose(swept[2] - swept[0], -8.0 * costs[:, 0], rtol=1e-5)
    wrong = params.replace(scalarisation=params.scalarisation.replace(cost_weights=jnp.ones(2)))
    with pytest.raises(
        ValueError, match=r"cost_weights has 2 entries; the costs are \('overflow',\)"
    ):
        env.step_env(KEY, state, jnp.full((3, 1), 0.1), wrong)


def test_scalarisation_methods_by_hand():
    rv = jnp.array([[0.2, 0.5, 0.9], [0.4, 0.1, 0.3]])
    mask = jnp.array([[True, True, True], [True, False, True]])
    ws = Scalarisation.create(3, "weighted_sum", [1.0, 2.0, 3.0])
    np.testing.assert_allclose(scalarise(rv, mask, ws), [0.2 + 1.0 + 2.7, 0.4 + 0.9], rtol=1e-6)
    mn = Scalarisation.create(3, "min")
    np.testing.assert_allclose(scalarise(rv, mask, mn), [0.2, 0.3], rtol=1e-6)
    pr = Scalarisation.create(3, "product", [1.0, 1.0, 0.0])  # weight 0 leaves the third out
    np.testing.assert_allclose(scalarise(rv, mask, pr), [0.1, 0.4], rtol=1e-6)
    nothing = jnp.zeros_like(mask)
    np.testing.assert_array_equal(scalarise(rv, nothing, mn), [0.0, 0.0])


def test_one_compiled_run_sweeps_scalarisations():
    rv = jnp.array([[0.2, 0.5]])
    mask = jnp.ones((1, 2), bool)
    sweep = jax.tree_util.tree_map(
        lambda *xs: jnp.stack(xs),
        Scalarisation.create(2, "weighted_sum"),
        Scalarisation.create(2, "min"),
        Scalarisation.create(2, "product"),
    )
    out = jax.jit(jax.vmap(scalarise, in_axes=(None, None, 0)))(rv, mask, sweep)
    np.testing.assert_allclose(out[:, 0], [0.35, 0.2, 0.1], rtol=1e-6)


def test_scalarisation_rejects_bad_arguments():
    with pytest.raises(ValueError, match="unknown scalarisation"):
        Scalarisation.create(2, "median")
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        Scalarisation.create(2, "weighted_sum", [1.0])
    with pytest.raises(ValueError, match="finite"):
        Scalarisation.create(2, "weighted_sum", [1.0, np.nan])
    with pytest.raises(ValueError, match="cost weights must be a vector of finite numbers >= 0"):
        Scalarisation.create(2, "weighted_sum", cost_weights=[-1.0])


def test_world_state_defaults_to_all_observations():
    env = toy_envs.Tanks()
    params = env.default_params()
    obs, state = env.reset(KEY, params)
    np.testing.assert_array_equal(env.world_state(state, params), obs.ravel())


class CountedResets(toy_envs.Tanks):
    """Tanks that count the environments each reset computes (one key is 2 numbers)."""

    def __init__(self, counts: list, **kwargs):
        super().__init__(**kwargs)
        self.counts = counts

    def reset_env(self, key, params):
        jax.debug.callback(lambda k: self.counts.append(np.size(k) // 2), key)
        return super().reset_env(key, params)


def select_step(env, key, state, action, params):
    """The auto-reset as gymnax and JaxMARL write it: a reset every step, then a select."""
    k_step, k_reset = jax.random.split(key)
    obs, state, reward, terminated, truncated, info = env.step_env(k_step, state, action, params)
    obs_reset, state_reset = env.reset_env(k_reset, params)
    done = terminated | truncated
    info = info | {"final_observation": obs}
    obs, state = jax.tree_util.tree_map(
        lambda r, s: jnp.where(done, r, s), (obs_reset, state_reset), (obs, state)
    )
    return obs, state, reward, terminated, truncated, info


class CountedModel(toy_envs.Tanks):
    """Tanks that count how often their model's Python runs (traced or eager)."""

    def __init__(self, calls: collections.Counter, **kwargs):
        super().__init__(**kwargs)
        self.calls = calls

    def reset_env(self, key, params):
        self.calls["reset_env"] += 1
        return super().reset_env(key, params)

    def transition(self, key, state, action, params):
        self.calls["transition"] += 1
        return super().transition(key, state, action, params)


def test_eager_calls_run_one_compiled_program_each():
    """Called outside ``jit`` (a notebook, a test), ``reset``, ``step_env`` and ``step``
    run their model's Python once, at the first call, as gymnax's jitted methods do;
    every later call runs the compiled program. Before, each eager call dispatched the
    model operation by operation (``voltage13-v0``: 23 s for its first reset)."""
    calls = collections.Counter()
    env = CountedModel(calls, num_agents=2, horizon=3)
    params = env.default_params()
    action = jnp.full((2, 1), 0.1)
    _, state = env.reset(KEY, params)
    env.step_env(KEY, state, action, params)
    env.step(KEY, state, action, params)
    first = dict(calls)
    assert first["reset_env"] >= 1 and first["transition"] >= 1
    for t in range(4):  # an episode ends at the third step: its reset is computed too
        _, state, *_ = env.step(jax.random.fold_in(KEY, t), state, action, params)
        env.step_env(KEY, state, action, params)
        env.reset(jax.random.fold_in(KEY, t), params)
    assert dict(calls) == first


@pytest.mark.parametrize("ends", ["together", "never"])
def test_vmapped_step_resets_only_when_episodes_ended(ends):
    counts = []
    env = CountedResets(counts, num_agents=2, horizon=3)
    params = env.default_params()
    n = 64
    _, states = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(KEY, n), params)
    if ends == "never":  # no episode ends in these 7 steps
        states = states.replace(time=jnp.full(n, -100))
    jax.block_until_ready(states)
    counts.clear()
    ours = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    plain = jax.jit(jax.vmap(functools.partial(select_step, env), in_axes=(0, 0, 0, None)))
    ended = 0
    for t in range(7):
        keys = jax.random.split(jax.random.fold_in(KEY, t), n)
        actions = jax.random.uniform(keys[0], (n, 2, 1), minval=-0.3, maxval=0.3)
        a = jax.block_until_ready(ours(keys, states, actions, params))
        ended += int(jnp.sum(a[3] | a[4]))
        b = plain(keys, states, actions, params)
        for x, y in zip(jax.tree_util.tree_leaves(a[:5]), jax.tree_util.tree_leaves(b[:5])):
            np.testing.assert_array_equal(x, y)
        states = a[1]
    computed = sum(counts) - 7 * n  # the plain select computed n resets a step
    if ends == "never":
        assert computed == ended == 0
    else:  # every episode ends at t = 2 and 5: two steps of resets, not seven
        assert computed == ended == 2 * n


def test_gradients_flow_through_the_auto_reset():
    env = toy_envs.Tanks(num_agents=2, horizon=3)
    params = env.default_params()
    keys = jax.random.split(KEY, 4)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    states = states.replace(time=jnp.array([0, 2, 2, 1]))  # two episodes end this step

    def total(step, action):
        obs, _, reward, *_ = jax.vmap(step, in_axes=(0, 0, 0, None))(keys, states, action, params)
        return jnp.sum(reward) + jnp.sum(obs**2)

    action = jnp.full((4, 2, 1), 0.2)
    got = jax.grad(functools.partial(total, env.step))(action)
    want = jax.grad(functools.partial(total, functools.partial(select_step, env)))(action)
    assert bool(jnp.any(got != 0))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_random_baseline_keeps_to_the_action_mask():
    env = toy_envs.Doors()
    params = env.default_params()
    obs, state = env.reset(KEY, params)
    obs, *_ = env.step(KEY, state, jnp.zeros(env.num_agents, jnp.int32), params)
    mask = np.asarray(obs["action_mask"])
    assert not mask.all()  # a door is locked on this step
    random = jax.jit(env.baselines(params)["random"])
    chosen = np.stack([np.asarray(random(jax.random.PRNGKey(k), obs)) for k in range(64)])
    assert mask[np.arange(env.num_agents), chosen].all()


def test_the_cycle_collector_pauses_while_a_step_traces():
    """The environment's own code traces with the collector off (jaxgrid/gc_pause.py),
    and the collector is on again after it (and stays off where the caller had
    switched it off, also when the step raises)."""
    import gc

    seen = []

    class Watched(toy_envs.Tanks):
        def reset_env(self, key, params):
            seen.append(("reset", gc.isenabled()))
            return super().reset_env(key, params)

        def transition(self, key, state, action, params):
            seen.append(("transition", gc.isenabled()))
            return super().transition(key, state, action, params)

    env = Watched()
    keys = jax.random.split(KEY, 4)
    _, state = jax.vmap(env.reset)(keys)
    action = jax.vmap(env.action_space(env.default_params()).sample)(keys)
    jax.make_jaxpr(jax.vmap(env.step))(keys, state, action)
    assert seen and not any(enabled for _, enabled in seen), seen
    assert {"reset", "transition"} <= {where for where, _ in seen}
    assert gc.isenabled()
    gc.disable()
    try:
        jax.make_jaxpr(jax.vmap(env.step))(keys, state, action)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ValueError):
        env.step(KEY, jax.tree_util.tree_map(lambda x: x[0], state), jnp.zeros(5))
    assert gc.isenabled()
