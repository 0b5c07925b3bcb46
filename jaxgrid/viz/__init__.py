"""Pictures of environments: the feeder coloured by voltage, observations, episode panels.

Drawn on the host with matplotlib (not jittable); every function returns or saves RGB
pixels. ``env.render(state, params)`` is :func:`render_state`.
"""

from jaxgrid.viz.episode import episode_figure, render_episode
from jaxgrid.viz.image import figure_to_rgb, save_frames
from jaxgrid.viz.layout import tree_layout
from jaxgrid.viz.state import draw_feeder, render_state

__all__ = [
    "draw_feeder",
    "episode_figure",
    "figure_to_rgb",
    "render_episode",
    "render_state",
    "save_frames",
    "tree_layout",
]
