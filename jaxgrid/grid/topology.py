"""Radial topology: orient the branches away from the slack and build the path matrix.

A radial feeder is a tree rooted at the slack bus. Anything else — no buses, a branch
that closes a loop, buses the slack cannot reach — is a ``ValueError`` naming the
offending buses or branches, never a silently wrong power flow.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np


class RadialTree(NamedTuple):
    """A feeder's tree.

    Attributes:
        parent: ``(n_bus,)`` upstream bus of each bus, -1 at the slack.
        branch_from: ``(n_branch,)`` upstream bus of each branch (branch order kept).
        branch_to: ``(n_branch,)`` downstream bus of each branch.
        path: ``(n_branch, n_bus)`` 1 where branch ``k`` lies on the path from the
            slack to bus ``j`` (the downstream matrix ``A^-T`` of LinDistFlow).
        levels: ``(depth, width)`` the branches by distance from the slack: row ``d``
            holds the branches ``d + 1`` steps from it, padded with ``n_branch``.
    """

    parent: np.ndarray
    branch_from: np.ndarray
    branch_to: np.ndarray
    path: np.ndarray
    levels: np.ndarray


def _names(labels, indices, limit: int = 20) -> str:
    shown = ", ".join(str(labels[i]) for i in indices[:limit])
    more = f" and {len(indices) - limit} more" if len(indices) > limit else ""
    return shown + more


def _loop(parent: np.ndarray, a: int, b: int) -> list[int]:
    """Buses of the loop closed by a branch a-b over the tree given by ``parent``."""

    def up(bus):
        chain = [bus]
        while parent[chain[-1]] >= 0:
            chain.append(int(parent[chain[-1]]))
        return chain

    up_a, up_b = up(int(a)), up(int(b))
    common = set(up_a) & set(up_b)
    head_a = [n for n in up_a if n not in common]
    head_b = [n for n in up_b if n not in common]
    top = next(n for n in up_a if n in common)
    return sorted(head_a + [top] + head_b)


def radial_tree(
    n_bus: int,
    from_bus: np.ndarray,
    to_bus: np.ndarray,
    slack: int,
    bus_labels=None,
    branch_labels=None,
) -> RadialTree:
    """Check that the branches form a tree rooted at ``slack`` and orient them.

    Args:
        n_bus: number of buses.
        from_bus, to_bus: ``(n_branch,)`` bus indices (0-based) of each branch.
        slack: index of the slack (root) bus.
        bus_labels, branch_labels: how to name buses and branches in error messages.

    Raises:
        ValueError: empty network, bad index, self-loop, loop (meshed) or disconnected.
    """
    from_bus = np.asarray(from_bus, dtype=np.int64)
    to_bus = np.asarray(to_bus, dtype=np.int64)
    n_branch = len(from_bus)
    bus_labels = list(range(n_bus)) if bus_labels is None else list(bus_labels)
    branch_labels = (
        [f"{bus_labels[f]}-{bus_labels[t]}" for f, t in zip(from_bus, to_bus)]
        if branch_labels is None
        else list(branch_labels)
    )
    if n_bus == 0:
        raise ValueError("empty network: it has no buses")
    if n_branch == 0:
        raise ValueError("empty network: it has no in-service branches, so nothing to solve")
    if not 0 <= slack < n_bus:
        raise ValueError(f"slack bus index {slack} is outside 0..{n_bus - 1}")
    bad = np.flatnonzero((from_bus < 0) | (from_bus >= n_bus) | (to_bus < 0) | (to_bus >= n_bus))
    if bad.size:
        raise ValueError(f"branches {_names(branch_labels, bad)} connect buses that do not exist")
    loops = np.flatnonzero(from_bus == to_bus)
    if loops.size:
        raise ValueError(f"branches {_names(branch_labels, loops)} connect a bus to itself")

    adjacency: list[list[tuple[int, int]]] = [[] for _ in range(n_bus)]
    for k, (f, t) in enumerate(zip(from_bus, to_bus)):
        adjacency[f].append((t, k))
        adjacency[t].append((f, k))

    parent = np.full(n_bus, -1, dtype=np.int32)
    branch_into = np.full(n_bus, -1, dtype=np.int64)
    visited = np.zeros(n_bus, dtype=bool)
    tree_branch = np.zeros(n_branch, dtype=bool)
    order = []
    visited[slack] = True
    queue = deque([slack])
    while queue:
        bus = queue.popleft()
        order.append(bus)
        for nxt, k in adjacency[bus]:
            if not visited[nxt]:
                visited[nxt] = True
                parent[nxt] = bus
                branch_into[nxt] = k
                tree_branch[k] = True
                queue.append(nxt)

    problems = []
    unreached = np.flatnonzero(~visited)
    if unreached.size:
        problems.append(
            f"disconnected: buses {_names(bus_labels, unreached)} cannot be reached "
            f"from the slack bus {bus_labels[slack]}"
        )
    closing = np.flatnonzero(~tree_branch & visited[from_bus])
    if closing.size:
        loops = "; ".join(
            f"branch {branch_labels[k]} closes the loop through buses "
            f"{_names(bus_labels, _loop(parent, from_bus[k], to_bus[k]))}"
            for k in closing[:5]
        )
        more = f" and {closing.size - 5} more loops" if closing.size > 5 else ""
        problems.append(f"meshed: {loops}{more} (take branches out of service to make it radial)")
    if problems:
        raise ValueError("network is not a radial tree: " + "; ".join(problems))

    branch_to = np.empty(n_branch, dtype=np.int32)
    branch_to[branch_into[branch_into >= 0]] = np.flatnonzero(branch_into >= 0)
    branch_from = parent[branch_to].astype(np.int32)

    path = np.zeros((n_branch, n_bus))
    for bus in order[1:]:
        up = parent[bus]
        path[:, bus] = path[:, up]
        path[branch_into[bus], bus] = 1.0
    return RadialTree(
        parent=parent,
        branch_from=branch_from,
        branch_to=branch_to,
        path=path,
        levels=branch_levels(path, branch_to),
    )


def branch_levels(path: np.ndarray, branch_to: np.ndarray) -> np.ndarray:
    """``(depth, width)`` int32 table of the branches by depth (row ``d``: the branches
    ``d + 1`` steps from the slack, in branch order), padded with ``n_branch``."""
    n_branch = len(branch_to)
    depth = np.rint(path.sum(axis=0)[branch_to]).astype(np.int64) - 1
    width = np.bincount(depth).max()
    levels = np.full((depth.max() + 1, width), n_branch, dtype=np.int32)
    for d in range(depth.max() + 1):
        members = np.flatnonzero(depth == d)
        levels[d, : members.size] = members
    return levels
