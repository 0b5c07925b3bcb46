"""``network_from_pandapower`` against pandapower itself: Y_bus equals the Ybus that
``pandapower.runpp`` builds for its own power flow, the bus injections at pandapower's
solution reproduce ``res_bus``, loads and bus types equal pandapower's internal tables;
costs against pandapower's OPF conversion; one clear error for what is not supported."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import x64

from jaxgrid.grid.network import ISOLATED, PIECEWISE_LINEAR, PQ, PV, REF, bus_admittance
from jaxgrid.grid.network_pandapower import network_from_pandapower

pp = pytest.importorskip("pandapower")
pn = pytest.importorskip("pandapower.networks")
idx_bus = pytest.importorskip("pandapower.pypower.idx_bus")
idx_gen = pytest.importorskip("pandapower.pypower.idx_gen")


def _solve(net, **options):
    """pandapower's power flow with every phase shift, an open switch taking its branch out
    (the builder's convention), solved tightly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pp.runpp(
            net,
            **options,
            calculate_voltage_angles=True,
            neglect_open_switch_branches=True,
            numba=False,
            tolerance_mva=1e-10,
            max_iteration=30,
        )


def assert_matches_pandapower(net, **options):
    """Y_bus, injections at the solution, loads, bus types and generators against
    pandapower's internal (ppci) tables, both built with ``options``; returns the network
    and its Y_bus."""
    network = network_from_pandapower(net, **options)
    _solve(net, **options)
    internal = net._ppc["internal"]
    lookup = net._pd2ppc_lookups["bus"]  # net.bus index -> row of pandapower's Ybus
    ids = np.asarray(network.bus_ids)
    live = np.asarray(network.bus_type) != ISOLATED
    rows = lookup[ids[live]]
    expected = internal["Ybus"].toarray()
    assert sorted(rows.tolist()) == list(range(expected.shape[0]))  # the same buses, no more
    with x64():
        y = np.asarray(bus_admittance(network))
    np.testing.assert_allclose(y[np.ix_(live, live)], expected[np.ix_(rows, rows)], atol=1e-9)

    # S = V conj(Y V) at pandapower's voltages is what the buses' elements inject into the
    # branches and shunts; res_bus is their consumption, shunts (res_shunt) included.
    base = float(network.base_mva)
    vm = net.res_bus.vm_pu.loc[ids].to_numpy()
    va = np.deg2rad(net.res_bus.va_degree.loc[ids].to_numpy())
    v = np.where(live, vm * np.exp(1j * va), 0.0)
    s = v * np.conj(y @ v) * base
    consumed = net.res_bus[["p_mw", "q_mvar"]].copy()
    if len(net.shunt):
        shunts = net.res_shunt[["p_mw", "q_mvar"]].groupby(net.shunt.bus).sum()
        consumed = consumed.sub(shunts.reindex(consumed.index, fill_value=0.0))
    fused = consumed.groupby(lookup[consumed.index]).sum()  # pandapower's fused buses
    np.testing.assert_allclose(-s.real[live], fused.p_mw.loc[rows], rtol=0, atol=1e-6)
    np.testing.assert_allclose(-s.imag[live], fused.q_mvar.loc[rows], rtol=0, atol=1e-6)

    bus = internal["bus"]
    np.testing.assert_array_equal(np.asarray(network.bus_type)[live], bus[rows, idx_bus.BUS_TYPE])
    np.testing.assert_allclose(network.pd_mw[live], bus[rows, idx_bus.PD], atol=1e-12)
    np.testing.assert_allclose(network.qd_mvar[live], bus[rows, idx_bus.QD], atol=1e-12)
    gen = internal["gen"]
    on = np.asarray(network.gen_in_service)
    np.testing.assert_array_equal(lookup[ids[network.gen_bus[on]]], gen[:, idx_gen.GEN_BUS])
    np.testing.assert_allclose(network.vg_pu[on], gen[:, idx_gen.VG], atol=1e-12)
    return network, y


@pytest.mark.parametrize(
    "name", ["case9", "case14", "case30", "case57", "case118", "case300", "mv_oberrhein"]
)
def test_admittance_and_injections_are_pandapowers(name):
    net = getattr(pn, name)()
    network, _ = assert_matches_pandapower(net)
    assert network.n_bus == len(net.bus) and network.n_branch == len(net.line) + len(net.trafo)
    assert float(network.base_mva) == net.sn_mva


def test_polynomial_costs_are_the_tables():
    net = pn.case30()
    network = network_from_pandapower(net)
    pg = np.linspace(10.0, 60.0, network.n_gen)
    expected = np.zeros(network.n_gen)
    for _, c in net.poly_cost.iterrows():
        g = (
            c.element
            if c.et == "ext_grid"
            else len(net.ext_grid) + net.gen.index.get_loc(c.element)
        )
        expected[g] = c.cp2_eur_per_mw2 * pg[g] ** 2 + c.cp1_eur_per_mw * pg[g] + c.cp0_eur
    with x64():
        ours = np.asarray(network.generation_cost(jnp.asarray(pg)))
    np.testing.assert_allclose(ours, expected, rtol=1e-12)


def _multivoltage():
    """pandapower's example_multivoltage with its three-winding transformer replaced by two
    two-winding ones of its ratings and its impedance and extended wards removed."""
    net = pn.example_multivoltage()
    t3 = net.trafo3w.loc[0]
    for bus, sn, vn, vk, vkr, shift in (
        (t3.mv_bus, t3.sn_mv_mva, t3.vn_mv_kv, t3.vk_mv_percent, t3.vkr_mv_percent, 30.0),
        (t3.lv_bus, t3.sn_lv_mva, t3.vn_lv_kv, t3.vk_lv_percent, t3.vkr_lv_percent, 30.0),
    ):
        pp.create_transformer_from_parameters(
            net, t3.hv_bus, bus, sn, t3.vn_hv_kv, vn, vkr, vk, 10.0, 0.05, shift_degree=shift
        )
    for table in ("trafo3w", "impedance", "xward"):
        net[table] = net[table].iloc[0:0]
    net.switch = net.switch[net.switch.et != "t3"]
    return net


def test_example_multivoltage_has_one_error_then_matches():
    with pytest.raises(ValueError, match=r"trafo3w \[0\]; impedance \[0\]; xward \[0, 1\]"):
        network_from_pandapower(pn.example_multivoltage())
    net = _multivoltage()
    network, _ = assert_matches_pandapower(net)
    fused = net.switch[(net.switch.et == "b") & net.switch.closed]
    assert network.n_bus < len(net.bus) and len(fused)  # closed bus-bus switches fuse buses
    opened = net.switch[(net.switch.et == "l") & ~net.switch.closed].element
    assert not np.any(np.asarray(network.branch_in_service)[net.line.index.get_indexer(opened)])


def _handmade():
    """Non-consecutive bus numbers, parallel lines with conductance, an open line switch, a
    closed bus-bus switch, an out-of-service transformer (its LV bus left unfed), a 150°
    transformer with its tap on the LV side, an ideal phase shifter and a tap with an
    angle, T models split unevenly; a gen, an sgen, scaled loads, a stepped shunt,
    polynomial and piecewise costs."""
    net = pp.create_empty_network(sn_mva=50.0, f_hz=50.0)
    for index, kv in ((10, 110.0), (20, 110.0), (35, 110.0), (7, 20.0), (42, 20.0), (99, 20.0)):
        pp.create_bus(net, kv, index=index, min_vm_pu=0.9, max_vm_pu=1.1)
    pp.create_bus(net, 20.0, index=5)
    net.bus.loc[5, "max_vm_pu"] = np.nan  # no limit
    pp.create_ext_grid(net, 10, vm_pu=1.02, va_degree=5.0, min_p_mw=-500.0, max_p_mw=500.0)
    pp.create_gen(net, 20, p_mw=30.0, vm_pu=1.01, min_p_mw=5.0, max_p_mw=80.0, min_q_mvar=-40)
    line = {"r_ohm_per_km": 0.12, "x_ohm_per_km": 0.39, "c_nf_per_km": 9.5, "max_i_ka": 0.6}
    pp.create_line_from_parameters(net, 10, 20, 12.0, parallel=2, g_us_per_km=1.5, **line)
    pp.create_line_from_parameters(net, 20, 35, 20.0, max_loading_percent=80.0, **line)
    open_line = pp.create_line_from_parameters(net, 10, 35, 25.0, **line)
    pp.create_switch(net, 35, open_line, et="l", closed=False)
    pp.create_switch(net, 20, 1, et="l", closed=True)
    cable = {"r_ohm_per_km": 0.16, "x_ohm_per_km": 0.11, "c_nf_per_km": 260.0, "max_i_ka": 0.3}
    pp.create_line_from_parameters(net, 7, 42, 4.0, **cable)
    trafo = {"sn_mva": 40.0, "vn_hv_kv": 110.0, "vn_lv_kv": 20.0, "vkr_percent": 0.3}
    trafo |= {"vk_percent": 12.0, "pfe_kw": 30.0, "i0_percent": 0.1}
    pp.create_transformer_from_parameters(
        net, 35, 7, shift_degree=150.0, tap_side="lv", tap_neutral=0, tap_pos=2,
        tap_step_percent=1.5, tap_changer_type="Ratio", **trafo,
    )  # fmt: skip
    pp.create_transformer_from_parameters(net, 10, 5, in_service=False, **trafo)
    pp.create_transformer_from_parameters(
        net, 20, 42, shift_degree=150.0, tap_side="hv", tap_neutral=0, tap_pos=-2,
        tap_step_degree=1.5, tap_changer_type="Ideal", parallel=2, **trafo,
    )  # fmt: skip
    pp.create_transformer_from_parameters(
        net, 35, 42, shift_degree=150.0, tap_side="hv", tap_neutral=0, tap_pos=1,
        tap_step_percent=2.0, tap_step_degree=3.0, tap_changer_type="Symmetrical", **trafo,
    )  # fmt: skip
    net.trafo.loc[2, "vn_hv_kv"] = 115.0  # off-nominal
    net.trafo["leakage_resistance_ratio_hv"] = [0.3, 0.5, 0.5, 0.5]  # T model, asymmetric
    net.trafo["leakage_reactance_ratio_hv"] = [0.4, 0.5, 0.5, 0.8]
    pp.create_switch(net, 42, 99, et="b", closed=True)
    pp.create_switch(net, 7, 5, et="b", closed=False)
    pp.create_load(net, 99, p_mw=12.0, q_mvar=4.0, scaling=0.8)
    pp.create_load(net, 7, p_mw=20.0, q_mvar=6.0)
    pp.create_load(net, 5, p_mw=3.0, q_mvar=1.0)
    pp.create_load(net, 35, p_mw=50.0, q_mvar=9.0, in_service=False)
    pp.create_sgen(net, 42, p_mw=6.0, q_mvar=-1.0, scaling=0.5)
    pp.create_shunt(net, 7, q_mvar=-2.0, p_mw=0.05, step=2, max_step=3, vn_kv=20.5)
    pp.create_poly_cost(net, 0, "ext_grid", cp1_eur_per_mw=30.0, cp2_eur_per_mw2=0.02)
    pp.create_pwl_cost(net, 0, "gen", [[5.0, 40.0, 10.0], [40.0, 80.0, 25.0]])
    return net


def test_handmade_network_matches_pandapower_with_its_numbers_and_statuses():
    net = _handmade()
    network, _ = assert_matches_pandapower(net)
    ids = np.asarray(network.bus_ids).tolist()
    assert ids == [10, 20, 35, 7, 42, 5]  # net.bus order; 99 fused into 42
    types = dict(zip(ids, np.asarray(network.bus_type).tolist()))
    assert types == {10: REF, 20: PV, 35: PQ, 7: PQ, 42: PQ, 5: ISOLATED}
    assert np.asarray(network.branch_in_service).tolist() == [1, 1, 0, 1, 1, 0, 1, 1]
    assert float(network.pd_mw[4]) == pytest.approx(12.0 * 0.8 - 6.0 * 0.5)
    assert float(network.pd_mw[5]) == 3.0  # a load at an unfed bus stays, the bus isolated
    assert float(network.vmin_pu[4]) == 0.9 and np.isinf(network.vmax_pu[5])
    assert float(network.rate_mva[1]) == pytest.approx(0.8 * np.sqrt(3) * 110.0 * 0.6)
    assert float(network.shift_deg[6]) == pytest.approx(150.0 - 2 * 1.5)  # ideal shifter
    # the start is pandapower's solution to within the angles the loads open
    va = net.res_bus.va_degree.loc[ids].to_numpy()
    live = np.asarray(network.bus_type) != ISOLATED
    assert np.all(np.abs(np.asarray(network.va_deg) - va)[live] < 10.0)


@pytest.mark.parametrize(
    "options, switch_ohm",
    [({"trafo_model": "pi"}, 0.0), ({}, 0.4), ({"trafo_model": "pi", "switch_rx_ratio": 0.5}, 2.0)],
)
def test_pi_model_and_switch_impedance_match_pandapower(options, switch_ohm):
    net = _handmade()
    net.switch.loc[net.switch.et == "b", "z_ohm"] = switch_ohm
    network, _ = assert_matches_pandapower(net, **options)
    assert network.n_bus == (7 if switch_ohm else 6)


def test_piecewise_linear_cost_is_pandapowers_opf_curve():
    from pandapower.opf.make_objective import costs_from_areas
    from pandapower.pypower.totcost import totcost

    net = _handmade()
    network = network_from_pandapower(net)
    points = costs_from_areas(net.pwl_cost.points.iloc[0], 1)
    gencost = np.array([[PIECEWISE_LINEAR, 0, 0, len(points) // 2, *points]])
    assert int(network.cost_model[1]) == PIECEWISE_LINEAR
    for p in (5.0, 22.0, 40.0, 63.0, 80.0):
        with x64():
            cost = float(network.generation_cost(jnp.array([0.0, p]))[1])
        assert cost == pytest.approx(float(totcost(gencost, np.array([p]))[0]), rel=1e-12)
    with x64():
        cost = float(network.generation_cost(jnp.array([100.0, 0.0]))[0])
    assert cost == pytest.approx(0.02 * 100.0**2 + 30.0 * 100.0)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda n: pp.create_dcline(n, 10, 20, 5.0, 1.0, 0.5, 1.0, 1.0), r"dcline \[0\]"),
        (lambda n: pp.create_ward(n, 35, 1.0, 0.5, 0.0, 0.0, in_service=False), r"ward \[0\]"),
        (lambda n: pp.create_storage(n, 7, 1.0, 4.0, q_mvar=0.3, index=8), r"storage .*\[8\]"),
        (
            lambda n: n.load.__setitem__("const_z_p_percent", 30.0),
            r"voltage-dependent loads \[0, 1",
        ),
        (lambda n: n.trafo.__setitem__("tap_dependency_table", True), r"trafo \[0, 1, 2, 3\] with"),
        (lambda n: pp.create_poly_cost(n, 0, "sgen", 10.0), r"poly_cost \[1\] on elements"),
        (lambda n: n.ext_grid.__setitem__("in_service", False), "no in-service ext_grid"),
    ],
)
def test_unsupported_input_is_one_clear_error(edit, message):
    net = _handmade()
    edit(net)
    with pytest.raises(ValueError, match=message):
        network_from_pandapower(net)


def test_storage_without_reactive_power_is_a_load():
    net = _handmade()
    pp.create_storage(net, 7, p_mw=2.0, max_e_mwh=4.0, scaling=0.5)
    network = network_from_pandapower(net)
    assert float(network.pd_mw[3]) == pytest.approx(20.0 + 1.0)
    assert int(np.asarray(network.bus_type)[1]) == PV
