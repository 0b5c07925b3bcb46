"""The reference DC-OPF: the same economic dispatch written for HiGHS from the network
tables, independently of jaxgrid's PTDF formulation.

By default the network enters through PYPOWER's PTDF (``makePTDF`` on the same tables):
one system balance row (its dual the energy price) and a flow row per rated branch, the
LMP the energy price plus the PTDF-weighted duals of the flow rows. ``form="b_theta"``
writes bus angles as variables instead, a power balance row per bus (its dual the bus's
LMP) and a flow row ``b (theta_f - theta_t - shift)`` per rated branch; HiGHS's
active-set QP solver fails on that form for the larger cases with quadratic costs, so it
serves linear costs. A piecewise-linear cost is an epigraph variable above every
segment's line. ``slack_price_rise`` puts the rise of shed's and spill's prices across
each bus's range in the Hessian. The problem is the one :func:`jaxgrid.dispatch.dcopf`
documents: load shedding at a value of lost load, spilling of must-run generation, a
reserve requirement with a priced shortfall. Used by the tests and by
``benchmarks/transmission_dispatch.py``.
"""

from __future__ import annotations

import time

import highspy
import numpy as np
from scipy.sparse import csc_matrix

RETRIES = (("qp_regularization_value", 1e-9), ("presolve", "off"))


def solve(
    network,
    pd_mw=None,
    *,
    cost_poly=None,
    commitment=None,
    rate_mva=None,
    reserve_mw=0.0,
    voll=10_000.0,
    spill_price=10_000.0,
    reserve_shortfall_price=1_000.0,
    slack_price_rise=0.0,
    form="ptdf",
    time_limit=60.0,
):
    """The DC-OPF of ``network`` (numpy tables) solved by HiGHS, in PTDF form (the PTDF
    from PYPOWER's ``makePTDF``: HiGHS's QP solver fails on the B-theta form of the larger
    cases) or with ``form="b_theta"``; returns a dict of
    ``pg_mw``, ``cost``, ``lmp``, ``p_branch_mw``, ``shed_mw``, ``spill_mw``,
    ``reserve_shortfall_mw``, ``reserve_price``, ``status`` and ``seconds`` (the solve)."""
    net = {k: np.asarray(v) for k, v in vars(network).items()}
    n_bus, n_gen = len(net["bus_type"]), len(net["gen_bus"])
    base = float(net["base_mva"])
    pd = np.asarray(net["pd_mw"] if pd_mw is None else pd_mw, float)
    poly = np.asarray(net["cost_poly"] if cost_poly is None else cost_poly, float)
    on = net["gen_in_service"] & (True if commitment is None else np.asarray(commitment, bool))
    rate = np.asarray(net["rate_mva"] if rate_mva is None else rate_mva, float)
    pwl = net["cost_model"] == 1

    # DC branch model (MATPOWER makeBdc), written out directly
    br_on = net["branch_in_service"]
    b = np.where(br_on, 1.0 / (net["x_pu"] * net["tap"]), 0.0)
    f, t = net["branch_from"], net["branch_to"]
    shift = np.deg2rad(net["shift_deg"])
    p_shift_branch = -b * shift  # pu
    p_shift_bus = np.zeros(n_bus)
    np.add.at(p_shift_bus, f, p_shift_branch)
    np.add.at(p_shift_bus, t, -p_shift_branch)

    # columns: pg, theta, shed, spill, shortfall, epigraph (one per generator)
    i_pg = np.arange(n_gen)
    i_th = n_gen + np.arange(n_bus)
    i_shed = n_gen + n_bus + np.arange(n_bus)
    i_spill = n_gen + 2 * n_bus + np.arange(n_bus)
    i_short = n_gen + 3 * n_bus
    i_epi = i_short + 1 + np.arange(n_gen)
    n_col = i_short + 1 + n_gen

    must_run = np.zeros(n_bus)
    np.add.at(must_run, net["gen_bus"], np.where(on, np.maximum(net["pmin_mw"], 0.0), 0.0))
    lower = np.concatenate(
        [
            np.where(on, net["pmin_mw"], 0.0),
            np.full(n_bus, -np.inf),
            np.zeros(n_bus),
            np.zeros(n_bus),
            [0.0],
            np.where(on & pwl, -np.inf, 0.0),
        ]
    )
    upper = np.concatenate(
        [
            np.where(on, net["pmax_mw"], 0.0),
            np.full(n_bus, np.inf),
            np.maximum(pd, 0.0),
            must_run + np.maximum(-pd, 0.0),
            [np.inf],
            np.where(on & pwl, np.inf, 0.0),
        ]
    )
    slack = int(np.flatnonzero(net["bus_type"] == 3)[0])
    lower[i_th[slack]] = upper[i_th[slack]] = 0.0
    cost = np.concatenate(
        [
            np.where(on & ~pwl, poly[:, 1], 0.0),
            np.zeros(n_bus),
            np.full(n_bus, voll),
            np.full(n_bus, spill_price),
            [reserve_shortfall_price],
            np.where(on & pwl, 1.0, 0.0),
        ]
    )
    offset = float(np.sum(np.where(on & ~pwl, poly[:, 2], 0.0)))

    rows, cols, vals, row_lo, row_hi = [], [], [], [], []

    def add_row(c, v, lo, hi):
        r = len(row_lo)
        rows.extend([r] * len(c))
        cols.extend(c)
        vals.extend(v)
        row_lo.append(lo)
        row_hi.append(hi)
        return r

    limited = np.flatnonzero(br_on & np.isfinite(rate))
    ptdf = pypower_ptdf(net) if form == "ptdf" else None
    if ptdf is None:
        balance_rows, line_rows = _b_theta_rows(
            add_row,
            net,
            b,
            p_shift_bus,
            p_shift_branch,
            pd,
            limited,
            rate,
            i_pg,
            i_th,
            i_shed,
            i_spill,
            base,
        )
    else:
        balance_rows, line_rows = _ptdf_rows(
            add_row,
            net,
            ptdf,
            p_shift_bus,
            p_shift_branch,
            pd,
            limited,
            rate,
            i_pg,
            i_shed,
            i_spill,
            base,
        )
    # reserve: headroom of committed units plus shortfall >= requirement
    cap = float(np.sum(np.where(on, net["pmax_mw"], 0.0)))
    reserve_row = add_row(
        [*i_pg[on], i_short], [*(-np.ones(on.sum())), 1.0], reserve_mw - cap, np.inf
    )
    # piecewise-linear costs: epigraph above each segment's line
    for g in np.flatnonzero(on & pwl):
        x, y = net["cost_pwl_mw"][g], net["cost_pwl_cost"][g]
        for k in range(len(x) - 1):
            if x[k + 1] > x[k]:
                slope = (y[k + 1] - y[k]) / (x[k + 1] - x[k])
                add_row([i_epi[g], i_pg[g]], [1.0, -slope], y[k] - slope * x[k], np.inf)

    a = csc_matrix((vals, (rows, cols)), shape=(len(row_lo), n_col))
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", time_limit)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_col, len(row_lo)
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lower, upper
    lp.row_lower_, lp.row_upper_ = np.array(row_lo), np.array(row_hi)
    lp.offset_ = offset
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = (
        a.indptr,
        a.indices,
        a.data,
    )
    h.passModel(lp)
    q = np.zeros(n_col)
    q[i_pg] = np.where(on & ~pwl, 2.0 * poly[:, 0], 0.0)
    # the rise of shed's and spill's prices across each bus's range
    for cols, price in ((i_shed, voll), (i_spill, spill_price)):
        most = upper[cols]
        q[cols] = np.where(most > 0, price * slack_price_rise / np.where(most > 0, most, 1), 0)
    if np.any(q > 0):
        nz = np.flatnonzero(q > 0).astype(np.int32)
        start = np.searchsorted(nz, np.arange(n_col + 1)).astype(np.int32)
        h.passHessian(n_col, len(nz), highspy.HessianFormat.kTriangular, start, nz, q[nz])
    start = time.perf_counter()
    h.run()
    for option, value in RETRIES:  # HiGHS's active-set QP solver sometimes gives up
        if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            break
        h.setOptionValue(option, value)
        h.clearSolver()
        h.run()
    seconds = time.perf_counter() - start
    status = h.modelStatusToString(h.getModelStatus())
    sol = h.getSolution()
    x, row_dual = np.asarray(sol.col_value), np.asarray(sol.row_dual)
    if ptdf is None:
        theta = x[i_th]
        flow = base * (b * (theta[f] - theta[t]) + p_shift_branch)
        lmp = row_dual[balance_rows]
    else:
        injection = np.zeros(n_bus)
        np.add.at(injection, net["gen_bus"], x[i_pg])
        injection += x[i_shed] - x[i_spill] - pd - net["gs_mw"]
        flow = ptdf @ injection + base * (p_shift_branch - ptdf @ p_shift_bus)
        lmp = row_dual[balance_rows[0]] + ptdf[limited].T @ row_dual[line_rows]
    return {
        "pg_mw": x[i_pg],
        "cost": h.getInfo().objective_function_value,
        "lmp": lmp,
        "p_branch_mw": flow,
        "line_dual": dict(zip(limited.tolist(), row_dual[line_rows].tolist(), strict=True)),
        "shed_mw": x[i_shed],
        "spill_mw": x[i_spill],
        "reserve_shortfall_mw": float(x[i_short]),
        "reserve_price": float(row_dual[reserve_row]),
        "status": status,
        "seconds": seconds,
    }


def pypower_ptdf(net: dict) -> np.ndarray:
    """``(n_branch, n_bus)`` PTDF of the network tables by PYPOWER's ``makePTDF`` (buses
    numbered by row), slack column 0."""
    import pandapower.pypower.idx_brch as idx_brch
    import pandapower.pypower.idx_bus as idx_bus
    from pandapower.pypower.makePTDF import makePTDF

    n_bus, n_br = len(net["bus_type"]), len(net["r_pu"])
    bus = np.zeros((n_bus, idx_bus.bus_cols))
    bus[:, idx_bus.BUS_I] = np.arange(n_bus)
    bus[:, idx_bus.BUS_TYPE] = net["bus_type"]
    branch = np.zeros((n_br, idx_brch.branch_cols))
    branch[:, idx_brch.F_BUS] = net["branch_from"]
    branch[:, idx_brch.T_BUS] = net["branch_to"]
    branch[:, idx_brch.BR_R] = net["r_pu"]
    branch[:, idx_brch.BR_X] = net["x_pu"]
    branch[:, idx_brch.TAP] = net["tap"]
    branch[:, idx_brch.SHIFT] = net["shift_deg"]
    branch[:, idx_brch.BR_STATUS] = net["branch_in_service"]
    slack = int(np.flatnonzero(net["bus_type"] == 3)[0])
    return makePTDF(float(net["base_mva"]), bus, branch, slack)


def _b_theta_rows(
    add_row,
    net,
    b,
    p_shift_bus,
    p_shift_branch,
    pd,
    limited,
    rate,
    i_pg,
    i_th,
    i_shed,
    i_spill,
    base,
):
    """Bus balance rows (generation + shed - spill - base B theta = load + gs + shift
    injection; duals are the LMPs) and flow rows of the rated branches."""
    n_bus = len(pd)
    f, t = net["branch_from"], net["branch_to"]
    b_bus = np.zeros((n_bus, n_bus))
    for k in np.flatnonzero(net["branch_in_service"]):
        b_bus[f[k], f[k]] += b[k]
        b_bus[t[k], t[k]] += b[k]
        b_bus[f[k], t[k]] -= b[k]
        b_bus[t[k], f[k]] -= b[k]
    balance_rows = []
    for i in range(n_bus):
        gens = np.flatnonzero(net["gen_bus"] == i)
        nz = np.flatnonzero(b_bus[i])
        c = [*i_pg[gens], i_shed[i], i_spill[i], *i_th[nz]]
        v = [*np.ones(len(gens)), 1.0, -1.0, *(-base * b_bus[i, nz])]
        rhs = pd[i] + net["gs_mw"][i] + base * p_shift_bus[i]
        balance_rows.append(add_row(c, v, rhs, rhs))
    line_rows = []
    for k in limited:
        off = base * p_shift_branch[k]
        line_rows.append(
            add_row(
                [i_th[f[k]], i_th[t[k]]], [base * b[k], -base * b[k]], -rate[k] - off, rate[k] - off
            )
        )
    return balance_rows, line_rows


def _ptdf_rows(
    add_row,
    net,
    ptdf,
    p_shift_bus,
    p_shift_branch,
    pd,
    limited,
    rate,
    i_pg,
    i_shed,
    i_spill,
    base,
):
    """One system balance row (its dual is the energy price) and flow rows ``PTDF @
    injection`` of the rated branches (LMP = energy price + PTDF' line duals)."""
    n_bus = len(pd)
    gen_bus = net["gen_bus"]
    load = pd + net["gs_mw"]
    balance = add_row(
        [*i_pg, *i_shed, *i_spill],
        [*np.ones(len(i_pg)), *np.ones(n_bus), *(-np.ones(n_bus))],
        float(np.sum(load)),
        float(np.sum(load)),
    )
    line_rows = []
    for k in limited:
        row = ptdf[k]
        off = base * (p_shift_branch[k] - row @ p_shift_bus) - row @ load
        c = [*i_pg, *i_shed, *i_spill]
        v = [*row[gen_bus], *row, *(-row)]
        keep = np.abs(v) > 0
        line_rows.append(
            add_row(np.asarray(c)[keep], np.asarray(v)[keep], -rate[k] - off, rate[k] - off)
        )
    return [balance], line_rows
