"""gardeners-v0 and variants: the contract, random grids and seed returns (which the
parity suite cannot drive: the package draws them from its NumPy stream), grid-file
errors, the picture, and IPPO on the masked observation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only

import jaxgrid
from jaxgrid.envs.gardeners import make_gardeners, read_grid_file
from jaxgrid.envs.gardeners.actions import HARVEST, act
from jaxgrid.envs.gardeners.viewer import cell_colours

KEY = jax.random.PRNGKey(0)


def test_random_grid_follows_the_peer_s_init_random():
    """``int(0.2 * 100)`` obstacles, agents on distinct free cells, ground at pollution 50,
    no flowers, every cell as likely to hold an obstacle or an agent."""
    env, params = jaxgrid.make("gardeners-v0")
    _, states = jax.vmap(env.reset_env, in_axes=(0, None))(jax.random.split(KEY, 2000), params)
    obstacle = np.asarray(states.obstacle)
    assert np.all(obstacle.sum(axis=(1, 2)) == 20)
    pos = np.asarray(states.position)
    assert not obstacle[np.arange(2000)[:, None], pos[..., 0], pos[..., 1]].any()
    assert np.all(np.any(pos[:, 0] != pos[:, 1], axis=1))  # two agents, two cells
    pollution = np.asarray(states.pollution)
    assert np.all(pollution[~obstacle] == 50) and np.all(np.asarray(states.flower_type) == -1)
    # 2000 grids x 20 obstacles over 100 cells: 400 per cell, sd 18
    assert np.all(np.abs(obstacle.sum(axis=0) - 400) < 100)
    agent_cells = np.bincount((pos[..., 0] * 10 + pos[..., 1]).ravel(), minlength=100)
    assert np.all(np.abs(agent_cells - 50) < 35)  # 4000 agents over 100 cells


ENV, PARAMS = make_gardeners(grid_file="peer_example")


@jax.jit
def _harvests(rule, keys):
    """Seeds returned by one harvest of a grown flower, per key (reset then harvest)."""
    params = PARAMS.replace(seeds_returned=rule)

    def one(key):
        k_reset, k_act = jax.random.split(key)
        _, state = ENV.reset_env(k_reset, params)
        state = state.replace(position=jnp.array([[1, 1]], jnp.int32))  # on the grown F0_2
        after, refused = act(state, 0, jnp.int32(HARVEST), k_act, params)
        return after.seeds[0, 0] - state.seeds[0, 0], refused, state.seeds_returned

    return jax.vmap(one)(keys)


def test_random_seed_returns_are_uniform_in_1_to_4():
    """The peer's codes -3 (``randint(1, 5)`` per harvest) and -2 (drawn once: here per
    episode, kept in the state); codes -1 (none) and n (fixed) give 0 and n."""
    keys = jax.random.split(KEY, 4000)
    for rule in (-3, -2):
        returned, refused, episode_rule = _harvests(jnp.int32(rule), keys)
        counts = np.bincount(np.asarray(returned), minlength=6)
        assert not np.any(refused) and counts[0] == counts[5] == 0
        assert np.all(np.abs(counts[1:5] - 1000) < 150)
        if rule == -2:
            np.testing.assert_array_equal(returned, episode_rule)
    for rule, expected in ((-1, 0), (0, 0), (3, 3)):
        assert np.all(np.asarray(_harvests(jnp.int32(rule), keys)[0]) == expected)


GOOD = "3 2\nG A0 O\nF0_1 G G\n0,5,1|-1\n0,10,0|2\n1,3,1\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (GOOD.replace("O", "X"), r"line 2: bad cell 'X' at column 2"),
        (GOOD.replace("F0_1 G G", "F0_1 G"), r"line 3: grid row 1 has 2 cells, expected 3"),
        (GOOD.replace("0,5,1|-1\n", "0,5,x\n"), r"line 4: expected an agent line"),
        (GOOD.replace("0,5,1|-1", "1,5,1|-1"), r"agent 1 is not on the grid"),
        (GOOD.replace("F0_1", "F0_4"), r"stage beyond its last"),
        (GOOD.replace("0,5,1|-1", "0,5,1"), r"seeds for each of the 2 flower types"),
    ],
)
def test_bad_grid_files_give_one_clear_error(tmp_path, text, message):
    path = tmp_path / "grid.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        make_gardeners(grid_file=str(path))


def test_grid_file_by_hand(tmp_path):
    path = tmp_path / "grid.txt"
    path.write_text(GOOD)
    grid = read_grid_file(path)
    assert grid.obstacle.tolist() == [[False, False, True], [False, False, False]]
    assert grid.flower_type.tolist() == [[-1, -1, -1], [0, -1, -1]]
    assert grid.position.tolist() == [[0, 1]] and grid.seeds.tolist() == [[1, -1]]
    assert grid.prices.tolist() == [10, 3] and grid.pollution_reductions == ((0.0, 2.0), (1.0,))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(num_agents=5, width=2, height=2, obstacles_ratio=0.5), "more than the 2 free cells"),
        (dict(initial_pollution=120.0), "initial_pollution"),
        (dict(num_seeds_returned=-4), "num_seeds_returned"),
        (dict(prices=(1.0, 2.0)), "one price and a non-empty list"),
        (dict(observation="local"), "observation must be one of"),
    ],
)
def test_bad_arguments_give_one_clear_error(overrides, message):
    with pytest.raises(ValueError, match=message):
        make_gardeners(**overrides)


def test_picture_in_the_peer_s_colours():
    env, params = jaxgrid.make("gardeners-file-v0")
    _, state = env.reset(KEY, params)
    state = state.replace(pollution=state.pollution.at[0, 0].set(73.0))
    colours = cell_colours(state, params)
    assert colours[0, 3].tolist() == [100, 100, 100]  # an obstacle
    assert colours[0, 0].tolist() == [70, 255 - int(0.73 * 110), 70]  # the peer's ground shade
    image = env.render(state, params)
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    grown = env.render(state.replace(flower_stage=state.flower_stage.at[1, 1].set(0)), params)
    assert not np.array_equal(image, grown)


@full_only
def test_ippo_trains_on_the_masked_observation():
    from jaxgrid.train import ippo, ppo

    env, params = jaxgrid.make("gardeners-v0", horizon=8)
    config = ppo.PPOConfig(total_steps=2 * 4 * 8, num_envs=4, num_steps=8, hidden=(8,))
    fns = ippo.make_train(config, env, params)  # grid views flattened by the trainer
    runner, metrics = jax.jit(fns.train)(KEY)
    assert np.all(np.isfinite(np.asarray(metrics["value_loss"])))
    assert np.asarray(metrics["episodes"]).sum() > 0
    # the trained policy acts on the environment's own observation, inside the mask
    act = jax.jit(fns.policy(runner, deterministic=False))
    obs, _ = env.reset(KEY, params)
    for k in range(20):
        action = np.asarray(act(jax.random.PRNGKey(k), obs))
        mask = np.asarray(obs["action_mask"])
        assert mask[np.arange(env.num_agents), action].all()
