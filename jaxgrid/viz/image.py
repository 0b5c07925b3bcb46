"""Matplotlib figures as RGB arrays and files."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def figure_to_rgb(fig) -> np.ndarray:
    """``(height, width, 3)`` uint8 pixels of a matplotlib figure, drawn off screen (no
    pyplot: the user's backend, e.g. a notebook's inline one, is left alone)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def save_frames(frames: list[np.ndarray], path: str | Path, fps: int = 4) -> Path:
    """Write one frame as a PNG, or several as an animated GIF (by the suffix)."""
    from PIL import Image

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    if path.suffix == ".gif":
        images[0].save(path, save_all=True, append_images=images[1:], duration=1000 // fps, loop=0)
    elif path.suffix == ".png":
        images[-1].save(path)
    else:
        raise ValueError(f"render writes .png or .gif files, not {path.name!r}")
    return path
