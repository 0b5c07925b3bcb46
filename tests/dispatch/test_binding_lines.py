"""The binding-lines dispatch against HiGHS where its certificate holds, on cases with
lines tightened until several bind, and its certificate's refusal where the optimum
sheds load behind a binding line (a block of constant cost at its price)."""

import jax
import numpy as np
import pytest
from conftest import full_only, x64
from highs_dcopf import solve
from instances import draw, tightened
from test_copper_plate import _at
from test_dcopf import _check

from jaxgrid.dispatch import (
    DCOPFParams,
    binding_lines_dispatch,
    copper_plate_dispatch,
    dcopf_with_fallback,
)
from jaxgrid.dispatch.binding_lines import ROUNDS, binding_lines_search
from jaxgrid.dispatch.dcopf import tolerance_mw
from jaxgrid.grid import network_from_matpower

# these instances bind up to six lines: room for eight, and rounds to find them
SEARCH = dict(slots=8, rounds=8, newton_steps=4)


def test_matches_highs_where_certified():
    certified_binding = []
    with x64():
        for name in ("case30", "case118"):
            network = tightened(network_from_matpower(name))
            pd, poly, commitment = draw(network, np.random.default_rng(11), 6)

            def both(p, c, u, network=network):
                kwargs = dict(cost_poly=c, commitment=u)
                return (
                    binding_lines_dispatch(network, p, **kwargs, **SEARCH),
                    copper_plate_dispatch(network, p, **kwargs),
                )

            lines, plate = jax.jit(jax.vmap(both))(pd, poly, commitment)
            for i in np.flatnonzero(np.asarray(lines.converged)):
                ref = solve(network, pd[i], cost_poly=poly[i], commitment=commitment[i])
                result = _at(lines, i)
                _check(result, ref, network, f"{name} instance {i}")
                assert int(result.iterations) == 0
                if not bool(plate.converged[i]):
                    certified_binding.append(int(np.sum(np.asarray(result.line_at_limit))))
    # the tightened lines bind: the copper plate refused these, Newton's prices hold
    assert len(certified_binding) >= 6 and max(certified_binding) >= 2


def test_default_search_certifies_most_congested_instances():
    """The default search (4 slots, rounds of 2 Newton steps), as the fallback runs it:
    each step's length minimises the prices' potential along its direction. Taking the
    one of four fixed lengths that least left of the error, it certified 40 of these 64
    instances of case118 with six tightened lines (where a step crossed a response's
    kink no length reduced the error, and the search stopped); this way 54."""
    with x64():
        network = tightened(network_from_matpower("case118"))
        pd, poly, commitment = draw(network, np.random.default_rng(11), 64)
        lines = jax.jit(
            jax.vmap(lambda p, c, u: binding_lines_dispatch(network, p, cost_poly=c, commitment=u))
        )(pd, poly, commitment)
        certified = np.flatnonzero(np.asarray(lines.converged))
        assert len(certified) >= 50
        for i in certified[::6]:
            ref = solve(network, pd[i], cost_poly=poly[i], commitment=commitment[i])
            _check(_at(lines, i), ref, network, f"case118 instance {i}")


def test_later_rounds_only_continue_the_first_where_they_do_not_certify():
    """Every problem takes ``first_rounds`` of the search and the rest continue it only
    where those do not certify: the batch certifies what every round on every problem
    certifies, at the same prices, and a problem alone (a ``lax.cond``) gets its batched
    result."""
    with x64():
        network = tightened(network_from_matpower("case118"))
        pd, poly, commitment = draw(network, np.random.default_rng(11), 64)

        def search(**kwargs):
            one = lambda p, c, u: binding_lines_dispatch(  # noqa: E731
                network, p, cost_poly=c, commitment=u, **kwargs
            )
            return jax.jit(jax.vmap(one))(pd, poly, commitment), one

        (split, one), (whole, _) = search(first_rounds=2), search(first_rounds=ROUNDS)
        (first, _) = search(first_rounds=2, rounds=2)
        first_ok, whole_ok = np.asarray(first.converged), np.asarray(whole.converged)
        later = np.flatnonzero(whole_ok & ~first_ok)  # the later rounds certify these
        picked = np.concatenate([later[:2], np.flatnonzero(first_ok)[:2]])
        alone = {i: jax.jit(one)(pd[i], poly[i], commitment[i]) for i in picked}
    assert len(later) >= 5
    np.testing.assert_array_equal(np.asarray(split.converged), whole_ok)
    np.testing.assert_allclose(
        np.asarray(split.lmp)[whole_ok], np.asarray(whole.lmp)[whole_ok], rtol=1e-7, atol=1e-6
    )
    for i, result in alone.items():
        assert bool(result.converged)
        np.testing.assert_allclose(result.lmp, split.lmp[i], rtol=1e-9, atol=1e-9)


def test_the_later_rounds_stop_where_the_certificate_holds():
    """A continued search stops once its certificate holds: a problem certified after
    ``k`` later rounds keeps that result, to the last bit, however many more it is
    allowed (further rounds would only add round-off: on float32 days of
    ``tso118-v0`` 22 fixed rounds certified fewer problems than 14)."""
    with x64():
        network = tightened(network_from_matpower("case118"))
        pd, poly, commitment = draw(network, np.random.default_rng(11), 64)

        def continued(rounds):
            def one(p, c, u):
                kwargs = dict(cost_poly=c, commitment=u)
                _, search = binding_lines_search(network, p, rounds=2, **kwargs)
                return binding_lines_search(network, p, search=search, rounds=rounds, **kwargs)[0]

            return jax.jit(jax.vmap(one))(pd, poly, commitment)

        results = {k: continued(k) for k in (0, 1, 2, 12)}
    certified = {k: np.asarray(r.converged) for k, r in results.items()}
    checked = 0
    for k in (1, 2):
        first_here = np.flatnonzero(certified[k] & ~certified[k - 1])
        checked += len(first_here)
        assert np.all(certified[12][first_here])
        np.testing.assert_array_equal(
            np.asarray(results[12].lmp)[first_here], np.asarray(results[k].lmp)[first_here]
        )
    assert checked >= 3
    assert np.sum(certified[12]) > np.sum(certified[2])


def test_the_fallback_continues_the_binding_lines_across_its_batch():
    """:func:`dcopf_with_fallback` runs the later rounds as a stage of their own, gathered
    across its whole batch rather than inside each gathered round of the first: the
    problems that only the later rounds certify are still the binding lines' (no
    interior point iteration), at the prices of the whole search."""
    with x64():
        network = tightened(network_from_matpower("case118"))
        pd, poly, commitment = draw(network, np.random.default_rng(11), 64)

        def batched(solver, **kwargs):
            one = lambda p, c, u: solver(network, p, cost_poly=c, commitment=u, **kwargs)  # noqa: E731
            return jax.jit(jax.vmap(one))(pd, poly, commitment)

        first = batched(binding_lines_dispatch, rounds=2)
        whole = batched(binding_lines_dispatch)
        fallback = batched(dcopf_with_fallback)
    later = np.flatnonzero(np.asarray(whole.converged) & ~np.asarray(first.converged))
    assert len(later) >= 5
    assert np.all(np.asarray(fallback.converged)[later])
    assert np.all(np.asarray(fallback.iterations)[later] == 0)
    np.testing.assert_allclose(
        np.asarray(fallback.lmp)[later], np.asarray(whole.lmp)[later], rtol=1e-7, atol=1e-6
    )


@full_only
def test_certificate_refuses_shed_behind_a_binding_line():
    with x64():
        network = tightened(network_from_matpower("case30"))
        pd = 3.0 * np.asarray(network.pd_mw)  # more than the units can serve
        result = binding_lines_dispatch(network, pd, params=DCOPFParams(voll=5000.0))
        ref = solve(network, pd, voll=5000.0)
    assert ref["status"] == "Optimal" and np.sum(ref["shed_mw"]) > 0
    assert not bool(result.converged)
    assert float(result.primal_residual_mw) > 1e-3


def test_the_search_switches_a_reserve_price_its_start_got_wrong():
    """The reserve's price is an active set of its own: started from a result whose
    reserve price is the shortfall's where the optimum holds the reserve, or 0 where it
    is short (the copper plate's, once lines bind and load is shed behind them; another
    stage's), the later rounds switch it once the lines are solved at it and certify
    HiGHS's optimum. They kept the start's price and certified none of these."""
    with x64():
        network = tightened(network_from_matpower("case118"))
        pd, poly, commitment = draw(network, np.random.default_rng(11), 8)
        capacity = np.sum(np.asarray(network.pmax_mw) * commitment, axis=1)
        shortfall_price = DCOPFParams().reserve_shortfall_price
        cases = {  # the reserve requirement, MW, and the start's (wrong) reserve price
            "held": (0.05 * pd.sum(axis=1), shortfall_price),
            "short": (capacity - pd.sum(axis=1) + 30.0, 0.0),
        }
        checked = 0
        for label, (reserve, wrong) in cases.items():

            def one(p, c, u, r, wrong=wrong):
                kwargs = dict(cost_poly=c, commitment=u, reserve_mw=r)
                plate = copper_plate_dispatch(network, p, **kwargs)
                start = plate.replace(reserve_price=jax.numpy.asarray(wrong, plate.lmp.dtype))
                return binding_lines_dispatch(network, p, plate=start, **kwargs)

            results = jax.jit(jax.vmap(one))(pd, poly, commitment, reserve)
            assert np.sum(np.asarray(results.converged)) >= 6, label
            for i in np.flatnonzero(np.asarray(results.converged))[:2]:
                ref = solve(
                    network,
                    pd[i],
                    cost_poly=poly[i],
                    commitment=commitment[i],
                    reserve_mw=reserve[i],
                )
                result = _at(results, i)
                _check(result, ref, network, f"{label} instance {i}")
                assert float(result.reserve_price) == pytest.approx(ref["reserve_price"], abs=1e-3)
                checked += 1
    assert checked == 4


def test_the_certificate_holds_the_balance_to_the_interior_points_tolerance():
    """The certificate accepts a balance within :func:`~jaxgrid.dispatch.dcopf.tolerance_mw`
    of the demand, what the interior point's convergence accepts (it was 1e-3 MW plus
    round-off, and float32 searches that settled within 0.02 MW at prices near the value
    of lost load fell to the interior point): here a copper plate's price moved until
    the balance is off by half of that."""
    with x64():
        network = tightened(network_from_matpower("case118"))
        pd = 0.6 * np.asarray(network.pd_mw)  # no line binds
        plate = copper_plate_dispatch(network, pd)

        def started_at(shift):  # no round: the certificate where the search starts
            start = plate.replace(lmp_energy=plate.lmp_energy + shift)
            return binding_lines_search(network, pd, plate=start, rounds=0)[0]

        slope = float(started_at(1e-3).primal_residual_mw) / 1e-3  # MW per currency/MWh
        tolerance = float(tolerance_mw(np.sum(pd)))
        result = started_at(0.5 * tolerance / slope)
    assert bool(plate.converged)
    assert 1.5e-3 < float(result.primal_residual_mw) <= tolerance
    assert bool(result.converged)
