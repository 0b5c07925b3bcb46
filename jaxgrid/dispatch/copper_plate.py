"""Economic dispatch on a copper plate: :func:`~jaxgrid.dispatch.dcopf`'s problem without
its line limits, solved exactly, and whether that is also the DC-OPF's solution.

Without line limits the problem has one price ``lam`` (currency/MWh) for the whole
system, and every variable's output follows from it alone: an output block with
marginal cost ``a + b x`` on ``0 <= x <= w`` produces ``clip((lam - a) / b, 0, w)``
(``b > 0``), a block of constant marginal cost (``b = 0``: a piecewise-linear segment,
shed load at ``voll``, the must-run output that is not spilled, priced at
``-spill_price``) all of ``w`` above ``a``, nothing below it and any share at ``lam =
a``. The total ``F(lam)`` is non-decreasing and piecewise linear with jumps at the
blocks' breakpoints, so the price that balances the system is found exactly: the
breakpoint where ``F`` jumps across the demand, else the one below the demand,
interpolated along its segment (``F`` evaluated at every breakpoint, about ``4 n^2``
operations for ``n`` blocks, no iteration). Blocks of equal cost at the price share
what is left in proportion to their widths; shed load and spilled output are spread
over their buses in proportion to the most each bus can shed or spill. With
:attr:`~jaxgrid.dispatch.DCOPFParams.slack_price_rise` 0 the optimum is not unique
there, and :func:`~jaxgrid.dispatch.dcopf` may return another split of the same cost;
with a rise that split is the unique optimum, shed and the output not spilled each one
sloped block whose buses all sit at the same share of their range. The reserve
requirement prices all units' output alike, so it moves the generators' marginal costs
by its price ``rho`` against shed and spill: it is solved
for ``rho = 0`` and for ``rho = reserve_shortfall_price`` and the one consistent with
its shortfall is kept.

The result is the DC-OPF's optimum, with the line limits' duals 0 and every bus at the
one price, exactly when the flows it causes stay within the monitored ratings:
``converged`` says so (and that a consistent price was found). A binding line, or a
reserve held at exactly its requirement with load shed (the reserve's price then lies
strictly between the two), leaves it False; :func:`~jaxgrid.dispatch.dcopf_with_fallback`
then solves the DC-OPF by the interior point. ``iterations`` is 0, ``dual_residual``
and ``gap`` are 0 (the prices meet the optimality conditions by construction) and
``primal_residual_mw`` is the balance's error or the largest flow above a monitored
rating.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from jaxgrid.dispatch.dcopf import (
    DCOPFParams,
    DispatchResult,
    _problem_data,
    _result,
    _rise_per_mw,
)
from jaxgrid.grid.network import Network
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array


@full_precision
def copper_plate_dispatch(
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
    ptdf: Array | None = None,
) -> DispatchResult:
    """The economic dispatch without line limits, as a :class:`DispatchResult` whose
    ``converged`` says whether it is :func:`~jaxgrid.dispatch.dcopf`'s solution of the
    same arguments (see the module docstring; the arguments are :func:`dcopf`'s)."""
    params = DCOPFParams() if params is None else params
    d = _problem_data(
        network,
        pd_mw,
        cost_poly,
        commitment,
        rate_mva,
        reserve_mw,
        monitored,
        shed_at,
        spill_at,
        ptdf,
    )
    dtype = d.dtype
    shed_total = jnp.sum(d.shed_max)
    spill_total = jnp.sum(d.spill_max)
    # the blocks' output balances demand net of the units' minimum output; the output
    # not spilled (spill_total - spill) is a block priced at -spill_price
    demand = jnp.sum(d.pd) + jnp.sum(network.gs_mw) - jnp.sum(d.lower) + spill_total
    headroom = jnp.sum(jnp.where(d.on, d.pmax, 0.0)) - jnp.sum(d.lower) - d.reserve
    reserve_on = d.reserve > 0

    # shed and the output not spilled, each one block: with a rise, every bus's share of
    # its range follows the one price, so the buses' blocks add up to one of the total
    rise_frac = params.slack_price_rise
    shed_rise = _rise_per_mw(params.voll, rise_frac, shed_total)
    kept_rise = _rise_per_mw(params.spill_price, rise_frac, spill_total)

    def dispatch(rho):
        start = jnp.concatenate(
            [
                d.slope.reshape(-1) + rho,
                jnp.stack([params.voll, -params.spill_price * (1.0 + rise_frac)]).astype(dtype),
            ]
        )
        rise = jnp.concatenate([d.curvature.reshape(-1), jnp.stack([shed_rise, kept_rise])])
        width = jnp.concatenate([d.width.reshape(-1), jnp.stack([shed_total, spill_total])])
        lam, x, found = _balance(start, rise, width, demand)
        blocks = x[:-2]
        shortfall = jnp.where(reserve_on, jnp.sum(blocks) - headroom, 0.0)
        return lam, x, found, shortfall

    lams, xs, founds, shortfalls = jax.vmap(dispatch)(
        jnp.stack([jnp.zeros((), dtype), jnp.asarray(params.reserve_shortfall_price, dtype)])
    )
    # rho = 0 holds if the reserve is kept; rho = its price if it is short
    held = shortfalls[0] <= 0.0
    pick = jnp.where(held, 0, 1)
    consistent = held | (shortfalls[1] >= 0.0)
    lam, x, found = lams[pick], xs[pick], founds[pick]
    shortfall = jnp.maximum(shortfalls[pick], 0.0)
    blocks = x[:-2].reshape(d.width.shape)
    shed_share = jnp.where(shed_total > 0, x[-2] / jnp.where(shed_total > 0, shed_total, 1.0), 0)
    spill_share = jnp.where(
        spill_total > 0, 1.0 - x[-1] / jnp.where(spill_total > 0, spill_total, 1.0), 0.0
    )
    n_bus = network.n_bus
    shed = jnp.zeros(n_bus, dtype).at[d.shed_buses].set(shed_share * d.shed_max)
    spill = jnp.zeros(n_bus, dtype).at[d.spill_buses].set(spill_share * d.spill_max)
    result = _result(
        network,
        d,
        params,
        blocks=blocks,
        shed=shed,
        spill=spill,
        shortfall=shortfall,
        energy=lam,
        line_mu=jnp.zeros(len(d.monitored), dtype),
        reserve_price=jnp.where(held, 0.0, params.reserve_shortfall_price).astype(dtype),
        converged=jnp.zeros((), bool),
        iterations=jnp.zeros((), jnp.int32),
        primal_residual_mw=jnp.zeros((), dtype),
        dual_residual=jnp.zeros((), dtype),
        gap=jnp.zeros((), dtype),
    )
    rate = d.rate[d.monitored]
    line_on = network.branch_in_service[d.monitored] & jnp.isfinite(rate)
    over = jnp.where(line_on, jnp.abs(result.p_branch_mw[d.monitored]) - rate, 0.0)
    imbalance = jnp.abs(
        jnp.sum(result.pg_mw)
        + jnp.sum(shed)
        - jnp.sum(spill)
        - jnp.sum(d.pd)
        - jnp.sum(network.gs_mw)
    )
    primal = jnp.maximum(jnp.max(over, initial=0.0), imbalance)
    return result.replace(
        converged=found & consistent & jnp.all(over <= 0.0),
        primal_residual_mw=primal,
    )


def _balance(start: Array, rise: Array, width: Array, demand: Array):
    """``(lam, x, found)``: the price ``lam`` at which blocks with marginal cost ``start +
    rise * x`` on ``[0, width]`` (each ``(n,)``) produce ``demand`` in all, their outputs
    ``x`` ``(n,)`` at that price, and whether such a price exists."""
    sloped = rise > 0
    safe_rise = jnp.where(sloped, rise, 1.0)

    def output(price, share):
        """``(n,)`` outputs at ``price``; a flat block priced exactly there gives ``share``
        of its width."""
        ramp = jnp.clip((price - start) / safe_rise, 0.0, width)
        flat = width * jnp.where(start < price, 1.0, jnp.where(start == price, share, 0.0))
        return jnp.where(sloped, ramp, flat)

    points = jnp.concatenate([start, start + jnp.where(sloped, rise * width, 0.0)])
    below = jax.vmap(lambda t: jnp.sum(output(t, 0.0)))(points)  # F just below each point
    above = jax.vmap(lambda t: jnp.sum(output(t, 1.0)))(points)  # and just above
    hit = (below <= demand) & (demand <= above)
    short = above < demand
    t_low = jnp.max(jnp.where(short, points, -jnp.inf))
    at_low = jnp.sum(output(t_low, 1.0))
    # F's slope just above t_low: the sloped blocks inside their range there
    slope = jnp.sum(
        jnp.where(sloped & (start <= t_low) & (t_low < start + rise * width), 1.0 / safe_rise, 0.0)
    )
    between = t_low + (demand - at_low) / jnp.where(slope > 0, slope, 1.0)
    lam = jnp.where(jnp.any(hit), jnp.max(jnp.where(hit, points, -jnp.inf)), between)
    found = jnp.any(hit) | (jnp.any(short) & (slope > 0))
    lam = jnp.where(found, lam, 0.0)
    low, high = jnp.sum(output(lam, 0.0)), jnp.sum(output(lam, 1.0))
    jump = high - low
    share = jnp.clip((demand - low) / jnp.where(jump > 0, jump, 1.0), 0.0, 1.0)
    return lam, output(lam, share), found
