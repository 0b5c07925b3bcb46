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
small. :func:`screen_branches` lists the branches that some dispatch could load beyond
their ratings, so that only those no dispatch can overload are left out: for each it
maximises and minimises the DC flow by linear programming over every injection the
environment can pose (each unit anywhere in ``[0, pmax]``, whatever its commitment; the
case's loads times any factor in :data:`LOAD_RANGE`, shed down to zero at any load bus,
spilled down to zero at any negative load), and monitors the branch where either
extreme passes its rating. No step can then overload a branch the dispatch does not
enforce. On the bundled cases it monitors 4 of case14's 20 branches, 94 of case118's 186
and 156 of case300's 411.

It replaced a screening by sample dispatches (every unit on, and the cheapest tier, at
four load levels; branches above half their rating monitored: 6, 42 and 33 branches),
which missed branches that the environment's own dispatches overload: on 16 held-out
days (float64) the merit order overloaded unmonitored branches on 9.4 % of
``tso118-v0``'s steps (68 MW a day) and 88.5 % of ``tso300-v0``'s (4 days: a radial
branch rated 534 MW behind which 2,073 MW of units sit), random actions on 11.6 % and
83.9 %, and on 3.3 % of ``tso14-v0``'s (branch 13, unit 4's only connection, rated
98.6 MW below the unit's 100 MW) — each step's dispatch then not the OPF that HiGHS,
every branch rated, solves.

The environments still compute every branch's flow: with params outside the screening's
range (a ``peak_demand_mw`` raised beyond :data:`LOAD_RANGE`'s top, other ``rate_mva``
than the environment was made with) a branch left out can overload, and shows up in the
``thermal_overload`` cost.

The bundled cases' screenings are stored in :data:`SCREENED` rather than recomputed by
every ``jaxgrid.make`` (about 800 linear programmes on case300); ``tests/envs/test_tso.py``
recomputes them.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxgrid.grid.network import Network
from jaxgrid.grid.sensitivity import ptdf, shift_flow_mw

MAX_ANGLE_DEG = 10.0
# the factors of the case's loads the screening covers: every net load of the profiles
# (at most the case's load, make_tso's peak demand) and the load-stress split's 1.12
LOAD_RANGE = (0.0, 1.2)
CASE_MAX_ANGLE_DEG = {"case300": 20.0}  # cases rated at another angle (module docstring)


def case_max_angle_deg(case: str) -> float:
    """The angle difference, degrees, at which the bundled ``case``'s unrated branches are
    rated: :data:`CASE_MAX_ANGLE_DEG`'s, else :data:`MAX_ANGLE_DEG`."""
    return CASE_MAX_ANGLE_DEG.get(case, MAX_ANGLE_DEG)


# screen_branches(network, angle_ratings(network, case_max_angle_deg(case))) of the
# bundled cases, in float64, so that both precisions monitor the same branches
SCREENED = {
    "case14": (1, 7, 9, 13),
    "case118": (8, 17, 18, 21, 28, 29, 30, 32, 36, 37, 38, 40, 43, 44, 47, 51, 52, 53, 54, 56, 57, 58, 59, 60, 61, 65, 66, 67, 70, 74, 75, 83, 84, 85, 86, 87, 88, 95, 96, 97, 98, 99, 101, 103, 104, 105, 106, 107, 108, 109, 110, 111, 113, 114, 115, 117, 118, 119, 125, 126, 127, 128, 129, 130, 133, 134, 135, 136, 140, 141, 142, 143, 144, 145, 146, 147, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 161, 162, 163, 166, 173, 178, 185),
    "case300": (3, 4, 6, 8, 40, 42, 43, 44, 48, 49, 54, 55, 56, 57, 58, 60, 70, 79, 81, 82, 83, 84, 86, 88, 89, 90, 91, 92, 93, 94, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 108, 109, 110, 111, 114, 115, 118, 119, 122, 126, 127, 128, 132, 137, 138, 139, 140, 141, 142, 144, 145, 146, 148, 150, 153, 156, 158, 159, 163, 166, 168, 169, 170, 171, 174, 177, 178, 180, 181, 183, 185, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 198, 202, 203, 204, 210, 211, 213, 217, 218, 219, 220, 221, 222, 224, 225, 226, 227, 228, 229, 231, 232, 233, 243, 246, 248, 249, 250, 251, 252, 254, 267, 271, 273, 288, 289, 290, 291, 295, 296, 299, 302, 306, 308, 309, 331, 335, 336, 338, 342, 347, 348, 351, 352, 355, 359, 360, 364, 372, 375, 376, 377, 378, 381, 382),
}  # fmt: skip


def angle_ratings(network: Network, max_angle_deg: float = MAX_ANGLE_DEG) -> np.ndarray:
    """Host side: ``(n_branch,)`` the network's ratings, MVA, with the unrated (``inf``)
    branches rated at ``base_mva * sin(max_angle_deg) / |x|``."""
    rate = np.asarray(network.rate_mva, float)
    x = np.maximum(np.abs(np.asarray(network.x_pu, float)), 1e-6)
    limit = float(network.base_mva) * np.sin(np.deg2rad(max_angle_deg)) / x
    return np.where(np.isfinite(rate), rate, limit)


def screen_branches(
    network: Network, rate_mva: np.ndarray, load_range: tuple[float, float] = LOAD_RANGE
) -> tuple[int, ...]:
    """Host side: the in-service branches whose DC flow (MW, shifters and shunts included)
    can pass ``rate_mva`` ``(n_branch,)`` at some injection the environment can pose
    (module docstring): each branch's flow maximised and minimised by HiGHS (``scipy``'s
    ``linprog``) over the units' outputs in ``[0, pmax]``, one load factor in
    ``load_range`` times the case's loads, the shed ``(0, load)`` at each load bus and the
    spill ``(0, -load)`` at each negative load."""
    from scipy.optimize import linprog

    h = np.asarray(ptdf(network), float)
    shift = np.asarray(shift_flow_mw(network, ptdf_matrix=jnp.asarray(h)), float)
    n_bus, gen_bus = h.shape[1], np.asarray(network.gen_bus)
    pmax = np.where(np.asarray(network.gen_in_service), np.asarray(network.pmax_mw, float), 0)
    pd, gs = np.asarray(network.pd_mw, float), np.asarray(network.gs_mw, float)
    n_gen = len(gen_bus)
    # variables: outputs (n_gen), the load factor, the shed or spill at each bus (n_bus):
    # injection = C_g p - factor pd + slack - gs (the shunts' fixed load), summing to 0,
    # 0 <= slack / (factor |pd|) <= 1
    injection = np.concatenate([np.eye(n_bus)[:, gen_bus], -pd[:, None], np.eye(n_bus)], axis=1)
    balance = injection.sum(axis=0, keepdims=True)
    slack_cap = np.concatenate(
        [np.zeros((n_bus, n_gen)), -np.abs(pd)[:, None], np.eye(n_bus)], axis=1
    )
    sign = np.where(pd >= 0, 1.0, -1.0)  # shed raises a bus's injection, spill lowers it
    bounds = [(0.0, p) for p in pmax] + [tuple(load_range)]
    bounds += [(0.0, None) if s > 0 else (None, 0.0) for s in sign]
    slack_cap[:, n_gen + 1 :] *= sign[None, :]
    flows, fixed = h @ injection, shift - h @ gs
    monitored = []
    for k in np.flatnonzero(np.asarray(network.branch_in_service)):
        extremes = []
        for direction in (1.0, -1.0):
            out = linprog(
                -direction * flows[k],
                A_ub=slack_cap,
                b_ub=np.zeros(n_bus),
                A_eq=balance,
                b_eq=[gs.sum()],
                bounds=bounds,
                method="highs",
            )
            if out.status != 0:
                raise RuntimeError(
                    f"screening branch {k}: the linear programme failed: {out.message}"
                )
            extremes.append(direction * (-out.fun) + fixed[k])
        if max(abs(e) for e in extremes) > rate_mva[k]:
            monitored.append(int(k))
    return tuple(monitored)
