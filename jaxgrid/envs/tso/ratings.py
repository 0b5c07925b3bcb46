"""Branch ratings for cases that give none, and the branches whose ratings can bind.

MATPOWER's case14, case118 and case300 carry no thermal ratings. Where a branch has none,
jaxgrid rates it at the active power a ``max_angle_deg`` difference across its reactance
carries, ``base_mva * sin(max_angle) / x`` (the textbook steady-state stability limit of
a line): 10° by default (:data:`MAX_ANGLE_DEG`), with which 3-4 of case118's branches
bind at 90-100 % of the case's load with every unit on and no load is shed.

case300 is rated at 20° (:data:`CASE_MAX_ANGLE_DEG`). At 10° its network cannot serve
its own load: with every unit on, the DC-OPF (float64) sheds 487 MW at 90 % of the
case's load and 800 MW at 100 % (13 and 17 branches binding; HiGHS, every branch
enforced and the 5 % reserve held, 1,245 MW at 110 %). ``tso300-v0``'s merit order
then shed load at every step, and the dispatch's binding-lines stage, built for a few
binding lines, certified 29 of 96 random-action problems (16 environments, 6 steps)
and none of the merit order's, leaving the rest to the interior point. At 20° nothing
is shed up to 110 % with every unit on and 1-2 branches bind (case118 at 10°: none shed,
2-4 bind); the copper plate and the binding lines certify 92 of the same 96 problems,
and on a merit-order day (4 environments, 48 steps) the interior point took 17 % of
the steps instead of 98 % (15° left it 90 %, with load still shed behind 4-8 binding
lines). What the merit order still sheds that day, 0.7-2.1 GW a step in its first half
(2.5-4.1 GW at 10°), it sheds at 30° too: its commitment, refused by ramps and minimum
times, not the network.

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
CASE_MAX_ANGLE_DEG = {"case300": 20.0}  # cases rated at another angle (module docstring)


def case_max_angle_deg(case: str) -> float:
    """The angle difference, degrees, at which the bundled ``case``'s unrated branches are
    rated: :data:`CASE_MAX_ANGLE_DEG`'s, else :data:`MAX_ANGLE_DEG`."""
    return CASE_MAX_ANGLE_DEG.get(case, MAX_ANGLE_DEG)


# screen_branches(network, angle_ratings(network, case_max_angle_deg(case))) of the
# bundled cases, in float64 (in float32 flows within round-off of the threshold change
# the list: case118 loses branch 136), so that both precisions monitor the same branches
SCREENED = {
    "case14": (0, 1, 2, 3, 8, 9),
    "case118": (6, 7, 8, 30, 32, 35, 36, 37, 50, 52, 65, 66, 70, 74, 75, 83, 84, 85, 86, 88, 95, 97, 98, 99, 104, 105, 107, 115, 117, 119, 130, 135, 136, 137, 138, 140, 141, 144, 153, 163, 166, 173),
    "case300": (3, 6, 44, 60, 99, 100, 109, 114, 115, 117, 166, 177, 180, 181, 188, 189, 196, 198, 202, 203, 210, 212, 221, 222, 232, 241, 248, 250, 251, 267, 308, 399, 406),
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
