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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.dispatch import dcopf
from jaxgrid.grid.network import Network
from jaxgrid.types import float_dtype

MAX_ANGLE_DEG = 10.0


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
