"""Pictures: the feeder layout against the feeder's own paths, renders as RGB arrays, the CLI."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxgrid
from jaxgrid.cli import main
from jaxgrid.viz import render_episode, tree_layout

KEY = jax.random.PRNGKey(0)


def test_tree_layout_depths_are_the_branch_counts_of_each_path():
    _, params = jaxgrid.make("voltage33-v0")
    feeder = params.feeder
    parent = np.asarray(feeder.parent)
    x, depth = tree_layout(parent)
    # an independent count: branches on the slack -> bus path, from the feeder's path matrix
    np.testing.assert_array_equal(depth, np.asarray(feeder.path).sum(0).astype(int))
    assert depth.max() == 17  # case33bw's main feeder: 18 buses in series
    children = {b: np.flatnonzero(parent == b) for b in range(len(parent))}
    for bus, kids in children.items():
        if len(kids):
            assert x[bus] == np.mean(x[kids])  # above the middle of its children
    leaves = [b for b, kids in children.items() if not len(kids)]
    assert sorted(x[leaves]) == list(range(len(leaves)))  # leaves side by side


def test_render_shows_the_state():
    env, params = jaxgrid.make("voltage33-v0")
    _, state = env.reset(KEY, params)
    image = env.render(state, params)
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 20  # a picture, not a blank
    low = state.replace(vm_pu=jnp.full_like(state.vm_pu, 0.9))
    assert not np.array_equal(env.render(low, params), image)  # other voltages, other colours
    grid_env, grid_params = jaxgrid.make("smartgrid-v0")
    _, grid_state = grid_env.reset(KEY, grid_params)
    assert grid_env.render(grid_state, grid_params).shape[2] == 3  # the observation picture


def test_episode_panels_and_cli(tmp_path):
    from PIL import Image

    env, params = jaxgrid.make("ders33-v0")
    traj = jaxgrid.rollout(env, params, env.baselines(params)["no_control"], KEY, 12)
    assert render_episode(env, traj).shape[2] == 3
    png, gif, panels = tmp_path / "a.png", tmp_path / "a.gif", tmp_path / "p.png"
    main(
        [
            "render",
            "--env",
            "voltage33-v0",
            "--out",
            str(png),
            "--steps",
            "4",
            "--panels",
            str(panels),
        ]
    )
    main(["render", "--env", "voltage33-v0", "--out", str(gif), "--steps", "6", "--frames", "3"])
    assert Image.open(png).size[0] > 300 and Image.open(panels).size[0] > 300
    assert Image.open(gif).n_frames == 3


def test_rollout_with_states_gives_the_states_behind_the_observations():
    env, params = jaxgrid.make("voltage33-v0")
    policy = env.baselines(params)["droop"]
    plain = jaxgrid.rollout(env, params, policy, KEY, 5)
    traj, states = jaxgrid.rollout(env, params, policy, KEY, 5, with_states=True)
    np.testing.assert_array_equal(traj.obs, plain.obs)  # the same run
    for t in range(4):  # the state after step t is what step t + 1 observed
        state = jax.tree_util.tree_map(lambda x, t=t: x[t], states)
        np.testing.assert_allclose(env.observe(state, params), traj.obs[t + 1], rtol=1e-6)


def test_render_leaves_the_matplotlib_backend_alone():
    import matplotlib

    before = matplotlib.get_backend()
    matplotlib.use("svg")  # stands for a notebook's inline backend
    try:
        env, params = jaxgrid.make("smartgrid-v0")
        _, state = env.reset(KEY, params)
        env.render(state, params)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
