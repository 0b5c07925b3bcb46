"""Positions of a radial feeder's buses for drawing it as a tree."""

from __future__ import annotations

import numpy as np


def tree_layout(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x, depth)`` of every bus: depth = branches from the slack (the bus without a
    parent, ``-1``); leaves take consecutive ``x`` in depth-first order and every other bus
    sits above the middle of its children."""
    parent = np.asarray(parent)
    n = len(parent)
    children = [[] for _ in range(n)]
    roots = []
    for bus, up in enumerate(parent):
        (children[up] if up >= 0 else roots).append(bus)
    if len(roots) != 1:
        raise ValueError(f"a radial feeder has one slack bus, found {len(roots)}")
    x, depth = np.zeros(n), np.zeros(n, int)
    next_leaf = 0
    stack = [(roots[0], False)]
    while stack:  # iterative depth-first walk: children placed before their parent
        bus, placed_children = stack.pop()
        if placed_children:
            x[bus] = np.mean(x[children[bus]])
            continue
        if not children[bus]:
            x[bus] = next_leaf
            next_leaf += 1
            continue
        stack.append((bus, True))
        for child in reversed(children[bus]):
            depth[child] = depth[bus] + 1
            stack.append((child, False))
    return x, depth
