"""A uniform-price nodal market on offers: markups, clearing by DC-OPF, settlement.

Each generator offers its true cost curve scaled by ``1 + markup``; the market operator
dispatches the offers at least offered cost within the generators' limits and the branch
ratings (:func:`jaxgrid.dispatch.dcopf_with_fallback`: exact on a copper plate where no
line binds, the interior point elsewhere) and pays every generator the locational
marginal price (LMP) of its bus for its whole output. A generator's profit is that
revenue less its *true* cost: a markup changes the dispatch and the prices, never what
producing costs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxgrid.dispatch import DCOPFParams, DispatchResult, dcopf_with_fallback
from jaxgrid.grid.network import Network
from jaxgrid.types import Array


class Settlement(NamedTuple):
    """What the market pays and what it costs, per generator, for one clearing.

    Attributes:
        dispatch: the DC-OPF of the offers (``pg_mw``, ``lmp``, ``shed_mw``, ...).
        price: ``(n_gen,)`` LMP at each generator's bus, currency/MWh.
        revenue: ``(n_gen,)`` ``price * pg_mw``, currency/h.
        true_cost: ``(n_gen,)`` cost of producing ``pg_mw`` by the true curve, currency/h.
        profit: ``(n_gen,)`` ``revenue - true_cost``, currency/h.
    """

    dispatch: DispatchResult
    price: Array
    revenue: Array
    true_cost: Array
    profit: Array


def offer_curves(cost_poly: Array, markup: Array) -> Array:
    """``(n_gen, 3)`` offered cost curves ``(1 + markup) * (c2 p^2 + c1 p)`` from the true
    curves ``cost_poly`` ``(n_gen, 3)`` (columns ``c2, c1, c0`` in currency/MW²h,
    currency/MWh, currency/h) and ``markup`` ``(n_gen,)`` (0: truthful): every marginal
    cost offered ``1 + markup`` times the true one. The fixed cost ``c0`` is not offered
    (it does not change the dispatch)."""
    variable = cost_poly.at[:, 2].set(0.0)
    return variable * (1.0 + markup)[:, None]


def true_cost(cost_poly: Array, pg_mw: Array) -> Array:
    """``(n_gen,)`` true cost of producing ``pg_mw`` ``(n_gen,)``, currency/h: the whole
    quadratic ``c2 p^2 + c1 p + c0`` (every unit is committed, so ``c0`` is paid always)."""
    c2, c1, c0 = cost_poly[:, 0], cost_poly[:, 1], cost_poly[:, 2]
    return (c2 * pg_mw + c1) * pg_mw + c0


def clear_market(
    network: Network,
    pd_mw: Array,
    cost_poly: Array,
    markup: Array,
    rate_mva: Array,
    voll: Array,
    iterations: int,
) -> Settlement:
    """Clear the offers ``offer_curves(cost_poly, markup)`` against the bus loads ``pd_mw``
    ``(n_bus,)`` (MW) on ``network`` with branch ratings ``rate_mva`` ``(n_branch,)`` (MVA,
    ``inf`` = none), load shed at ``voll`` (currency/MWh) where it cannot be served, and
    settle at the LMPs. Every branch is monitored and load may be shed at every bus, so
    the programme is the same for any traced ratings and loads; ``iterations`` is the
    interior point budget (static)."""
    n_bus, n_branch = network.n_bus, network.n_branch
    dispatch = dcopf_with_fallback(
        network,
        pd_mw,
        cost_poly=offer_curves(cost_poly, markup),
        rate_mva=rate_mva,
        params=DCOPFParams(voll=voll),
        monitored=range(n_branch),
        shed_at=range(n_bus),
        iterations=iterations,
        binding_lines=False,  # on case5 it costs more than it saves (measured there)
    )
    price = dispatch.lmp[network.gen_bus]
    revenue = price * dispatch.pg_mw
    cost = true_cost(cost_poly, dispatch.pg_mw)
    return Settlement(
        dispatch=dispatch,
        price=price,
        revenue=revenue,
        true_cost=cost,
        profit=revenue - cost,
    )


def rising_marginal_costs(cost_poly, pmax_mw, rise: float):
    """Host-side: ``cost_poly`` ``(n_gen, 3)`` with ``c2 = rise * c1 / (2 pmax)`` added,
    so that each unit's marginal cost climbs by ``rise`` (a share of ``c1``) from zero to
    full output (a heat-rate curve's shape; MATPOWER's case5 has flat marginal costs)."""
    poly = np.array(cost_poly, np.float64)
    poly[:, 0] += rise * poly[:, 1] / (2.0 * np.maximum(np.asarray(pmax_mw, np.float64), 1e-9))
    return poly
