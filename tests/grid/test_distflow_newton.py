"""DistFlow by Newton-Raphson on the tree, the sweep's fallback and LinDistFlow's collapse
floor, judged by pandapower's AC power flow (with load continuation where it has to
decide whether a loading has a solution at all) and by a hand-worked two-bus feeder."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ac_loadability, assert_tree_finite, full_only, x64
from test_powerflow import line_flows, reference, scenario

from jaxgrid.grid import case33bw, case69, case141, distflow, from_branch_table, lindistflow
from jaxgrid.grid.distflow_newton import distflow_newton
from jaxgrid.grid.fallback import distflow_with_fallback
from jaxgrid.grid.result import PowerFlowResult
from jaxgrid.grid.solvers import DISTFLOW, LINDISTFLOW, solve_feeder_by_newton

pytest.importorskip("pandapower")
CASES = {"case33bw": case33bw, "case69": case69, "case141": case141}
NEWTON = jax.jit(distflow_newton, static_argnames="iterations")


@pytest.mark.parametrize(
    "case_name, name",
    [
        ("case33bw", "load x1.0"),
        ("case33bw", "pv reverse flow"),
        ("case69", "load x2.0"),
        ("case141", "random injections"),
    ],
)
def test_newton_matches_pandapower(case_name, name):
    p, q = scenario(CASES[case_name](), name)
    net, feeder = reference(case_name, p, q)
    with x64():
        res = NEWTON(feeder, p, q, iterations=8)
    assert bool(res.converged)
    assert float(res.mismatch_pu) < 1e-9
    np.testing.assert_allclose(
        res.vm_pu, net.res_bus.vm_pu.loc[np.asarray(feeder.bus_ids)], atol=1e-8
    )
    p_ref, q_ref = line_flows(net, feeder)
    np.testing.assert_allclose(res.p_branch_mw, p_ref, atol=1e-8)
    np.testing.assert_allclose(res.q_branch_mvar, q_ref, atol=1e-8)
    assert float(res.loss_mw) == pytest.approx(net.res_line.pl_mw.sum(), abs=1e-7)
    assert float(res.p_import_mw) == pytest.approx(net.res_ext_grid.p_mw.sum(), abs=1e-7)


def test_near_the_nose_newton_finds_the_solution_the_sweep_misses():
    """case33bw at 3.5x its load has an AC solution (lowest voltage ~0.62 pu) that ten
    sweeps do not reach; Newton and the fallback do, at pandapower's voltages."""
    feeder = case33bw()
    p, q = 3.5 * np.asarray(feeder.p_load_mw), 3.5 * np.asarray(feeder.q_load_mvar)
    share, net = ac_loadability(feeder, p, q)
    assert share == 1.0
    vm_ac = net.res_bus.vm_pu.to_numpy()
    with x64():
        assert not bool(distflow(feeder, p, q, iterations=10).converged)
        for res in (NEWTON(feeder, p, q, iterations=8), distflow_with_fallback(feeder, p, q)):
            assert bool(res.converged)
            np.testing.assert_allclose(res.vm_pu, vm_ac, atol=1e-8)
    res32 = distflow_with_fallback(feeder, p, q)  # float32, the environments' default
    assert bool(res32.converged)
    np.testing.assert_allclose(res32.vm_pu, vm_ac, atol=2e-5)


def test_the_shared_solve_is_newton_from_lindistflow():
    """``solve_feeder_by_newton`` (a solve that a batch shares: a reset's idle feeder)
    finds the AC solution near the nose without any sweep, at pandapower's voltages, and
    is LinDistFlow's exactly where the solver leaf says so."""
    feeder = case33bw()
    p, q = 3.5 * np.asarray(feeder.p_load_mw), 3.5 * np.asarray(feeder.q_load_mvar)
    _, net = ac_loadability(feeder, p, q)
    vm_ac = net.res_bus.vm_pu.to_numpy()
    solve = jax.jit(solve_feeder_by_newton)
    with x64():
        res = solve(feeder, p, q, DISTFLOW)
        assert bool(res.converged) and float(res.mismatch_pu) < 1e-9
        np.testing.assert_allclose(res.vm_pu, vm_ac, atol=1e-8)
    res32 = solve(feeder, p, q, DISTFLOW)
    assert bool(res32.converged)
    np.testing.assert_allclose(res32.vm_pu, vm_ac, atol=2e-5)
    linear = solve(feeder, p, q, LINDISTFLOW)
    for got, want in zip(
        jax.tree_util.tree_leaves(linear), jax.tree_util.tree_leaves(lindistflow(feeder, p, q))
    ):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("load", [3.75, 5.0])
def test_collapse_is_reported_by_every_solver(load):
    feeder = case33bw()
    p, q = load * np.asarray(feeder.p_load_mw), load * np.asarray(feeder.q_load_mvar)
    share, _ = ac_loadability(feeder, p, q)
    assert share < 1.0  # pandapower: no AC solution at this loading
    for res in (
        NEWTON(feeder, p, q, iterations=20),
        distflow_with_fallback(feeder, p, q),
        lindistflow(feeder, p, q),
    ):
        assert not bool(res.converged)
        assert_tree_finite(res, "a collapsed solve")


def test_lindistflow_collapse_floor_against_the_ac_power_flow():
    """Below the floor LinDistFlow reports collapse; at loadings with an AC solution it
    does not (uniform scaling of case33bw, judged by pandapower)."""
    feeder = case33bw()
    for load, solvable in ((3.5, True), (4.0, False), (6.0, False)):
        p, q = load * np.asarray(feeder.p_load_mw), load * np.asarray(feeder.q_load_mvar)
        share, _ = ac_loadability(feeder, p, q)
        assert (share == 1.0) == solvable
        assert bool(lindistflow(feeder, p, q).converged) == solvable


def two_bus(r=0.1, x=0.2):
    """A feeder of one line (pu on 1 MVA, so MW are pu)."""
    return from_branch_table(
        from_bus=[0], to_bus=[1], r_pu=[r], x_pu=[x], base_mva=1.0, base_kv=[10.0, 10.0], n_bus=2
    )


@full_only
def test_the_lower_unstable_solution_is_not_converged():
    """One line, r = 0.1, x = 0.2 pu, load 1 + 0.5j pu: the receiving-end squared voltage
    solves v^2 - (1 - 2 (rP + xQ)) v + |z|^2 |S|^2 = 0, i.e. v^2 - 0.6 v + 0.0625 = 0,
    v = 0.3 +- sqrt(0.0275) (by hand). Newton from the default start reaches the upper
    root; started at the lower root it stays there, and reports it as not converged (the
    operating point lies past the nose of the PV curve)."""
    feeder = two_bus()
    p, q = np.array([0.0, 1.0]), np.array([0.0, 0.5])
    v_hi, v_lo = 0.3 + np.sqrt(0.0275), 0.3 - np.sqrt(0.0275)
    with x64():
        upper = NEWTON(feeder, p, q, iterations=10)
        assert bool(upper.converged)
        np.testing.assert_allclose(upper.vm_pu, np.sqrt([1.0, v_hi]), atol=1e-12)
        ell = 1.25 / v_lo  # |S|^2 / v at the lower root
        start = PowerFlowResult(
            vm_pu=jnp.sqrt(jnp.array([1.0, v_lo])),
            p_branch_mw=jnp.array([1.0 + 0.1 * ell]),
            q_branch_mvar=jnp.array([0.5 + 0.2 * ell]),
            loss_branch_mw=jnp.zeros(1),
            loss_mw=jnp.zeros(()),
            p_import_mw=jnp.zeros(()),
            q_import_mvar=jnp.zeros(()),
            converged=jnp.array(True),
            mismatch_pu=jnp.zeros(()),
        )
        lower = distflow_newton(feeder, p, q, iterations=5, start=start)
        assert float(lower.mismatch_pu) < 1e-12  # a solution of the equations...
        np.testing.assert_allclose(lower.vm_pu, np.sqrt([1.0, v_lo]), atol=1e-12)
        assert not bool(lower.converged)  # ...on the unstable branch


def test_a_diverging_newton_stays_finite():
    feeder = case141()
    p, q = 30 * np.asarray(feeder.p_load_mw), -30 * np.asarray(feeder.q_load_mvar)
    res = NEWTON(feeder, p, q, iterations=30)
    assert not bool(res.converged)
    assert_tree_finite(res, "a diverging Newton")


def test_iterations_are_bounded():
    feeder = case33bw()
    with pytest.raises(ValueError, match=r"max_iterations <= 100, got iterations=101"):
        distflow_newton(feeder, np.zeros(33), np.zeros(33), iterations=101)
    with pytest.raises(ValueError, match=r"got iterations=4, max_iterations=3"):
        distflow_newton(feeder, np.zeros(33), np.zeros(33), iterations=4, max_iterations=3)


def test_mismatch_is_the_largest_residual_of_the_equations():
    """``mismatch_pu`` of unconverged solves (one iteration at one to three times
    case33bw's load) against the four DistFlow equations evaluated here in NumPy from the
    returned flows, losses and voltages (MW over the base, pu of voltage squared, MVA^2
    over the base squared). A Newton step solves the three linear equations exactly, so
    the largest is the current's (``ell v_i = P^2 + Q^2``), the others at round-off: the
    test pins that equation's scale and that nothing else (padding slots) enters."""
    feeder = jax.device_get(case33bw())
    base = float(feeder.base_mva)
    frm, to = np.asarray(feeder.branch_from), np.asarray(feeder.branch_to)
    r = np.asarray(feeder.r_pu, float) / base
    x = np.asarray(feeder.x_pu, float) / base
    for scale in (1.0, 2.0, 3.0):
        p, q = scale * np.asarray(feeder.p_load_mw), scale * np.asarray(feeder.q_load_mvar)
        with x64():
            res = jax.device_get(NEWTON(feeder, p, q, iterations=1))
        big_p, big_q = np.asarray(res.p_branch_mw), np.asarray(res.q_branch_mvar)
        ell = np.asarray(res.loss_branch_mw) / r
        v = np.asarray(res.vm_pu) ** 2
        below_p = np.array([big_p[frm == j].sum() for j in to])
        below_q = np.array([big_q[frm == j].sum() for j in to])
        linear = (
            (big_p - r * ell - p[to] - below_p) / base,
            (big_q - x * ell - q[to] - below_q) / base,
            v[to] - v[frm] + 2 * (r * big_p + x * big_q) - (r**2 + x**2) * ell,
        )
        current = (ell * v[frm] - big_p**2 - big_q**2) / base**2
        assert not bool(res.converged) and np.abs(current).max() > 1e-4
        assert max(np.abs(f).max() for f in linear) < 1e-12
        np.testing.assert_allclose(float(res.mismatch_pu), np.abs(current).max(), rtol=1e-6)
