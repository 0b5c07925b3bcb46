"""An episode as stacked panels, each drawn only where the trajectory's ``info`` holds its
data (bus voltages, powers, state of charge, prices), then the rewards per objective and the
costs (see :func:`episode_figure`)."""

from __future__ import annotations

import numpy as np

from jaxgrid.viz.image import figure_to_rgb

POWER_UNITS = ("_mw", "_mvar")
PRICE_KEYS = ("price", "available_energy")


def _masked_mean(values, mask):
    return np.where(mask, values, 0.0).sum(1) / np.maximum(mask.sum(1), 1)


def episode_figure(env, trajectory, v_band=(0.95, 1.05)):
    """A matplotlib figure of one environment's trajectory (leading axis = time), its panels
    stacked top to bottom in this order, each only where its data is there:

    - voltage, where ``info`` has ``vm_pu`` ``(time, buses)``: the band between the lowest and
      the highest bus, the mean bus, and ``v_band`` (pu) as dashed lines;
    - power: every ``info`` entry ending in ``_mw`` or ``_mvar`` with one or two axes, a line
      per column, in MW or Mvar — whatever the environment reports, feeder totals
      (``import_mw``, ``loss_mw``) as well as devices (``p_pv_mw``, ``q_mvar``);
    - state of charge, where ``info`` has ``soc``: a line per column, unlabelled;
    - price: the first column of ``info``'s ``price`` and ``available_energy``;
    - objectives, always: each of ``env.objective_names``, averaged over the agents it is
      active for (``objective_mask``);
    - costs, where ``env.cost_names`` is not empty: each cost summed over the agents.

    An environment that keeps its devices' powers, state of charge or prices out of
    ``info`` gets no panel for them."""
    from matplotlib.figure import Figure

    info = {k: np.asarray(v) for k, v in trajectory.info.items() if hasattr(v, "shape")}
    t = np.arange(len(np.asarray(trajectory.reward)))
    panels = []
    if "vm_pu" in info:
        panels.append("voltage")
    powers = [k for k in info if k.endswith(POWER_UNITS) and info[k].ndim in (1, 2)]
    if powers:
        panels.append("power")
    if "soc" in info:
        panels.append("soc")
    prices = [k for k in PRICE_KEYS if k in info]
    if prices:
        panels.append("price")
    panels.append("objectives")
    if env.cost_names:
        panels.append("costs")
    fig = Figure(figsize=(9, 1.9 * len(panels) + 0.6), dpi=90)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        if panel == "voltage":
            vm = info["vm_pu"]
            ax.fill_between(t, vm.min(1), vm.max(1), color="C0", alpha=0.3, label="min–max bus")
            ax.plot(t, vm.mean(1), color="C0", label="mean bus")
            for limit in v_band:
                ax.axhline(limit, color="k", ls="--", lw=0.8)
            ax.set_ylabel("voltage (pu)")
        elif panel == "power":
            for i, key in enumerate(powers):
                series = info[key].reshape(len(t), -1)
                for j in range(series.shape[1]):
                    ax.plot(t, series[:, j], color=f"C{i}", lw=0.8,
                            label=key if j == 0 else None)  # fmt: skip
            ax.set_ylabel("MW / Mvar")
        elif panel == "soc":
            ax.plot(t, info["soc"].reshape(len(t), -1), lw=0.9)
            ax.set_ylabel("state of charge")
        elif panel == "price":
            for key in prices:
                ax.plot(t, info[key].reshape(len(t), -1)[:, 0], label=key)
            ax.set_ylabel("price / pool")
        elif panel == "objectives":
            vector, mask = info["reward_vector"], info["objective_mask"]
            for k, name in enumerate(env.objective_names):
                ax.plot(t, _masked_mean(vector[:, :, k], mask[:, :, k]), label=name, lw=0.9)
            ax.set_ylabel("objective\n(mean of agents)")
        elif panel == "costs":
            for k, name in enumerate(env.cost_names):
                ax.plot(t, info["costs"][:, :, k].sum(1), label=name, lw=0.9)
            ax.set_ylabel("cost\n(sum of agents)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right", ncol=3)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    axes[0, 0].set_title(f"{env.name}: one episode")
    fig.tight_layout()
    return fig


def render_episode(env, trajectory, v_band=(0.95, 1.05)) -> np.ndarray:
    """:func:`episode_figure` as a ``(height, width, 3)`` uint8 array: the panels for which
    ``trajectory.info`` has data (voltage, power, state of charge, price), then objectives
    and costs."""
    return figure_to_rgb(episode_figure(env, trajectory, v_band))
