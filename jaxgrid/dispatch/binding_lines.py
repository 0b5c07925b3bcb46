"""The DC-OPF where a few lines bind: Newton's method on the prices of the balance and of
those lines, and a certificate that the result is the optimum.

Where lines bind, the DC-OPF's prices are the energy price ``lam`` and one price ``m_l``
per binding line; every bus's price is ``lam + sum_l m_l PTDF[l, bus]`` (its LMP), and
every variable responds to its bus's price alone: an output block with marginal cost
``a + b x`` on ``[0, w]`` produces ``clip((price - rho - a) / b, 0, w)`` (``rho`` the
reserve's price, taken from the copper plate, :mod:`.copper_plate`), shed load is all
of the bus's above ``voll`` and spilled output all of it below ``-spill_price`` (with
:attr:`~jaxgrid.dispatch.DCOPFParams.slack_price_rise`, the share of its range that the
bus's price reaches across the rise). The prices are the root of ``1 + K``
piecewise-linear equations: the balance, and each binding line's flow at its rating.
Newton's method finds that root in a few steps (its matrix is ``E D E'``, ``(1 + K)``
square, ``E`` the balance's and the lines' PTDF rows at the blocks' and the buses'
places and ``D`` the blocks, sheds and spills inside their range, ``1 / slope`` each).
The equations are the gradient of a convex potential of the prices (each response is
the derivative of its block's, shed's or spill's conjugate cost at its price), so each
step goes along its direction to the potential's minimum there: the root of the
potential's derivative along it, monotone and piecewise linear in the step's length,
bracketed on lengths ``BRACKET`` and ``REFINE`` points inside the bracket and
interpolated (the prices are affine in the length, so each trial costs the responses
alone, no product with the PTDF rows). Taking instead, of four fixed lengths, the one
that most reduced the equations' error stalled where a step crosses a response's kink
(no length reduced it): on 64 instances of case118 with six tightened lines (float64)
the search certified 40 that way and 54 this way; on ``tso118-v0``'s random days the
interior point was left 6.5 % of the steps and now 1.4 % (``tests/dispatch/
test_binding_lines.py``). The
binding lines are found by an active set over ``rounds``: each round drops a line whose
price has the wrong sign (a limit that pushes rather than holds), adds the monitored line
most over its rating into one of ``slots`` places, and takes ``newton_steps`` Newton
steps.

``converged`` is a certificate of optimality, checked on the result: the balance holds,
every monitored flow is within its rating, every binding line is at its rating with a
price of the right sign, and the reserve's price is consistent with its shortfall. The
optimality conditions left, each variable's response to its bus's price, hold by
construction. Where the optimum needs a block of constant cost at its price (without a
rise, shed load or spilled output at a bus whose price is ``voll`` or ``-spill_price``;
a piecewise-linear segment), a binding set larger than ``slots``, or more rounds, the
certificate fails and :func:`~jaxgrid.dispatch.dcopf_with_fallback` takes the interior
point. ``iterations`` is 0 (no interior point iteration), ``dual_residual`` and ``gap``
are 0 (the responses are exact), ``primal_residual_mw`` is the balance's error or the
largest flow beyond a monitored rating.

Why not another QP solver for these steps: the problems differ from the copper plate
by a few lines, so the unknowns are ``1 + K`` prices instead of the interior point's
~200 variables and ~80 line bounds; each Newton step is ``O(K^2 n)`` for ``n`` output
blocks, and its ``(1 + K)``-square system is inverted in JAX operations
(:func:`~jaxgrid.numerics.small_inverse`), not by LAPACK (the PTDF, as in every stage,
is the network's: :func:`~jaxgrid.dispatch.dcopf.network_ptdf`, passed in by
:func:`~jaxgrid.dispatch.dcopf_with_fallback`). Measured in a jitted ``vmap`` of 64 case118 problems
(2-core CPU, float32): 1.2e3-1.8e3 solves/s at 8 rounds of 4 steps, against 1.1e2-1.3e2
for the interior point at 30 iterations.
A step's exact length costs 26 evaluations of the responses per direction where four
fixed lengths cost four of the equations: the stage alone ran 6.9 ms a batch of 64
``tso118-v0`` problems before and 9.0 ms after (one process), and the fallback as a
whole 24.7 and 18.6 ms, the interior point running less.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from jaxgrid.dispatch.copper_plate import copper_plate_dispatch
from jaxgrid.dispatch.dcopf import (
    DCOPFParams,
    DispatchResult,
    _gen_at_bus,
    _problem_data,
    _result,
)
from jaxgrid.grid.network import Network
from jaxgrid.numerics import full_precision, small_inverse
from jaxgrid.types import Array

SLOTS = 4  # lines that may bind at once
ROUNDS = 4  # active-set rounds
NEWTON_STEPS = 2  # Newton steps per round
BRACKET = tuple(2.0**k for k in range(-6, 11))  # step lengths that bracket the minimum
REFINE = 8  # points inside the bracket
DAMPING = (1e-9, 1e-3, 1e-1)  # Levenberg-Marquardt damping of the directions tried


@full_precision
def binding_lines_dispatch(
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
    slots: int = SLOTS,
    rounds: int = ROUNDS,
    newton_steps: int = NEWTON_STEPS,
    plate: DispatchResult | None = None,
    ptdf: Array | None = None,
) -> DispatchResult:
    """The DC-OPF by Newton's method on the prices of the balance and of at most
    ``slots`` binding lines (see the module docstring; the other arguments are
    :func:`~jaxgrid.dispatch.dcopf`'s), with ``converged`` its certificate of
    optimality. ``plate`` is where the search starts, its energy price and reserve
    price (kept), for the same arguments: :func:`copper_plate_dispatch`'s result where
    the caller has it (computed here otherwise), or another stage's solution, whose
    ``slots`` lines of largest price start in the slots at their prices (the interior
    point's result, polished by :func:`~jaxgrid.dispatch.dcopf_with_fallback`)."""
    params = DCOPFParams() if params is None else params
    if plate is None:
        plate = copper_plate_dispatch(
            network,
            pd_mw,
            cost_poly=cost_poly,
            commitment=commitment,
            rate_mva=rate_mva,
            reserve_mw=reserve_mw,
            params=params,
            monitored=monitored,
            shed_at=shed_at,
            spill_at=spill_at,
            ptdf=ptdf,
        )
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
    if len(d.monitored) == 0:  # no line can bind: the copper plate is the answer
        return plate
    dtype, n_bus = d.dtype, network.n_bus
    h = d.h_full[d.monitored]  # (L, n_bus)
    rate = d.rate[d.monitored]
    line_on = network.branch_in_service[d.monitored] & jnp.isfinite(rate)
    rating = jnp.where(line_on, rate, 0.0)
    shift = d.shift[d.monitored]
    n_seg = d.width.shape[-1]
    block_bus = jnp.repeat(network.gen_bus, n_seg)
    # the reserve's price, 0 where it is round-off of the start's prices (an interior
    # point's is never exactly 0, and a positive price asks for a shortfall)
    start_scale = jnp.maximum(1.0, jnp.max(jnp.abs(plate.lmp)))
    rho = jnp.where(plate.reserve_price > 1e-6 * start_scale, plate.reserve_price, 0.0)
    start = d.slope.reshape(-1) + rho
    rise = d.curvature.reshape(-1)
    width = d.width.reshape(-1)
    sloped = rise > 0
    safe_rise = jnp.where(sloped, rise, 1.0)
    gen_to_bus = _gen_at_bus(network, dtype)
    block_to_bus = jnp.repeat(gen_to_bus, n_seg, axis=0)
    fixed = d.lower @ gen_to_bus - d.pd - network.gs_mw
    fixed_total = jnp.sum(fixed)
    scale = jnp.maximum(jnp.sum(jnp.abs(d.pd)), 1.0)
    tol_mw = 1e-3 + 64 * jnp.finfo(dtype).eps * scale
    h_blocks = h[:, block_bus]  # (L, n_blocks)
    shed_cap = jnp.zeros(n_bus, dtype).at[d.shed_buses].set(d.shed_max)
    spill_cap = jnp.zeros(n_bus, dtype).at[d.spill_buses].set(d.spill_max)
    # shed and spill respond to their bus's price across ``span`` (currency/MWh) with a
    # rise, all at once without one
    voll, spill_price = params.voll, params.spill_price
    rising = params.slack_price_rise > 0
    shed_span = voll * params.slack_price_rise
    spill_span = spill_price * params.slack_price_rise
    safe_shed_span = jnp.where(rising, shed_span, 1.0)
    safe_spill_span = jnp.where(rising, spill_span, 1.0)

    # the slots: ``pick`` (slots, L) holds +1 (upper limit) or -1 (lower limit) at the
    # line a slot holds, a row of zeros for a free slot; written as products with it, so
    # that no step gathers or scatters
    def slotted(pick):
        """The slots' PTDF rows at the buses and at the blocks, their ratings and
        shifts, their sides and whether they hold a line."""
        held = jnp.abs(pick)
        side = jnp.sum(pick, axis=1)
        return held @ h, held @ h_blocks, held @ rating, held @ shift, side, side != 0

    def respond(p, slots_):
        """At prices ``p``: the blocks' outputs and prices ``(n_blocks,)``, shed less
        spill and the buses' prices ``(n_bus,)``."""
        h_at, hb_at, _, _, _, active = slots_
        m = jnp.where(active, p[1:], 0.0)
        at_block = p[0] + m @ hb_at
        price = p[0] + m @ h_at
        ramp = jnp.clip((at_block - start) / safe_rise, 0.0, width)
        x = jnp.where(sloped, ramp, width * (start < at_block))
        shed = jnp.where(rising, jnp.clip((price - voll) / safe_shed_span, 0.0, 1.0), price > voll)
        spill = jnp.where(
            rising,
            jnp.clip((-price - spill_price) / safe_spill_span, 0.0, 1.0),
            price < -spill_price,
        )
        return x, at_block, shed_cap * shed - spill_cap * spill, price

    def slack_slope(price):
        """``(n_bus,)`` d (shed - spill) / d price at the buses' prices, MW per
        currency/MWh (0 without a rise: the blocks are flat)."""
        shed_in = (price > voll) & (price < voll + shed_span)
        spill_in = (price < -spill_price) & (price > -spill_price - spill_span)
        return jnp.where(
            rising,
            shed_cap * shed_in / safe_shed_span + spill_cap * spill_in / safe_spill_span,
            0.0,
        )

    def injection(x, slack):
        return fixed + x @ block_to_bus + slack

    def residual(p, slots_):
        """The balance's and the binding lines' errors, MW (``(1 + slots,)``; 0 for a
        free slot), and the blocks' prices (the products with the slots' PTDF rows taken
        term by term, without forming the buses' injections)."""
        h_at, hb_at, rating_at, shift_at, side, active = slots_
        x, at_block, slack, price = respond(p, slots_)
        balance = fixed_total + jnp.sum(x) + jnp.sum(slack)
        flows = h_at @ (fixed + slack) + hb_at @ x + shift_at
        error = jnp.where(active, flows - side * rating_at, 0.0)
        return jnp.concatenate([balance[None], error]), at_block, price

    def along(direction, slots_):
        """The prices' change ``(n_blocks,)``, ``(n_bus,)`` at the blocks and the buses
        per unit step along ``direction`` (the step's prices are affine in its length)."""
        h_at, hb_at, _, _, _, active = slots_
        dm = jnp.where(active, direction[1:], 0.0)
        return direction[0] + dm @ hb_at, direction[0] + dm @ h_at

    def slope_at(lengths, at_block, price, d_block, d_bus, constant):
        """The derivative along a direction of the prices' convex potential (whose
        gradient is :func:`residual`'s error) at each of ``lengths`` ``(T,)``: the
        blocks' outputs and the buses' shed less spill at the moved prices, weighted by
        their prices' changes, plus ``constant`` (the direction's product with the
        error's fixed part)."""
        moved_block = at_block + lengths[:, None] * d_block
        moved_bus = price + lengths[:, None] * d_bus
        ramp = jnp.clip((moved_block - start) / safe_rise, 0.0, width)
        x = jnp.where(sloped, ramp, width * (start < moved_block))
        shed = jnp.where(
            rising, jnp.clip((moved_bus - voll) / safe_shed_span, 0.0, 1.0), moved_bus > voll
        )
        spill = jnp.where(
            rising,
            jnp.clip((-moved_bus - spill_price) / safe_spill_span, 0.0, 1.0),
            moved_bus < -spill_price,
        )
        slack = shed_cap * shed - spill_cap * spill
        return x @ d_block + slack @ d_bus + constant

    def line_search(p, direction, error, slots_):
        """The step length ``()`` that minimises the potential along ``direction`` (a
        descent direction): the root of its derivative, nondecreasing and piecewise
        linear in the length, bracketed on ``BRACKET`` and then on ``REFINE`` points
        inside the bracket, and interpolated linearly within the last (exact where no
        response kinks inside it)."""
        x0, at_block, slack0, price = respond(p, slots_)
        d_block, d_bus = along(direction, slots_)
        # the error's fixed part: its value less the responses' share
        constant = error @ direction - (x0 @ d_block + slack0 @ d_bus)
        zero = jnp.zeros((1,), dtype)
        grid = jnp.concatenate([zero, jnp.asarray(BRACKET, dtype)])
        q = slope_at(grid, at_block, price, d_block, d_bus, constant)
        up = q >= 0
        k = jnp.where(jnp.any(up), jnp.argmax(up), len(grid) - 1)
        lo, hi = grid[jnp.maximum(k - 1, 0)], grid[k]
        inner = lo + (hi - lo) * jnp.linspace(0.0, 1.0, REFINE + 1, dtype=dtype)
        qi = slope_at(inner, at_block, price, d_block, d_bus, constant)
        j = jnp.clip(jnp.argmax(qi >= 0), 1, REFINE)
        a, b, qa, qb = inner[j - 1], inner[j], qi[j - 1], qi[j]
        root = a + (b - a) * jnp.clip(-qa / jnp.where(qb > qa, qb - qa, 1.0), 0.0, 1.0)
        return jnp.where(jnp.any(up), root, hi)

    def newton(p, slots_):
        """One step: along the Newton direction and damped ones, each to the minimum of
        the potential along it (:func:`line_search`), the one that leaves the smallest
        error."""
        h_at, hb_at, _, _, _, active = slots_
        error, at_block, price = residual(p, slots_)
        inside = sloped & (at_block > start) & (at_block < start + rise * width)
        slope = jnp.where(inside, 1.0 / safe_rise, 0.0)
        rows = jnp.concatenate(
            [jnp.ones((1, len(start)), dtype), jnp.where(active[:, None], hb_at, 0.0)]
        )
        bus_rows = jnp.concatenate(
            [jnp.ones((1, n_bus), dtype), jnp.where(active[:, None], h_at, 0.0)]
        )
        on = jnp.concatenate([jnp.ones(1, bool), active])
        products = (rows * slope) @ rows.T + (bus_rows * slack_slope(price)) @ bus_rows.T
        jac = jnp.where(on[:, None] & on[None, :], products, jnp.eye(len(on)))
        # where fewer blocks are inside their range than prices are sought the matrix
        # is singular: damped directions (Levenberg-Marquardt) are tried beside Newton's
        size = jnp.max(jnp.diag(jac))
        damped = jac + (jnp.asarray(DAMPING, dtype) * size)[:, None, None] * jnp.eye(len(on))
        directions = -(jax.vmap(small_inverse)(damped) @ error)
        directions = jnp.where(jnp.isfinite(directions), directions, 0.0)
        lengths = jax.vmap(lambda d: line_search(p, d, error, slots_))(directions)
        trials = p[None] + lengths[:, None] * directions
        norms = jax.vmap(lambda q: jnp.sum(residual(q, slots_)[0] ** 2))(trials)
        best = jnp.argmin(jnp.where(jnp.isfinite(norms), norms, jnp.inf))
        return jnp.where(jnp.isfinite(norms[best]), trials[best], p)

    def round_(carry, _):
        p, pick = carry
        # drop a limit whose price pushes (upper limit: m <= 0; lower limit: m >= 0)
        side = jnp.sum(pick, axis=1)
        wrong = (side != 0) & (side * p[1:] > 0)
        pick = jnp.where(wrong[:, None], 0.0, pick)
        p = p.at[1:].set(jnp.where(wrong | (side == 0), 0.0, p[1:]))
        # add the line most over its rating into a free slot
        x, _, slack, _ = respond(p, slotted(pick))
        flows = h @ injection(x, slack) + shift
        taken = jnp.sum(jnp.abs(pick), axis=0) > 0
        over = jnp.where(taken | ~line_on, -jnp.inf, jnp.abs(flows) - rating)
        worst = jnp.argmax(over)
        free = jnp.sum(jnp.abs(pick), axis=1) == 0
        first_free = jnp.arange(slots) == jnp.argmax(free)
        add = (over[worst] > tol_mw) & jnp.any(free)
        entry = jnp.sign(flows[worst]) * (jnp.arange(len(rating)) == worst)
        pick = jnp.where(add & first_free[:, None], entry[None], pick)
        slots_ = slotted(pick)
        p = jax.lax.fori_loop(0, newton_steps, lambda _, q: newton(q, slots_), p)
        return (p, pick), None

    # the start's binding lines (none on a copper plate): of the lines at their rating,
    # the ``slots`` of largest price above round-off, each on the side its price holds
    # (an interior point prices lines short of their rating at ~0.1 in float32)
    monitored_at = jnp.asarray(d.monitored)
    mu0 = -plate.line_price[monitored_at]
    mu0 = jnp.where(line_on & plate.line_at_limit[monitored_at], mu0, 0.0)
    top, first = jax.lax.top_k(jnp.abs(mu0), min(slots, len(rating)))
    held0 = top > 1e-6 * start_scale
    pad = slots - len(top)
    held0 = jnp.concatenate([held0, jnp.zeros(pad, bool)])
    first = jnp.concatenate([first, jnp.zeros(pad, first.dtype)])
    p0 = jnp.concatenate([plate.lmp_energy[None], jnp.where(held0, mu0[first], 0.0)])
    pick0 = jax.nn.one_hot(first, len(rating), dtype=dtype) * -jnp.sign(mu0[first])[:, None]
    init = (p0, jnp.where(held0[:, None], pick0, 0.0))
    (p, pick), _ = jax.lax.scan(round_, init, None, length=rounds)

    slots_ = slotted(pick)
    x, _, slack, _ = respond(p, slots_)
    inj = injection(x, slack)
    flows = h @ inj + shift
    _, _, rating_at, _, side, active = slots_
    balance = jnp.abs(jnp.sum(inj))
    over = jnp.max(jnp.where(line_on, jnp.abs(flows) - rating, 0.0), initial=0.0)
    at_limit = jnp.abs(jnp.abs(pick) @ flows - side * rating_at) <= tol_mw
    price_scale = jnp.maximum(1.0, jnp.max(jnp.abs(start)))
    holds = side * p[1:] <= 1e-6 * price_scale
    blocks = x.reshape(d.width.shape)
    headroom = jnp.sum(jnp.where(d.on, d.pmax, 0.0)) - jnp.sum(d.lower) - d.reserve
    short = jnp.sum(x) - headroom
    reserve_on = d.reserve > 0
    consistent = ~reserve_on | jnp.where(rho > 0, short >= -tol_mw, short <= tol_mw)
    certified = (
        (balance <= tol_mw) & (over <= tol_mw) & jnp.all(~active | (at_limit & holds)) & consistent
    )
    line_mu = jnp.where(active, p[1:], 0.0) @ jnp.abs(pick)
    return _result(
        network,
        d,
        params,
        blocks=blocks,
        shed=jnp.maximum(slack, 0.0),
        spill=jnp.maximum(-slack, 0.0),
        shortfall=jnp.where(reserve_on, jnp.maximum(short, 0.0), 0.0),
        energy=p[0],
        line_mu=line_mu,
        reserve_price=rho,
        converged=certified,
        iterations=jnp.zeros((), jnp.int32),
        primal_residual_mw=jnp.maximum(balance, jnp.maximum(over, 0.0)),
        dual_residual=jnp.zeros((), dtype),
        gap=jnp.zeros((), dtype),
    )
