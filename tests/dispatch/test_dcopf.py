"""The DC-OPF against HiGHS (the same problem written independently in
``highs_dcopf.py``) on six bundled cases with line ratings tightened until several lines
bind, over random loads, costs and commitments; properties by Hypothesis; infeasible,
reserve and piecewise-linear instances.

The default suite solves 3 instances of case118 and a sample of the other tests;
``JAXGRID_VALIDATE=full`` solves 200 random instances per case (about 2 minutes on 2
cores) and runs every test::

    JAXGRID_VALIDATE=full python -m pytest tests/dispatch/test_dcopf.py -n 0
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import FULL, full_only, sampled, x64
from highs_dcopf import solve
from hypothesis import given, settings
from hypothesis import strategies as st
from instances import CASES, draw, tightened

from jaxgrid.dispatch import DCOPFParams, dcopf, monitored_branches
from jaxgrid.grid import network_from_matpower

COST_RTOL, LMP_ATOL = 1e-6, 1e-3  # relative cost, currency/MWh
CASE_DIR = "jaxgrid/grid/cases/transmission"


def _check(result, ref, network, what):
    assert ref["status"] == "Optimal", f"{what}: HiGHS {ref['status']}"
    assert bool(result.converged), f"{what}: not converged"
    cost = float(result.cost)
    assert abs(cost - ref["cost"]) <= COST_RTOL * abs(ref["cost"]), f"{what}: cost"
    np.testing.assert_allclose(result.lmp, ref["lmp"], atol=LMP_ATOL, err_msg=f"{what}: LMP")
    shed = float(jnp.sum(result.shed_mw))  # where it is shed may be undetermined
    assert shed == pytest.approx(np.sum(ref["shed_mw"]), abs=1e-4), f"{what}: shed"
    rate = np.asarray(network.rate_mva)
    assert np.all(np.abs(np.asarray(result.p_branch_mw)) <= rate + 1e-6), f"{what}: limits"
    np.testing.assert_allclose(
        result.lmp, result.lmp_energy + result.lmp_congestion, rtol=1e-12, atol=1e-9
    )


@pytest.mark.parametrize("name", sampled(CASES, keep=("case118",)))
def test_matches_highs_on_random_instances(name):
    with x64():
        network = tightened(network_from_matpower(name))
        pd, poly, commitment = draw(network, np.random.default_rng(7), 200 if FULL else 3)
        solve_batch = jax.jit(
            jax.vmap(lambda p, c, u: dcopf(network, p, cost_poly=c, commitment=u))
        )
        results = solve_batch(pd, poly, commitment)
        binding, skipped = [], 0
        for i in range(len(pd)):
            ref = solve(network, pd[i], cost_poly=poly[i], commitment=commitment[i], time_limit=5)
            if ref["status"] != "Optimal":  # HiGHS's active-set QP solver gave up
                skipped += 1
                continue
            result = jax.tree_util.tree_map(lambda a, i=i: a[i], results)
            _check(result, ref, network, f"{name} instance {i}")
            binding.append(int(np.sum(np.asarray(result.line_at_limit))))
        assert skipped <= 0.02 * len(pd) + 1, f"{name}: HiGHS failed {skipped} times"
        assert max(binding) >= 2, f"{name}: fewer than two lines bind"


def test_load_above_capacity_is_shed_at_the_value_of_lost_load():
    with x64():
        network = network_from_matpower("case9")
        # without line limits (with them, a unit at its limit behind a full line has any
        # price between its cost and the value of lost load)
        network = network.replace(rate_mva=np.full(network.n_branch, np.inf))
        linear = np.asarray(network.cost_poly) * [0.0, 1.0, 1.0]  # an LP
        pd = 3.0 * np.asarray(network.pd_mw)  # 945 MW against 820 MW of capacity
        result = dcopf(network, pd, cost_poly=linear, params=DCOPFParams(voll=5000.0))
        ref = solve(network, pd, cost_poly=linear, voll=5000.0, form="b_theta")
        _check(result, ref, network, "case9 x3 load")
    assert bool(result.infeasible)
    capacity = float(np.sum(network.pmax_mw))
    assert float(jnp.sum(result.shed_mw)) == pytest.approx(np.sum(pd) - capacity, abs=1e-5)
    np.testing.assert_allclose(result.pg_mw, network.pmax_mw, atol=1e-5)
    assert np.all(np.asarray(result.gen_at_pmax))
    np.testing.assert_allclose(result.lmp, 5000.0, atol=1e-3)
    assert float(result.cost) >= 5000.0 * (np.sum(pd) - capacity)


@full_only
def test_load_at_a_bus_without_load_is_shed_where_allowed():
    """Under ``jit`` the loads are traced, so load may be shed only where the network has
    a load: a shortage at another bus leaves the result unconverged (never a silent
    dispatch), and ``shed_at`` lets that bus shed too, as the concrete call does."""
    with x64():
        network = network_from_matpower("case9")
        pd = np.asarray(network.pd_mw).copy()
        pd[0] = 2000.0  # the slack generator's bus, no load in the file; 820 MW of capacity
        concrete = dcopf(network, pd)
        traced = jax.jit(lambda p: dcopf(network, p))(pd)
        every = jax.jit(lambda p: dcopf(network, p, shed_at=range(network.n_bus)))(pd)
    assert bool(concrete.converged) and bool(concrete.infeasible)
    assert not bool(traced.converged)
    assert bool(every.converged) and bool(every.infeasible)
    np.testing.assert_allclose(every.shed_mw, concrete.shed_mw, atol=1e-5)
    np.testing.assert_allclose(every.cost, concrete.cost, rtol=1e-9)


@full_only
def test_reserve_requirement_holds_headroom_and_is_priced():
    with x64():
        network = tightened(network_from_matpower("case118"))
        pd = 1.8 * np.asarray(network.pd_mw)  # 7640 MW of load, 9966 MW of capacity
        reserve = 2500.0  # more than the headroom left: a shortfall at its price
        for requirement in (2000.0, reserve):
            result = dcopf(network, pd, reserve_mw=requirement)
            ref = solve(network, pd, reserve_mw=requirement)
            _check(result, ref, network, f"case118 reserve {requirement}")
            headroom = float(jnp.sum(network.pmax_mw - result.pg_mw))
            assert headroom + float(result.reserve_shortfall_mw) >= requirement - 1e-5
            assert float(result.reserve_price) == pytest.approx(ref["reserve_price"], abs=1e-3)
            assert float(result.reserve_shortfall_mw) == pytest.approx(
                ref["reserve_shortfall_mw"], abs=1e-4
            )
    assert float(result.reserve_shortfall_mw) > 0 and bool(result.infeasible)
    assert float(result.reserve_price) == pytest.approx(1000.0, abs=1e-3)


def _pwl_case9(tmp_path, rows):
    text = open(f"{CASE_DIR}/case9.m").read()
    start = text.index("mpc.gencost = [\n") + len("mpc.gencost = [\n")
    path = tmp_path / "case9pwl.m"
    path.write_text(text[:start] + rows + text[text.index("];", start) :])
    return network_from_matpower(path)


@full_only
def test_piecewise_linear_costs_and_a_non_convex_one_is_refused(tmp_path):
    rows = (
        "\t1\t0\t0\t4\t0\t0\t100\t2000\t200\t5500\t300\t10000;\n"  # 20, 35, 45 per MWh
        "\t2\t0\t0\t3\t0\t22\t600\t0\t0\t0\t0\t0;\n"  # an LP: HiGHS's QP duals are
        # 3e-3 off here (its cost 2e-5 above the optimum)
        "\t1\t0\t0\t3\t0\t0\t150\t4000\t270\t9000\t0\t0;\n"  # 26.7, 41.7 per MWh
    )
    with x64():
        network = _pwl_case9(tmp_path, rows)
        for scale in (0.6, 1.0, 1.6):
            pd = scale * np.asarray(network.pd_mw)
            _check(dcopf(network, pd), solve(network, pd), network, f"pwl x{scale}")
    non_convex = rows.replace("200\t5500\t300\t10000", "200\t5500\t300\t6000")
    with pytest.raises(ValueError, match="generator 0: its piecewise-linear cost is not convex"):
        dcopf(_pwl_case9(tmp_path, non_convex))


@full_only
def test_commitment_and_monitored_lines():
    with x64():
        network = tightened(network_from_matpower("case30"))
        commitment = np.ones(network.n_gen, bool)
        commitment[[1, 4]] = False
        default = dcopf(network, commitment=commitment)
        ref = solve(network, commitment=commitment)
        _check(default, ref, network, "case30 commitment")
        np.testing.assert_array_equal(np.asarray(default.pg_mw)[[1, 4]], 0.0)
        # the network traced under jit: every branch monitored, the same answer
        traced = jax.jit(lambda n: dcopf(n, commitment=commitment))(network)
        np.testing.assert_allclose(traced.lmp, default.lmp, atol=1e-6)
        np.testing.assert_allclose(traced.pg_mw, default.pg_mw, atol=1e-6)
    assert len(monitored_branches(network)) == 6


@full_only
def test_float32_by_default_is_close():
    with x64():
        network = tightened(network_from_matpower("case118"))
        ref = solve(network)
    result = jax.jit(lambda p: dcopf(network, p))(np.asarray(network.pd_mw, np.float32))
    assert result.cost.dtype == jnp.float32 and bool(result.converged)
    assert float(result.cost) == pytest.approx(ref["cost"], rel=1e-4)
    np.testing.assert_allclose(result.lmp, ref["lmp"], atol=0.5)


# Properties on case30 (linear costs and quadratic ones as the file gives them)
with x64():  # every use is in float64: a Network object is used in one precision
    NETWORK = network_from_matpower("case30")
    LIMITED = tightened(NETWORK)


@pytest.fixture(scope="module")
def solvers():
    with x64():
        free = NETWORK.replace(rate_mva=np.full(NETWORK.n_branch, np.inf))
        return {
            "limited": jax.jit(jax.vmap(lambda p: dcopf(LIMITED, p))),
            "free": jax.jit(jax.vmap(lambda p: dcopf(free, p))),
        }


loads = st.lists(st.floats(0.3, 1.6), min_size=NETWORK.n_bus, max_size=NETWORK.n_bus)


@full_only
@settings(max_examples=15, deadline=None)
@given(scale=loads)
def test_power_balances(solvers, scale):
    with x64():
        pd = np.asarray(scale) * np.asarray(NETWORK.pd_mw)
        r = jax.tree_util.tree_map(lambda a: a[0], solvers["limited"](pd[None]))
        supplied = jnp.sum(r.pg_mw) + jnp.sum(r.shed_mw) - jnp.sum(r.spill_mw)
        assert bool(r.converged)
        assert float(supplied) == pytest.approx(np.sum(pd) + np.sum(NETWORK.gs_mw), abs=1e-6)


@settings(max_examples=15, deadline=None)
@given(scale=loads)
def test_uncongested_network_has_one_price(solvers, scale):
    with x64():
        pd = np.asarray(scale) * np.asarray(NETWORK.pd_mw)
        r = jax.tree_util.tree_map(lambda a: a[0], solvers["free"](pd[None]))
        assert bool(r.converged)
        np.testing.assert_allclose(r.lmp, r.lmp_energy, atol=1e-6)
        np.testing.assert_allclose(r.lmp_congestion, 0.0, atol=1e-6)


@full_only
@settings(max_examples=15, deadline=None)
@given(scale=loads, more=st.floats(1.0, 1.5))
def test_cost_grows_with_load(solvers, scale, more):
    with x64():
        pd = np.asarray(scale) * np.asarray(NETWORK.pd_mw)
        r = solvers["limited"](np.stack([pd, more * pd]))
        assert np.all(np.asarray(r.converged))
        assert float(r.cost[1]) >= float(r.cost[0]) - 1e-6 * abs(float(r.cost[0]))
