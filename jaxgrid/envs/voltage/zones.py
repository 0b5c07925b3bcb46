"""Observation zones: the buses each PV agent sees.

Each bus belongs to the zone of the PV nearest to it along the feeder (fewest branches;
ties go to the lower PV index), a Voronoi partition of the tree, so every bus is watched
by exactly one agent and an agent sees its own neighbourhood.
"""

from __future__ import annotations

import numpy as np

from jaxgrid.grid.feeder import Feeder


def tree_distances(feeder: Feeder) -> np.ndarray:
    """``(n_bus, n_bus)`` number of branches between every pair of buses."""
    path = np.asarray(feeder.path)
    depth = path.sum(axis=0)
    return depth[:, None] + depth[None, :] - 2 * (path.T @ path)


def voronoi_zones(feeder: Feeder, pv_bus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(zone_buses, zone_mask)``, ``(n_pv, zone_size)``: zone members padded with the PV's bus."""
    pv_bus = np.asarray(pv_bus)
    nearest = np.argmin(tree_distances(feeder)[:, pv_bus], axis=1)
    members = [np.flatnonzero(nearest == i) for i in range(len(pv_bus))]
    size = max(len(m) for m in members)
    zone_buses = np.array(
        [np.pad(m, (0, size - len(m)), constant_values=pv_bus[i]) for i, m in enumerate(members)]
    )
    zone_mask = np.array([np.arange(size) < len(m) for m in members])
    return zone_buses.astype(np.int32), zone_mask


def spread_buses(feeder: Feeder, k: int) -> np.ndarray:
    """``k`` bus indices spread over the feeder by farthest-point sampling.

    Distances are resistances along the tree (pu), where voltage problems grow: the
    first bus is the one electrically farthest from the slack, each next one the bus
    farthest from all chosen so far (ties to the lower index).
    """
    path = np.asarray(feeder.path)
    r = np.asarray(feeder.r_pu)
    depth = r @ path  # resistance from the slack to each bus
    shared = (path * r[:, None]).T @ path  # resistance of the common upstream path
    distance = depth[:, None] + depth[None, :] - 2 * shared
    chosen = [int(np.argmax(depth))]
    nearest = distance[chosen[0]].copy()
    nearest[int(feeder.slack)] = -1.0
    while len(chosen) < k:
        nxt = int(np.argmax(nearest))
        chosen.append(nxt)
        nearest = np.minimum(nearest, distance[nxt])
        nearest[chosen] = -1.0
    return np.sort(np.array(chosen, dtype=np.int32))
