"""The perfect-foresight unit commitment of a day, by mixed-integer linear programming.

Given the whole day's net load, the schedule of least total cost (the environment's two
objectives: generation, no-load and start-up costs plus shed load, spilled output and
reserve shortfall at their prices) over status ``u``, start-ups ``v``, shut-downs ``w``
(binaries) and outputs ``p`` of every unit and step, subject to the environment's rules
(the standard formulation of Carrión & Arroyo, IEEE Trans. Power Syst. 21(3), 2006)::

    v_t - w_t = u_t - u_{t-1}                          (u_0 = 1: every unit on at the start)
    sum_{s=t-UT+1..t} v_s <= u_t,  sum_{s=t-DT+1..t} w_s <= 1 - u_t   (minimum up/down)
    pmin u_t <= p_t <= pmax u_t
    p_t - p_{t-1} <= RU u_{t-1} + SU v_t,  p_{t-1} - p_t <= RD u_t + SD w_t   (ramps)
    0 <= r_t <= pmax u_t - p_t,  p_t + r_t <= p_{t-1} + RU u_{t-1} + SU v_t   (headroom)
    sum_g r_t + shortfall_t >= reserve_margin * net_load_t
    sum_g p_t + sum shed_t - sum spill_t = net_load_t + shunt load
    |PTDF_l (injection_t) + shift_l| <= rate_l       (the environment's monitored branches)
    0 <= shed_{b,t} <= load_{b,t},  0 <= spill_{b,t} <= output at bus b

with ``p_0`` the environment's initial output. Cost curves are linearised by secants over
``segments`` equal pieces of ``[pmin, pmax]`` (never below the curve); the reported cost
evaluates the schedule with the exact curves. Solved with HiGHS through ``highspy`` on
the host (``scipy.optimize.milp`` runs the same HiGHS but takes neither a starting
commitment nor its heuristic effort): seconds on case14, one to several
minutes a day on case118.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from jaxgrid.envs.tso.net_load import net_load
from jaxgrid.grid.sensitivity import ptdf, shift_flow_mw

MIP_REL_GAP = 5e-3  # HiGHS stops within 0.5 % of its bound (case118: minutes a day)


class DaySchedule(NamedTuple):
    """The optimal day (``T`` steps, ``G`` units, ``B`` buses).

    Attributes:
        total_cost: both objectives' costs over the day, currency.
        status: ``(T, G)`` bool units on line.
        pg_mw: ``(T, G)`` output, MW.
        shed_mw, spill_mw: ``(T, B)`` shed load and spilled output, MW.
        reserve_shortfall_mw: ``(T,)`` reserve not held, MW.
        net_load_mw: ``(T,)`` the day's net load, MW.
        p0_mw: ``(G,)`` output before the first step, MW.
        mip_gap: relative gap HiGHS proved (above ``mip_rel_gap`` where it ran out of time).
    """

    total_cost: float
    status: np.ndarray
    pg_mw: np.ndarray
    shed_mw: np.ndarray
    spill_mw: np.ndarray
    reserve_shortfall_mw: np.ndarray
    net_load_mw: np.ndarray
    p0_mw: np.ndarray
    mip_gap: float


def unit_commitment_milp(
    network,
    units,
    net_load_mw,
    load_share,
    rate_mva,
    monitored,
    p0_mw,
    reserve_margin: float,
    voll: float,
    spill_price: float,
    reserve_shortfall_price: float,
    dt_h: float,
    segments: int = 4,
    time_limit_s: float = 600.0,
    mip_rel_gap: float = MIP_REL_GAP,
    heuristic_effort: float = 0.5,
    warm_start=None,
) -> DaySchedule:
    """The optimal day for ``net_load_mw`` ``(T,)`` (module docstring); ``units`` holds
    ``(G,)`` NumPy fields of :class:`~jaxgrid.envs.tso.fleet.UnitParams`. ``warm_start``,
    a ``(T, G)`` commitment (a heuristic's), is HiGHS's first incumbent where it is
    feasible: the best schedule found within ``time_limit_s`` is then at least as good
    (where the time runs out before HiGHS has completed it, the given commitment's own
    schedule, with the gap HiGHS proved, ``inf`` where it proved no bound).
    ``heuristic_effort`` is HiGHS's ``mip_heuristic_effort`` (its default 0.05 left a
    held-out ``tso118-v0`` day at a 98 % gap after 60 s, its best schedule 75x the optimum;
    0.5 found one within 0.4 % of it in 120 s)."""
    f = lambda x: np.asarray(x, float)  # noqa: E731
    demand = f(net_load_mw)
    T, G, B = len(demand), network.n_gen, network.n_bus
    pmin, pmax = f(units.pmin_mw), f(units.pmax_mw)
    ru, rd = f(units.ramp_up_mw), f(units.ramp_down_mw)
    su, sd = f(units.startup_ramp_mw), f(units.shutdown_ramp_mw)
    up, down = np.asarray(units.min_up_steps, int), np.asarray(units.min_down_steps, int)
    poly = f(units.cost_poly)
    gen_bus = np.asarray(network.gen_bus, int)
    load = demand[:, None] * f(load_share)[None]  # (T, B)
    shed_buses = np.flatnonzero(f(load_share) > 0)
    spill_buses = np.union1d(gen_bus, np.flatnonzero(f(load_share) < 0))
    S, P = len(shed_buses), len(spill_buses)
    K = segments

    # variable layout: blocks of (T, ...) each
    sizes = {"u": G, "v": G, "w": G, "p": G, "r": G, "s": G * K, "shed": S, "spill": P, "short": 1}
    offset, start = {}, 0
    for name, n in sizes.items():
        offset[name] = start
        start += T * n
    nv = start

    def idx(name, t, j=0):
        return offset[name] + t * sizes[name] + j

    gi = np.arange(G)
    rows, cols, vals, lo, hi = [], [], [], [], []

    def add(entries, low, high):
        r = len(lo)
        for c, v in entries:
            (
                rows.append(np.full(np.size(c), r)),
                cols.append(np.atleast_1d(c)),
                vals.append(np.broadcast_to(v, np.shape(np.atleast_1d(c)))),
            )
        lo.append(low), hi.append(high)

    def add_per_unit(terms, low, high):
        """One row per unit: ``terms`` are (column array (G,), coefficient (G,) or scalar)."""
        r0 = len(lo)
        for c, v in terms:
            (
                rows.append(r0 + gi),
                cols.append(np.asarray(c)),
                vals.append(np.broadcast_to(v, (G,)).astype(float)),
            )
        (
            lo.extend(np.broadcast_to(low, (G,)).tolist()),
            hi.extend(np.broadcast_to(high, (G,)).tolist()),
        )

    u = lambda t: idx("u", t, gi)  # noqa: E731
    v = lambda t: idx("v", t, gi)  # noqa: E731
    w = lambda t: idx("w", t, gi)  # noqa: E731
    p = lambda t: idx("p", t, gi)  # noqa: E731
    r = lambda t: idx("r", t, gi)  # noqa: E731
    width = (pmax - pmin) / K
    p0 = f(p0_mw)
    for t in range(T):
        prev_u = [] if t == 0 else [(u(t - 1), 1.0)]
        const_u = 1.0 if t == 0 else 0.0
        add_per_unit([(v(t), 1.0), (w(t), -1.0), (u(t), -1.0), *prev_u], -const_u, -const_u)
        # minimum up / down: windows differ by unit, so one row per unit with its own window
        for g in range(G):
            win = range(max(0, t - up[g] + 1), t + 1)
            add([(idx("v", s, g), 1.0) for s in win] + [(idx("u", t, g), -1.0)], -np.inf, 0.0)
            win = range(max(0, t - down[g] + 1), t + 1)
            add([(idx("w", s, g), 1.0) for s in win] + [(idx("u", t, g), 1.0)], -np.inf, 1.0)
        # output = pmin u + segments; segments within the range of a committed unit
        seg = [(idx("s", t, gi * K + k), -1.0) for k in range(K)]
        add_per_unit([(p(t), 1.0), (u(t), -pmin), *seg], 0.0, 0.0)
        add_per_unit([(s, 1.0) for s, _ in seg] + [(u(t), -(pmax - pmin))], -np.inf, 0.0)
        # ramps (p_0 and u_0 = 1 are constants at t = 0)
        if t == 0:
            add_per_unit([(p(t), 1.0), (v(t), -su)], -np.inf, p0 + ru)
            add_per_unit([(p(t), -1.0), (u(t), -rd), (w(t), -sd)], -np.inf, -p0)
            add_per_unit([(p(t), 1.0), (r(t), 1.0), (v(t), -su)], -np.inf, p0 + ru)
        else:
            add_per_unit(
                [(p(t), 1.0), (p(t - 1), -1.0), (u(t - 1), -ru), (v(t), -su)], -np.inf, 0.0
            )
            add_per_unit([(p(t - 1), 1.0), (p(t), -1.0), (u(t), -rd), (w(t), -sd)], -np.inf, 0.0)
            add_per_unit(
                [(p(t), 1.0), (r(t), 1.0), (p(t - 1), -1.0), (u(t - 1), -ru), (v(t), -su)],
                -np.inf,
                0.0,
            )
        add_per_unit([(r(t), 1.0), (p(t), 1.0), (u(t), -pmax)], -np.inf, 0.0)
        # reserve
        add([(r(t), 1.0), (idx("short", t), 1.0)], reserve_margin * demand[t], np.inf)

    # balance and monitored branch flows
    gs = f(network.gs_mw)
    h = np.array(ptdf(network), float)
    h[np.abs(h) < 1e-12] = 0.0  # round-off of the factorisation, not sensitivities
    shift = np.asarray(shift_flow_mw(network, jnp.asarray(h)), float)
    mon = np.asarray(monitored, int)
    rate = f(rate_mva)
    for t in range(T):
        shed = idx("shed", t, np.arange(S))
        spill = idx("spill", t, np.arange(P))
        add([(p(t), 1.0), (shed, 1.0), (spill, -1.0)], demand[t] + gs.sum(), demand[t] + gs.sum())
        fixed = h[mon] @ (-load[t] - gs) + shift[mon]
        for i, branch in enumerate(mon):
            row = h[branch]
            entries = [(p(t), row[gen_bus]), (shed, row[shed_buses]), (spill, -row[spill_buses])]
            add(entries, -rate[branch] - fixed[i], rate[branch] - fixed[i])
        # spill at a bus at most the output there, and the injection of a negative load
        at_bus = (gen_bus[None, :] == spill_buses[:, None]).astype(float)
        for j in range(P):
            gens = np.flatnonzero(at_bus[j])
            injection = max(-load[t, spill_buses[j]], 0.0)
            add([(idx("spill", t, j), 1.0), (idx("p", t, gens), -1.0)], -np.inf, injection)

    A = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(lo), nv)
    )
    lower, upper = np.zeros(nv), np.full(nv, np.inf)
    integrality = np.zeros(nv)
    for name in ("u", "v", "w"):
        block = slice(offset[name], offset[name] + T * G)
        upper[block], integrality[block] = 1.0, 1
    upper[offset["s"] : offset["s"] + T * G * K] = np.tile(np.repeat(width, K), T)
    upper[offset["shed"] : offset["shed"] + T * S] = load[:, shed_buses].ravel()

    c2, c1, c0 = poly.T
    edges = pmin[:, None] + width[:, None] * np.arange(K + 1)  # (G, K + 1)
    slope = c1[:, None] + c2[:, None] * (edges[:, :-1] + edges[:, 1:])  # secants (G, K)
    at_pmin = c2 * pmin**2 + c1 * pmin + c0 + f(units.no_load_cost)
    objective = np.zeros(nv)
    objective[offset["u"] : offset["u"] + T * G] = np.tile(at_pmin * dt_h, T)
    objective[offset["v"] : offset["v"] + T * G] = np.tile(f(units.startup_cost), T)
    objective[offset["s"] : offset["s"] + T * G * K] = np.tile(slope.ravel() * dt_h, T)
    objective[offset["shed"] : offset["shed"] + T * S] = voll * dt_h
    objective[offset["spill"] : offset["spill"] + T * P] = spill_price * dt_h
    objective[offset["short"] : offset["short"] + T] = reserve_shortfall_price * dt_h

    if warm_start is not None:  # u, v, w of the given commitment; HiGHS completes the rest
        u_ws = np.asarray(warm_start, float)
        change = np.diff(np.vstack([np.ones((1, G)), u_ws]), axis=0)
        hint = np.concatenate(
            [u_ws.ravel(), np.maximum(change, 0).ravel(), np.maximum(-change, 0).ravel()]
        )
        warm_start = (np.arange(offset["u"], offset["u"] + 3 * T * G), hint)
    x, gap = _solve_milp(
        objective,
        A,
        np.asarray(lo),
        np.asarray(hi),
        lower,
        upper,
        integrality,
        warm_start,
        time_limit_s,
        mip_rel_gap,
        heuristic_effort,
    )

    def block(name, n):
        return x[offset[name] : offset[name] + T * n].reshape(T, n)

    status = block("u", G) > 0.5
    pg = np.where(status, block("p", G), 0.0)
    shed = np.zeros((T, B))
    shed[:, shed_buses] = block("shed", S)
    spill = np.zeros((T, B))
    spill[:, spill_buses] = block("spill", P)
    shortfall = block("short", 1)[:, 0]
    starts = block("v", G) > 0.5
    generation = np.where(status, c2 * pg**2 + c1 * pg + c0 + f(units.no_load_cost), 0.0)
    total = (
        dt_h * generation.sum()
        + f(units.startup_cost) @ starts.sum(axis=0)
        + dt_h
        * (
            voll * shed.sum()
            + spill_price * spill.sum()
            + reserve_shortfall_price * shortfall.sum()
        )
    )
    return DaySchedule(
        total_cost=float(total),
        status=status,
        pg_mw=pg,
        shed_mw=shed,
        spill_mw=spill,
        reserve_shortfall_mw=shortfall,
        net_load_mw=demand,
        p0_mw=p0,
        mip_gap=gap,
    )


def day_oracle(env, params, start: int, **options) -> DaySchedule:
    """The optimal day of ``env`` from profile row ``start`` (the environment's rules,
    initial state, monitored branches and prices); ``options`` go to
    :func:`unit_commitment_milp`."""
    units = jax.tree_util.tree_map(np.asarray, params.units)
    rows = jnp.asarray(start + np.arange(env.horizon))
    demand = np.asarray(net_load(rows, params).net_load_mw, float)
    pmin, pmax = np.asarray(units.pmin_mw, float), np.asarray(units.pmax_mw, float)
    p0 = np.clip(demand[0] / pmax.sum() * pmax, pmin, pmax)
    d = params.dispatch
    return unit_commitment_milp(
        env.network,
        units,
        demand,
        np.asarray(params.load_share),
        np.asarray(params.rate_mva),
        env.monitored,
        p0,
        reserve_margin=float(params.reserve_margin),
        voll=float(d.voll),
        spill_price=float(d.spill_price),
        reserve_shortfall_price=float(d.reserve_shortfall_price),
        dt_h=float(params.dt_h),
        **options,
    )


def _solve_milp(
    c, A, row_lo, row_hi, col_lo, col_hi, integrality, warm_start, time_limit_s, gap, effort
):
    """``min c x`` s.t. ``row_lo <= A x <= row_hi``, ``col_lo <= x <= col_hi``, integer where
    ``integrality``, by HiGHS through ``highspy`` (``scipy.optimize.milp`` takes no starting
    solution); ``warm_start`` is ``(columns, values)`` of a partial solution or ``None``.
    Returns ``x`` and the relative gap proved."""
    import highspy

    A = sp.csc_matrix(A)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = c, col_lo, col_hi
    lp.row_lower_, lp.row_upper_ = row_lo, row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    lp.integrality_ = [
        highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
        for i in integrality
    ]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", gap)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_heuristic_effort", float(effort))
    h.passModel(lp)
    if warm_start is not None:
        columns, values = warm_start
        h.setSolution(len(columns), np.asarray(columns, np.int32), np.asarray(values, float))
    h.run()
    solution = h.getSolution()
    if not solution.value_valid and warm_start is not None:
        # the time ran out before HiGHS completed the given commitment (its presolve
        # alone can take longer on a loaded machine): that commitment's schedule, the
        # linear program left with its integer columns fixed, an LP without time limit
        x = _completed(lp, *warm_start)
        if x is not None:
            cost, bound = float(c @ x), float(h.getInfo().mip_dual_bound)
            gap = (cost - bound) / max(abs(cost), 1e-9) if np.isfinite(bound) else np.inf
            return x, gap
    if not solution.value_valid:
        raise RuntimeError(
            f"the unit-commitment oracle found no schedule: {h.modelStatusToString(h.getModelStatus())}"
        )
    return np.asarray(solution.col_value), float(h.getInfo().mip_gap)


def _completed(lp, columns, values):
    """The solution of ``lp`` (a ``highspy.HighsLp``) with ``columns`` fixed at ``values``
    and every other column continuous, or ``None`` where that is infeasible."""
    import highspy

    fixed = highspy.HighsLp()
    fixed.num_col_, fixed.num_row_ = lp.num_col_, lp.num_row_
    fixed.col_cost_, fixed.row_lower_, fixed.row_upper_ = lp.col_cost_, lp.row_lower_, lp.row_upper_
    fixed.a_matrix_ = lp.a_matrix_
    lower, upper = np.array(lp.col_lower_, float), np.array(lp.col_upper_, float)
    lower[columns] = upper[columns] = values
    fixed.col_lower_, fixed.col_upper_ = lower, upper
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(fixed)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return np.asarray(h.getSolution().col_value)
