"""Read a pandapower network into a meshed :class:`Network`.

pandapower's own conversion (``pandapower/build_branch.py``, ``build_bus.py``,
``build_gen.py``), applied as ``pandapower.runpp`` applies it with its defaults, except
that an open line or transformer switch takes the branch out of service (``runpp``'s
``neglect_open_switch_branches=True``; by default pandapower leaves the line hanging
from its other end, charging included):

- **Buses**: the rows of ``net.bus`` in table order, ``bus_ids`` = the index (which may
  be non-consecutive). Buses joined by a closed bus-bus switch (``z_ohm`` 0) are fused into
  one, numbered by a bus of the group with an ext_grid, else one with a gen, else the
  group's first bus; limits are the tightest of the group. A bus out of service, or in
  service but with no path of in-service branches to a slack, is ``ISOLATED``. Base
  power ``base_mva`` = ``net.sn_mva``; base voltages ``vn_kv``.
- **Branches**: ``net.line`` rows, then ``net.trafo`` rows, then closed bus-bus switches
  with ``z_ohm > 0`` (impedance ``z_ohm`` at R/X = ``switch_rx_ratio``, as pandapower), in
  table order. A branch is in service when it is, its buses are, and no open switch sits
  at either end. Lines: ``r, x`` in ohm/km × length / parallel systems; charging
  ``b = 2π f c_nf_per_km`` × length × parallel; rating ``√3 vn max_i_ka df parallel``.
  Two-winding transformers: ``vk/vkr`` on the rated power and the low-voltage side, the
  magnetising admittance from ``pfe_kw`` and ``i0_percent``, the tap changer(s) (``tap``
  and ``tap2``: ``Ratio`` and ``Symmetrical`` in magnitude and angle, ``Ideal`` phase
  shifters) on the side the data names, then the T model turned into a pi
  (``trafo_model="t"``, pandapower's default) or the pi model as it is; the whole
  off-nominal ratio and phase shift sit on the high-voltage (from) side, as in
  pandapower's and MATPOWER's branch model; rating ``sn_mva df parallel``. Ratings are
  scaled by ``max_loading_percent`` where the table has it.
- **Shunt conductance**: a :class:`Network` branch carries a charging susceptance only,
  so line conductance (``g_us_per_km``) and a transformer's magnetising conductance (with
  any asymmetric part of a T model's shunts) become bus shunts at the branch's ends, on
  the same base (at the from end divided by the squared ratio, as in the branch
  admittance). Y_bus is unchanged; switching such a branch off in the Network later
  leaves these shunts (core losses, a few kW per MVA) behind.
- **Injections**: loads, storage (load sign) and static generators (as negative loads:
  fixed PQ injections, ``controllable`` or not), each times its ``scaling``, summed per
  bus into ``pd_mw`` and ``qd_mvar``; shunts ``p_mw`` and ``-q_mvar`` times ``step`` and
  ``(vn_bus / vn_kv)²`` into ``gs_mw`` and ``bs_mvar``. Elements out of service or at an
  out-of-service bus are left out.
- **Generators**: ``net.ext_grid`` rows (slack, ``vm_pu``, ``va_degree``), then
  ``net.gen`` rows (PV, or slack where ``slack`` is True), with ``p_mw × scaling``, the
  ``min/max_p_mw`` and ``min/max_q_mvar`` limits (``inf`` where missing), ``pmin = pmax``
  for a gen that is not ``controllable``; costs from ``net.poly_cost`` (active power
  coefficients; reactive ones are not read) or ``net.pwl_cost`` (breakpoint costs as
  pandapower's OPF builds them), zero where a generator has none.
- **Starting point**: ``vm_pu`` 1 except the setpoints of slack and PV buses; ``va_deg``
  the slack's angle carried across transformers' phase shifts. Results (``res_*``) are
  not read and controllers (``net.controller``) are not run.

Refused, with one ``ValueError`` that names every table and row: elements the Network
cannot hold (``trafo3w``, ``impedance``, ``dcline``, ``ward``, ``xward``, ``motor``,
asymmetric loads and sgens, FACTS devices, DC grids, ...) whether in service or not (the
Network keeps out-of-service elements so that switching one on is a parameter change),
storage with reactive power, voltage-dependent loads (``const_z``/``const_i`` parts:
set them to 0 for a constant-power load), tap-dependent transformer impedances and
step-dependent shunts (characteristic tables), and costs on elements that are not
generators here (sgens, loads, storage).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from jaxgrid.grid.network import ISOLATED, PIECEWISE_LINEAR, POLYNOMIAL, PQ, PV, REF, Network
from jaxgrid.grid.pandapower_io import LOAD_DEPENDENCE, _live
from jaxgrid.grid.topology import _names

_SUPPORTED = {
    "bus",
    "line",
    "trafo",
    "switch",
    "ext_grid",
    "gen",
    "load",
    "sgen",
    "storage",
    "shunt",
}
_NOT_ELEMENTS = {"measurement", "poly_cost", "pwl_cost", "controller", "group"}


def network_from_pandapower(
    net, *, trafo_model: str = "t", switch_rx_ratio: float = 2.0
) -> Network:
    """A :class:`Network` of the pandapower network ``net`` (see the module docstring).

    Args:
        net: a ``pandapowerNet``; read, never changed.
        trafo_model: ``"t"`` (pandapower's default) or ``"pi"``, as ``runpp``'s
            ``trafo_model``.
        switch_rx_ratio: R/X of closed bus-bus switches with ``z_ohm > 0``, as ``runpp``'s.

    Returns:
        The Network, impedances in pu on ``net.sn_mva`` and each bus's ``vn_kv``, powers in
        MW and Mvar (loads positive = consumption, sgens subtracted), angles in degrees,
        costs in the currency of ``net.poly_cost`` / ``net.pwl_cost`` per hour.

    Raises:
        ValueError: one error naming every unsupported table with its rows, and every
            refused feature (see the module docstring); or no in-service slack.
    """
    if trafo_model not in ("t", "pi"):
        raise ValueError(f"trafo_model must be 't' or 'pi', not {trafo_model!r}")
    _refuse(net)
    sn_mva = float(net.sn_mva)
    bus = net.bus
    bus_index = bus.index
    n_pp = len(bus)
    if n_pp and (
        bus_index.min() < np.iinfo(np.int32).min or bus_index.max() > np.iinfo(np.int32).max
    ):
        raise ValueError("net.bus indices do not fit in int32")
    bus_on = bus["in_service"].to_numpy(bool)
    vn_pp = bus["vn_kv"].to_numpy(float)

    def pos(table: str, column: str) -> np.ndarray:
        """Positions in net.bus of ``net[table][column]``."""
        where = bus_index.get_indexer(net[table][column].to_numpy())
        if np.any(where < 0):
            bad = net[table].index[where < 0].tolist()
            raise ValueError(f"net.{table} rows {bad}: {column} is not a bus of net.bus")
        return where

    ext, gen = net.ext_grid, net.gen
    ext_pos, gen_pos = pos("ext_grid", "bus"), pos("gen", "bus")
    ext_on = ext["in_service"].to_numpy(bool) & bus_on[ext_pos]
    gen_on = gen["in_service"].to_numpy(bool) & bus_on[gen_pos]
    gen_slack = gen["slack"].to_numpy(bool) if "slack" in gen else np.zeros(len(gen), bool)

    # Fuse buses joined by closed bus-bus switches without impedance.
    switch = net.switch
    closed = switch["closed"].to_numpy(bool)
    et = switch["et"].to_numpy(object)
    z_ohm = np.nan_to_num(_col(switch, "z_ohm", 0.0))
    is_bb = et == "b"
    sw_a = np.full(len(switch), -1)
    sw_b = np.full(len(switch), -1)
    if is_bb.any():
        sw_a[is_bb] = bus_index.get_indexer(switch["bus"].to_numpy()[is_bb])
        sw_b[is_bb] = bus_index.get_indexer(switch["element"].to_numpy()[is_bb])
        if np.any(sw_a[is_bb] < 0) or np.any(sw_b[is_bb] < 0):
            bad = switch.index[is_bb & ((sw_a < 0) | (sw_b < 0))].tolist()
            raise ValueError(f"net.switch rows {bad}: a bus-bus switch names a bus not in net.bus")
    live_bb = is_bb & closed
    live_bb[is_bb] &= bus_on[sw_a[is_bb]] & bus_on[sw_b[is_bb]]
    fuse = live_bb & (z_ohm <= 0)
    graph = coo_matrix((np.ones(fuse.sum()), (sw_a[fuse], sw_b[fuse])), shape=(n_pp, n_pp))
    _, group = connected_components(graph, directed=False)
    priority = np.full(n_pp, 2)
    priority[gen_pos[gen_on]] = 1
    priority[ext_pos[ext_on]] = 0
    first = {}
    for i in np.lexsort((np.arange(n_pp), priority)):
        first.setdefault(group[i], i)
    rep = np.array([first[group[i]] for i in range(n_pp)], dtype=np.int64)
    keep = rep == np.arange(n_pp)
    row = (np.cumsum(keep) - 1)[rep]  # Network row of every net.bus position
    n_bus = int(keep.sum())
    kv = vn_pp[rep]  # base voltage pandapower uses at each bus (the fused bus's)
    row_on = bus_on[keep]

    # Branches.
    opened = {
        kind: set(switch["element"].to_numpy()[(et == kind) & ~closed].tolist())
        for kind in ("l", "t")
    }
    gs = np.zeros(n_bus)
    bs = np.zeros(n_bus)

    line = net.line
    lf, lt = pos("line", "from_bus"), pos("line", "to_bus")
    length = line["length_km"].to_numpy(float)
    parallel = line["parallel"].to_numpy(float)
    base_r = kv[lf] ** 2 / sn_mva
    line_r = line["r_ohm_per_km"].to_numpy(float) * length / base_r / parallel
    line_x = line["x_ohm_per_km"].to_numpy(float) * length / base_r / parallel
    line_b = 2 * net.f_hz * math.pi * line["c_nf_per_km"].to_numpy(float) * 1e-9
    line_b = line_b * base_r * length * parallel
    line_g = _col(line, "g_us_per_km", 0.0) * 1e-6 * base_r * length * parallel
    line_on = (
        line["in_service"].to_numpy(bool)
        & bus_on[lf]
        & bus_on[lt]
        & ~line.index.isin(list(opened["l"]))
    )
    line_rate = (
        math.sqrt(3)
        * vn_pp[lf]
        * line["max_i_ka"].to_numpy(float)
        * _col(line, "df", 1.0)
        * parallel
        * _loading(line)
    )
    np.add.at(gs, row[lf[line_on]], sn_mva * line_g[line_on] / 2)
    np.add.at(gs, row[lt[line_on]], sn_mva * line_g[line_on] / 2)

    trafo = net.trafo
    hv, lv = pos("trafo", "hv_bus"), pos("trafo", "lv_bus")
    tr_r, tr_x, tr_g, tr_b, g_asym, b_asym, ratio, shift = _trafo_pi(
        trafo, kv[hv], kv[lv], sn_mva, trafo_model
    )
    tr_on = (
        trafo["in_service"].to_numpy(bool)
        & bus_on[hv]
        & bus_on[lv]
        & ~trafo.index.isin(list(opened["t"]))
    )
    tr_rate = (
        trafo["sn_mva"].to_numpy(float)
        * _col(trafo, "df", 1.0)
        * trafo["parallel"].to_numpy(float)
        * _loading(trafo)
    )
    np.add.at(gs, row[hv[tr_on]], sn_mva * tr_g[tr_on] / 2 / ratio[tr_on] ** 2)
    np.add.at(gs, row[lv[tr_on]], sn_mva * (tr_g + g_asym)[tr_on] / 2)
    np.add.at(bs, row[lv[tr_on]], sn_mva * b_asym[tr_on] / 2)

    sw_branch = is_bb & (z_ohm > 0)
    sw_f, sw_t = sw_a[sw_branch], sw_b[sw_branch]
    z_pu = z_ohm[sw_branch] / (kv[sw_f] ** 2 / sn_mva)
    sw_r = z_pu * switch_rx_ratio / math.sqrt(1 + switch_rx_ratio**2)
    sw_x = z_pu / math.sqrt(1 + switch_rx_ratio**2)
    n_sw = int(sw_branch.sum())

    branch_from = row[np.concatenate([lf, hv, sw_f])].astype(np.int32)
    branch_to = row[np.concatenate([lt, lv, sw_t])].astype(np.int32)
    branch_on = np.concatenate([line_on, tr_on, live_bb[sw_branch]])
    n_line, n_trafo = len(line), len(trafo)
    shift_deg = np.concatenate([np.zeros(n_line), shift, np.zeros(n_sw)])
    tap = np.concatenate([np.ones(n_line), ratio, np.ones(n_sw)])

    # Injections at buses.
    pd_mw = np.zeros(n_bus)
    qd_mvar = np.zeros(n_bus)
    for table, sign in (("load", 1.0), ("storage", 1.0), ("sgen", -1.0)):
        if table not in net or not len(net[table]):
            continue
        where = pos(table, "bus")
        on = net[table]["in_service"].to_numpy(bool) & bus_on[where]
        scale = _col(net[table], "scaling", 1.0)
        np.add.at(pd_mw, row[where[on]], sign * (net[table]["p_mw"].to_numpy(float) * scale)[on])
        np.add.at(qd_mvar, row[where[on]], sign * (_col(net[table], "q_mvar", 0.0) * scale)[on])
    if "shunt" in net and len(net.shunt):
        shunt = net.shunt
        where = pos("shunt", "bus")
        on = shunt["in_service"].to_numpy(bool) & bus_on[where]
        vn = _col(shunt, "vn_kv", np.nan)
        vn = np.where(np.isnan(vn), vn_pp[where], vn)
        factor = _col(shunt, "step", 1.0) * (kv[where] / vn) ** 2
        np.add.at(gs, row[where[on]], (shunt["p_mw"].to_numpy(float) * factor)[on])
        np.add.at(bs, row[where[on]], -(shunt["q_mvar"].to_numpy(float) * factor)[on])

    # Generators: ext_grids, then gens.
    n_ext = len(ext)
    gen_bus = row[np.concatenate([ext_pos, gen_pos])].astype(np.int32)
    pg = np.concatenate([np.zeros(n_ext), gen["p_mw"].to_numpy(float) * _col(gen, "scaling", 1.0)])
    pmin = np.concatenate([_col(ext, "min_p_mw", -np.inf), _col(gen, "min_p_mw", -np.inf)])
    pmax = np.concatenate([_col(ext, "max_p_mw", np.inf), _col(gen, "max_p_mw", np.inf)])
    fixed = np.concatenate([np.zeros(n_ext, bool), ~_col(gen, "controllable", 1.0).astype(bool)])
    pmin, pmax = np.where(fixed, pg, pmin), np.where(fixed, pg, pmax)
    qmin = np.concatenate([_col(ext, "min_q_mvar", -np.inf), _col(gen, "min_q_mvar", -np.inf)])
    qmax = np.concatenate([_col(ext, "max_q_mvar", np.inf), _col(gen, "max_q_mvar", np.inf)])
    vg = np.concatenate([ext["vm_pu"].to_numpy(float), gen["vm_pu"].to_numpy(float)])
    unit_on = np.concatenate([ext_on, gen_on])
    slack_unit = np.concatenate([np.ones(n_ext, bool), gen_slack]) & unit_on

    bus_type = np.full(n_bus, PQ, np.int32)
    bus_type[gen_bus[unit_on & ~slack_unit]] = PV
    bus_type[gen_bus[slack_unit]] = REF
    if not slack_unit.any():
        raise ValueError("no in-service ext_grid or slack gen at an in-service bus")
    live = np.zeros(n_bus, bool)
    branches = coo_matrix(
        (np.ones(branch_on.sum()), (branch_from[branch_on], branch_to[branch_on])),
        shape=(n_bus, n_bus),
    )
    _, island = connected_components(branches, directed=False)
    live[np.isin(island, island[bus_type == REF])] = True
    bus_type[~(live & row_on)] = ISOLATED
    unit_on &= bus_type[gen_bus] != ISOLATED

    vm = np.ones(n_bus)
    for order in (unit_on & ~slack_unit, slack_unit):  # slack setpoints win
        vm[gen_bus[order]] = vg[order]
    va_slack = np.concatenate([_col(ext, "va_degree", 0.0), np.zeros(len(gen))])
    va = _angles(n_bus, branch_from, branch_to, shift_deg, branch_on, gen_bus, va_slack, slack_unit)

    vmin = _col(bus, "min_vm_pu", 0.0)
    vmax = _col(bus, "max_vm_pu", np.inf)
    vmin_row = np.zeros(n_bus)
    vmax_row = np.full(n_bus, np.inf)
    np.maximum.at(vmin_row, row, vmin)
    np.minimum.at(vmax_row, row, vmax)

    model, poly, pwl_mw, pwl_cost = _costs(net, n_ext, len(gen))
    n_branch = n_line + n_trafo + n_sw
    return Network(
        base_mva=np.asarray(sn_mva, np.float64),
        bus_ids=bus_index.to_numpy()[keep].astype(np.int32),
        bus_type=bus_type,
        base_kv=vn_pp[keep].astype(np.float64),
        pd_mw=pd_mw,
        qd_mvar=qd_mvar,
        gs_mw=gs,
        bs_mvar=bs,
        vm_pu=vm,
        va_deg=va,
        vmin_pu=vmin_row,
        vmax_pu=vmax_row,
        branch_from=branch_from,
        branch_to=branch_to,
        r_pu=np.concatenate([line_r, tr_r, sw_r]).astype(np.float64),
        x_pu=np.concatenate([line_x, tr_x, sw_x]).astype(np.float64),
        b_pu=np.concatenate([line_b, tr_b, np.zeros(n_sw)]).astype(np.float64),
        rate_mva=np.concatenate([line_rate, tr_rate, np.full(n_sw, np.inf)]).astype(np.float64),
        tap=tap.astype(np.float64),
        shift_deg=shift_deg.astype(np.float64),
        branch_in_service=branch_on.astype(bool),
        angmin_deg=np.full(n_branch, -np.inf),
        angmax_deg=np.full(n_branch, np.inf),
        gen_bus=gen_bus,
        pg_mw=pg,
        qg_mvar=np.zeros(len(pg)),
        pmin_mw=pmin,
        pmax_mw=pmax,
        qmin_mvar=qmin,
        qmax_mvar=qmax,
        vg_pu=vg,
        gen_in_service=unit_on,
        cost_model=model,
        cost_poly=poly,
        cost_pwl_mw=pwl_mw,
        cost_pwl_cost=pwl_cost,
        startup_cost=np.zeros(len(pg)),
        shutdown_cost=np.zeros(len(pg)),
    )


def _col(table, column: str, default: float) -> np.ndarray:
    """``table[column]`` as floats, ``default`` where missing (no column, NaN or None)."""
    import pandas as pd  # a pandapower network brings pandas; jaxgrid itself does not need it

    if column not in table:
        return np.full(len(table), default, dtype=float)
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(float, na_value=np.nan)
    return np.where(np.isnan(values), default, values)


def _text(table, column: str) -> np.ndarray:
    """``table[column]`` as strings, ``""`` where missing."""
    import pandas as pd

    if column not in table:
        return np.full(len(table), "", dtype=object)
    return np.array(["" if pd.isna(v) else str(v) for v in table[column]], dtype=object)


def _listed(index) -> str:
    """``[a, b, ...]``: the first rows of ``index``, and how many more."""
    rows = list(index)
    return f"[{_names(rows, range(len(rows)))}]"


def _loading(table) -> np.ndarray:
    """``max_loading_percent / 100`` where given, else 1."""
    return _col(table, "max_loading_percent", 100.0) / 100.0


def _refuse(net) -> None:
    """One ValueError listing everything this reader does not model."""
    import pandas as pd

    problems = []
    for name in net.keys():
        table = net[name]
        if (
            name.startswith(("_", "res_"))
            or name in _SUPPORTED
            or name in _NOT_ELEMENTS
            or not isinstance(table, pd.DataFrame)
            or not len(table)
        ):
            continue
        if name == "bus_dc" or any("bus" in str(c) for c in table.columns):
            problems.append(f"{name} {_listed(table.index)}")
    if "storage" in net and len(net.storage):
        reactive = net.storage.index[_col(net.storage, "q_mvar", 0.0) != 0]
        if len(reactive):
            problems.append(f"storage with reactive power {_listed(reactive)}")
    if "load" in net and len(net.load):
        load = _live(net.load)
        dependent = np.zeros(len(load), bool)
        for column in LOAD_DEPENDENCE:
            dependent |= _col(load, column, 0.0) != 0
        if dependent.any():
            rows = list(load.index[dependent])
            problems.append(
                f"voltage-dependent loads {_listed(rows)} (const_z/const_i "
                "parts; set them to 0 for constant-power loads)"
            )
    if "trafo" in net and len(net.trafo):
        table = _col(net.trafo, "tap_dependency_table", 0.0) != 0
        table |= _col(net.trafo, "tap_dependent_impedance", 0.0) != 0  # pandapower < 3
        if table.any():
            rows = list(net.trafo.index[table])
            problems.append(
                f"trafo {_listed(rows)} with tap-dependent impedance (tap_dependency_table)"
            )
        for t in ("", "2"):
            ideal = _text(net.trafo, f"tap{t}_changer_type") == "Ideal"
            both = (np.nan_to_num(_col(net.trafo, f"tap{t}_step_degree", 0.0)) != 0) & (
                np.nan_to_num(_col(net.trafo, f"tap{t}_step_percent", 0.0)) != 0
            )
            if np.any(ideal & both):
                rows = list(net.trafo.index[ideal & both])
                problems.append(
                    f"trafo {_listed(rows)}: an ideal phase shifter with both "
                    f"tap{t}_step_degree and tap{t}_step_percent"
                )
    if "shunt" in net and len(net.shunt):
        stepped = _col(net.shunt, "step_dependency_table", 0.0) != 0
        if stepped.any():
            rows = list(net.shunt.index[stepped])
            problems.append(
                f"shunt {_listed(rows)} with step-dependent values (step_dependency_table)"
            )
    for cost_table in ("poly_cost", "pwl_cost"):
        if cost_table not in net or not len(net[cost_table]):
            continue
        costs = net[cost_table]
        other = ~costs["et"].isin(["gen", "ext_grid"]).to_numpy()
        if cost_table == "pwl_cost":
            other &= costs["power_type"].to_numpy() == "p"
        if other.any():
            rows = list(costs.index[other])
            problems.append(
                f"{cost_table} {_listed(rows)} on elements other than gen and "
                "ext_grid (sgens, loads and storage are fixed injections here)"
            )
    if problems:
        raise ValueError(
            "network_from_pandapower reads buses, lines, two-winding trafos, switches, "
            "ext_grids, gens, loads, sgens, storage without reactive power and shunts; "
            f"the network has {'; '.join(problems)}"
        )


def _trafo_pi(trafo, kv_hv, kv_lv, sn_mva: float, trafo_model: str):
    """pandapower's pi model of two-winding transformers: ``(r, x, g, b, g_asym, b_asym,
    ratio, shift_deg)``, pu on ``sn_mva`` and the buses' base voltages ``kv_hv``, ``kv_lv``
    (``pandapower.build_branch._calc_branch_values_from_trafo_df``)."""
    vnh = trafo["vn_hv_kv"].to_numpy(float).copy()
    vnl = trafo["vn_lv_kv"].to_numpy(float).copy()
    shift = _col(trafo, "shift_degree", 0.0)
    for t in ("", "2"):
        if f"tap{t}_pos" not in trafo:
            continue
        side = _text(trafo, f"tap{t}_side")
        kind = _text(trafo, f"tap{t}_changer_type")
        if f"tap{t}_changer_type" not in trafo and f"tap{t}_phase_shifter" in trafo:
            # pandapower < 3: a phase shifter is ideal, any other tap with a step a ratio tap
            shifter = _col(trafo, f"tap{t}_phase_shifter", 0.0) != 0
            stepped = ~np.isnan(_col(trafo, f"tap{t}_step_percent", np.nan))
            stepped &= ~np.isnan(_col(trafo, f"tap{t}_pos", np.nan))
            kind = np.where(shifter, "Ideal", np.where(stepped, "Ratio", ""))
        diff = np.nan_to_num(
            _col(trafo, f"tap{t}_pos", np.nan) - _col(trafo, f"tap{t}_neutral", np.nan)
        )
        step_pct = np.nan_to_num(_col(trafo, f"tap{t}_step_percent", 0.0))
        step_deg = np.nan_to_num(_col(trafo, f"tap{t}_step_degree", 0.0))
        for name, vn, direction in (("hv", vnh, 1.0), ("lv", vnl, -1.0)):
            ideal = (kind == "Ideal") & (side == name)
            shift[ideal] += np.where(
                step_deg != 0,
                direction * diff * step_deg,
                direction * 2 * np.rad2deg(np.arcsin(diff * step_pct / 100 / 2)),
            )[ideal]
            ratio_tap = np.isin(kind, ["Ratio", "Symmetrical"]) & (side == name)
            du = vn * step_pct * diff / 100
            cos, sin = np.cos(np.deg2rad(step_deg)), np.sin(np.deg2rad(step_deg))
            shift[ratio_tap] += np.rad2deg(np.arctan(direction * du * sin / (vn + du * cos)))[
                ratio_tap
            ]
            vn[ratio_tap] = np.sqrt((vn + du * cos) ** 2 + (du * sin) ** 2)[ratio_tap]
    ratio = (vnh / vnl) / (kv_hv / kv_lv)

    parallel = trafo["parallel"].to_numpy(float)
    sn_trafo = trafo["sn_mva"].to_numpy(float)
    to_lv = (vnl / kv_lv) ** 2 * sn_mva
    z_sc = trafo["vk_percent"].to_numpy(float) / 100 / sn_trafo * to_lv
    r = trafo["vkr_percent"].to_numpy(float) / 100 / sn_trafo * to_lv
    x = np.sign(z_sc) * np.sqrt(z_sc**2 - r**2)
    r, x = r / parallel, x / parallel

    vn_lv_rated = trafo["vn_lv_kv"].to_numpy(float)
    base_z = kv_lv**2 / sn_mva
    pfe_mw = _col(trafo, "pfe_kw", 0.0) * 1e-3
    ym_mva = _col(trafo, "i0_percent", 0.0) / 100 * sn_trafo
    b_mva = -np.sqrt(np.maximum(ym_mva**2 - pfe_mw**2, 0.0))
    to_pu = base_z * parallel / vn_lv_rated**2 / (vnl / vn_lv_rated) ** 2
    g, b = pfe_mw * to_pu, b_mva * to_pu
    g_asym, b_asym = np.zeros_like(g), np.zeros_like(b)
    if trafo_model == "t":
        # pandapower.build_branch._wye_delta: the T model's star to a pi's delta.
        t = (g != 0) | (b != 0)
        r_ratio = _col(trafo, "leakage_resistance_ratio_hv", 0.5)[t]
        x_ratio = _col(trafo, "leakage_reactance_ratio_hv", 0.5)[t]
        za = r[t] * r_ratio + 1j * x[t] * x_ratio
        zb = r[t] * (1 - r_ratio) + 1j * x[t] * (1 - x_ratio)
        zc = 1 / (g[t] + 1j * b[t])
        z_sum = za * zb + za * zc + zb * zc
        z_ab, z_ac, z_bc = z_sum / zc, z_sum / zb, z_sum / za
        r[t], x[t] = z_ab.real, z_ab.imag
        y_hv, y_lv = 1 / z_ac, 1 / z_bc
        g[t], b[t] = 2 * y_hv.real, 2 * y_hv.imag
        g_asym[t], b_asym[t] = 2 * y_lv.real - g[t], 2 * y_lv.imag - b[t]
    return r, x, g, b, g_asym, b_asym, ratio, shift


def _angles(n_bus, branch_from, branch_to, shift_deg, branch_on, gen_bus, va_slack, slack_unit):
    """``(n_bus,)`` starting angles, degrees: each slack's angle, carried across in-service
    branches (a phase shift ``φ`` from ``f`` to ``t`` gives ``va_t = va_f - φ``)."""
    neighbours = [[] for _ in range(n_bus)]
    for f, t, s in zip(branch_from[branch_on], branch_to[branch_on], shift_deg[branch_on]):
        neighbours[f].append((t, -s))
        neighbours[t].append((f, s))
    va = np.zeros(n_bus)
    seen = np.zeros(n_bus, bool)
    queue = deque()
    for g in np.flatnonzero(slack_unit):
        if not seen[gen_bus[g]]:
            seen[gen_bus[g]] = True
            va[gen_bus[g]] = va_slack[g]
            queue.append(gen_bus[g])
    while queue:
        i = queue.popleft()
        for j, step in neighbours[i]:
            if not seen[j]:
                seen[j] = True
                va[j] = va[i] + step
                queue.append(j)
    return va


def _costs(net, n_ext: int, n_gen: int):
    """``(model, poly, pwl_mw, pwl_cost)`` of the ext_grids then gens, from
    ``net.poly_cost`` and ``net.pwl_cost`` (active power only; zero where none)."""
    n = n_ext + n_gen
    slot = {("ext_grid", int(e)): i for i, e in enumerate(net.ext_grid.index)} | {
        ("gen", int(g)): n_ext + i for i, g in enumerate(net.gen.index)
    }
    model = np.full(n, POLYNOMIAL, np.int32)
    poly = np.zeros((n, 3))
    priced = np.zeros(n, bool)
    problems = []

    def unit(table, index, et, element) -> int | None:
        i = slot.get((str(et), int(element)))
        if i is None:
            problems.append(f"net.{table} row {index}: {et} {element} does not exist")
        elif priced[i]:
            problems.append(f"net.{table} row {index}: {et} {element} already has a cost")
        else:
            priced[i] = True
        return i

    if "poly_cost" in net and len(net.poly_cost):
        for index, c in net.poly_cost.iterrows():
            i = unit("poly_cost", index, c["et"], c["element"])
            if i is not None:
                poly[i] = c["cp2_eur_per_mw2"], c["cp1_eur_per_mw"], c["cp0_eur"]
    curves = {}
    if "pwl_cost" in net and len(net.pwl_cost):
        for index, c in net.pwl_cost.iterrows():
            if c["power_type"] != "p":
                continue
            i = unit("pwl_cost", index, c["et"], c["element"])
            if i is None:
                continue
            points = np.asarray(c["points"], float).reshape(-1, 3)
            if len(points) == 0 or np.any(points[1:, 0] != points[:-1, 1]):
                problems.append(f"net.pwl_cost row {index}: the segments are not consecutive")
                continue
            mw = np.concatenate([points[:1, 0], points[:, 1]])
            # pandapower.opf.make_objective.costs_from_areas: the first breakpoint costs
            # lower * slope, then each segment adds its width times its slope.
            cost = np.cumsum(
                np.concatenate([points[:1, 0] * points[0, 2], np.diff(mw) * points[:, 2]])
            )
            curves[i] = (mw, cost)
            model[i] = PIECEWISE_LINEAR
    if problems:
        raise ValueError("; ".join(problems))
    n_points = max([2, *(len(mw) for mw, _ in curves.values())])
    pwl_mw = np.zeros((n, n_points))
    pwl_cost = np.zeros((n, n_points))
    for i, (mw, cost) in curves.items():
        pwl_mw[i, : len(mw)], pwl_cost[i, : len(mw)] = mw, cost
        pwl_mw[i, len(mw) :], pwl_cost[i, len(mw) :] = mw[-1], cost[-1]
    return model, poly, pwl_mw, pwl_cost
