"""The DC-OPF against HiGHS (the same problem written independently in
``highs_dcopf.py``) on six bundled cases with line ratings tightened until several lines
bind, over random loads, costs and commitments; properties by Hypothesis; infeasible,
reserve and piecewise-linear instances.

The default suite solves 3 instances of case118 and a sample of the other tests;
``JAXGRID_VALIDATE=full`` solves 200 random instances per case (about 2 minutes on 2
cores) and runs every test::

    JAXGRID_VALIDATE=full python -m pytest tests/dispatch/test_dcopf.py -n 0
"""

from pathlib import Path

import jax
import jax.monitoring
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import FULL, full_only, jaxpr_loops, sampled, x64
from highs_dcopf import pypower_ptdf, solve
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


# two steps of tso300-v0 in float64 (random commitments, load shed behind binding lines:
# LPs degenerate along their optimal face, the shed split undetermined) on which the
# node matrix loses its Cholesky factor near the solution. "degenerate": the proximal
# term then added was scaled by the largest diagonal entry (about 1e35 there) and
# swamped the small ones; the dual residual stalled at 3.8e-5 currency/MWh (2.5e-3
# inside the environment's compiled step, which then reported a failed dispatch:
# check_env of tso300-v0 saw a batched and an unbatched run part). "stalled": the
# complementarity fell to 4e-12 with the dual residual at 4e-6 (scaled) and rising, and
# the solve ended unconverged (2.6e-4 currency/MWh).
STORED_STEPS = ("degenerate_case300.npz", "stalled_case300.npz")


@pytest.mark.parametrize("stored", STORED_STEPS)
def test_stored_degenerate_steps_converge_to_the_optimum(stored):
    """A stored step converges, to the optimum: HiGHS's QP solver does not finish these
    instances (600 s: time limit), so the reference is the optimality certificate of a
    convex QP, checked by NumPy."""
    network, data, prices, result = stored_step(stored)
    assert bool(result.converged) and float(result.dual_residual) < 1e-6  # currency/MWh
    _check_kkt(network, data, prices, result)
    assert np.sum(result.shed_mw) > 1.0 and np.sum(result.line_at_limit) >= 1


def stored_step(stored, rise=0.0):
    """``(network, data, prices, result)``: the stored step ``stored`` solved by
    :func:`dcopf` in float64 (jitted, as in the environment) with the prices of shed and
    spill rising by ``rise``; ``result`` in NumPy arrays."""
    data = np.load(Path(__file__).with_name(stored))
    with x64():
        network = network_from_matpower("case300").replace(
            pmin_mw=data["pmin_mw"], pmax_mw=data["pmax_mw"]
        )
        dispatch = dict(
            cost_poly=data["cost_poly"],
            commitment=data["commitment"],
            reserve_mw=float(data["reserve_mw"]),
        )
        prices = dict(
            voll=float(data["voll"]),
            spill_price=float(data["spill_price"]),
            reserve_shortfall_price=float(data["reserve_shortfall_price"]),
        )
        result = jax.jit(
            lambda pd: dcopf(
                network.replace(rate_mva=data["rate_mva"]),
                pd,
                params=DCOPFParams(**prices, slack_price_rise=rise),
                monitored=tuple(data["monitored"]),
                shed_at=tuple(data["shed_at"]),
                spill_at=tuple(data["spill_at"]),
                iterations=30,
                **dispatch,
            )
        )(data["pd_mw"])
    return network, data, prices, jax.tree_util.tree_map(np.asarray, result)


def _check_kkt(network, data, prices, result, tol_mw=1e-5, tol_price=LMP_ATOL, rise=0.0):
    """The KKT conditions of :func:`dcopf`'s problem at ``result`` (the prices of shed and
    spill rising by ``rise`` across each bus's range), with its prices as the
    duals and PYPOWER's PTDF: primal feasibility, each variable's marginal cost against
    its bus's price (equal inside its bounds, on the right side at a bound), each line
    price nonzero only on its binding side, and the LMPs made of the energy price and
    the line prices. They are sufficient for optimality of a convex QP."""
    net = {k: np.asarray(v) for k, v in vars(network).items()}
    on = data["commitment"] & net["gen_in_service"]
    pmin, pmax = np.where(on, data["pmin_mw"], 0.0), np.where(on, data["pmax_mw"], 0.0)
    pg, lmp, rho = result.pg_mw, result.lmp, float(result.reserve_price)
    shed, spill, short = result.shed_mw, result.spill_mw, float(result.reserve_shortfall_mw)
    pd = data["pd_mw"]

    def dual_feasible(x, low, high, gradient, what):
        """``gradient`` (marginal cost less the bus's price) is >= 0 at the lower bound,
        <= 0 at the upper one and 0 between them."""
        at_low, at_high = x <= low + tol_mw, x >= high - tol_mw
        assert np.all((x >= low - tol_mw) & (x <= high + tol_mw)), f"{what}: bounds"
        assert np.all(at_low | (gradient <= tol_price)), f"{what}: could go down"
        assert np.all(at_high | (gradient >= -tol_price)), f"{what}: could go up"

    gen_bus = net["gen_bus"]
    marginal = 2.0 * data["cost_poly"][:, 0] * pg + data["cost_poly"][:, 1] + rho
    dual_feasible(pg[on], pmin[on], pmax[on], (marginal - lmp[gen_bus])[on], "units")

    def rising(price, x, most):
        return price * (1.0 + rise * x / np.where(most > 0, most, 1.0))

    b = data["shed_at"]
    most = np.maximum(pd[b], 0.0)
    shed_price = rising(prices["voll"], shed[b], most)
    dual_feasible(shed[b], 0.0, most, shed_price - lmp[b], "shed")
    must_run = np.zeros(len(pd))
    np.add.at(must_run, gen_bus, np.maximum(pmin, 0.0))
    b = data["spill_at"]
    cap = must_run[b] + np.maximum(-pd[b], 0.0)
    spill_price = rising(prices["spill_price"], spill[b], cap)
    dual_feasible(spill[b], 0.0, cap, spill_price + lmp[b], "spill")
    headroom = np.sum(pmax - pg) + short - float(data["reserve_mw"])
    assert headroom >= -tol_mw and rho >= -tol_price
    assert rho <= tol_price or abs(headroom) <= tol_mw, "reserve priced but not binding"
    reserve_cost = prices["reserve_shortfall_price"] - rho
    dual_feasible(np.array([short]), 0.0, np.inf, np.array([reserve_cost]), "shortfall")

    injection = shed - spill - pd - net["gs_mw"]
    np.add.at(injection, gen_bus, pg)
    assert abs(np.sum(injection)) <= tol_mw
    ptdf = pypower_ptdf(net)[data["monitored"]]
    flow, rate = ptdf @ injection, data["rate_mva"][data["monitored"]]
    line_price = result.line_price[data["monitored"]]
    np.testing.assert_allclose(flow, result.p_branch_mw[data["monitored"]], atol=tol_mw)
    assert np.all(np.abs(flow) <= rate + tol_mw)
    assert np.all((line_price <= tol_price) | (flow >= rate - tol_mw)), "from->to price"
    assert np.all((line_price >= -tol_price) | (flow <= -rate + tol_mw)), "to->from price"
    np.testing.assert_allclose(lmp, result.lmp_energy - ptdf.T @ line_price, atol=tol_price)


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


def test_the_interior_point_ends_when_every_problem_has_converged():
    """The iterations are a loop that ends once the batch has converged (a
    ``while_loop`` bounded by the budget), not a scan over the whole budget: case118's
    problems converge in 11-26 of the 40 allowed, and running all 40 cost tso118-v0 a
    quarter to a third of its speed. The solution is the same either way."""
    network = network_from_matpower("case118")
    jaxpr = jax.make_jaxpr(lambda p: dcopf(network, p, iterations=37))(
        np.asarray(network.pd_mw, np.float32)
    )
    loops = jaxpr_loops(jaxpr.jaxpr)
    assert ("scan", 37) not in loops and any(kind == "while" for kind, _ in loops)
    result = jax.jit(lambda p: dcopf(network, p, iterations=37))(
        np.asarray(network.pd_mw, np.float32)
    )
    assert bool(result.converged) and int(result.iterations) < 37


def test_the_interior_point_takes_at_least_one_iteration():
    """The start is not measured (its complementarity is never small), so a budget of
    no iterations is refused, and one iteration gives an unconverged result whose
    residuals are the iterate's (finite), not the unmeasured start's."""
    network = network_from_matpower("case9")
    with pytest.raises(ValueError, match="iterations must be positive, got 0"):
        dcopf(network, iterations=0)
    once = dcopf(network, iterations=1)
    assert not bool(once.converged) and int(once.iterations) == 1
    assert np.isfinite([once.primal_residual_mw, once.dual_residual, once.gap]).all()


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


@pytest.mark.parametrize(
    "field", ["x_pu", "tap", "branch_in_service", "branch_from", "branch_to", "bus_type"]
)
def test_the_ptdf_is_traced_when_a_field_it_reads_is(field):
    """Each field the PTDF reads, traced, sends it to the traced path (NumPy cannot read a
    tracer): the PTDF still, a value of the program rather than a constant."""
    from jaxgrid.dispatch.dcopf import network_ptdf

    network = network_from_matpower("case14")
    seen = []

    def traced(value):
        seen.append(network_ptdf(network.replace(**{field: value})))
        return seen[-1]

    out = jax.jit(traced)(getattr(network, field))
    assert isinstance(seen[0], jax.core.Tracer)
    np.testing.assert_allclose(out, pypower_ptdf(vars(network)), atol=1e-5)


def test_the_ptdf_of_an_island_without_slack_is_jaxs_as_before():
    """Where the DC equations are singular (case118 without its branch 6 leaves two buses
    without the slack), NumPy refuses to invert them; ``network_ptdf`` then gives what
    the traceable PTDF gives, instead of raising."""
    from jaxgrid.dispatch.dcopf import network_ptdf
    from jaxgrid.grid import ptdf

    network = network_from_matpower("case118")
    on = np.ones(network.n_branch, bool)
    on[6] = False
    islanded = network.replace(branch_in_service=on)
    with pytest.raises(np.linalg.LinAlgError):
        ptdf(islanded, xp=np)
    np.testing.assert_array_equal(network_ptdf(islanded), ptdf(islanded))


def test_the_ptdf_constant_is_computed_on_the_host_and_is_pypowers_ptdf():
    """``network_ptdf`` of a network whose loads are traced is a constant, MATPOWER's PTDF,
    computed by NumPy without compiling anything (it was one program per operation, 43
    programs and 1.7 s of a transmission step's tracing, then one program, 0.22 s of a
    process's first trace); with a reactance traced it is traced, and still the PTDF."""
    from jaxgrid.dispatch.dcopf import network_ptdf

    network = network_from_matpower("case14")
    reference = pypower_ptdf(vars(network))
    compiles, constants = [], []

    def listener(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(seconds)

    def loads_traced(pd_mw):
        constants.append(network_ptdf(network.replace(pd_mw=pd_mw)))
        return pd_mw

    jax.clear_caches()
    jax.monitoring.register_event_duration_secs_listener(listener)
    on_device = jax.device_put(network)  # leaves as JAX arrays (float32 data)
    try:
        jax.jit(loads_traced).trace(network.pd_mw)
        # still on the host, not JAX's operations one by one
        constants.append(network_ptdf(on_device))
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert not compiles, f"{len(compiles)} programs compiled"
    assert all(isinstance(c, np.ndarray) for c in constants)
    assert constants[0].dtype == jnp.result_type(float)
    np.testing.assert_allclose(constants[1], reference, atol=1e-5)
    np.testing.assert_allclose(constants[0], reference, atol=1e-5)
    reactance_traced = jax.jit(lambda x: network_ptdf(network.replace(x_pu=x)))
    np.testing.assert_allclose(reactance_traced(network.x_pu), reference, atol=1e-5)
