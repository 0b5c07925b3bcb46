"""Graph checks of a network for the tests (and the DC-OPF instances beside them)."""

from __future__ import annotations

import numpy as np


def bridges(network, on=None) -> np.ndarray:
    """``(n_branch,)`` bool: in-service branches (``on``, default the network's status)
    whose outage splits the network into more islands."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    f, t = np.asarray(network.branch_from), np.asarray(network.branch_to)
    on = np.asarray(network.branch_in_service) if on is None else on
    n = network.n_bus

    def islands(mask):
        graph = coo_matrix((np.ones(mask.sum()), (f[mask], t[mask])), shape=(n, n))
        return connected_components(graph, directed=False)[0]

    base = islands(on)
    out = np.zeros(len(f), bool)
    for k in np.flatnonzero(on):
        mask = on.copy()
        mask[k] = False
        out[k] = islands(mask) > base
    return out
