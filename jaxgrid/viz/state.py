"""One environment state as a picture: the feeder coloured by voltage, or the observation."""

from __future__ import annotations

import numpy as np

from jaxgrid.viz.image import figure_to_rgb
from jaxgrid.viz.layout import (
    ALL_LABELS_UP_TO,
    bus_positions,
    device_positions,
    labelled_buses,
    tree_layout,
)

MARKERS = ["^", "s", "D", "v", "P", "*", "o"]


def draw_feeder(ax, feeder, vm_pu=None, devices=None, v_band=(0.95, 1.05), title=""):
    """Draw ``feeder`` as a tree on ``ax``: branches as lines, buses coloured by ``vm_pu``
    (pu, diverging around 1 with the band's limits at the ends) and labelled with their
    numbers (``feeder.bus_ids``; on large feeders only some, see
    :func:`~jaxgrid.viz.layout.labelled_buses`), each device type's buses ringed by a
    hollow marker centred on the bus. Returns the bus scatter (for a colour bar)."""
    import matplotlib.colors as mcolors

    parent = np.asarray(feeder.parent)
    xy = bus_positions(parent)
    x, y = xy[:, 0], xy[:, 1]
    for bus, up in enumerate(parent):
        if up >= 0:
            ax.plot([x[up], x[bus]], [y[up], y[bus]], color="0.6", lw=1.2, zorder=1)
    low, high = v_band
    margin = 0.5 * (high - low)
    norm = mcolors.TwoSlopeNorm(vmin=low - margin / 2, vcenter=1.0, vmax=high + margin / 2)
    values = np.ones(len(parent)) if vm_pu is None else np.asarray(vm_pu)
    buses = ax.scatter(x, y, c=values, cmap="coolwarm", norm=norm, s=46, edgecolors="k",
                       linewidths=0.5, zorder=2)  # fmt: skip
    outside = (values < low) | (values > high)
    if np.any(outside):
        ax.scatter(x[outside], y[outside], s=46, facecolors="none", edgecolors="k",
                   linewidths=2.0, zorder=3, label="outside the band")  # fmt: skip
    slack = int(np.flatnonzero(parent < 0)[0])
    ax.scatter([x[slack]], [y[slack] + 0.6], marker="s", s=90, color="k", zorder=3,
               label="substation")  # fmt: skip
    for i, (kind, at) in enumerate(device_positions(parent, devices or {}).items()):
        ax.scatter(at[:, 0], at[:, 1], marker=MARKERS[i % len(MARKERS)], s=130 + 50 * i,
                   facecolors="none", edgecolors=f"C{i + 2}", linewidths=1.6, zorder=4,
                   label=kind)  # fmt: skip
    bus_ids = np.asarray(feeder.bus_ids)
    small = len(parent) > ALL_LABELS_UP_TO
    for bus in labelled_buses(parent, devices):
        ax.annotate(str(int(bus_ids[bus])), (x[bus], y[bus]), xytext=(11, 0),
                    textcoords="offset points", va="center", fontsize=6 if small else 7,
                    color="0.2", zorder=5)  # fmt: skip
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_ylabel("branches from the substation")
    depth = int(-y.min())
    ax.set_yticks(np.arange(0, -depth - 1, -5), [str(d) for d in range(0, depth + 1, 5)])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=5, fontsize=8,
              frameon=False, markerscale=0.7)  # fmt: skip
    return buses


def state_figure(env, state, params, step: int | None = None):
    """A matplotlib figure of ``state`` after ``step`` steps of its episode (default
    ``state.time`` where the state has it; else the title names no step): the feeder
    coloured by bus voltage with the devices marked (feeder environments), else each
    agent's observation."""
    from matplotlib.figure import Figure

    feeder = getattr(params, "feeder", None)
    vm_pu = getattr(state, "vm_pu", None)
    if step is None and hasattr(state, "time"):
        step = int(np.asarray(state.time))
    when = "" if step is None else f", step {step}"
    # a radial single-phase feeder is drawn as its tree; a three-phase one (no
    # ``parent``: a node-based Feeder3) falls back to the observation picture
    if feeder is not None and vm_pu is not None and hasattr(feeder, "parent"):
        width = max(9.0, 3.0 + 0.25 * (tree_layout(np.asarray(feeder.parent))[0].max() + 1))
        fig = Figure(figsize=(width, 5.5), dpi=90)
        ax = fig.subplots()
        band = (float(getattr(params, "v_lower", 0.95)), float(getattr(params, "v_upper", 1.05)))
        devices = env.device_buses(params) if hasattr(env, "device_buses") else {}
        buses = draw_feeder(ax, feeder, vm_pu, devices, band,
                            title=f"{env.name}{when}: bus voltages")  # fmt: skip
        fig.colorbar(buses, ax=ax, label="voltage (pu)")
    else:
        obs = env.observe(state, params)
        obs = np.asarray(obs["observation"] if isinstance(obs, dict) else obs)
        obs = obs.reshape(obs.shape[0], -1)
        try:
            fields = env.observation_names(params)
        except NotImplementedError:
            fields = None
        fig = Figure(figsize=(9, 1.5 + 0.22 * obs.shape[0]), dpi=90)
        ax = fig.subplots()
        image = ax.imshow(obs, aspect="auto", cmap="viridis")
        ax.set_yticks(range(obs.shape[0]), env.agents, fontsize=7)
        if fields is not None and len(fields) == obs.shape[1]:
            ax.set_xticks(range(obs.shape[1]), fields, rotation=40, ha="right", fontsize=7)
        else:
            ax.set_xlabel("observation entry")
        ax.set_title(f"{env.name}{when}: observation per agent")
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig


def render_state(env, state, params, step: int | None = None) -> np.ndarray:
    """``(height, width, 3)`` uint8 picture of ``state`` (:func:`state_figure`; see
    :meth:`Environment.render`)."""
    return figure_to_rgb(state_figure(env, state, params, step))
