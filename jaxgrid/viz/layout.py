"""Positions of a radial feeder's buses for drawing it as a tree."""

from __future__ import annotations

import numpy as np

ALL_LABELS_UP_TO = 70  # feeders with more buses label only the ends, junctions and devices


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


def bus_positions(parent: np.ndarray) -> np.ndarray:
    """``(n_bus, 2)`` drawing coordinates ``(x, -depth)`` of every bus (:func:`tree_layout`):
    the substation on top, one row per branch below it."""
    x, depth = tree_layout(parent)
    return np.stack([x, -depth.astype(float)], axis=1)


def device_positions(parent: np.ndarray, devices: dict) -> dict[str, np.ndarray]:
    """``{kind: (k, 2)}`` drawing coordinates of each device type's ``k`` buses (bus
    indices, as ``env.device_buses`` gives them): exactly their buses' positions."""
    xy = bus_positions(parent)
    return {kind: xy[np.asarray(at, int)] for kind, at in devices.items()}


def labelled_buses(parent: np.ndarray, devices: dict | None = None) -> np.ndarray:
    """Indices of the buses to label: all of them on feeders up to ``ALL_LABELS_UP_TO``
    buses; on larger ones (case141) only the substation, the junctions, the ends of the
    laterals and the devices' buses, so that the labels stay readable."""
    parent = np.asarray(parent)
    n = len(parent)
    if n <= ALL_LABELS_UP_TO:
        return np.arange(n)
    children = np.bincount(parent[parent >= 0], minlength=n)
    keep = (parent < 0) | (children != 1)
    for at in (devices or {}).values():
        keep[np.asarray(at, int)] = True
    return np.flatnonzero(keep)
