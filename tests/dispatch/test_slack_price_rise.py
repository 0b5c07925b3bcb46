"""``DCOPFParams.slack_price_rise``: with the prices of shed and spill rising across each
bus's range, the shed's split over the buses is unique, every stage of
``dcopf_with_fallback`` returns it, and it is HiGHS's optimum of the same QP bus by bus
(without the rise, HiGHS and the interior point may return different splits of one
cost: the tests of the linear program compare only the total shed)."""

import jax
import numpy as np
import pytest
from conftest import full_only, x64
from highs_dcopf import solve
from instances import draw, tightened
from test_copper_plate import _unlimited
from test_dcopf import STORED_STEPS, _check, _check_kkt, stored_step

from jaxgrid.dispatch import (
    DCOPFParams,
    binding_lines_dispatch,
    copper_plate_dispatch,
    dcopf,
    dcopf_with_fallback,
)
from jaxgrid.dispatch.binding_lines import binding_lines_search
from jaxgrid.grid import network_from_matpower

RISE, VOLL = 0.01, 5000.0


def _same_split(result, ref, network, what, atol_mw=1e-4):
    """HiGHS's optimum (``_check``) with its shed and spill bus by bus, MW."""
    _check(result, ref, network, what)
    np.testing.assert_allclose(result.shed_mw, ref["shed_mw"], atol=atol_mw, err_msg=what)
    np.testing.assert_allclose(result.spill_mw, ref["spill_mw"], atol=atol_mw, err_msg=what)


def test_shed_behind_binding_lines_is_split_as_highs_splits_it():
    """case30 with six lines tightened and three times its load: load is shed behind the
    binding lines; the interior point and the fallback's result equal HiGHS's bus by bus,
    and each bus sheds the share of its load that its price reaches across the rise."""
    params = DCOPFParams(voll=VOLL, slack_price_rise=RISE)
    with x64():
        network = tightened(network_from_matpower("case30"))
        pd = 3.0 * np.asarray(network.pd_mw)
        ref = solve(network, pd, voll=VOLL, slack_price_rise=RISE)
        interior = dcopf(network, pd, params=params)
        stages = dcopf_with_fallback(network, pd, params=params)
        for result, what in ((interior, "interior point"), (stages, "fallback")):
            _same_split(result, ref, network, what)
            assert bool(result.infeasible) and np.sum(np.asarray(result.line_at_limit)) >= 1
    shed, lmp = np.asarray(interior.shed_mw), np.asarray(interior.lmp)
    partial = (shed > 1e-3) & (shed < pd - 1e-3)
    assert np.sum(partial) >= 2  # buses sharing out a shed
    np.testing.assert_allclose(
        shed[partial] / pd[partial], (lmp[partial] - VOLL) / (VOLL * RISE), atol=1e-5
    )


@pytest.mark.parametrize("times_load", [3.0, 0.3])
def test_copper_plate_prices_the_rise_as_highs_does(times_load):
    """Without line limits: at three times the load every bus sheds the same share of
    its load, at the price that share reaches; at 0.3 times the must-run units' minimum
    output is spilled, each bus the same share of it."""
    params = DCOPFParams(voll=VOLL, spill_price=VOLL, slack_price_rise=RISE)
    with x64():
        network = _unlimited("case30")
        pmin = np.asarray(network.pmax_mw) * 0.5  # enough must-run output to spill
        network = network.replace(pmin_mw=pmin)
        pd = times_load * np.asarray(network.pd_mw)
        ref = solve(network, pd, voll=VOLL, spill_price=VOLL, slack_price_rise=RISE)
        result = copper_plate_dispatch(network, pd, params=params)
        assert bool(result.converged)
        _same_split(result, ref, network, f"{times_load} x load")
    slack = np.asarray(result.shed_mw if times_load > 1 else result.spill_mw)
    assert np.sum(slack) > 1.0


@full_only
@pytest.mark.parametrize("stored", STORED_STEPS)
def test_stored_tso300_steps_meet_the_rising_prices_optimality_conditions(stored):
    """The two stored ``tso300-v0`` steps (degenerate without the rise: shed behind
    binding lines at several buses of one price) converge with it, to the point where
    each bus's shed is priced by its share: the optimality conditions of a QP strictly
    convex in the shed, so that split is the only one."""
    network, data, prices, result = stored_step(stored, rise=RISE)
    assert bool(result.converged)
    _check_kkt(network, data, prices, result, rise=RISE)
    assert np.sum(result.shed_mw) > 1.0 and np.sum(result.line_at_limit) >= 1


def test_binding_lines_certify_a_shed_behind_a_binding_line_with_the_rise():
    """case30 with one line tightened and load 10 % above the units' capacity: load is
    shed behind that line. Without the rise the optimum needs a block of constant cost
    at its price and the binding lines' stage cannot certify it; with the rise each bus's
    shed follows its price, and the stage's certified result is HiGHS's bus by bus."""
    with x64():
        network = tightened(network_from_matpower("case30"), n_lines=1, factor=0.9)
        capacity = float(np.sum(network.pmax_mw))
        pd = 1.1 * capacity / float(np.sum(network.pd_mw)) * np.asarray(network.pd_mw)
        for rise in (0.0, RISE):
            params = DCOPFParams(voll=VOLL, slack_price_rise=rise)
            result = binding_lines_dispatch(network, pd, params=params)
            assert bool(result.converged) == (rise > 0), f"rise {rise}"
        ref = solve(network, pd, voll=VOLL, slack_price_rise=RISE)
        _same_split(result, ref, network, "binding lines")
        assert np.sum(np.asarray(result.line_at_limit)) == 1 and bool(result.infeasible)


def test_first_rounds_certify_a_shed_behind_a_binding_line():
    """The binding lines' first rounds search among the output blocks alone, and with
    every responder only where the blocks' prices make a shed or spill responder answer.
    Where load is shed behind a binding line (case30, one line tightened, load 10 %
    above the units' capacity) the blocks alone have no root and their prices run off;
    the first rounds' search with every responder then certifies HiGHS's optimum bus by
    bus, as it did before the blocks' search (handed on to the later rounds instead, at
    the start's prices, it did not certify within the first rounds)."""
    params = DCOPFParams(voll=VOLL, slack_price_rise=RISE)
    with x64():
        network = tightened(network_from_matpower("case30"), n_lines=1, factor=0.9)
        capacity = float(np.sum(network.pmax_mw))
        pd = 1.1 * capacity / float(np.sum(network.pd_mw)) * np.asarray(network.pd_mw)
        first, _ = binding_lines_search(network, pd, params=params)
        first = jax.tree_util.tree_map(np.asarray, first)
        ref = solve(network, pd, voll=VOLL, slack_price_rise=RISE)
    assert bool(first.converged) and np.sum(first.shed_mw) > 1.0
    _same_split(first, ref, network, "the binding lines' first rounds")
    assert np.sum(first.line_at_limit) == 1


def test_binding_lines_move_where_every_response_is_saturated():
    """case30 with six lines tightened, 64 random loads, costs and commitments, with the
    rise: the load behind a binding line is shed at prices the Newton directions do not
    reach once every response is saturated (a zero Jacobian). With the steepest descent
    beside them and the trials chosen by the potential the search certifies 23 of the 64
    (10 before both); each certified result is HiGHS's optimum bus by bus."""
    params = DCOPFParams(voll=VOLL, slack_price_rise=RISE)
    with x64():
        network = tightened(network_from_matpower("case30"))
        pd, poly, commitment = draw(network, np.random.default_rng(11), 64)
        lines = jax.jit(
            jax.vmap(
                lambda p, c, u: binding_lines_dispatch(
                    network, p, cost_poly=c, commitment=u, params=params
                )
            )
        )(pd, poly, commitment)
        certified = np.flatnonzero(np.asarray(lines.converged))
        assert len(certified) >= 18
        sheds = 0
        for i in certified[::3]:
            ref = solve(
                network,
                pd[i],
                cost_poly=poly[i],
                commitment=commitment[i],
                voll=VOLL,
                slack_price_rise=RISE,
            )
            result = jax.tree_util.tree_map(lambda x, i=i: x[i], lines)
            _same_split(result, ref, network, f"instance {i}")
            sheds += float(np.sum(ref["shed_mw"])) > 1e-3
    assert sheds >= 2  # load shed behind the lines among those checked
