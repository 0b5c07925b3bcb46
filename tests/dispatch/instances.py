"""Random DC-OPF instances of the bundled cases for the tests and the benchmark: line
ratings tightened until several lines bind, then loads, costs and commitments drawn."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from highs_dcopf import solve

sys.path.insert(0, str(Path(__file__).parents[1] / "grid"))  # the grid tests' helpers
from topology import bridges  # noqa: E402

CASES = ("case9", "case30", "case39", "case57", "case118", "case300")


def tightened(network, n_lines: int = 6, factor: float = 0.8):
    """``network`` with the ratings of its ``n_lines`` most loaded non-bridge branches (at
    the least-cost dispatch without limits) set to ``factor`` times their flow, the
    others unlimited: several lines bind, and no two of them carry the same flow (which
    would leave their prices undetermined)."""
    free = solve(network, rate_mva=np.full(network.n_branch, np.inf))
    flow = np.abs(free["p_branch_mw"])
    order = np.argsort(-np.where(bridges(network), 0.0, flow))
    chosen = []
    for k in order:
        if all(abs(flow[k] - flow[j]) > 1e-3 * flow[j] for j in chosen):
            chosen.append(k)
        if len(chosen) == n_lines:
            break
    rate = np.full(network.n_branch, np.inf)
    rate[chosen] = factor * flow[chosen]
    return network.replace(rate_mva=rate)


def draw(network, rng, n: int):
    """``n`` random instances: loads scaled by U(0.85, 1.15) bus by bus, cost
    coefficients c1 and c2 by U(0.8, 1.2), and about one unit in ten switched off (never
    leaving less than 1.3 times the load of capacity). Returns ``(pd, cost_poly,
    commitment)`` with leading axis ``n``."""
    pd0 = np.asarray(network.pd_mw)
    poly0 = np.asarray(network.cost_poly)
    pmax = np.asarray(network.pmax_mw)
    on0 = np.asarray(network.gen_in_service)
    pds, polys, commits = [], [], []
    for _ in range(n):
        pd = pd0 * rng.uniform(0.85, 1.15, pd0.shape)
        poly = poly0 * np.concatenate(
            [rng.uniform(0.8, 1.2, (len(poly0), 2)), np.ones((len(poly0), 1))], axis=1
        )
        commit = rng.uniform(size=len(pmax)) > 0.1
        if np.sum(pmax[commit & on0]) < 1.3 * np.sum(pd):
            commit[:] = True
        pds.append(pd)
        polys.append(poly)
        commits.append(commit)
    return np.array(pds), np.array(polys), np.array(commits)
