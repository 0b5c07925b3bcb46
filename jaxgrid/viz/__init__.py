"""Pictures of environments: the feeder coloured by voltage, observations, episode panels.

Drawn on the host with matplotlib (not jittable); every function returns or saves RGB
pixels. ``env.render(state, params)`` is :func:`render_state`.
"""

from jaxgrid.viz.episode import episode_figure, render_episode
from jaxgrid.viz.image import figure_to_rgb, save_frames
from jaxgrid.viz.layout import bus_positions, device_positions, labelled_buses, tree_layout
from jaxgrid.viz.state import draw_feeder, render_state, state_figure

__all__ = [
    "bus_positions",
    "device_positions",
    "draw_feeder",
    "episode_figure",
    "figure_to_rgb",
    "labelled_buses",
    "render_episode",
    "render_state",
    "save_frames",
    "state_figure",
    "tree_layout",
]
