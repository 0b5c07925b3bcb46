"""Convert between a :class:`Feeder` and a pandapower network.

pandapower is an optional dependency (in the ``test`` extra); it is imported only here.
"""

from __future__ import annotations

import math

import numpy as np

from jaxgrid.grid.feeder import Feeder, from_branch_table

_SUPPORTED = {"bus", "line", "switch", "ext_grid", "load", "sgen", "storage", "shunt"}
_UNSUPPORTED = (
    "trafo",
    "trafo3w",
    "impedance",
    "gen",
    "ward",
    "xward",
    "dcline",
    "svc",
    "tcsc",
    "ssc",
    "vsc",
    "motor",
    "asymmetric_load",
    "asymmetric_sgen",
    "bus_dc",
    "line_dc",
    "source_dc",
    "load_dc",
)


# pandapower's columns of a load's voltage-dependent (constant impedance or current) parts
LOAD_DEPENDENCE = (
    "const_z_p_percent",
    "const_z_q_percent",
    "const_i_p_percent",
    "const_i_q_percent",
    "const_z_percent",
    "const_i_percent",
)


def _live(table):
    return table[table["in_service"].astype(bool)] if "in_service" in table else table


def from_pandapower(net) -> Feeder:
    """A :class:`Feeder` from a radial pandapower network.

    Buses are the in-service rows of ``net.bus`` in index order (``bus_ids`` keeps the
    index); branches are the in-service lines not opened by a line switch, in index
    order (``branch_ids`` = line index), then closed bus-bus switches as zero-impedance
    branches (``branch_ids`` = ``-(switch index + 1)``). Loads, static generators,
    storage (load sign convention) and shunts at each bus are summed into base loads.

    Raises:
        ValueError: an in-service element DistFlow does not model (transformer, generator,
            ...), voltage-dependent loads, not exactly one external grid, a line between
            voltage levels, or a network that is not radial.
    """
    unsupported = [
        f"{name} {list(_live(net[name]).index)[:10]}"
        for name in _UNSUPPORTED
        if name in net and len(net[name]) and len(_live(net[name]))
    ]
    if unsupported:
        raise ValueError(
            "from_pandapower supports buses, lines, switches, one ext_grid, loads, sgens, "
            f"storage and shunts; the network has in-service {', '.join(unsupported)}"
        )
    bus = _live(net.bus).sort_index()
    bus_ids = bus.index.to_numpy(np.int64)
    live_bus = set(bus_ids.tolist())
    vn_kv = bus["vn_kv"].to_numpy(float)
    kv_of = dict(zip(bus_ids.tolist(), vn_kv))

    ext = _live(net.ext_grid)
    ext = ext[ext["bus"].isin(live_bus)]
    if len(ext) != 1:
        raise ValueError(f"a radial feeder needs exactly one in-service ext_grid, found {len(ext)}")
    slack_bus = int(ext["bus"].iloc[0])
    slack = int(np.flatnonzero(bus_ids == slack_bus)[0])

    switch = net.switch
    opened_lines = set(switch[(switch["et"] == "l") & ~switch["closed"].astype(bool)]["element"])
    line = _live(net.line).sort_index()
    line = line[
        ~line.index.isin(opened_lines)
        & line["from_bus"].isin(live_bus)
        & line["to_bus"].isin(live_bus)
    ]
    f_kv = line["from_bus"].map(kv_of).to_numpy(float)
    t_kv = line["to_bus"].map(kv_of).to_numpy(float)
    if np.any(f_kv != t_kv):
        bad = line.index[f_kv != t_kv].tolist()
        raise ValueError(f"lines {bad} connect buses of different voltage levels")
    if len(line) and np.any(line["g_us_per_km"].to_numpy(float) != 0):
        raise ValueError("lines with shunt conductance (g_us_per_km != 0) are not supported")
    length = line["length_km"].to_numpy(float) / line["parallel"].to_numpy(float)
    z_base = f_kv**2 / net.sn_mva
    r_pu = line["r_ohm_per_km"].to_numpy(float) * length / z_base
    x_pu = line["x_ohm_per_km"].to_numpy(float) * length / z_base
    b_siemens = (
        2
        * math.pi
        * net.f_hz
        * line["c_nf_per_km"].to_numpy(float)
        * 1e-9
        * line["length_km"].to_numpy(float)
        * line["parallel"].to_numpy(float)
    )
    rate_mva = (
        line["max_i_ka"].to_numpy(float)
        * line["df"].to_numpy(float)
        * line["parallel"].to_numpy(float)
        * f_kv
        * math.sqrt(3)
    )
    bus_switch = switch[(switch["et"] == "b") & switch["closed"].astype(bool)]
    bus_switch = bus_switch[bus_switch["bus"].isin(live_bus) & bus_switch["element"].isin(live_bus)]
    n_sw = len(bus_switch)

    n_bus = len(bus_ids)
    index_of = {b: i for i, b in enumerate(bus_ids.tolist())}
    p = np.zeros(n_bus)
    q = np.zeros(n_bus)
    gs = np.zeros(n_bus)
    bs = np.zeros(n_bus)

    def add(table, sign):
        table = _live(table)
        table = table[table["bus"].isin(live_bus)]
        scale = table["scaling"].to_numpy(float) if "scaling" in table else 1.0
        rows = [index_of[b] for b in table["bus"]]
        np.add.at(p, rows, sign * table["p_mw"].to_numpy(float) * scale)
        np.add.at(q, rows, sign * table["q_mvar"].to_numpy(float) * scale)

    if "load" in net and len(net.load):
        load = _live(net.load)
        dependent = [
            c
            for c in LOAD_DEPENDENCE
            if c in load and np.any(load[c].fillna(0).to_numpy(float) != 0)
        ]
        if dependent:
            raise ValueError(f"voltage-dependent loads ({', '.join(dependent)}) are not supported")
        add(net.load, +1.0)
    if "sgen" in net and len(net.sgen):
        add(net.sgen, -1.0)
    if "storage" in net and len(net.storage):
        add(net.storage, +1.0)
    if "shunt" in net and len(net.shunt):
        shunt = _live(net.shunt)
        shunt = shunt[shunt["bus"].isin(live_bus)]
        rows = [index_of[b] for b in shunt["bus"]]
        factor = (
            shunt["step"].to_numpy(float)
            * (shunt["bus"].map(kv_of).to_numpy(float) / shunt["vn_kv"].to_numpy(float)) ** 2
        )
        np.add.at(gs, rows, shunt["p_mw"].to_numpy(float) * factor)
        np.add.at(bs, rows, -shunt["q_mvar"].to_numpy(float) * factor)

    limits = {}
    for name, column, default in (("vmin_pu", "min_vm_pu", 0.95), ("vmax_pu", "max_vm_pu", 1.05)):
        col = bus[column].to_numpy(float) if column in bus else np.full(n_bus, default)
        limits[name] = np.where(np.isnan(col), default, col)

    return from_branch_table(
        from_bus=np.concatenate(
            [line["from_bus"].to_numpy(np.int64), bus_switch["bus"].to_numpy(np.int64)]
        ),
        to_bus=np.concatenate(
            [line["to_bus"].to_numpy(np.int64), bus_switch["element"].to_numpy(np.int64)]
        ),
        r_pu=np.concatenate([r_pu, np.zeros(n_sw)]),
        x_pu=np.concatenate([x_pu, np.zeros(n_sw)]),
        b_pu=np.concatenate([b_siemens * z_base, np.zeros(n_sw)]),
        rate_mva=np.concatenate([rate_mva, np.full(n_sw, np.inf)]),
        branch_ids=np.concatenate(
            [line.index.to_numpy(np.int64), -(bus_switch.index.to_numpy(np.int64) + 1)]
        ),
        base_mva=float(net.sn_mva),
        base_kv=vn_kv,
        bus_ids=bus_ids,
        slack=slack,
        p_load_mw=p,
        q_load_mvar=q,
        gs_mw=gs,
        bs_mvar=bs,
        vm_slack_pu=float(ext["vm_pu"].iloc[0]),
        **limits,
    )


def to_pandapower(feeder: Feeder, p_mw=None, q_mvar=None, f_hz: float = 50.0):
    """A pandapower network of ``feeder`` with loads ``p_mw``, ``q_mvar`` (default: base loads).

    Buses keep ``bus_ids`` as their index; a branch within one voltage level becomes a
    1 km line, a branch between levels an ``impedance`` element; each bus gets one load
    and, where it has one, one shunt.
    """
    import pandapower as pp

    p_mw = np.asarray(feeder.p_load_mw if p_mw is None else p_mw, float)
    q_mvar = np.asarray(feeder.q_load_mvar if q_mvar is None else q_mvar, float)
    base_mva = float(feeder.base_mva)
    bus_ids = np.asarray(feeder.bus_ids)
    base_kv = np.asarray(feeder.base_kv, float)
    net = pp.create_empty_network(sn_mva=base_mva, f_hz=f_hz)
    for i, bus_id in enumerate(bus_ids):
        pp.create_bus(
            net,
            vn_kv=base_kv[i],
            index=int(bus_id),
            name=str(bus_id),
            min_vm_pu=float(feeder.vmin_pu[i]),
            max_vm_pu=float(feeder.vmax_pu[i]),
        )
    pp.create_ext_grid(net, bus=int(bus_ids[int(feeder.slack)]), vm_pu=float(feeder.vm_slack_pu))
    for k in range(feeder.n_branch):
        f, t = int(feeder.branch_from[k]), int(feeder.branch_to[k])
        r, x, b = float(feeder.r_pu[k]), float(feeder.x_pu[k]), float(feeder.b_pu[k])
        if base_kv[f] == base_kv[t]:
            z_base = base_kv[f] ** 2 / base_mva
            rate = float(feeder.rate_mva[k])
            pp.create_line_from_parameters(
                net,
                from_bus=int(bus_ids[f]),
                to_bus=int(bus_ids[t]),
                length_km=1.0,
                r_ohm_per_km=r * z_base,
                x_ohm_per_km=x * z_base,
                c_nf_per_km=b / z_base / (2 * math.pi * f_hz) * 1e9,
                max_i_ka=rate / (math.sqrt(3) * base_kv[f]) if math.isfinite(rate) else 99999.0,
            )
        else:
            pp.create_impedance(
                net,
                from_bus=int(bus_ids[f]),
                to_bus=int(bus_ids[t]),
                rft_pu=r,
                xft_pu=x,
                sn_mva=base_mva,
            )
    for i, bus_id in enumerate(bus_ids):
        if p_mw[i] != 0 or q_mvar[i] != 0:
            pp.create_load(net, bus=int(bus_id), p_mw=float(p_mw[i]), q_mvar=float(q_mvar[i]))
        gs, bs = float(feeder.gs_mw[i]), float(feeder.bs_mvar[i])
        if gs != 0 or bs != 0:
            pp.create_shunt(net, bus=int(bus_id), p_mw=gs, q_mvar=-bs, vn_kv=base_kv[i])
    return net
