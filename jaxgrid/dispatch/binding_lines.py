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
square, ``E`` the balance's and the lines' PTDF rows at the responders' buses and ``D``
the responders inside their range, ``1 / slope`` each). The responders are the blocks,
the shed at each listed bus and the spill at each, written alike as
``reach * clip((price - start) * gain, 0, 1)`` MW of injection (a step at ``start``
where there is no range: ``gain`` a power of two that saturates the clip), so that
each evaluation is one pass over ``n_blocks + n_shed + n_spill`` values (207 on
``tso118-v0``) with no division, where the blocks' outputs and every bus's shed and
spill (236 values, each computed with and without a rise and selected) were three
passes; the Newton systems are solved by
:func:`~jaxgrid.numerics.positive_definite_solve` (no pivot search, one right-hand
side) where an inverse was formed and multiplied.
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
steps. Every problem takes the first ``first_rounds`` (2), and the rest (up to 12 more)
continue the search, from where it stands, only where those do not certify
(:func:`~jaxgrid.masked.masked_apply`, a sixteenth of a batch a round), each problem
stopping once its certificate holds (a ``while_loop`` of at most 12 rounds: the
number of rounds is bounded, not fixed). On a day of
``tso118-v0``'s random commitments at 256 environments (2,634 problems that the copper
plate does not certify, float32) 2 rounds certified 2,251, 4 rounds 2,525 and 6 rounds
2,557, so that the later rounds run for about a seventh of the problems. Measured on
``jax.vmap(env.step)`` (random actions, 48-step days, each variant compiled ahead of
time in one process and their runs alternated, medians of 7-11 per-round ratios): 4
rounds for every problem against 2 and 4 more where needed, 1.24x the env-steps/s at
64 environments, 1.17x at 256 and 1.18x at 1024, and 1.06x on the merit order's
days at 256 (the interior point left fewer problems: 77 of the day's 2,634 instead of
109); 2 and 6 more were no faster, nor 4 more of 4 Newton steps each (0.92x; they
certified 11 more). The share gathered for the later rounds (the binding lines' stage
of :func:`~jaxgrid.dispatch.dcopf_with_fallback` then gathered 64 problems a round at
256 environments, so a sixteenth was 4; now 32 and 2): at 256 environments a quarter 9.44 ms a step, an
eighth 9.13, a sixteenth 8.79, a half 10.17; 4, 2 and 1 problems a round 9.46, 9.47 and
10.09 against a sixteenth's 8.93 (the same alternated runs); at 64 a sixteenth and a
quarter the same within 2 %. :func:`~jaxgrid.dispatch.dcopf_with_fallback` runs the
later rounds as a stage of its own (:func:`binding_lines_search` twice, the search's
:class:`LinesSearch` between them), gathered across its whole batch: nested in each of
the first rounds' gathered rounds (8 problems at 64 environments), a sixteenth of those
was one problem at a time, and a step ran two or three such rounds one after another
(the later rounds were 0.45 of the stage's 1.2 ms a step at 64 environments).

The later rounds stop where the certificate holds, so that more of them cost nothing
where they are not needed: at most 12 instead of a fixed 4 left the interior point 9 of
a day's 3,072 ``tso118-v0`` problems at 64 environments instead of 16 (random actions;
10 and 14 fixed rounds in all left 13 and 10 of 17), at about 2.5 ms each (its own
measure: 10-30 iterations of about 330 kernels, one problem a round) where a round of
the search costs a few tens of microseconds. ``jax.vmap(env.step)``, compiled ahead of
time in one process with runs alternated: 1.12x, 1.10x and 1.11x the env-steps/s at 64
environments (medians of 9-15 per-round ratios), the same at 1 and 256 (1.00x, 1.01x);
stopping the first rounds where they certify as well was slower (1.03x at 64).

The first rounds search among the output blocks alone (``_first_rounds``): the
shed and spill responders, three quarters of ``tso118-v0``'s 207, are 0 at every price
in ``(-spill_price, voll)``, where most problems' prices stay, and each evaluation of
the responses (the line search's 26 a direction) then costs a pass over its 54 blocks
instead of all 207. Where the prices reached make a shed or spill responder answer
(load shed or output spilled behind a binding line: the blocks alone have no root, and
their prices run off), the first rounds are taken again with every responder, under
``jax.vmap`` only for those problems, gathered an eighth of the batch at a time
(:data:`SLACK_CAPACITY`). The certificate is always checked with every responder. On a
day of ``tso118-v0``'s random commitments at 64 environments (713 of 3,072 problems
need the binding lines, float32) the first rounds certified 600 instead of 602, the
later rounds took 113 problems and 299 rounds in all instead of 111 and 297, and the
interior point was left 7 problems, as before. Measured on ``jax.vmap(env.step)``
(the two versions compiled ahead of time in one process, runs alternated; random
actions): 1.15x at 64 environments (median of 11 four-day runs), 1.16x at 256 (7
two-day runs), 1.14x at 1024 (5 one-day runs); the merit order's days 1.00x at 64 and
0.97x at 256 (5 and 3 one-day runs: they shed behind binding lines more often). Two ways
not kept: handing the problems whose slack answers to the later rounds at the start's
prices (the later rounds take one problem a round on a CPU, so 1.07x at 64 environments
but 0.80x on the merit order's days), and the first rounds with every responder for the
whole gathered round wherever one of its problems needs them (1.13x at 64, but 0.94x
at 1024, where a gathered round of 64 problems nearly always holds one).

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
largest flow beyond a monitored rating. Its tolerances: each line's flow within
``1e-3`` MW plus round-off of the demand, and no more than
:func:`~jaxgrid.dispatch.dcopf.tolerance_mw` of its rating (what the environments count as
at the rating: in float32 a search that left a 42.2 MW line 0.0068 MW over it, within
the round-off of a 1,900 MW demand, made the one step of 768 of ``tso118-v0``'s random
actions with a ``thermal_overload`` cost once every branch that can overload was
monitored), the sums of every output (the balance and the
reserve's shortfall) within :func:`~jaxgrid.dispatch.dcopf.tolerance_mw` of the demand,
what the interior point's convergence accepts of its primal residual (float32 searches
that settled within 0.02 MW at prices near the value of lost load had fallen to the
interior point).

The reserve's price is an active set of its own, as the lines are: the search starts
at its start's (the copper plate's: 0 where the plate holds the reserve, the shortfall's
price where it does not), and where the later rounds have solved the lines at that
price but it is inconsistent (positive with the reserve held, which the load shed
behind a binding line frees; 0 with the reserve short) they switch it and go on.
Switched only at a solution, so that prices on the way to one do not switch it back and
forth; a reserve held at exactly its requirement (a price between the two) is left to
the interior point. On ``tso118-v0``'s days at 64 environments (float32, the stages on
every problem, ``jax.vmap``) the interior point was left 30 of 9,216 random-action
problems (three days) and 326 of the merit order's 3,072 (one day) with the start's
price kept and the old tolerance, 27 and 310 with the switch, 26 and 296 with both.

Why not another QP solver for these steps: the problems differ from the copper plate
by a few lines, so the unknowns are ``1 + K`` prices instead of the interior point's
~200 variables and ~80 line bounds; each Newton step is ``O(K^2 n)`` for ``n`` output
blocks, and its ``(1 + K)``-square system is solved in JAX operations
(:func:`~jaxgrid.numerics.positive_definite_solve`), not by LAPACK (the PTDF, as in every stage,
is the network's: :func:`~jaxgrid.dispatch.dcopf.network_ptdf`, passed in by
:func:`~jaxgrid.dispatch.dcopf_with_fallback`). Measured in a jitted ``vmap`` of 64 case118 problems
(2-core CPU, float32): 1.2e3-1.8e3 solves/s at 8 rounds of 4 steps, against 1.1e2-1.3e2
for the interior point at 30 iterations.
A step's exact length costs 26 evaluations of the responses per direction where four
fixed lengths cost four of the equations: the stage alone ran 6.9 ms a batch of 64
``tso118-v0`` problems before and 9.0 ms after (one process), and the fallback as a
whole 24.7 and 18.6 ms, the interior point running less.

The directions: Newton's and one damped by ``1e-3`` of the matrix's largest diagonal
entry (``DAMPING``). Measured on a day of ``tso118-v0``'s random-commitment problems at
64 environments (3,072 problems, float32, the stage on all of them; each pair compiled
in one process, runs alternated, median of 7): three directions (``1e-9``, ``1e-3``,
``1e-1``) certified 97.9 % and these two 98.3 %; the responders 9.3 -> 8.6 ms a day's
step, the solve instead of the inverse 7.4 -> 6.0 ms (``jax.profiler``: the inverse's
loop had been a tenth of the stage's kernel time), all three together 10.2 -> 7.0 ms.
``tso118-v0``'s ``jax.vmap(env.step)``, the old and new code alike: 7.9 -> 5.6 ms a
step at 64 environments, 28.0 -> 22.0 ms at 256.

A third direction, the steepest descent of the potential (minus the equations' error),
moves where every response is saturated and the Jacobian is 0 (the energy price below
every unit's range and a line's price short of where the load behind it is shed: the
two Newton directions vanish there, and the search stalled); and of the directions'
trials the one of least potential is taken, not the one of least error (each trial
minimises the potential along its direction, so the potential is what decreases
monotonically; the error may rise on the way to the root). Near the root the trials'
potentials differ by round-off, and there the least error decides: chosen by potential
alone, a float32 polish of ``tests/envs/test_tso.py``'s stalled step certified a
balance 0.03 MW off (within the certificate's tolerance) at a price of 10,000
currency/MWh, 283 currency/h below HiGHS's cost. Of a day's 2,655 problems that
``tso118-v0``'s random commitments at 256 environments left to this stage, the
interior point was left 84 before and 51 after (the steepest descent alone, chosen by
the error: 228), and of the merit order's 5,471 1,684 and 1,340. Its step (each
variant compiled ahead of time in one process, runs alternated, medians of 5-11
per-round ratios): the same at 64 environments (1.00x), 1.05x at 256, 1.04x at 1024
and 1.19x on the merit order's days at 256.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxgrid.dispatch.copper_plate import copper_plate_dispatch
from jaxgrid.dispatch.dcopf import (
    DCOPFParams,
    DispatchResult,
    _gen_at_bus,
    _problem_data,
    _result,
    network_ptdf,
    solve_positional,
    static_sets,
    tolerance_mw,
)
from jaxgrid.grid.network import Network
from jaxgrid.masked import masked_apply
from jaxgrid.numerics import full_precision, positive_definite_solve
from jaxgrid.types import Array

SLOTS = 4  # lines that may bind at once
ROUNDS = 14  # active-set rounds at most
FIRST_ROUNDS = 2  # rounds every problem takes; the rest only where these do not certify,
# each problem stopping where its certificate holds
CONTINUE_CAPACITY = 1 / 16  # share of a batch gathered per round for the rest (docstring)
SLACK_CAPACITY = 1 / 8  # share of a batch whose first rounds need every responder, per round
NEWTON_STEPS = 2  # Newton steps per round
BRACKET = tuple(2.0**k for k in range(-6, 11))  # step lengths that bracket the minimum
REFINE = 8  # points inside the bracket
DAMPING = (1e-9, 1e-3)  # Levenberg-Marquardt damping of the directions tried (docstring)


class _Search(NamedTuple):
    """One problem's data for the search, ``L`` monitored lines and ``R`` responders."""

    h_resp: Array  # (L, R) the lines' PTDF rows at the responders' buses
    rating: Array  # (L,) MW, 0 for a line out of service
    fixed_flow: Array  # (L,) MW, the flows of the fixed injections
    fixed_total: Array  # () MW, the fixed injections' sum
    line_on: Array  # (L,) bool, in service with a finite rating
    tol_mw: Array  # (L,) MW, the certificate's tolerance on each line's flow
    balance_tol_mw: Array  # () MW, its tolerance on the sums of every output: the
    # balance and the reserve's shortfall (the interior point's, :func:`tolerance_mw`)
    reach: Array  # (R,) MW, each responder's injection across its range
    start: Array  # (R,) currency/MWh, the price where its range starts
    gain: Array  # (R,) per currency/MWh, 1 / the range's width (a step's: huge)
    slope: Array  # (R,) MW per currency/MWh, d injection / d price inside its range
    span: Array  # (R,) currency/MWh, the width of its range (0 for a step)


def _slotted(s: _Search, pick):
    """The slots' PTDF rows at the responders, their ratings and fixed flows, their
    sides and whether they hold a line: ``pick`` (slots, L) holds +1 (upper limit) or
    -1 (lower limit) at the line a slot holds, a row of zeros for a free slot; written
    as products with it, so that no step gathers or scatters."""
    held = jnp.abs(pick)
    side = jnp.sum(pick, axis=1)
    return held @ s.h_resp, held @ s.rating, held @ s.fixed_flow, side, side != 0


def _output(s: _Search, price):
    """``(..., R)`` the responders' injections, MW, at their prices."""
    return s.reach * jnp.clip((price - s.start) * s.gain, 0.0, 1.0)


def _prices(p, slots_):
    """``(R,)`` the responders' buses' prices at prices ``p``."""
    hr_at, *_, active = slots_
    return p[0] + jnp.where(active, p[1:], 0.0) @ hr_at


def _residual(s: _Search, p, slots_):
    """The balance's and the binding lines' errors, MW (``(1 + slots,)``; 0 for a free
    slot), and the responders' prices."""
    hr_at, rating_at, fixed_at, side, active = slots_
    price = _prices(p, slots_)
    y = _output(s, price)
    balance = s.fixed_total + jnp.sum(y)
    error = jnp.where(active, fixed_at + hr_at @ y - side * rating_at, 0.0)
    return jnp.concatenate([balance[None], error]), price


def _potential(s: _Search, p, slots_):
    """The prices' convex potential ``()`` at prices ``p``, currency/h, whose gradient
    is :func:`_residual`'s error: the fixed injections' and the ratings' linear terms,
    and each responder's injection integrated over its bus's price (0 below its range,
    quadratic across it, linear above)."""
    _, rating_at, fixed_at, side, active = slots_
    t = (_prices(p, slots_) - s.start) * jnp.sign(s.gain)  # into the range, currency/MWh
    w = s.span
    inside = t * t / (2 * jnp.where(w > 0, w, 1.0))
    integral = jnp.where(t <= 0, 0.0, jnp.where(t < w, inside, t - w / 2))
    linear = p[0] * s.fixed_total + jnp.where(active, p[1:], 0.0) @ (fixed_at - side * rating_at)
    return linear + jnp.abs(s.reach) @ integral


def _slope_at(s: _Search, lengths, price, moves, constant):
    """The derivative along a direction of the prices' convex potential (whose gradient
    is :func:`_residual`'s error) at each of ``lengths`` ``(T,)``: the responders'
    injections at the moved prices, weighted by their prices' changes ``moves`` per unit
    length, plus ``constant`` (the direction's product with the error's fixed part)."""
    return _output(s, price + lengths[:, None] * moves) @ moves + constant


def _line_search(s: _Search, p, direction, error, slots_):
    """The step length ``()`` that minimises the potential along ``direction`` (a descent
    direction): the root of its derivative, nondecreasing and piecewise linear in the
    length, bracketed on ``BRACKET`` and then on ``REFINE`` points inside the bracket,
    and interpolated linearly within the last (exact where no response kinks inside
    it)."""
    dtype = s.reach.dtype
    price = _prices(p, slots_)
    # the responders' prices' change per unit step (the prices are affine in it)
    moves = _prices(direction, slots_)
    # the error's fixed part: its value less the responders' share
    constant = error @ direction - _output(s, price) @ moves
    zero = jnp.zeros((1,), dtype)
    grid = jnp.concatenate([zero, jnp.asarray(BRACKET, dtype)])
    q = _slope_at(s, grid, price, moves, constant)
    up = q >= 0
    k = jnp.where(jnp.any(up), jnp.argmax(up), len(grid) - 1)
    lo, hi = grid[jnp.maximum(k - 1, 0)], grid[k]
    inner = lo + (hi - lo) * jnp.linspace(0.0, 1.0, REFINE + 1, dtype=dtype)
    qi = _slope_at(s, inner, price, moves, constant)
    j = jnp.clip(jnp.argmax(qi >= 0), 1, REFINE)
    a, b, qa, qb = inner[j - 1], inner[j], qi[j - 1], qi[j]
    root = a + (b - a) * jnp.clip(-qa / jnp.where(qb > qa, qb - qa, 1.0), 0.0, 1.0)
    return jnp.where(jnp.any(up), root, hi)


def _newton(s: _Search, p, slots_):
    """One step: along the Newton direction, damped ones and the steepest descent, each
    to the minimum of the potential along it (:func:`_line_search`), the one of least
    potential (:func:`_potential`), of those within round-off of it the one of least
    error."""
    dtype = s.reach.dtype
    hr_at, *_, active = slots_
    error, price = _residual(s, p, slots_)
    u = (price - s.start) * s.gain
    inside = (u > 0) & (u < 1)
    rows = jnp.concatenate(
        [jnp.ones((1, len(s.start)), dtype), jnp.where(active[:, None], hr_at, 0.0)]
    )
    on = jnp.concatenate([jnp.ones(1, bool), active])
    products = (rows * jnp.where(inside, s.slope, 0.0)) @ rows.T
    jac = jnp.where(on[:, None] & on[None, :], products, jnp.eye(len(on)))
    # where fewer blocks are inside their range than prices are sought the matrix is
    # singular: damped directions (Levenberg-Marquardt) are tried beside Newton's
    size = jnp.max(jnp.diag(jac))
    damped = jac + (jnp.asarray(DAMPING, dtype) * size)[:, None, None] * jnp.eye(len(on))
    directions = -jax.vmap(positive_definite_solve, in_axes=(0, None))(damped, error)
    # and the steepest descent, which moves where every response is saturated
    directions = jnp.concatenate([directions, -error[None]])
    directions = jnp.where(jnp.isfinite(directions), directions, 0.0)
    lengths = jax.vmap(lambda d: _line_search(s, p, d, error, slots_))(directions)
    trials = p[None] + lengths[:, None] * directions
    potentials = jax.vmap(lambda q: _potential(s, q, slots_))(trials)
    norms = jax.vmap(lambda q: jnp.sum(_residual(s, q, slots_)[0] ** 2))(trials)
    finite = jnp.isfinite(potentials) & jnp.isfinite(norms)
    least = jnp.min(jnp.where(finite, potentials, jnp.inf))
    # near the root the trials' potentials differ by round-off: of those, the least error
    tied = finite & (potentials <= least + 64 * jnp.finfo(dtype).eps * jnp.abs(least))
    best = jnp.argmin(jnp.where(tied, norms, jnp.inf))
    return jnp.where(jnp.any(tied), trials[best], p)


def _round(s: _Search, carry, newton_steps: int):
    """One active-set round on ``carry = (p, pick)``: drop a limit whose price pushes
    (upper limit: m <= 0; lower limit: m >= 0), add the line most over its rating into
    a free slot, take ``newton_steps`` Newton steps."""
    p, pick = carry
    slots = pick.shape[0]
    side = jnp.sum(pick, axis=1)
    wrong = (side != 0) & (side * p[1:] > 0)
    pick = jnp.where(wrong[:, None], 0.0, pick)
    p = p.at[1:].set(jnp.where(wrong | (side == 0), 0.0, p[1:]))
    flows = s.fixed_flow + s.h_resp @ _output(s, _prices(p, _slotted(s, pick)))
    taken = jnp.sum(jnp.abs(pick), axis=0) > 0
    # each line's flow beyond its rating and tolerance
    over = jnp.where(taken | ~s.line_on, -jnp.inf, jnp.abs(flows) - s.rating - s.tol_mw)
    worst = jnp.argmax(over)
    free = jnp.sum(jnp.abs(pick), axis=1) == 0
    first_free = jnp.arange(slots) == jnp.argmax(free)
    add = (over[worst] > 0) & jnp.any(free)
    entry = jnp.sign(flows[worst]) * (jnp.arange(len(s.rating)) == worst)
    pick = jnp.where(add & first_free[:, None], entry[None], pick)
    slots_ = _slotted(s, pick)
    p = jax.lax.fori_loop(0, newton_steps, lambda _, q: _newton(s, q, slots_), p)
    return p, pick


def _search(s: _Search, carry, rounds: int, newton_steps: int):
    """``rounds`` of :func:`_round` from ``carry = (p, pick)``."""
    step = lambda c, _: (_round(s, c, newton_steps), None)  # noqa: E731
    return jax.lax.scan(step, carry, None, length=rounds)[0]


def _blocks_only(s: _Search, n_blocks: int) -> _Search:
    """``s`` with the output blocks, its first ``n_blocks`` responders, as its only
    ones: the shed and spill (0 at every price in ``(-spill_price, voll)``) left out."""
    return s._replace(
        h_resp=s.h_resp[:, :n_blocks],
        reach=s.reach[:n_blocks],
        start=s.start[:n_blocks],
        gain=s.gain[:n_blocks],
        slope=s.slope[:n_blocks],
        span=s.span[:n_blocks],
    )


def _slack_idle(s: _Search, n_blocks: int, p, pick) -> Array:
    """Whether at prices ``p`` every shed and spill responder of ``s`` is 0 (so that
    :func:`_blocks_only`'s equations are ``s``'s), with ``p`` finite."""
    y = _output(s, _prices(p, _slotted(s, pick)))
    return jnp.all(jnp.isfinite(p)) & jnp.all(y[n_blocks:] == 0)


def _first_rounds(s: _Search, n_blocks: int, start: LinesSearch, rounds: int, newton_steps: int):
    """``rounds`` of :func:`_round` from ``start`` among the output blocks alone
    (:func:`_blocks_only`), and where the prices reached make a shed or spill responder
    answer (load shed or output spilled behind a binding line: the blocks alone have no
    root, and their prices run off), ``rounds`` from ``start`` with every responder
    instead: under ``jax.vmap`` only for those problems, gathered a share
    :data:`SLACK_CAPACITY` of the batch at a time (:func:`~jaxgrid.masked.masked_apply`)."""
    p, pick = _search(_blocks_only(s, n_blocks), (start.prices, start.pick), rounds, newton_steps)
    idle = _slack_idle(s, n_blocks, p, pick)

    def every(s, p, pick):
        return _search(s, (p, pick), rounds, newton_steps)

    p, pick = masked_apply(
        every, ~idle, (p, pick), s, start.prices, start.pick, capacity=SLACK_CAPACITY
    )
    return LinesSearch(p, pick, start.reserve_price)


class LinesSearch(NamedTuple):
    """Where one problem's search stands, to continue it (:func:`binding_lines_search`):
    ``L`` monitored lines, ``slots`` places."""

    prices: Array  # (1 + slots,) currency/MWh: the energy's, then each slot's line's
    pick: Array  # (slots, L) +1 or -1 at the line a slot holds (upper, lower limit)
    reserve_price: Array  # () currency/MWh, the start's, kept

    @classmethod
    def empty(cls, n_lines: int, slots: int = SLOTS, dtype=jnp.float32) -> LinesSearch:
        """A search that holds no line, for a problem it does not run on."""
        return cls(
            jnp.zeros(1 + slots, dtype), jnp.zeros((slots, n_lines), dtype), jnp.zeros((), dtype)
        )


def _problem(network: Network, d, params: DCOPFParams, rho) -> _Search:
    """The search's data of one problem (:class:`_Search`), with ``rho`` the reserve's
    price, currency/MWh."""
    dtype = d.dtype
    h = d.h_full[d.monitored]  # (L, n_bus)
    rate = d.rate[d.monitored]
    line_on = network.branch_in_service[d.monitored] & jnp.isfinite(rate)
    n_seg = d.width.shape[-1]
    n_blocks, n_shed, n_spill = d.width.size, len(d.shed_buses), len(d.spill_buses)
    # the responders: the output blocks, the shed at each listed bus and the spill at
    # each, every one ``reach * clip((price - start) * gain, 0, 1)`` MW of injection at
    # its bus's price (currency/MWh): a block rises to its width across ``rise * width``
    # above its marginal cost, shed to the bus's load across ``voll * slack_price_rise``
    # above ``voll``, and spill (negative injection, ``reach`` and ``gain`` negative) to
    # the bus's must-run output across ``spill_price * slack_price_rise`` below
    # ``-spill_price``; without a range (a block of constant cost, shed and spill without
    # a rise) ``gain`` is a power of two that makes the clip a step at ``start``
    rising = params.slack_price_rise > 0
    voll, spill_price = params.voll, params.spill_price
    width = d.width.reshape(-1)
    block_range = d.curvature.reshape(-1) * width
    span = jnp.concatenate(
        [
            block_range,
            jnp.full(n_shed, jnp.where(rising, voll * params.slack_price_rise, 0.0), dtype),
            jnp.full(n_spill, jnp.where(rising, spill_price * params.slack_price_rise, 0.0), dtype),
        ]
    )
    ranged = span > 0
    step_gain = 1 / jnp.finfo(dtype).tiny  # 2**126 in float32: finite, and 0 * it is 0
    sign = jnp.concatenate([jnp.ones(n_blocks + n_shed, dtype), -jnp.ones(n_spill, dtype)])
    gain = sign * jnp.where(ranged, 1 / jnp.where(ranged, span, 1.0), step_gain)
    reach = sign * jnp.concatenate([width, d.shed_max, d.spill_max])
    responder_bus = jnp.concatenate(
        [jnp.repeat(network.gen_bus, n_seg), jnp.asarray(d.shed_buses), jnp.asarray(d.spill_buses)]
    )
    fixed = d.lower @ _gen_at_bus(network, dtype) - d.pd - network.gs_mw
    scale = jnp.maximum(jnp.sum(jnp.abs(d.pd)), 1.0)
    tol = 1e-3 + 64 * jnp.finfo(dtype).eps * scale
    start = jnp.concatenate(
        [
            d.slope.reshape(-1) + rho,
            jnp.full(n_shed, voll, dtype),
            jnp.full(n_spill, -spill_price, dtype),
        ]
    )
    return _Search(
        h_resp=h[:, responder_bus],
        rating=jnp.where(line_on, rate, 0.0),
        fixed_flow=h @ fixed + d.shift[d.monitored],
        fixed_total=jnp.sum(fixed),
        line_on=line_on,
        tol_mw=jnp.minimum(tol, tolerance_mw(rate)),
        balance_tol_mw=jnp.maximum(tol, tolerance_mw(scale)),
        reach=reach,
        start=start,
        gain=gain,
        slope=jnp.where(ranged, reach * gain, 0.0),
        span=jnp.where(ranged, span, 0.0),
    )


def _reserve_price(plate: DispatchResult) -> Array:
    """The start's reserve price, 0 where it is round-off of its prices (an interior
    point's is never exactly 0, and a positive price asks for a shortfall)."""
    start_scale = jnp.maximum(1.0, jnp.max(jnp.abs(plate.lmp)))
    return jnp.where(plate.reserve_price > 1e-6 * start_scale, plate.reserve_price, 0.0)


def _start(s: _Search, d, plate: DispatchResult, slots: int, rho) -> LinesSearch:
    """The search from ``plate``: its energy price, and of its lines at their rating the
    ``slots`` of largest price above round-off, each on the side its price holds (none
    on a copper plate; an interior point prices lines short of their rating at ~0.1 in
    float32)."""
    dtype = d.dtype
    start_scale = jnp.maximum(1.0, jnp.max(jnp.abs(plate.lmp)))
    monitored_at = jnp.asarray(d.monitored)
    mu0 = -plate.line_price[monitored_at]
    mu0 = jnp.where(s.line_on & plate.line_at_limit[monitored_at], mu0, 0.0)
    top, first = jax.lax.top_k(jnp.abs(mu0), min(slots, len(s.rating)))
    held0 = top > 1e-6 * start_scale
    pad = slots - len(top)
    held0 = jnp.concatenate([held0, jnp.zeros(pad, bool)])
    first = jnp.concatenate([first, jnp.zeros(pad, first.dtype)])
    p0 = jnp.concatenate([plate.lmp_energy[None], jnp.where(held0, mu0[first], 0.0)])
    pick0 = jax.nn.one_hot(first, len(s.rating), dtype=dtype) * -jnp.sign(mu0[first])[:, None]
    return LinesSearch(p0, jnp.where(held0[:, None], pick0, 0.0), rho)


def _certificate(s: _Search, d, search: LinesSearch):
    """``(certified, solved, y, balance, over, short)`` where ``search`` stands: the
    certificate (module docstring), whether every term of it holds but the reserve
    price's consistency, the responders' injections (MW) and its terms: the balance's
    error, the largest flow beyond a rating and the reserve's shortfall (MW)."""
    p, pick, rho = search
    n_blocks = d.width.size
    slots_ = _slotted(s, pick)
    y = _output(s, _prices(p, slots_))
    flows = s.fixed_flow + s.h_resp @ y
    _, rating_at, _, side, active = slots_
    balance = jnp.abs(s.fixed_total + jnp.sum(y))
    over = jnp.max(jnp.where(s.line_on, jnp.abs(flows) - s.rating, 0.0), initial=0.0)
    at_limit = jnp.abs(jnp.abs(pick) @ flows - side * rating_at) <= jnp.abs(pick) @ s.tol_mw
    price_scale = jnp.maximum(1.0, jnp.max(jnp.abs(s.start[:n_blocks])))
    holds = side * p[1:] <= 1e-6 * price_scale
    headroom = jnp.sum(jnp.where(d.on, d.pmax, 0.0)) - jnp.sum(d.lower) - d.reserve
    short = jnp.sum(y[:n_blocks]) - headroom
    tol = s.balance_tol_mw
    consistent = (d.reserve <= 0) | jnp.where(rho > 0, short >= -tol, short <= tol)
    solved = (
        (balance <= s.balance_tol_mw)
        & jnp.all(~s.line_on | (jnp.abs(flows) - s.rating <= s.tol_mw))
        & jnp.all(~active | (at_limit & holds))
    )
    return solved & consistent, solved, y, balance, over, short


def _repriced(s: _Search, d, rho_from, rho_to) -> _Search:
    """``s`` (whose output blocks start at ``rho_from`` above their marginal costs) with
    the reserve's price ``rho_to`` instead, currency/MWh."""
    blocks = jnp.arange(len(s.start)) < d.width.size
    return s._replace(start=s.start + jnp.where(blocks, rho_to - rho_from, 0.0))


def _reserve_switch(rho, solved, short, tol_mw, shortfall_price, reserve):
    """The reserve's price after a round that left it ``rho`` with the certificate's
    terms ``solved`` and ``short`` (:func:`_certificate`): where the search has found the
    optimum at that price but the price is inconsistent, 0 where it is positive and the
    reserve is held (no shortfall beyond ``tol_mw``), ``shortfall_price`` where it is
    below that and the reserve is short; else unchanged (the reserve's active-set rule,
    as :func:`_round`'s for the lines; switched only at a solution, so that the prices
    on the way to it do not switch it back and forth). ``reserve`` the requirement, MW."""
    held = (rho > 0) & (short < -tol_mw)
    lacking = (rho < shortfall_price) & (short > tol_mw)
    switched = jnp.where(held, 0.0, jnp.where(lacking, shortfall_price, rho))
    return jnp.where(solved & (reserve > 0), switched, rho).astype(rho.dtype)


def _search_until_certified(
    s: _Search, d, search: LinesSearch, rounds: int, newton_steps: int, shortfall_price
) -> LinesSearch:
    """At most ``rounds`` of :func:`_round` from where ``search`` stands (``s`` priced at
    its reserve price), stopping where its certificate (:func:`_certificate`, once a
    round) holds, each round first switching an inconsistent reserve price
    (:func:`_reserve_switch`): where the search then stands."""
    rho0 = search.reserve_price

    def checked(taken, at: LinesSearch):
        certified, solved, _, _, _, short = _certificate(
            _repriced(s, d, rho0, at.reserve_price), d, at
        )
        return taken, at, certified, solved, short

    def unsure(carry):
        taken, _, certified, _, _ = carry
        return (taken < rounds) & ~certified

    def one_round(carry):
        taken, at, _, solved, short = carry
        rho = _reserve_switch(
            at.reserve_price, solved, short, s.balance_tol_mw, shortfall_price, d.reserve
        )
        p, pick = _round(_repriced(s, d, rho0, rho), (at.prices, at.pick), newton_steps)
        return checked(taken + 1, LinesSearch(p, pick, rho))

    return jax.lax.while_loop(unsure, one_round, checked(jnp.zeros((), jnp.int32), search))[1]


def _outcome(network: Network, d, params: DCOPFParams, s: _Search, search: LinesSearch):
    """The :class:`DispatchResult` where ``search`` stands, ``converged`` its certificate."""
    p, pick, rho = search
    dtype, n_bus = d.dtype, network.n_bus
    n_blocks, n_shed = d.width.size, len(d.shed_buses)
    certified, _, y, balance, over, short = _certificate(s, d, search)
    active = jnp.sum(pick, axis=1) != 0
    shed = jnp.zeros(n_bus, dtype).at[d.shed_buses].set(y[n_blocks : n_blocks + n_shed])
    spill = jnp.zeros(n_bus, dtype).at[d.spill_buses].set(-y[n_blocks + n_shed :])
    return _result(
        network,
        d,
        params,
        blocks=y[:n_blocks].reshape(d.width.shape),
        shed=shed,
        spill=spill,
        shortfall=jnp.where(d.reserve > 0, jnp.maximum(short, 0.0), 0.0),
        energy=p[0],
        line_mu=jnp.where(active, p[1:], 0.0) @ jnp.abs(pick),
        reserve_price=rho,
        converged=certified,
        iterations=jnp.zeros((), jnp.int32),
        primal_residual_mw=jnp.maximum(balance, jnp.maximum(over, 0.0)),
        dual_residual=jnp.zeros((), dtype),
        gap=jnp.zeros((), dtype),
    )


@full_precision
def binding_lines_search(
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
    rounds: int = FIRST_ROUNDS,
    newton_steps: int = NEWTON_STEPS,
    plate: DispatchResult | None = None,
    search: LinesSearch | None = None,
    ptdf: Array | None = None,
) -> tuple[DispatchResult, LinesSearch]:
    """``rounds`` rounds of :func:`binding_lines_dispatch`'s search (same arguments)
    from ``plate``, or, where ``search`` is given (where an earlier call of the same
    problem left it), at most ``rounds`` more from there, stopping once the certificate
    holds; the result where the search then stands and the search, to continue it. A
    caller that continues only the problems that need it, gathered across a batch
    (:func:`~jaxgrid.dispatch.dcopf_with_fallback`), calls this twice."""
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
    if plate is None and (search is None or len(d.monitored) == 0):
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
    if len(d.monitored) == 0:  # no line can bind: the copper plate is the answer
        return plate, LinesSearch.empty(0, slots, d.dtype)
    continued = search is not None
    rho = _reserve_price(plate) if search is None else search.reserve_price
    s = _problem(network, d, params, rho)
    search = _start(s, d, plate, slots, rho) if search is None else search
    if continued:
        shortfall_price = jnp.asarray(params.reserve_shortfall_price, d.dtype)
        search = _search_until_certified(s, d, search, rounds, newton_steps, shortfall_price)
        s = _repriced(s, d, rho, search.reserve_price)
    else:
        search = _first_rounds(s, d.width.size, search, rounds, newton_steps)
    return _outcome(network, d, params, s, search), search


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
    first_rounds: int = FIRST_ROUNDS,
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
    point's result, polished by :func:`~jaxgrid.dispatch.dcopf_with_fallback`). Every
    problem takes ``first_rounds`` of the ``rounds``; the rest, at most, run only where
    those do not certify, each problem stopping once it certifies
    (:func:`~jaxgrid.masked.masked_apply`, a share :data:`CONTINUE_CAPACITY` of a batch
    a round)."""
    # the index sets and the PTDF fixed here, where the problem may still be concrete:
    # the continuation traces its arguments
    monitored, shed_at, spill_at = static_sets(
        network, pd_mw, rate_mva, monitored, shed_at, spill_at
    )
    ptdf = network_ptdf(network) if ptdf is None else ptdf
    sets = dict(monitored=monitored, shed_at=shed_at, spill_at=spill_at, slots=slots)
    sets.update(newton_steps=newton_steps)
    problem = (pd_mw, cost_poly, commitment, rate_mva, reserve_mw, params, ptdf)

    first_rounds = min(first_rounds, rounds)
    found, search = positional_first_rounds(sets, plate, network, *problem, rounds=first_rounds)
    if rounds > first_rounds and len(monitored) > 0:
        rest = functools.partial(positional_later_rounds, sets, rounds=rounds - first_rounds)
        found, _ = masked_apply(
            rest,
            ~found.converged,
            (found, search),
            search,
            network,
            *problem,
            capacity=CONTINUE_CAPACITY,
        )
    return found


def positional_first_rounds(
    sets, start, *problem, rounds: int = FIRST_ROUNDS
) -> tuple[DispatchResult, LinesSearch]:
    """:func:`binding_lines_search`'s first ``rounds`` from the result ``start`` on a
    problem given as positional arrays (:func:`~jaxgrid.dispatch.dcopf.solve_positional`'s
    form, ``sets`` its static keywords), as :func:`~jaxgrid.masked.masked_apply` passes
    it: the result and the search."""
    first = functools.partial(binding_lines_search, plate=start, rounds=rounds)
    return solve_positional(first, sets, *problem)


def positional_later_rounds(
    sets, search, *problem, rounds: int = ROUNDS - FIRST_ROUNDS
) -> tuple[DispatchResult, LinesSearch]:
    """At most ``rounds`` more of the search from where ``search`` stands, each problem
    stopping once it certifies, on a problem in :func:`positional_first_rounds`' form."""
    later = functools.partial(binding_lines_search, search=search, rounds=rounds)
    return solve_positional(later, sets, *problem)
