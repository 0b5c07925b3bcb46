"""Conversion from and to pandapower: service states, switches, unsupported elements."""

import jax
import numpy as np
import pytest
from conftest import run_ac, x64

from jaxgrid.grid import case69, distflow, from_pandapower, to_pandapower
from jaxgrid.grid.distflow_newton import distflow_newton

pp = pytest.importorskip("pandapower")
pn = pytest.importorskip("pandapower.networks")


def assert_matches_ac(net):
    feeder = from_pandapower(net)
    run_ac(net)
    with x64():
        res = distflow(feeder, feeder.p_load_mw, feeder.q_load_mvar, iterations=25)
    assert bool(res.converged)
    np.testing.assert_allclose(
        res.vm_pu, net.res_bus.vm_pu.loc[np.asarray(feeder.bus_ids)], atol=1e-6
    )
    return feeder


def test_open_line_switch_and_tie_line_reconfigure_the_feeder():
    net = pn.case33bw()
    tie = net.line.index[(net.line.from_bus == 20) & (net.line.to_bus == 7)][0]
    net.line.loc[tie, "in_service"] = True  # close tie 21-8 ...
    opened = net.line.index[(net.line.from_bus == 6) & (net.line.to_bus == 7)][0]
    pp.create_switch(net, bus=6, element=opened, et="l", closed=False)  # ... and open 7-8
    feeder = assert_matches_ac(net)
    assert tie in feeder.branch_ids and opened not in feeder.branch_ids
    assert int(feeder.parent[7]) == 20  # bus 8 is now fed from bus 21


def test_closed_bus_switch_is_a_zero_impedance_branch():
    net = pn.case33bw()
    extra = pp.create_bus(net, vn_kv=12.66)
    sw = pp.create_switch(net, bus=17, element=extra, et="b", closed=True)
    pp.create_load(net, bus=extra, p_mw=0.2, q_mvar=0.1)
    pp.create_sgen(net, bus=10, p_mw=0.5, q_mvar=-0.1)
    feeder = assert_matches_ac(net)
    assert -(sw + 1) in feeder.branch_ids
    assert float(feeder.p_load_mw[10]) == pytest.approx(0.045 - 0.5)  # load minus sgen


def test_out_of_service_elements_are_left_out():
    net = pn.case33bw()
    dead = pp.create_bus(net, vn_kv=12.66, in_service=False)
    pp.create_line_from_parameters(net, 5, dead, 1.0, 0.1, 0.1, 0, 1.0)
    pp.create_load(net, bus=dead, p_mw=5.0, q_mvar=1.0)
    pp.create_load(net, bus=3, p_mw=5.0, q_mvar=1.0, in_service=False)
    pp.create_load(net, bus=3, p_mw=0.1, q_mvar=0.05, scaling=2.0)
    feeder = assert_matches_ac(net)
    assert feeder.n_bus == 33 and dead not in feeder.bus_ids
    assert float(feeder.p_load_mw[3]) == pytest.approx(0.12 + 0.2)


def charged_case33bw():
    net = pn.case33bw()
    pp.create_shunt(net, bus=17, p_mw=0.0, q_mvar=-0.3, vn_kv=12.66)
    pp.create_shunt(net, bus=24, p_mw=0.02, q_mvar=0.0, vn_kv=12.0)
    net.line["c_nf_per_km"] = 300.0
    return net


def test_shunt_and_line_charging_match_ac():
    assert_matches_ac(charged_case33bw())


@pytest.mark.parametrize("solver", [distflow, distflow_newton])
def test_line_charging_of_a_traced_feeder_matches_ac(solver):
    """The feeder as a jitted function's argument, as environments pass it in their params:
    its line charging is then computed from traced topology, not left out as known zero."""
    net = charged_case33bw()
    feeder = from_pandapower(net)
    assert np.any(np.asarray(feeder.b_pu) > 0)
    run_ac(net)
    with x64():
        res = jax.jit(lambda f: solver(f, f.p_load_mw, f.q_load_mvar, iterations=25))(feeder)
    assert bool(res.converged)
    np.testing.assert_allclose(
        res.vm_pu, net.res_bus.vm_pu.loc[np.asarray(feeder.bus_ids)], atol=1e-6
    )
    assert float(res.q_import_mvar) == pytest.approx(net.res_ext_grid.q_mvar.sum(), abs=1e-5)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda n: pp.create_transformer(n, 0, 5, "0.4 MVA 20/0.4 kV"), r"in-service trafo \[0\]"),
        (lambda n: pp.create_gen(n, 9, p_mw=0.1), r"in-service gen \[0\]"),
        (lambda n: pp.create_ext_grid(n, 9), "exactly one in-service ext_grid, found 2"),
        (lambda n: n.load.__setitem__("const_z_p_percent", 50.0), "voltage-dependent loads"),
        (lambda n: n.line.__setitem__("in_service", True), "meshed"),
    ],
)
def test_unsupported_networks_raise_one_clear_error(edit, message):
    net = pn.case33bw()
    edit(net)
    with pytest.raises(ValueError, match=message):
        from_pandapower(net)


def test_round_trip_through_pandapower():
    feeder = case69()
    back = from_pandapower(to_pandapower(feeder))
    np.testing.assert_array_equal(back.bus_ids, feeder.bus_ids)
    np.testing.assert_array_equal(back.parent, feeder.parent)
    for field in ("r_pu", "x_pu", "p_load_mw", "q_load_mvar", "vmin_pu", "vmax_pu"):
        np.testing.assert_allclose(
            getattr(back, field), getattr(feeder, field), rtol=1e-12, atol=1e-15
        )
