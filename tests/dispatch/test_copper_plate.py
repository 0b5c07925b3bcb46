"""The copper-plate dispatch against HiGHS where no line binds (shed load, spilled
output, reserve shortfall and piecewise-linear costs included), its refusal where one
does, and :func:`dcopf_with_fallback` against the interior point on batches of both,
batched, nested and unbatched."""

import jax
import numpy as np
import pytest
from conftest import full_only, jaxpr_equations, sampled, x64
from highs_dcopf import solve
from instances import draw, tightened
from test_dcopf import _check, _pwl_case9

from jaxgrid.dispatch import DCOPFParams, copper_plate_dispatch, dcopf, dcopf_with_fallback
from jaxgrid.dispatch.fallback import (
    CAPACITY,
    interior_capacity,
    later_capacity,
    lines_capacity,
)
from jaxgrid.grid import network_from_matpower


def _unlimited(name):
    network = network_from_matpower(name)
    return network.replace(rate_mva=np.full(network.n_branch, np.inf))


def _at(tree, i):
    return jax.tree_util.tree_map(lambda a: a[i], tree)


@pytest.mark.parametrize("name", sampled(["case30", "case118"], keep=("case118",)))
def test_matches_highs_without_line_limits(name):
    with x64():
        network = _unlimited(name)
        pd, poly, commitment = draw(network, np.random.default_rng(3), 4)
        pd = pd * np.array([0.5, 1.0, 1.4, 3.0])[:, None]  # the last beyond the capacity
        reserve = np.array([0.0, 0.05, 1.0, 0.1]) * pd.sum(axis=1)  # the third is short
        results = jax.jit(
            jax.vmap(
                lambda p, c, u, r: copper_plate_dispatch(
                    network, p, cost_poly=c, commitment=u, reserve_mw=r
                )
            )
        )(pd, poly, commitment, reserve)
        for i in range(len(pd)):
            ref = solve(
                network, pd[i], cost_poly=poly[i], commitment=commitment[i], reserve_mw=reserve[i]
            )
            result = _at(results, i)
            _check(result, ref, network, f"{name} instance {i}")
            assert int(result.iterations) == 0
            # HiGHS's QP stops up to 2e-6 relative from the optimum; the optimality
            # condition holds exactly: each unit inside its range at the energy price
            # net of the reserve's
            np.testing.assert_allclose(result.pg_mw, ref["pg_mw"], rtol=1e-5, atol=1e-3)
            pg = np.asarray(result.pg_mw)
            marginal = 2 * poly[i][:, 0] * pg + poly[i][:, 1]
            inside = (pg > np.asarray(network.pmin_mw) + 1e-6) & (
                pg < np.asarray(network.pmax_mw) - 1e-6
            )
            price = float(result.lmp_energy - result.reserve_price)
            np.testing.assert_allclose(marginal[inside], price, atol=1e-9)
            shortfall = float(result.reserve_shortfall_mw)
            assert shortfall == pytest.approx(ref["reserve_shortfall_mw"], abs=1e-5)
        assert float(np.sum(results.shed_mw[-1])) > 0  # the last instance sheds
        assert float(results.reserve_shortfall_mw[2]) > 0


def test_spills_must_run_output_at_its_price():
    with x64():
        network = _unlimited("case30")
        network = network.replace(pmin_mw=0.8 * np.asarray(network.pmax_mw))
        pd = 0.4 * np.asarray(network.pd_mw)  # below the units' minimum output
        params = DCOPFParams(spill_price=700.0)
        result = copper_plate_dispatch(network, pd, params=params)
        ref = solve(network, pd, spill_price=700.0)
        _check(result, ref, network, "case30 spill")
        assert float(np.sum(result.spill_mw)) == pytest.approx(np.sum(ref["spill_mw"]), abs=1e-5)
        assert float(result.lmp_energy) == pytest.approx(-700.0, abs=1e-6)


@full_only
def test_piecewise_linear_blocks_share_the_price(tmp_path):
    rows = (
        "\t1\t0\t0\t4\t0\t0\t100\t2000\t200\t5500\t300\t10000;\n"  # 20, 35, 45 per MWh
        "\t2\t0\t0\t3\t0\t22\t600\t0\t0\t0\t0\t0;\n"
        "\t1\t0\t0\t3\t0\t0\t150\t4000\t270\t9000\t0\t0;\n"  # 26.7, 41.7 per MWh
    )
    with x64():
        network = _pwl_case9(tmp_path, rows)
        network = network.replace(rate_mva=np.full(network.n_branch, np.inf))
        for scale in (0.6, 1.0, 1.6):
            pd = scale * np.asarray(network.pd_mw)
            result = copper_plate_dispatch(network, pd)
            _check(result, solve(network, pd), network, f"pwl x{scale}")


def test_refuses_where_a_line_binds_and_agrees_where_none_does():
    with x64():
        network = tightened(network_from_matpower("case118"))
        pd = np.asarray(network.pd_mw) * np.linspace(0.2, 1.2, 12)[:, None]
        plate = jax.jit(jax.vmap(lambda p: copper_plate_dispatch(network, p)))(pd)
        interior = jax.jit(jax.vmap(lambda p: dcopf(network, p)))(pd)
    binds = np.any(np.asarray(interior.line_at_limit), axis=1)
    certified = np.asarray(plate.converged)
    assert binds.any() and (~binds).any()
    np.testing.assert_array_equal(certified, ~binds)
    np.testing.assert_allclose(plate.cost[certified], interior.cost[certified], rtol=1e-7)
    np.testing.assert_allclose(plate.lmp[certified], interior.lmp[certified], atol=1e-3)
    assert np.all(np.asarray(plate.primal_residual_mw)[~certified] > 0)


@full_only
def test_fallback_is_the_interior_point_however_it_is_batched():
    with x64():
        network = tightened(network_from_matpower("case118"))
        pd, poly, commitment = draw(network, np.random.default_rng(5), 6)
        pd = pd * np.array([0.3, 0.4, 1.0, 0.35, 1.1, 0.5])[:, None]  # some below the limits

        def one(p, c, u):
            return dcopf_with_fallback(network, p, cost_poly=c, commitment=u, capacity=2)

        batched = jax.jit(jax.vmap(one))(pd, poly, commitment)
        by_default = jax.jit(  # one problem a round on a CPU
            jax.vmap(lambda p, c, u: dcopf_with_fallback(network, p, cost_poly=c, commitment=u))
        )(pd, poly, commitment)
        nested = jax.jit(jax.vmap(jax.vmap(one)))(
            *(x.reshape((2, 3) + x.shape[1:]) for x in (pd, poly, commitment))
        )
        single = [jax.jit(one)(pd[i], poly[i], commitment[i]) for i in (0, 2)]
        interior = jax.jit(jax.vmap(lambda p, c, u: dcopf(network, p, cost_poly=c, commitment=u)))(
            pd, poly, commitment
        )
    by_plate = np.asarray(batched.iterations) == 0
    assert by_plate.any() and (~by_plate).any()
    assert np.all(np.asarray(batched.converged))
    for result in (
        batched,
        by_default,
        jax.tree_util.tree_map(lambda a: a.reshape((6,) + a.shape[2:]), nested),
    ):
        np.testing.assert_allclose(result.cost, interior.cost, rtol=1e-7)
        np.testing.assert_allclose(result.pg_mw, interior.pg_mw, atol=1e-4)
        np.testing.assert_allclose(result.lmp, interior.lmp, atol=1e-3)
    for i, result in zip((0, 2), single, strict=True):
        assert float(result.cost) == pytest.approx(float(interior.cost[i]), rel=1e-7)
        assert (int(result.iterations) == 0) == by_plate[i]


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU's round sizes")
def test_on_a_cpu_the_interior_point_takes_one_problem_a_round_after_the_lines():
    # lockstep rounds of a share of the batch ran as long as their slowest problem:
    # tso118-v0's step at 256 and 1024 environments 19 % and 12 % slower (benchmarks)
    assert interior_capacity(binding_lines=True) == 1
    assert interior_capacity(binding_lines=False) == CAPACITY  # case5's market: most need it
    # the binding lines: an eighth of the batch, at most 64 problems a round (a quarter
    # ran tso118-v0's step 7 % slower at 64 and 256 environments once the search's
    # later rounds ran only where needed: benchmarks)
    assert [lines_capacity(n) for n in (1, 64, 256, 1024, 4096)] == [1, 8, 32, 64, 64]
    # their later rounds, gathered across the batch, one problem a round: they stop
    # where they certify, so a round runs until its slowest problem has (tso118-v0's
    # step 1.12x at 1024 environments against a sixty-fourth, 16: benchmarks)
    assert [later_capacity(n) for n in (1, 64, 256, 1024, 4096)] == [1, 1, 1, 1, 1]


def test_the_fallback_holds_a_closed_over_networks_ptdf_as_a_constant():
    # traced, the PTDF's inverse (an LU and a loop over its pivots) ran in every stage
    # and gathered round: a fifth of tso118-v0's kernels
    network = network_from_matpower("case118")
    pd = np.tile(np.asarray(network.pd_mw, np.float32), (2, 1))
    jaxpr = jax.make_jaxpr(jax.vmap(lambda p: dcopf_with_fallback(network, p)))(pd)
    assert "lu" not in {e.primitive.name for e in jaxpr_equations(jaxpr.jaxpr)}


def test_the_fallback_computes_a_traced_networks_ptdf():
    network = network_from_matpower("case14")
    pd = np.asarray(network.pd_mw, np.float32)
    scales = np.array([1.0, 1.7], np.float32)

    def solve_at(scale):
        return dcopf_with_fallback(network.replace(x_pu=network.x_pu * scale), pd * 1.3)

    batched = jax.jit(jax.vmap(solve_at))(scales)
    for i, scale in enumerate(scales):
        alone = jax.jit(solve_at)(scale)
        assert bool(batched.converged[i]) and bool(alone.converged)
        np.testing.assert_allclose(batched.lmp[i], alone.lmp, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(batched.p_branch_mw[i], alone.p_branch_mw, atol=1e-3)
