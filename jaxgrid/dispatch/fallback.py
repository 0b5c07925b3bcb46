"""The DC-OPF by the copper plate where no line binds, by the interior point elsewhere.

Most dispatches of a day leave every line below its rating; for them the DC-OPF's
solution is the economic dispatch on a copper plate (:mod:`.copper_plate`), found
exactly without iterating, while the interior point (:func:`~jaxgrid.dispatch.dcopf`)
spends ``iterations`` factorisations on each. :func:`dcopf_with_fallback` therefore
solves the copper plate for every problem and the interior point only where the
copper plate's flows exceed a monitored rating (or no consistent price exists), through
:func:`~jaxgrid.masked.masked_apply`: under ``jax.vmap`` those problems are gathered,
``capacity`` at a time, and a batch where no line binds runs no interior point at all;
unbatched it is a ``lax.cond``. The result is the copper plate's where it is the
optimum and the interior point's elsewhere; where the optimum is not unique (load shed
or output spilled at several buses at one price) the two may split it differently at
the same cost.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax.numpy as jnp

from jaxgrid.dispatch.copper_plate import copper_plate_dispatch
from jaxgrid.dispatch.dcopf import (
    DEFAULT_ITERATIONS,
    DCOPFParams,
    DispatchResult,
    dcopf,
    static_sets,
)
from jaxgrid.grid.network import Network
from jaxgrid.masked import masked_apply
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array

CAPACITY = 16  # problems of a batch the interior point takes per round


@full_precision
def dcopf_with_fallback(
    network: Network,
    pd_mw: Array | None = None,
    *,
    cost_poly: Array | None = None,
    commitment: Array | None = None,
    rate_mva: Array | None = None,
    reserve_mw: Array | float = 0.0,
    params: DCOPFParams | None = None,
    monitored: Sequence[int] | None = None,
    shed_at: Sequence[int] | None = None,
    spill_at: Sequence[int] | None = None,
    iterations: int = DEFAULT_ITERATIONS,
    capacity: int = CAPACITY,
) -> DispatchResult:
    """:func:`~jaxgrid.dispatch.dcopf`'s solution of the same arguments (see the module
    docstring), with ``capacity`` the problems of a batch solved by the interior point
    per round."""
    params = DCOPFParams() if params is None else params
    monitored, shed_at, spill_at = static_sets(
        network, pd_mw, rate_mva, monitored, shed_at, spill_at
    )
    pd = network.pd_mw if pd_mw is None else pd_mw
    poly = network.cost_poly if cost_poly is None else cost_poly
    on = network.gen_in_service if commitment is None else commitment
    rate = network.rate_mva if rate_mva is None else rate_mva
    args = (network, jnp.asarray(pd), jnp.asarray(poly), jnp.asarray(on), jnp.asarray(rate))
    args = args + (jnp.asarray(reserve_mw), params)
    sets = dict(monitored=tuple(monitored), shed_at=tuple(shed_at), spill_at=tuple(spill_at))
    plate = _solve(copper_plate_dispatch, sets, *args)
    interior = functools.partial(_solve, functools.partial(dcopf, iterations=iterations), sets)
    return masked_apply(interior, ~plate.converged, plate, *args, capacity=capacity)


def _solve(solver, sets, network, pd, poly, on, rate, reserve, params) -> DispatchResult:
    return solver(
        network,
        pd,
        cost_poly=poly,
        commitment=on,
        rate_mva=rate,
        reserve_mw=reserve,
        params=params,
        **sets,
    )
