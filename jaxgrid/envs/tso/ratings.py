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

Params outside what was screened (a demand beyond :data:`LOAD_RANGE`'s top, a branch left
out rated lower, the load spread over the buses otherwise, a unit's rating raised) could
let a branch left out overload, so the environment refuses them before they reach a
compiled program: :class:`Screening` is a rule of :mod:`jaxgrid.validation` bound to the
environment (``TSO.params_rules``), and its error names the ``make_tso`` argument
(``max_load_factor``, ``rate_mva``) that screens for them. The environments still compute
every branch's flow, and count any overload in the ``thermal_overload`` cost.

The bundled cases' screenings are stored in :data:`SCREENED` rather than recomputed by
every ``jaxgrid.make`` (about 800 linear programmes on case300); ``tests/envs/test_tso.py``
recomputes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxgrid.grid.network import Network
from jaxgrid.grid.sensitivity import ptdf, shift_flow_mw
from jaxgrid.validation import first_bad

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


# relative slack of the comparisons below: float32 params against float64 screenings
_RTOL = 1e-6


@dataclasses.dataclass(frozen=True, eq=False)
class Screening:
    """What :func:`screen_branches` screened a TSO environment's branches for, and the rule
    (:mod:`jaxgrid.validation`, bound to the environment) that its params stay inside it.

    Attributes:
        rate_mva: ``(n_branch,)`` the ratings screened, MVA.
        max_load_factor: the loads screened are the case's times any factor from 0 to this.
        pd_mw: ``(n_bus,)`` the case's loads, MW (negative: an injection).
        pmax_mw: ``(n_gen,)`` the units' largest outputs screened, MW (0 out of service).
        left_out: ``(n_branch,)`` True where a branch in service was found unable to
            overload: the dispatch does not enforce its rating.
        monitored: the branches found able to overload, which the dispatch enforces.
    """

    rate_mva: np.ndarray
    max_load_factor: float
    pd_mw: np.ndarray
    pmax_mw: np.ndarray
    left_out: np.ndarray
    monitored: tuple[int, ...]

    @classmethod
    def of(
        cls,
        network: Network,
        rate_mva: np.ndarray,
        max_load_factor: float = LOAD_RANGE[1],
        monitored: tuple[int, ...] | None = None,
    ) -> Screening:
        """The screening of ``network`` at ``rate_mva`` for loads up to ``max_load_factor``
        times the case's: ``monitored`` if given (a stored screening), else
        :func:`screen_branches`'."""
        rate = np.asarray(rate_mva, float)
        if monitored is None:
            monitored = screen_branches(network, rate, (0.0, float(max_load_factor)))
        left_out = np.asarray(network.branch_in_service, bool).copy()
        left_out[list(monitored)] = False
        pmax = np.asarray(network.pmax_mw, float)
        return cls(
            rate_mva=rate,
            max_load_factor=float(max_load_factor),
            pd_mw=np.asarray(network.pd_mw, float),
            pmax_mw=np.where(np.asarray(network.gen_in_service, bool), pmax, 0.0),
            left_out=left_out,
            monitored=tuple(int(k) for k in monitored),
        )

    def problems(self, node: Any, label: str) -> Iterator[str]:
        """Where ``node`` (:class:`~jaxgrid.envs.tso.env.TSOParams`, concrete leaves; any
        leading batch axes) poses ratings, loads or outputs this screening did not cover."""
        leaves = (node.rate_mva, node.load_share, node.peak_demand_mw, node.demand_floor)
        leaves += (node.profiles.load, node.units.pmax_mw)
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return
        rate, share, peak, floor, shape, pmax = (np.asarray(leaf, float) for leaf in leaves)
        case_share = self.pd_mw / self.pd_mw.sum()
        moved = ~np.isclose(share, case_share, rtol=1e-5, atol=1e-7)
        top = np.max(shape, axis=(-2, -1))
        factor = peak * (floor + (1.0 - floor) * top) / self.pd_mw.sum()
        top = np.broadcast_to(top, factor.shape)

        def lower(at, v, i):
            return (
                f"{at} = {v:.6g} MVA: below the {self.rate_mva[i[-1]]:.6g} MVA branch {i[-1]} "
                "was screened at, and the dispatch does not monitor it (no injection can load "
                "it beyond that rating, but it may beyond this one): make the environment "
                "with the lowest ratings it will be given (jaxgrid.make(name, rate_mva=...)) "
                "to have the branches they let overload monitored"
            )

        def moved_load(at, v, i):
            return (
                f"{at} = {v:.6g}: the monitored branches were screened for the case's own "
                f"spread of load (bus {i[-1]}'s share {case_share[i[-1]]:.6g}); another "
                "spread can overload branches the dispatch does not monitor"
            )

        def beyond(at, v, i):
            return (
                f"{at} = {v:.6g} MW: with demand_floor and the load profile's peak "
                f"({top[i]:.4g}) the demand reaches {factor[i]:.4g} times the case's load, "
                f"beyond the {self.max_load_factor:g} the monitored branches were screened "
                f"for: make the environment with max_load_factor={float(np.max(factor)):.4g} "
                "or more (jaxgrid.make(name, max_load_factor=...))"
            )

        def raised(at, v, i):
            return (
                f"{at} = {v:.6g} MW: above the {self.pmax_mw[i[-1]]:.6g} MW the case rates "
                f"unit {i[-1]} at, which the monitored branches were screened for"
            )

        checks = (
            ("rate_mva", rate, self.left_out & (rate < self.rate_mva * (1 - _RTOL)), lower),
            ("load_share", share, moved, moved_load),
            # the demand's factor is the loads' only where they keep the case's spread
            (
                "peak_demand_mw",
                np.broadcast_to(peak, factor.shape),
                ~np.any(moved) & (factor > self.max_load_factor * (1 + _RTOL)),
                beyond,
            ),
            ("units.pmax_mw", pmax, pmax > self.pmax_mw * (1 + _RTOL), raised),
        )
        for field, values, bad, message in checks:
            if np.any(bad):
                yield first_bad(f"{label}.{field}", values, bad, message)
