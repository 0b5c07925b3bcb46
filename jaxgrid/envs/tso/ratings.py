"""Branch ratings for cases that give none, and the branches whose ratings can bind.

MATPOWER's case118 (and case14) carry no thermal ratings. Where a branch has none, jaxgrid
rates it at the active power a ``max_angle_deg`` (10°) difference across its reactance
carries, ``base_mva * sin(max_angle) / x`` (the textbook steady-state stability limit of
a line; with it 4 of case118's branches bind at the case's peak load with every unit
on).

The DC-OPF enforces only the branches listed as monitored, which keeps its linear algebra
small; :func:`screen_branches` lists those loaded above a share of their rating in
dispatches that span the scenario's range (every unit on, and only the units of the
lowest marginal cost, at several load levels). The environments compute every branch's
flow, so a branch the screening missed shows up in the ``thermal_overload`` cost.

The bundled cases' screenings are stored in :data:`SCREENED` rather than recomputed by
every ``jaxgrid.make``: the screening solves eight DC-OPFs by the interior point, which
took 10-15 s of XLA compiling per process on a 2-core CPU. ``tests/envs/test_tso.py``
recomputes them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.dispatch import dcopf
from jaxgrid.grid.network import Network
from jaxgrid.types import float_dtype

MAX_ANGLE_DEG = 10.0

# screen_branches(network, angle_ratings(network)) of the bundled cases, in float64 (in
# float32 flows within round-off of the threshold change the list: case118 loses branch
# 136, case300 gains 63), so that both precisions monitor the same branches
SCREENED = {
    "case14": (0, 1, 2, 3, 8, 9),
    "case118": (6, 7, 8, 30, 32, 35, 36, 37, 50, 52, 65, 66, 70, 74, 75, 83, 84, 85, 86, 88, 95, 97, 98, 99, 104, 105, 107, 115, 117, 119, 130, 135, 136, 137, 138, 140, 141, 144, 153, 163, 166, 173),
    "case300": (2, 3, 4, 5, 6, 7, 23, 25, 35, 40, 42, 44, 49, 55, 58, 60, 64, 70, 89, 96, 98, 99, 100, 109, 111, 114, 115, 117, 118, 120, 129, 136, 142, 145, 148, 149, 166, 176, 177, 178, 179, 180, 181, 183, 184, 186, 187, 188, 189, 192, 194, 196, 198, 202, 203, 204, 210, 211, 212, 217, 218, 220, 221, 222, 224, 225, 226, 228, 229, 231, 232, 235, 236, 241, 242, 243, 246, 248, 249, 250, 251, 254, 257, 262, 267, 278, 291, 292, 306, 308, 310, 321, 342, 361, 363, 364, 367, 372, 381, 382, 386, 387, 388, 392, 393, 394, 395, 396, 397, 398, 399, 403, 404, 406, 407, 408, 409, 410),
}  # fmt: skip


def angle_ratings(network: Network, max_angle_deg: float = MAX_ANGLE_DEG) -> np.ndarray:
    """Host side: ``(n_branch,)`` the network's ratings, MVA, with the unrated (``inf``)
    branches rated at ``base_mva * sin(max_angle_deg) / |x|``."""
    rate = np.asarray(network.rate_mva, float)
    x = np.maximum(np.abs(np.asarray(network.x_pu, float)), 1e-6)
    limit = float(network.base_mva) * np.sin(np.deg2rad(max_angle_deg)) / x
    return np.where(np.isfinite(rate), rate, limit)


def screen_branches(
    network: Network,
    rate_mva: np.ndarray,
    load_levels=(0.3, 0.6, 0.9, 1.1),
    loading: float = 0.5,
) -> tuple[int, ...]:
    """Host side: branches loaded above ``loading`` of ``rate_mva`` in the screening
    dispatches (every unit on, and only the cheapest units' tier; the network's loads
    scaled by ``load_levels``)."""
    c1 = np.asarray(network.cost_poly)[:, 1]
    tiers = np.stack([np.ones_like(c1, bool), c1 <= c1.min()])
    pd = np.asarray(network.pd_mw, float)
    levels = np.asarray(load_levels, float)
    rated = network.replace(rate_mva=jnp.asarray(rate_mva, float_dtype()))

    def flows(on, level):
        return dcopf(rated, level * jnp.asarray(pd, float_dtype()), commitment=on).p_branch_mw

    grid = jax.jit(jax.vmap(jax.vmap(flows, (None, 0)), (0, None)))
    f = np.abs(np.asarray(grid(jnp.asarray(tiers), jnp.asarray(levels, float_dtype()))))
    heavy = np.any(f > loading * rate_mva, axis=(0, 1))
    return tuple(int(k) for k in np.flatnonzero(heavy & np.asarray(network.branch_in_service)))
