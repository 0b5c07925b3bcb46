"""Pictures: the feeder layout against the feeder's own paths, renders as RGB arrays, the CLI."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import full_only

import jaxgrid
from jaxgrid.cli import main
from jaxgrid.viz import (
    device_positions,
    draw_feeder,
    labelled_buses,
    render_episode,
    state_figure,
    tree_layout,
)

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


@full_only
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


@full_only
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


def _drawn(env, params):
    """``draw_feeder`` of ``env``'s feeder on a fresh axes: the axes, the bus positions
    and the device buses."""
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    devices = env.device_buses(params)
    draw_feeder(ax, params.feeder, None, devices)
    x, depth = tree_layout(np.asarray(params.feeder.parent))
    return ax, np.stack([x, -depth], axis=1), devices


@pytest.mark.parametrize("name", ["ders33-v0", "voltage141-v0"])
def test_device_markers_sit_on_their_buses(name):
    env, params = jaxgrid.make(name)
    ax, xy, devices = _drawn(env, params)
    markers = {c.get_label(): c.get_offsets() for c in ax.collections}
    for kind, at in devices.items():
        np.testing.assert_array_equal(markers[kind], xy[np.asarray(at)])
        np.testing.assert_array_equal(device_positions(params.feeder.parent, devices)[kind],
                                      xy[np.asarray(at)])  # fmt: skip


def test_buses_carry_their_numbers():
    env, params = jaxgrid.make("ders33-v0")
    ax, xy, _ = _drawn(env, params)
    labels = {t.get_text(): t.xy for t in ax.texts}
    bus_ids = np.asarray(params.feeder.bus_ids)
    assert sorted(labels, key=int) == [str(b) for b in range(1, 34)]  # case33bw: buses 1..33
    for i, bus in enumerate(bus_ids):
        np.testing.assert_array_equal(labels[str(bus)], xy[i])


def test_a_large_feeder_labels_its_ends_junctions_and_devices():
    env, params = jaxgrid.make("voltage141-v0")
    ax, xy, devices = _drawn(env, params)
    bus_ids = np.asarray(params.feeder.bus_ids)
    labels = {int(t.get_text()) for t in ax.texts}
    parent = np.asarray(params.feeder.parent)
    children = np.bincount(parent[parent >= 0], minlength=len(parent))
    must = np.flatnonzero(children != 1)  # the substation's lateral ends and junctions
    must = np.union1d(must, devices["PV inverter (agent)"])
    assert set(bus_ids[must].tolist()) <= labels
    assert len(labels) < len(bus_ids)  # sparse: the chains between them stay unlabelled
    assert labels == set(bus_ids[labelled_buses(parent, devices)].tolist())


@full_only
def test_render_draws_the_last_state_of_the_episode(tmp_path, monkeypatch):
    from jaxgrid.env import Environment

    drawn = []

    def record(self, state, params=None, step=None):
        drawn.append((state, step))
        return np.zeros((4, 4, 3), np.uint8)

    monkeypatch.setattr(Environment, "render", record)
    main(["render", "--env", "ders33-v0", "--out", str(tmp_path / "a.png")])
    state, step = drawn[-1]
    assert step == 48 and int(state.time) == 48  # not the next episode's first state
    drawn.clear()
    main(["render", "--env", "ders33-v0", "--out", str(tmp_path / "a.gif"), "--steps", "60",
          "--frames", "5"])  # fmt: skip
    assert [s for _, s in drawn] == [12, 24, 36, 48, 12]  # the step of each frame's episode
    assert [int(state.time) for state, _ in drawn] == [12, 24, 36, 48, 12]


def test_the_frame_is_titled_with_its_step():
    env, params = jaxgrid.make("ders33-v0")
    policy = env.baselines(params)["no_control"]
    _, states = jaxgrid.rollout(env, params, policy, KEY, env.horizon, with_states=True)
    last = jax.tree_util.tree_map(lambda x: x[-1], states)
    assert int(last.time) == env.horizon  # the episode's last state, before the auto-reset
    assert state_figure(env, last, params).axes[0].get_title() == "ders33-v0, step 48: bus voltages"
    grid_env, grid_params = jaxgrid.make("smartgrid33-v0")  # its clock is state.society.time
    _, grid_state = grid_env.reset(KEY, grid_params)
    assert "step 7:" in state_figure(grid_env, grid_state, grid_params, 7).axes[0].get_title()
    assert "step" not in state_figure(grid_env, grid_state, grid_params).axes[0].get_title()
