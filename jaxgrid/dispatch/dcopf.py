"""Economic dispatch / DC optimal power flow with locational marginal prices.

The problem, for bus loads ``pd_mw`` and the generators a commitment mask leaves on::

    minimise   sum_g cost_g(pg_g) + voll * sum(shed) + spill_price * sum(spill)
               + reserve_shortfall_price * shortfall                       (currency/h)
               [+ rise/2 * sum_i (voll shed_i^2 / shed_max_i
                                  + spill_price spill_i^2 / spill_max_i)]
    subject to sum_i injection_i = 0                                       (energy price)
               -rate_l <= PTDF_l @ injection + shift_flow_l <= rate_l      (monitored lines)
               sum_g (pmax_g - pg_g) + shortfall >= reserve_mw             (if reserve_mw > 0)
               pmin_g <= pg_g <= pmax_g,  0 <= shed_i <= max(pd_i, 0),
               0 <= spill_i <= must-run output and negative load at bus i

with ``injection_i = sum_{g at i} pg_g + shed_i - spill_i - pd_i - gs_i``. Costs are
quadratic ``c2 p^2 + c1 p + c0`` or convex piecewise linear (each segment becomes a block
of output with its own marginal cost; a non-convex curve is refused). Load that cannot be
served is shed at the value of lost load, must-run output that cannot be absorbed is
spilled, a reserve that cannot be held is short at a price: the problem always has a
solution, and :attr:`DispatchResult.infeasible` says when the hard problem had none.
The bracketed term, :attr:`DCOPFParams.slack_price_rise` (``rise``, 0 by default), makes
the prices of shedding and spilling rise across each bus's range (``shed_max_i`` its
load, ``spill_max_i`` its must-run output and negative load), so that where the linear
program may shed at any of several buses at one price, and the flows on the lines it does
not monitor with it, the shed is split uniquely: in proportion to the buses' loads.

The LMP of bus ``i`` is the cost of serving one more MW there: ``lmp = lmp_energy +
lmp_congestion`` with ``lmp_energy`` the price at the slack bus (the dual of the power
balance) and ``lmp_congestion_i = sum_l PTDF[l, i] (mu_lo_l - mu_hi_l)`` from the line
limits' duals.

Solver. A primal-dual interior point method (Mehrotra predictor-corrector) on this PTDF
formulation with a bounded number of iterations: every problem of a batch runs in
lockstep under ``vmap``, a problem that has converged keeps its solution, and the
iterations end once every problem of the batch has converged or the budget is spent (a
``while_loop``; 15-26 iterations reached the tolerance on the bundled cases in float64,
11-13 on case118 in float32; the default budget is 40). Against running the whole budget
this took ``tso118-v0`` (30 allowed, the interior point on a few problems a step) from
3.7e3 to 4.9e3 env-steps/s at 64 environments and from 4.5e3 to 6.7e3 at 256 (one XLA
device, this 2-core CPU, one session). An earlier try of the early end hung at 64
environments (every thread idle); that was before the balance row rode along as a
second right-hand side of the step's one LAPACK solve (below), and it has not hung
since, at 1 to 256 environments. Variables are
blocks of output above ``pmin`` (one per unit and cost segment), shed and spill per bus
and the reserve shortfall. Each iteration's Newton system has the matrix ``K = D + G'
Theta_G G`` (variables x variables, ``D = Q + Theta_x`` diagonal, ``G`` the monitored
lines' PTDF rows and the reserve row) and the power balance. It is solved on its nodes,
the buses that carry a variable and the shortfall: every variable at a bus enters the
lines' rows and the balance through the bus's net injection only, so for the nodes' net
changes ``y`` the system is ``(F^-1 + N' Theta_lines N + theta' w w') y = b`` (nodes x
nodes, ``N`` the monitored lines' PTDF columns of the nodes' buses; ``F`` the sum of
``1/D`` over a node's variables, a parallel combination, so ``F^-1`` stays bounded where
one variable is inside its bounds with a tiny ``D``; ``w`` the node's ``1/D``-weighted
mean of its variables' reserve coefficients and ``theta' = theta_r / (1 + theta_r v)``,
``v`` the ``1/D``-weighted spread of those coefficients inside the nodes), factored by
Cholesky. Each variable's step then follows from its own row, except that each node's
net change goes to its variable with the smallest ``D`` (whose row would divide by that
``D``). The same Newton directions at a lower cost: on case118 109 nodes instead of 208
variables (``tso118-v0``; 154 with the tests' defaults), the same iteration counts and
solutions to 1e-7 on the tests' instances of case9 to case118 (float64). Measured in one
process on a 2-core CPU shared with other jobs, old and new interleaved: ``tso118-v0``
(float32, 30 iterations) ran 2.2x the env-steps/s at one environment (140-146 against
54-78) and 3.6x at 64 (253 against 70); case118's float32 solves at batch 64 1.8x (138
against 75 per second); in float64 the variables' system ran erratically there (5-80 s
for a batch of 64, at best 12 solves/s), the nodes' steadily at 185 solves/s. Two other
ways lost accuracy. Eliminating the variables (the row-space normal equations of LP
interior point methods, a system the size of the monitored lines: 25x faster on case118
and the cost right to 1e-12, even with a proximal term and two steps of iterative
refinement) let the dual residual stall at 2e2-1e4 on case9 with six tightened lines and
load shed at partial buses (degenerate LPs), since the dual steps of variables at a
bound are recovered from their tiny primal steps. Keeping the reserve row out of the
nodes' matrix (a 2 x 2 Schur complement of the balance and reserve rows after the node
solve) stalled the dual residual at 20 currency/MWh on case118 with a reserve shortfall:
once the reserve row's weight ``theta_r`` passed 1e9 the Newton equations' residuals
reached 1e2-1e7 (the complement's determinant is a difference of products scaled by
``theta_r``); as a rank-1 term of the nodes' matrix it is factored with the rest, as in
the variables' matrix. Pass ``monitored`` (the branches whose limits can bind, e.g.
:func:`monitored_branches`) to keep ``N`` small.

Derivatives. ``jax.grad`` and ``jax.jvp`` of every output are taken at the solution, not
through the iterations (the approach of OptNet, Amos & Kolter 2017, for a QP layer): the
primal-dual point the interior point returns is the root of the QP's KKT conditions
(stationarity of each variable switched on, the power balance, and ``min(dual, slack) =
0`` for every bound and row switched on), and ``jax.lax.custom_root``
(:mod:`jaxgrid.grid.implicit`) differentiates that root by the implicit function theorem
with one dense LU solve of the conditions' Jacobian (``3 n_var + 2 n_row + 1`` unknowns,
``n_var`` the variables above, ``n_row`` the monitored lines plus the reserve row).
Written with ``min`` rather than the products ``dual * slack``, the Jacobian is that of
the active set: a constraint whose slack the solver left below its dual keeps its slack
at 0 (a binding line keeps its flow at the rating, a unit at a limit stays there), any
other keeps its dual at 0. Where the active set does not change within a step the
derivatives are those of the exact QP solution, so ``d cost / d pd_mw = lmp``, ``d cost /
d rate_mva = -|line_price|`` and ``d cost / d reserve_mw = reserve_price`` (envelope
theorem), and they do not move with the iteration count. ``converged``, ``iterations``
and the residuals are not differentiated; the prices' derivatives are those of the
duals (0 for an LP, whose prices are piecewise constant).

Where they are not defined: a constraint at its bound with a zero dual (no strict
complementarity: a line rated at exactly its unconstrained flow, a unit whose marginal
cost at its limit equals its bus's price) is a kink; the derivative returned is one
side's, whichever of the pair's slack and dual the solver left smaller being taken as 0
(the interior point leaves both near the square root of its last barrier parameter
there, about 1e-5, so which side is not controlled). Where the Jacobian is singular (prices
not unique: two lines with proportional PTDF rows both binding; load that may be shed at
any of several buses, a degenerate LP) every derivative of the solve is 0
(:func:`~jaxgrid.grid.implicit.guarded_tangent_solve`), not the result of a solve through a
zero pivot.

Accuracy and cost, measured by ``python benchmarks/dcopf_gradient.py`` (float64, one
jitted ``jax.value_and_grad`` of one solve with respect to loads and cost coefficients, a
random weighting of dispatch, cost, LMPs and monitored flows; relative error of a
directional derivative against central differences; 2-core CPU shared with other jobs,
so times moved by up to 2x between runs) at the solution ("implicit") and through the 40
iterations as before ("unrolled")::

    case     gradient  err d/d pd  err d/d cost_poly  value+grad  value alone  compile
    case9    implicit  5.7e-11     3.2e-10            0.64 ms     0.48 ms      6.4 s
    case9    unrolled  1.1e-12     1.9e-10            2.35 ms                  13.3 s
    case30   implicit  7.2e-11     4.1e-07            1.08 ms     0.77 ms      8.1 s
    case30   unrolled  2.8e-09     4.1e-07            3.03 ms                  15.2 s
    case118  implicit  7.1e-09     2.3e-05            115 ms      84 ms        8.8 s
    case118  unrolled  5.5e-07     2.2e-05            206 ms                   20.8 s

Rerun with the Newton system on the nodes (``--cases case9 case118 --repeats 10``, the
machine under other jobs): the same errors (case118 implicit 7.6e-9 and 2.3e-5, case9
5.6e-11 and 3.2e-10); case118's value alone 24 ms, case9's 0.36 ms.

The differences are of the solver's output, itself within its tolerance of the exact
solution; on case118 the barrier leaves one unit 8.5e-6 MW above its minimum (its
complementarity product 1.5e-10 where the others' are below 1e-11), and that remnant
moves with the cost coefficients in the differences (0.018 MW per unit of the
direction) while the derivative at the solution holds the unit at its minimum, as the
exact solution does: hence 2e-5 there, for both. The gradient at the solution costs one
factorisation of the KKT Jacobian instead of a reverse pass through 40 iterations (each
with its own Cholesky factor), and its program compiles in half the time.

Why not a JAX solver library (measured on this 2-core CPU, case118 with six lines
tightened to 80 % of their unconstrained flow, quadratic costs, float64, against HiGHS
1.16 at about 9-17 ms per solve): ``mpax`` 0.2.4 ``r2HPDHG`` dropped the quadratic cost
(42 % cost error); its ``raPDHG`` reached 8e-8 relative cost at ``eps = 1e-6`` after
4873 iterations (63 ms per solve) and 3e-9 after 7561 (120-170 ms), with a ``while_loop``
to tolerance. ``qpax`` 0.1.4 (dense interior point on every bound as an inequality):
1e-13 relative cost and 5e-5 in LMPs, but 565 ms per solve (and a ``while_loop``).
``jaxopt`` 0.8.5 ``BoxOSQP``: 44 % cost error after 4000 iterations (2.3 s). This
solver: 15 iterations, 4e-10 relative cost and 6e-5 currency/MWh in LMPs on that
instance; speed in ``benchmarks/transmission_dispatch.py``.

Accuracy needs float64 (``jax_enable_x64``) for 1e-6 relative cost and 1e-3 currency/MWh
in LMPs (measured: below 1e-9 and 8e-4 against HiGHS on case9 to case300); in float32
case118 converges to about 1e-5 relative cost and 0.05 currency/MWh in LMPs.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.flatten_util import ravel_pytree

from jaxgrid.grid.implicit import (
    active_set_complementarity,
    guarded_tangent_solve,
    implicit_root,
)
from jaxgrid.grid.network import POLYNOMIAL, Network
from jaxgrid.grid.sensitivity import ptdf as ptdf_matrix
from jaxgrid.grid.sensitivity import shift_flow_mw
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array

DEFAULT_ITERATIONS = 40


@struct.dataclass
class DCOPFParams:
    """Prices of what the dispatch may do when the hard problem has no solution.

    Attributes:
        voll: ``()`` value of lost load: price of shed load, currency/MWh.
        spill_price: ``()`` price of spilling must-run generation (or negative load) the
            network cannot absorb, currency/MWh.
        reserve_shortfall_price: ``()`` price of each MW of reserve requirement not held,
            currency/MWh (below ``voll``: reserve is given up before load).
        slack_price_rise: ``()`` relative rise of the prices of shed load and spilled
            output across each bus's range, dimensionless: the last MW a bus can shed
            costs ``voll * (1 + slack_price_rise)``, its first ``voll`` (spill alike).
            0 (the default) is the linear program, whose shed and spill are not unique
            where several buses share a price; a positive value (``tso-*`` use 0.01)
            makes them unique, split in proportion to each bus's range where the buses'
            prices are equal, the same split in every stage of
            :func:`~jaxgrid.dispatch.dcopf_with_fallback`.
    """

    voll: Array = 10_000.0
    spill_price: Array = 10_000.0
    reserve_shortfall_price: Array = 1_000.0
    slack_price_rise: Array = 0.0


@struct.dataclass
class DispatchResult:
    """A DC-OPF solution (leading batch axes under ``vmap``).

    Attributes:
        pg_mw: ``(n_gen,)`` dispatch, MW (0 for units that are off).
        cost: ``()`` objective: generation cost plus the prices of shed load, spilled
            generation and reserve shortfall, currency/h.
        generation_cost: ``()`` generation cost alone, currency/h.
        lmp: ``(n_bus,)`` locational marginal price, currency/MWh.
        lmp_energy: ``()`` energy component: the price at the slack bus, currency/MWh.
        lmp_congestion: ``(n_bus,)`` congestion component ``lmp - lmp_energy``,
            currency/MWh (0 at the slack bus).
        p_branch_mw: ``(n_branch,)`` DC flow from ``branch_from`` to ``branch_to``, MW.
        line_price: ``(n_branch,)`` shadow price of each branch limit, currency/MWh per
            MW of rating: positive when the from->to limit binds, negative when the
            to->from limit binds, 0 for an unmonitored branch.
        line_at_limit: ``(n_branch,)`` bool, monitored branches whose flow is at its rating
            (within :func:`tolerance_mw` of it).
        gen_at_pmax, gen_at_pmin: ``(n_gen,)`` bool, committed units at a limit (within
            :func:`tolerance_mw` of it).
        shed_mw: ``(n_bus,)`` load shed, MW.
        spill_mw: ``(n_bus,)`` generation spilled, MW.
        reserve_shortfall_mw: ``()`` reserve requirement not held, MW.
        reserve_price: ``()`` cost of one more MW of reserve requirement, currency/MWh.
        infeasible: ``()`` bool: load was shed, generation spilled or reserve short (more
            than :func:`tolerance_mw` of the demand): the problem without those had no
            solution.
        converged: ``()`` bool: residuals and duality gap below the tolerance.
        iterations: ``()`` int32 iterations until convergence (the budget if never).
        primal_residual_mw: ``()`` largest violation of balance or line limits, MW.
        dual_residual: ``()`` largest violation of the optimality conditions, currency/MWh.
        gap: ``()`` duality gap, currency/h.
    """

    pg_mw: Array
    cost: Array
    generation_cost: Array
    lmp: Array
    lmp_energy: Array
    lmp_congestion: Array
    p_branch_mw: Array
    line_price: Array
    line_at_limit: Array
    gen_at_pmax: Array
    gen_at_pmin: Array
    shed_mw: Array
    spill_mw: Array
    reserve_shortfall_mw: Array
    reserve_price: Array
    infeasible: Array
    converged: Array
    iterations: Array
    primal_residual_mw: Array
    dual_residual: Array
    gap: Array


def convergence_tolerances(dtype) -> tuple[float, float]:
    """``(strict, loose)`` relative tolerances of the interior point in ``dtype``: it
    iterates until the strict one (2e-11 in float64, 6e-5 in float32; the LMPs of case300
    needed it) and reports convergence at the loose one, since a degenerate problem
    (units at their limits, load shed at a bus) can stall between them.

    The loose one is 1e-6 in float64, MATPOWER's default tolerances (``mips``): 1e-2
    currency/MWh of dual residual at a value of lost load of 10,000. It was 1e-8, and
    steps of ``tso300-v0`` where hundreds of MW are shed stalled at dual residuals of
    1e-6 to 6e-5 currency/MWh (the cost right to 1e-13 relative, primal residual 1e-12
    MW), so that the same step converged in a batch and failed alone, ending one
    episode but not the other.
    """
    strict = 10.0 * float(jnp.finfo(dtype).eps) ** 0.75
    return strict, max(strict, 1e-6)


def dual_tolerance(dtype) -> float:
    """The relative dual residual at which the interior point reports convergence: the
    loose tolerance in float64 (1e-6), 1e-3 in float32 (OSQP's default relative
    tolerance; 10 currency/MWh at a value of lost load of 10,000).

    In float32, steps of ``tso118-v0``'s merit order that shed hundreds of MW behind
    binding lines stall with their dual residual at 0.7-26 currency/MWh while the primal
    residual is within 2e-4 MW and the complementarity within tolerance (50 of 1,536
    held-out steps, 3.3 %); the loose tolerance (6e-5, 0.6 currency/MWh) reported each as a
    failure, ending its episode. At this tolerance 17 steps fail (1.1 %); 9 (0.6 %) where
    the interior point returns the last iterate that met its tolerances, 2 with the
    polish of :func:`~jaxgrid.dispatch.dcopf_with_fallback`. On one
    accepted step (39 MW shed) the dispatch is float64's to 3e-6 in cost and 3e-4 MW in
    every output, its prices within 2.4 currency/MWh of about 10,000.
    """
    _, loose = convergence_tolerances(dtype)
    return max(loose, 1e-3) if jnp.finfo(dtype).bits <= 32 else loose


def tolerance_mw(size_mw) -> Array:
    """How far a dispatch's quantity of magnitude ``size_mw`` (MW, any shape) may be from
    its exact value: ``1e-3 MW + rtol * |size_mw|``, ``rtol`` the interior point's loose
    tolerance in ``size_mw``'s dtype (1e-6 in float64, 6e-5 in float32).

    The interior point leaves each variable inside its bounds by a remnant of its barrier
    (a unit at its minimum ends slightly above it, a line at its rating slightly over or
    under it, a shed, spill or shortfall of 0 slightly positive). In ``tso118-v0``'s
    rollouts (16 days of the merit order, float32) such remnants were 6e-5 to 1e-2 MW
    where the exact solution has none, so a limit, a shed or an overload is one only
    beyond this tolerance: the at-limit flags and ``infeasible`` here, and the
    environments' costs built on a dispatch.
    """
    size = jnp.abs(jnp.asarray(size_mw))
    _, loose = convergence_tolerances(size.dtype)
    return 1e-3 + loose * size


def solve_positional(
    solver, sets, network, pd, poly, on, rate, reserve, params, ptdf
) -> DispatchResult:
    """``solver`` (a DC-OPF solver of :func:`dcopf`'s keywords) on a problem given as
    positional arrays, the form :func:`~jaxgrid.masked.masked_apply` gathers and the
    stages of :func:`~jaxgrid.dispatch.dcopf_with_fallback` pass on; ``sets`` its static
    keywords (``monitored``, ``shed_at``, ``spill_at``, ...)."""
    return solver(
        network,
        pd,
        cost_poly=poly,
        commitment=on,
        rate_mva=rate,
        reserve_mw=reserve,
        params=params,
        ptdf=ptdf,
        **sets,
    )


def monitored_branches(network: Network, rate_mva=None) -> tuple[int, ...]:
    """Host-side: indices of the in-service branches with a finite rating (``rate_mva``
    ``(n_branch,)``, MVA, default the network's), the ``monitored`` argument of
    :func:`dcopf` that keeps its linear algebra small."""
    rate = np.asarray(network.rate_mva if rate_mva is None else rate_mva)
    on = np.asarray(network.branch_in_service)
    return tuple(int(k) for k in np.flatnonzero(on & np.isfinite(rate)))


@full_precision
def dcopf(
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
    ptdf: Array | None = None,
) -> DispatchResult:
    """Economic dispatch with line limits (DC-OPF) and its LMPs (see the module docstring).

    Args:
        network: the network (its PTDF is computed here; when only loads, costs or
            commitments are batched it is computed once).
        pd_mw: ``(n_bus,)`` loads, MW (default the network's).
        cost_poly: ``(n_gen, 3)`` quadratic costs ``(c2, c1, c0)`` replacing the
            network's (currency/MW²h, currency/MWh, currency/h); piecewise-linear units
            keep their curve.
        commitment: ``(n_gen,)`` bool, units that may run (with the network's status).
        rate_mva: ``(n_branch,)`` branch ratings, MVA, replacing the network's (``inf``
            = no limit).
        reserve_mw: ``()`` headroom (``pmax - pg`` summed over running units) to keep,
            MW.
        params: prices of shedding, spilling and reserve shortfall.
        monitored: static branch indices whose limits are enforced; limits of other
            branches are ignored. Default: the in-service branches with a finite rating
            when ratings and statuses are concrete (a network closed over by ``jit``),
            every branch when they are traced (slower: forming the solver's matrix costs
            the square of the buses with variables per monitored branch).
        shed_at: static bus indices where load may be shed. Default: the buses with a
            positive load in ``pd_mw`` when it is concrete, else (``pd_mw`` traced, as
            under ``vmap``) in the network. Load a batch puts at a bus outside this set
            cannot be shed: a shortage there leaves the result unconverged.
        spill_at: static bus indices where generation may be spilled. Default: the
            buses of committed units with ``pmin > 0`` and of negative loads (of
            ``pd_mw`` when concrete, else of the network). Each bus left out of these
            sets removes a variable from every iteration, and a row of the system it
            factors where no other variable is at that bus.
        iterations: static number of interior point iterations, at least one.
        ptdf: ``(n_branch, n_bus)`` the network's PTDF when the caller has it
            (:func:`network_ptdf`); computed here otherwise.

    Returns:
        :class:`DispatchResult`.

    Raises:
        ValueError: ``iterations`` is not positive; (outside ``jit`` only) a
            piecewise-linear cost that is not convex.
    """
    if int(iterations) < 1:
        raise ValueError(f"iterations must be positive, got {iterations}")
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
    dtype, base, n_bus, n_gen = d.dtype, d.base, network.n_bus, network.n_gen
    n_seg, n_shed, n_spill = d.width.shape[-1], len(d.shed_buses), len(d.spill_buses)
    monitored, shed_buses, spill_buses = d.monitored, d.shed_buses, d.spill_buses

    # variables: output blocks (n_gen * n_seg), shed, spill, reserve shortfall
    upper_mw = jnp.concatenate(
        [d.width.reshape(-1), d.shed_max, d.spill_max, jnp.maximum(d.reserve, 0.0)[None]]
    )
    price = jnp.concatenate(
        [
            d.slope.reshape(-1),
            jnp.full(n_shed, params.voll, dtype),
            jnp.full(n_spill, params.spill_price, dtype),
            jnp.asarray(params.reserve_shortfall_price, dtype)[None],
        ]
    )
    quad = jnp.concatenate(
        [
            d.curvature.reshape(-1),
            _rise_per_mw(params.voll, params.slack_price_rise, d.shed_max).astype(dtype),
            _rise_per_mw(params.spill_price, params.slack_price_rise, d.spill_max).astype(dtype),
            jnp.zeros(1, dtype),
        ]
    )
    bus_of_block = jnp.repeat(network.gen_bus, n_seg)
    var_bus = jnp.concatenate(
        [bus_of_block, jnp.asarray(shed_buses), jnp.asarray(spill_buses), jnp.zeros(1, int)]
    )
    var_sign = jnp.concatenate(
        [jnp.ones(n_gen * n_seg + n_shed, dtype), -jnp.ones(n_spill, dtype), jnp.zeros(1, dtype)]
    )
    reserve_row = jnp.concatenate(
        [jnp.ones(n_gen * n_seg, dtype), jnp.zeros(n_shed + n_spill, dtype), -jnp.ones(1, dtype)]
    )

    var_to_bus = var_sign[:, None] * (var_bus[:, None] == jnp.arange(n_bus)).astype(dtype)
    # nodes of the Newton system: the buses with variables, then the reserve shortfall
    node_bus, var_node = _nodes(network, n_seg, shed_buses, spill_buses)

    # network: PTDF rows of the monitored branches, limits on their flows
    h_lines = d.h_full[monitored]
    n_lines = len(monitored)
    fixed_injection = d.lower @ _gen_at_bus(network, dtype) - d.pd - network.gs_mw
    flow_fixed = h_lines @ fixed_injection + d.shift[monitored]
    line_rate = d.rate[monitored]
    line_on = network.branch_in_service[monitored] & jnp.isfinite(line_rate)
    safe_rate = jnp.where(line_on, line_rate, 0.0)
    reserve_on = d.reserve > 0
    headroom = jnp.sum(jnp.where(d.on, d.pmax, 0.0)) - jnp.sum(d.lower) - d.reserve

    # scaling: powers in pu of base_mva, costs in units of the largest marginal cost
    cost_scale = jnp.maximum(
        1.0, jnp.max(jnp.where(upper_mw[: n_gen * n_seg] > 0, jnp.abs(price[: n_gen * n_seg]), 0.0))
    )
    problem = _Problem(
        c=price / cost_scale,
        q=quad * base / cost_scale,
        upper=upper_mw / base,
        active=upper_mw > 1e-9 * base,
        var_sign=var_sign,
        demand=-jnp.sum(fixed_injection) / base,
        g=jnp.concatenate([h_lines @ var_to_bus.T, reserve_row[None]]),
        var_node=var_node,
        node_sign=var_sign.at[-1].set(1.0),
        node_rows=jnp.concatenate([h_lines[:, node_bus], jnp.zeros((n_lines, 1), dtype)], axis=1),
        node_balance=jnp.concatenate([jnp.ones(len(node_bus), dtype), jnp.zeros(1, dtype)]),
        lo=jnp.concatenate([(-safe_rate - flow_fixed) / base, jnp.full(1, -jnp.inf, dtype)]),
        hi=jnp.concatenate([(safe_rate - flow_fixed) / base, (headroom / base)[None]]),
        lo_on=jnp.concatenate([line_on, jnp.zeros(1, bool)]),
        hi_on=jnp.concatenate([line_on, reserve_on[None]]),
    )
    sol = _at_solution(problem, iterations)

    # back to MW and currency
    x_mw = sol.x * base
    blocks = x_mw[: n_gen * n_seg].reshape(n_gen, n_seg)
    start = n_gen * n_seg
    return _result(
        network,
        d,
        params,
        blocks=blocks,
        shed=jnp.zeros(n_bus, dtype).at[shed_buses].set(x_mw[start : start + n_shed]),
        spill=jnp.zeros(n_bus, dtype)
        .at[spill_buses]
        .set(x_mw[start + n_shed : start + n_shed + n_spill]),
        shortfall=x_mw[-1],
        energy=sol.lam * cost_scale,
        line_mu=(sol.y_lo[:n_lines] - sol.y_hi[:n_lines]) * cost_scale,
        reserve_price=sol.y_hi[-1] * cost_scale,
        converged=sol.converged,
        iterations=sol.iterations,
        primal_residual_mw=sol.primal_residual * base,
        dual_residual=sol.dual_residual * cost_scale,
        gap=sol.gap * cost_scale * base,
    )


class _Data(NamedTuple):
    """What every dispatch of one problem starts from (MW, currency/MWh; see :func:`dcopf`'s
    arguments): the static index sets, the committed units' output range above ``lower``
    as blocks (``width``, ``slope``, ``curvature``, each ``(n_gen, n_seg)``), the largest
    shed and spill per listed bus, and the PTDF ``h_full`` ``(n_branch, n_bus)`` with
    the flows ``shift`` of phase shifters."""

    dtype: Any
    base: Array
    pd: Array
    rate: Array
    on: Array
    pmin: Array
    pmax: Array
    lower: Array
    width: Array
    slope: Array
    curvature: Array
    costed: Network
    monitored: np.ndarray
    shed_buses: np.ndarray
    spill_buses: np.ndarray
    shed_max: Array
    spill_max: Array
    reserve: Array
    h_full: Array
    shift: Array


def network_ptdf(network: Network) -> Array:
    """``(n_branch, n_bus)`` the PTDF of ``network``
    (:func:`jaxgrid.grid.sensitivity.ptdf`), computed while tracing where the branch data
    it depends on are concrete (a network closed over by ``jit``, whose loads, costs,
    output limits or ratings may be traced): the program then holds it as a constant.

    Traced, the PTDF's ``jnp.linalg.inv`` is an LU factorisation and a loop over the
    pivots, about 600 small kernels on case118, which XLA cannot move out of the loops
    and branches of :func:`~jaxgrid.dispatch.dcopf_with_fallback`'s stages: computed in
    each stage and each gathered round, it was a fifth of the kernels ``tso118-v0``'s step
    ran and 18 % of its time (31.0 against 25.4 ms a step of 256 environments, one
    process, the two alternated).

    The constant is computed on the host by NumPy (the same functions with ``xp=numpy``,
    in the network's own float64 where its data are NumPy's, rounded once to JAX's
    default float type); a read of a traced leaf sends it to the traced path. Evaluated
    eagerly by JAX, each of the PTDF's operations was compiled on its own (43 programs,
    1.7 s of tracing ``tso118-v0``'s step on a 2-core CPU); as one compiled program,
    0.22 s of every process's first trace of a network (case14 or case118), 0.2-0.3 s of
    ``tso14-v0``'s 1.2-1.3 s of tracing in a fresh process; by NumPy, no compile at all.
    A network whose DC equations are singular (an island without a slack bus) gets
    JAX's result, as before.
    """
    # concrete leaves as NumPy's (a device array would run JAX's operations one by one)
    on_host = jax.tree_util.tree_map(
        lambda leaf: leaf if isinstance(leaf, jax.core.Tracer) else np.asarray(leaf), network
    )
    try:
        # a traced leaf may pass through JAX's operations (and their dtype warnings) before
        # NumPy refuses it; the traced path then computes the PTDF
        with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            host = ptdf_matrix(on_host, xp=np)
    except (
        jax.errors.TracerArrayConversionError,
        jax.errors.ConcretizationTypeError,
        np.linalg.LinAlgError,
    ):
        return ptdf_matrix(network)
    return host.astype(jax.dtypes.canonicalize_dtype(host.dtype))


def _problem_data(
    network,
    pd_mw,
    cost_poly,
    commitment,
    rate_mva,
    reserve_mw,
    monitored,
    shed_at,
    spill_at,
    ptdf=None,
) -> _Data:
    """:class:`_Data` of :func:`dcopf`'s arguments (defaults as documented there)."""
    dtype = jnp.result_type(float)
    pd = jnp.asarray(network.pd_mw if pd_mw is None else pd_mw, dtype)
    rate = jnp.asarray(network.rate_mva if rate_mva is None else rate_mva, dtype)
    poly = jnp.asarray(network.cost_poly if cost_poly is None else cost_poly, dtype)
    on = network.gen_in_service
    if commitment is not None:
        on = on & jnp.asarray(commitment, bool)
    monitored, shed_buses, spill_buses = static_sets(
        network, pd_mw, rate_mva, monitored, shed_at, spill_at
    )
    _check_convex(network)
    pmin = jnp.asarray(network.pmin_mw, dtype)
    pmax = jnp.asarray(network.pmax_mw, dtype)
    width, slope, curvature = _blocks(network, poly, on, dtype)
    must_run = jnp.where(on, jnp.maximum(pmin, 0.0), 0.0) @ _gen_at_bus(network, dtype)
    h_full = jnp.asarray(network_ptdf(network) if ptdf is None else ptdf).astype(dtype)
    return _Data(
        dtype=dtype,
        base=jnp.asarray(network.base_mva, dtype),
        pd=pd,
        rate=rate,
        on=on,
        pmin=pmin,
        pmax=pmax,
        lower=jnp.where(on, pmin, 0.0),
        width=width,
        slope=slope,
        curvature=curvature,
        costed=network.replace(cost_poly=poly, gen_in_service=on),
        monitored=monitored,
        shed_buses=shed_buses,
        spill_buses=spill_buses,
        shed_max=jnp.maximum(pd, 0.0)[shed_buses],
        spill_max=(must_run + jnp.maximum(-pd, 0.0))[spill_buses],
        reserve=jnp.asarray(reserve_mw, dtype),
        h_full=h_full,
        shift=shift_flow_mw(network, h_full).astype(dtype),
    )


def _result(
    network: Network,
    d: _Data,
    params: DCOPFParams,
    *,
    blocks,
    shed,
    spill,
    shortfall,
    energy,
    line_mu,
    reserve_price,
    converged,
    iterations,
    primal_residual_mw,
    dual_residual,
    gap,
) -> DispatchResult:
    """The :class:`DispatchResult` of a dispatch: ``blocks`` ``(n_gen, n_seg)`` MW above
    ``lower``, ``shed`` and ``spill`` ``(n_bus,)`` MW, ``shortfall`` MW, the balance's
    price ``energy`` and the monitored lines' duals ``line_mu`` ``(n_lines,)`` (lower
    limit's minus upper limit's), currency/MWh."""
    pg = jnp.where(d.on, d.lower + jnp.sum(blocks, axis=-1), 0.0)
    generation_cost = jnp.sum(d.costed.generation_cost(pg))

    def slack_cost(price, amount, buses, most):
        """Linear part and the rise's quadratic part, currency/h."""
        at = amount[buses]
        return price * jnp.sum(amount) + 0.5 * jnp.sum(
            _rise_per_mw(price, params.slack_price_rise, most) * at**2
        )

    cost = (
        generation_cost
        + slack_cost(params.voll, shed, d.shed_buses, d.shed_max)
        + slack_cost(params.spill_price, spill, d.spill_buses, d.spill_max)
        + params.reserve_shortfall_price * shortfall
    )
    congestion = d.h_full[d.monitored].T @ line_mu
    injection = (pg @ _gen_at_bus(network, d.dtype)) + shed - spill - d.pd - network.gs_mw
    flow = d.h_full @ injection + d.shift
    line_price = jnp.zeros(network.n_branch, d.dtype).at[d.monitored].set(-line_mu)
    line_on = network.branch_in_service[d.monitored] & jnp.isfinite(d.rate[d.monitored])
    monitored_mask = jnp.zeros(network.n_branch, bool).at[d.monitored].set(line_on)
    served = jnp.sum(jnp.abs(d.pd))
    return DispatchResult(
        pg_mw=pg,
        cost=cost,
        generation_cost=generation_cost,
        lmp=energy + congestion,
        lmp_energy=energy,
        lmp_congestion=congestion,
        p_branch_mw=flow,
        line_price=line_price,
        line_at_limit=monitored_mask & (jnp.abs(flow) >= d.rate - tolerance_mw(d.rate)),
        gen_at_pmax=d.on & (pg >= d.pmax - tolerance_mw(d.pmax)),
        gen_at_pmin=d.on & (pg <= d.pmin + tolerance_mw(d.pmin)),
        shed_mw=shed,
        spill_mw=spill,
        reserve_shortfall_mw=shortfall,
        reserve_price=reserve_price,
        infeasible=(jnp.sum(shed) + jnp.sum(spill) + shortfall) > tolerance_mw(served),
        converged=converged,
        iterations=iterations,
        primal_residual_mw=primal_residual_mw,
        dual_residual=dual_residual,
        gap=gap,
    )


def _rise_per_mw(price, rise, most_mw):
    """``(n,)`` slope of a shed's or spill's marginal price at buses whose range is
    ``most_mw`` ``(n,)``: ``price * rise`` across the range, currency/MWh per MW (0 for
    an empty range)."""
    return jnp.where(most_mw > 0, price * rise / jnp.where(most_mw > 0, most_mw, 1.0), 0.0)


def static_sets(
    network: Network, pd_mw=None, rate_mva=None, monitored=None, shed_at=None, spill_at=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Host side: ``(monitored, shed_at, spill_at)`` as :func:`dcopf` resolves them
    (the given ones, else its defaults), as index arrays: what a caller that passes the
    problem on to traced code (where the defaults would be every branch and bus) fixes
    first."""
    if monitored is None:
        monitored = _default_monitored(network, rate_mva)
    shed_buses, spill_buses = _slack_buses(network, pd_mw)
    if shed_at is not None:
        shed_buses = np.asarray(shed_at, np.int64).reshape(-1)
    if spill_at is not None:
        spill_buses = np.asarray(spill_at, np.int64).reshape(-1)
    return np.asarray(monitored, np.int64).reshape(-1), shed_buses, spill_buses


def _slack_buses(network: Network, pd_mw) -> tuple[np.ndarray, np.ndarray]:
    """``(shed_buses, spill_buses)``: the buses where load may be shed (positive load) and
    where generation may be spilled (a unit with ``pmin > 0`` or a negative load), from
    ``pd_mw`` where it is concrete, else from the network's loads; every bus when the
    network is traced. Fewer variables make each interior point iteration cheaper, most
    where a bus is left without any (its factored matrix has a row per bus with
    variables)."""
    try:
        data = np.asarray(network.pd_mw, float)
        pmin = np.asarray(network.pmin_mw, float)
        on = np.asarray(network.gen_in_service, bool)
        gen_bus = np.asarray(network.gen_bus)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        every = np.arange(network.n_bus)
        return every, every
    try:
        loads = data if pd_mw is None else np.asarray(pd_mw, float)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        loads = data
    if loads.shape != data.shape:  # a batch of loads given outside vmap
        every = np.arange(network.n_bus)
        return every, every
    must_run = np.zeros(network.n_bus, bool)
    must_run[gen_bus[on & (pmin > 0)]] = True
    return np.flatnonzero(loads > 0), np.flatnonzero(must_run | (loads < 0))


def _default_monitored(network: Network, rate_mva) -> np.ndarray:
    """The in-service branches with a finite rating where the ratings and statuses are
    concrete (not traced), else every branch."""
    try:
        return np.asarray(monitored_branches(network, rate_mva), np.int64)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return np.arange(network.n_branch)


def _nodes(network: Network, n_seg: int, shed_buses, spill_buses) -> tuple[np.ndarray, Array]:
    """``(node_bus, var_node)``: the static buses that carry a variable (every bus when
    the generators' buses are traced) and, for each variable (output blocks, shed,
    spill, reserve shortfall), its node: the index of its bus in ``node_bus``, the
    shortfall its own node ``len(node_bus)``."""
    try:
        gen_bus = np.asarray(network.gen_bus)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        gen_bus = None
    if gen_bus is None:
        node_bus = np.arange(network.n_bus)
        block_node = jnp.repeat(network.gen_bus, n_seg)
    else:
        node_bus = np.unique(np.concatenate([gen_bus, shed_buses, spill_buses]))
        block_node = jnp.asarray(np.searchsorted(node_bus, np.repeat(gen_bus, n_seg)))
    var_node = jnp.concatenate(
        [
            block_node,
            jnp.asarray(np.searchsorted(node_bus, shed_buses), block_node.dtype),
            jnp.asarray(np.searchsorted(node_bus, spill_buses), block_node.dtype),
            jnp.full(1, len(node_bus), block_node.dtype),
        ]
    )
    return node_bus, var_node


def _gen_at_bus(network: Network, dtype) -> Array:
    """``(n_gen, n_bus)`` one-hot bus of each generator."""
    return (network.gen_bus[:, None] == jnp.arange(network.n_bus)).astype(dtype)


def _blocks(network: Network, poly: Array, on: Array, dtype):
    """``(width, slope, curvature)``, each ``(n_gen, n_seg)``: the blocks of output above
    ``pmin`` of every unit (MW), their marginal cost at the block's start (currency/MWh)
    and the derivative of the marginal cost (currency/MW²h). A polynomial unit is one
    block; a piecewise-linear one a block per segment, the first and last segments
    extended to ``pmin`` and ``pmax``."""
    pmin = jnp.asarray(network.pmin_mw, dtype)
    pmax = jnp.asarray(network.pmax_mw, dtype)
    x = jnp.asarray(network.cost_pwl_mw, dtype)
    y = jnp.asarray(network.cost_pwl_cost, dtype)
    n_seg = x.shape[-1] - 1
    dx = x[:, 1:] - x[:, :-1]
    real = dx > 0
    seg_slope = jnp.where(real, (y[:, 1:] - y[:, :-1]) / jnp.where(real, dx, 1.0), 0.0)
    last = jnp.max(jnp.where(real, jnp.arange(n_seg), -1), axis=-1, keepdims=True)
    k = jnp.arange(n_seg)
    seg_lo = jnp.where(k == 0, -jnp.inf, x[:, :-1])
    seg_hi = jnp.where(k == last, jnp.inf, x[:, 1:])
    pwl_width = jnp.where(
        real,
        jnp.maximum(
            0.0,
            jnp.minimum(seg_hi, pmax[:, None]) - jnp.maximum(seg_lo, pmin[:, None]),
        ),
        0.0,
    )
    c2, c1 = poly[:, 0], poly[:, 1]
    first = k == 0
    poly_width = jnp.where(first, (pmax - pmin)[:, None], 0.0)
    poly_slope = jnp.where(first, (2.0 * c2 * pmin + c1)[:, None], 0.0)
    poly_curv = jnp.where(first, 2.0 * c2[:, None], 0.0)
    is_poly = (network.cost_model == POLYNOMIAL)[:, None]
    width = jnp.where(is_poly, poly_width, pwl_width)
    width = jnp.where(on[:, None], jnp.maximum(width, 0.0), 0.0)
    slope = jnp.where(is_poly, poly_slope, seg_slope)
    curvature = jnp.where(is_poly, poly_curv, 0.0)
    return width, slope, curvature


def _check_convex(network: Network) -> None:
    """Raise for a non-convex piecewise-linear cost when the network is concrete."""
    try:
        x = np.asarray(network.cost_pwl_mw, float)
        y = np.asarray(network.cost_pwl_cost, float)
        model = np.asarray(network.cost_model)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return
    if x.ndim != 2:
        return
    dx = np.diff(x, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(dx > 0, np.diff(y, axis=-1) / np.where(dx > 0, dx, 1.0), np.nan)
    for g in np.flatnonzero(model != POLYNOMIAL):
        s = slope[g][~np.isnan(slope[g])]
        if np.any(np.diff(s) < -1e-9 * np.maximum(1.0, np.abs(s[:-1]))):
            raise ValueError(
                f"generator {g}: its piecewise-linear cost is not convex (marginal costs "
                f"{np.round(s, 6).tolist()} currency/MWh must not decrease); the DC-OPF "
                "solves convex problems only"
            )


@struct.dataclass
class _Problem:
    """The scaled QP: ``min 1/2 q x^2 + c x`` over ``0 <= x <= upper`` (inactive variables
    fixed at 0), ``sign' x = demand``, ``lo <= g x <= hi`` on the rows switched on (the
    monitored lines' flows, then the reserve row).

    The nodes of the Newton system: ``var_node`` ``(n_var,)`` the node of each variable,
    ``node_sign`` ``(n_var,)`` its sign in the node's net change (``var_sign``, 1 for the
    shortfall), ``node_rows`` ``(n_lines, n_node)`` the lines' PTDF columns of the nodes'
    buses (0 for the shortfall's node, the last), ``node_balance`` ``(n_node,)`` 1 for a
    bus, 0 for the shortfall: ``g[:-1] = node_rows[:, var_node] * node_sign``."""

    c: Array
    q: Array
    upper: Array
    active: Array
    var_sign: Array
    demand: Array
    g: Array
    var_node: Array
    node_sign: Array
    node_rows: Array
    node_balance: Array
    lo: Array
    hi: Array
    lo_on: Array
    hi_on: Array

    def rows(self, x: Array) -> Array:
        """``g x``."""
        return self.g @ x

    def rows_t(self, y: Array) -> Array:
        """``g' y``."""
        return self.g.T @ y


@struct.dataclass
class _State:
    """An iterate of :func:`_interior_point` (or a direction): outputs ``x`` and bound
    duals ``v_lo``, ``v_hi`` ``(n_var,)``, the balance price ``lam`` ``()``, and the
    rows' slacks ``s_lo``, ``s_hi`` and duals ``y_lo``, ``y_hi`` ``(n_row,)``."""

    x: Array
    lam: Array
    s_lo: Array
    s_hi: Array
    y_lo: Array
    y_hi: Array
    v_lo: Array
    v_hi: Array


@struct.dataclass
class _Newton:
    """One iteration's factored Newton system on the nodes (see :func:`_interior_point`)."""

    d_inv: Array
    f_inv: Array
    w: Array
    spread: Array
    theta_w: Array
    chol: Array
    balance: Array
    pivot: Array


@struct.dataclass
class _Solution:
    x: Array
    lam: Array
    y_lo: Array
    y_hi: Array
    v_lo: Array
    v_hi: Array
    converged: Array
    iterations: Array
    primal_residual: Array
    dual_residual: Array
    gap: Array


def _at_solution(p: _Problem, iterations: int) -> _Solution:
    """:func:`_interior_point`, its solution bit for bit, differentiated at that solution
    by the implicit function theorem on the QP's KKT conditions, not through its
    iterations (see the module docstring, "Derivatives").

    The unknowns are the primal-dual point ``z = (x, lam, y_lo, y_hi, v_lo, v_hi)`` (the
    row slacks are ``g x - lo`` and ``hi - g x``); the equations are stationarity for
    the variables switched on (``x = 0`` for the rest), the power balance, and for every
    bound and row switched on the complementarity ``min(dual, slack) = 0`` (the dual
    ``= 0`` for the rest). ``min`` makes the tangent system that of the active set: a
    constraint whose slack is below its dual keeps its slack at 0, any other keeps its
    dual at 0. Its problem data are the closed-over leaves of ``p``."""
    act = p.active
    a = jnp.where(act, p.var_sign, 0.0)
    upper = jnp.where(act, p.upper, 1.0)
    lo = jnp.where(p.lo_on, p.lo, 0.0)
    hi = jnp.where(p.hi_on, p.hi, 0.0)

    def residual(z):
        x, lam, y_lo, y_hi, v_lo, v_hi = z
        gx = p.rows(x)
        stationarity = p.q * x + p.c - a * lam - p.rows_t(y_lo - y_hi) - v_lo + v_hi
        return (
            jnp.where(act, stationarity, x),
            p.demand - a @ x,
            active_set_complementarity(y_lo, gx - lo, p.lo_on),
            active_set_complementarity(y_hi, hi - gx, p.hi_on),
            active_set_complementarity(v_lo, x, act),
            active_set_complementarity(v_hi, upper - x, act),
        )

    def iterate(_):
        sol = _interior_point(p, iterations)
        z = (sol.x, sol.lam, sol.y_lo, sol.y_hi, sol.v_lo, sol.v_hi)
        return z, (sol.converged, sol.iterations, sol.primal_residual, sol.dual_residual, sol.gap)

    dtype = p.c.dtype
    initial = (
        jnp.zeros_like(p.c),
        jnp.zeros((), dtype),
        jnp.zeros_like(p.lo),
        jnp.zeros_like(p.hi),
        jnp.zeros_like(p.c),
        jnp.zeros_like(p.c),
    )
    z, (converged, count, primal, dual, gap) = implicit_root(
        residual, initial, iterate, has_aux=True, tangent_solve=guarded_tangent_solve
    )
    x, lam, y_lo, y_hi, v_lo, v_hi = z
    return _Solution(
        x=x,
        lam=lam,
        y_lo=y_lo,
        y_hi=y_hi,
        v_lo=v_lo,
        v_hi=v_hi,
        converged=converged,
        iterations=count,
        primal_residual=primal,
        dual_residual=dual,
        gap=gap,
    )


def _interior_point(p: _Problem, iterations: int) -> _Solution:
    """Mehrotra's predictor-corrector on the scaled QP, at most ``iterations`` steps,
    frozen once converged to the strict tolerance, and ended once every problem of a
    batch is (a ``while_loop``); the result is the last iterate, or where it misses
    the reported tolerances, the last one that met them. In float32 the iterates past the
    loose tolerance can drift away from it: on ``tso118-v0``'s merit order (32 held-out
    days), 8 of the 17 steps that ended unconverged had met the reported tolerances
    earlier (dual residuals of 2-9 currency/MWh there, 10-36 at the end)."""
    dtype = p.c.dtype
    eps = jnp.finfo(dtype).eps
    strict, loose = convergence_tolerances(dtype)
    dual_tol = dual_tolerance(dtype)
    act = p.active
    upper = jnp.where(act, p.upper, 1.0)
    a = jnp.where(act, p.var_sign, 0.0)

    def residuals(st: _State):
        gx = p.rows(jnp.where(act, st.x, 0.0))
        r_d = p.q * st.x + p.c - a * st.lam - p.rows_t(st.y_lo - st.y_hi) - st.v_lo + st.v_hi
        r_d = jnp.where(act, r_d, 0.0)
        r_p = p.demand - a @ st.x
        r_lo = jnp.where(p.lo_on, p.lo + st.s_lo - gx, 0.0)
        r_hi = jnp.where(p.hi_on, p.hi - st.s_hi - gx, 0.0)
        return r_d, r_p, r_lo, r_hi

    def complementarity(st: _State):
        pairs = (
            jnp.sum(jnp.where(p.lo_on, st.s_lo * st.y_lo, 0.0))
            + jnp.sum(jnp.where(p.hi_on, st.s_hi * st.y_hi, 0.0))
            + jnp.sum(jnp.where(act, st.x * st.v_lo + (upper - st.x) * st.v_hi, 0.0))
        )
        count = jnp.sum(p.lo_on) + jnp.sum(p.hi_on) + 2 * jnp.sum(act)
        return pairs, jnp.maximum(count, 1)

    def scales(st: _State):
        """``(primal, dual, pairs)``: the sizes the tolerances scale the primal residual,
        the dual residual and the complementarity by."""
        objective = jnp.sum(jnp.where(act, 0.5 * p.q * st.x**2 + p.c * st.x, 0.0))
        return (
            1.0 + jnp.abs(p.demand) + jnp.max(jnp.abs(p.upper)),
            1.0 + jnp.max(jnp.abs(p.c)),
            1.0 + jnp.abs(objective),
        )

    def measures(st: _State):
        """``(strict, reported, primal, dual, pairs)``: whether ``st`` meets the strict
        tolerance (iterations stop) and the reported ones, and its residuals."""
        r_d, r_p, r_lo, r_hi = residuals(st)
        primal = jnp.maximum(jnp.abs(r_p), jnp.max(jnp.abs(jnp.concatenate([r_lo, r_hi]))))
        dual = jnp.max(jnp.abs(r_d))
        pairs, _ = complementarity(st)
        s_primal, s_dual, s_pairs = scales(st)

        def meets(tol, dual_tol):
            return (
                (primal <= tol * s_primal) & (dual <= dual_tol * s_dual) & (pairs <= tol * s_pairs)
            )

        return meets(strict, strict), meets(loose, dual_tol), primal, dual, pairs

    n_node = p.node_rows.shape[-1]
    reserve_row = p.g[-1]
    # the reserve row seen from a node: 1 for output blocks, 0 for shed and spill, -1 for
    # the shortfall (alone at its node)
    kappa = p.node_sign * reserve_row
    index = jnp.arange(len(p.c))

    def node_sum(v):
        return jax.ops.segment_sum(v, p.var_node, num_segments=n_node)

    def factor(theta_x, theta_g, reg) -> _Newton:
        """The Newton system reduced to the nodes (see the module docstring, "Solver"):
        ``M = F^-1 + N' Theta_lines N + theta' w w'`` by Cholesky (nodes without an
        active variable replaced by the identity), the balance row on the nodes, and
        each node's variable with the smallest ``D``."""
        d_inv = jnp.where(act, 1.0 / jnp.where(act, p.q + theta_x, 1.0), 0.0)
        f = node_sum(d_inv)
        empty = f <= 0.0
        f_inv = jnp.where(empty, 1.0, 1.0 / jnp.where(empty, 1.0, f))
        # the node's reserve coefficient w (a 1/D-weighted mean of kappa) and each
        # variable's kappa - w, without cancellation: a node holds blocks (kappa 1) and
        # shed or spill (kappa 0), or the shortfall alone
        w = node_sum(kappa * d_inv) * f_inv
        share_0 = node_sum(jnp.where(kappa == 0, d_inv, 0.0)) * f_inv
        spread = jnp.where(kappa == 0, -w[p.var_node], kappa * share_0[p.var_node])
        variance = jnp.sum(d_inv * spread**2)
        # the reserve row's Newton equation eliminated into the nodes' matrix: a rank-1
        # term of weight theta_r / (1 + theta_r variance)
        theta_r = theta_g[-1]
        theta_w = theta_r / (1.0 + theta_r * variance)
        m = (
            (p.node_rows.T * theta_g[:-1]) @ p.node_rows
            + theta_w * w[:, None] * w[None, :]
            + jnp.diag(f_inv)
        )
        m = jnp.where(empty[:, None] | empty[None, :], jnp.eye(n_node, dtype=dtype), m)
        # a degenerate LP leaves M singular along the optimal face (shed load that may
        # sit at any of several buses): after a failed factorisation a proximal term
        # keeps it defined; the residuals stay exact, so the solution does too. Each
        # diagonal entry grows by ``reg`` times itself: near the solution the entries
        # span 1e35, and a term of ``reg`` times the largest (as before) swamped the
        # small ones, whose directions then stalled the dual residual (1e-5 to 1e-3
        # currency/MWh in float64 on case300, a failed dispatch; two thirds of the
        # merit order's failed float32 dispatches on tso118-v0; tests/dispatch/
        # test_dcopf.py keeps one such step)
        # (symmetric by construction: LAPACK reads the lower triangle, so it is not
        # averaged with its transpose first, as jnp.linalg.cholesky would)
        m = m + jnp.diag(reg * jnp.diagonal(m))
        chol = jax.lax.linalg.cholesky(m, symmetrize_input=False)
        balance = jnp.where(empty, 0.0, p.node_balance)
        # the variable with the smallest D (largest 1/D) at each node takes the node's
        # net change, the others their own rows
        top = jax.ops.segment_max(d_inv, p.var_node, num_segments=n_node)
        first = jax.ops.segment_min(
            jnp.where(d_inv == top[p.var_node], index, len(index)), p.var_node, n_node
        )
        return _Newton(
            d_inv=d_inv,
            f_inv=f_inv,
            w=w,
            spread=spread,
            theta_w=theta_w,
            chol=chol,
            balance=balance,
            pivot=first[p.var_node] == index,
        )

    def solve(k: _Newton, rhs_x, r_p):
        """``(dx, d_lam)`` with ``K dx = rhs_x + sign d_lam`` and ``sign' dx = r_p``, ``K
        = Q + Theta_x + G' Theta_g G``, from the factored node system."""
        rhs = jnp.where(act, rhs_x, 0.0)
        b_y = k.f_inv * node_sum(p.node_sign * k.d_inv * rhs)
        b_u = jnp.sum(k.d_inv * p.node_sign * k.spread * rhs)
        # the balance row's solve rides along as a second right-hand side, so that one
        # LAPACK solve runs at a time: jaxlib 0.10's CPU kernels hand a batch's chunks to
        # XLA's thread pool and block a pool thread until they are done, and two
        # independent solves (the balance row's, once per iteration, and this one) each
        # held one of this 2-core CPU's two pool threads and waited for ever (case300's
        # screening dispatches on one XLA device; an optimization barrier did not order
        # them: XLA's CPU compiler drops it)
        both = jnp.stack([b_y - k.theta_w * k.w * b_u, k.balance], axis=-1)
        y0, y_balance = jnp.moveaxis(jax.scipy.linalg.cho_solve((k.chol, True), both), -1, 0)
        d_lam = (r_p - k.balance @ y0) / (k.balance @ y_balance)
        y = y0 + y_balance * d_lam
        u = k.theta_w * (b_u + k.w @ y)  # the reserve row's Theta_r times its change
        price = b_y - k.w * u - k.f_inv * y  # N' Theta N y - balance d_lam at each node
        own = k.d_inv * (rhs - reserve_row * u - p.node_sign * price[p.var_node])
        own = jnp.where(k.pivot, 0.0, own)
        rest = p.node_sign * (y - node_sum(p.node_sign * own))[p.var_node]
        return jnp.where(act, jnp.where(k.pivot, rest, own), 0.0), d_lam

    def newton(st: _State, k: _Newton, rhs):
        """Solve the Newton system for right-hand sides ``rhs``."""
        r_d, r_p, r_lo, r_hi, c_lo, c_hi, c_vlo, c_vhi = rhs
        s_lo = jnp.where(p.lo_on, st.s_lo, 1.0)
        s_hi = jnp.where(p.hi_on, st.s_hi, 1.0)
        g_r = jnp.where(p.lo_on, (c_lo + st.y_lo * r_lo) / s_lo, 0.0) - jnp.where(
            p.hi_on, (c_hi - st.y_hi * r_hi) / s_hi, 0.0
        )
        xl = jnp.where(act, st.x, 1.0)
        xu = jnp.where(act, upper - st.x, 1.0)
        rhs_x = -r_d + p.rows_t(g_r) + c_vlo / xl - c_vhi / xu
        dx, d_lam = solve(k, rhs_x, r_p)
        gdx = p.rows(dx)
        ds_lo = jnp.where(p.lo_on, gdx - r_lo, 0.0)
        ds_hi = jnp.where(p.hi_on, r_hi - gdx, 0.0)
        dy_lo = jnp.where(p.lo_on, (c_lo - st.y_lo * ds_lo) / s_lo, 0.0)
        dy_hi = jnp.where(p.hi_on, (c_hi - st.y_hi * ds_hi) / s_hi, 0.0)
        dv_lo = jnp.where(act, (c_vlo - st.v_lo * dx) / xl, 0.0)
        dv_hi = jnp.where(act, (c_vhi + st.v_hi * dx) / xu, 0.0)
        return _State(dx, d_lam, ds_lo, ds_hi, dy_lo, dy_hi, dv_lo, dv_hi)

    def step_to_boundary(value, delta, mask):
        ratio = jnp.where(mask & (delta < 0), -value / jnp.where(delta < 0, delta, -1.0), jnp.inf)
        return jnp.min(ratio, initial=jnp.inf)

    # the iteration moves, selects and tests its iterate as one vector (the fields end to
    # end, ``jax.flatten_util.ravel_pytree``): a kernel each where the eight fields took
    # eight. ``tso14-v0``'s ``jax.vmap(env.step)`` compiled 460 kernels instead of 485 and
    # stepped 1.1-1.25x as fast at 1024 environments, the same results bit for bit in
    # float32 and float64. Which of its entries are bounded below by 0 (all but the
    # balance price):
    bounded, _ = ravel_pytree(
        _State(act, jnp.zeros((), bool), p.lo_on, p.hi_on, p.lo_on, p.hi_on, act, act)
    )

    def max_step(z, dz):
        """The longest step along ``dz`` from ``z`` (packed) that keeps the outputs, their
        headroom ``upper - x``, the slacks and the duals nonnegative: two reductions, not
        one a field."""
        x, dx = unpack(z).x, unpack(dz).x
        return jnp.minimum(step_to_boundary(z, dz, bounded), step_to_boundary(upper - x, -dx, act))

    def iterate(carry):
        (z, done, count, reg, _), (best, found, best_measured) = carry
        st = unpack(z)
        r_d, r_p, r_lo, r_hi = residuals(st)
        pairs, n_pairs = complementarity(st)
        mu = pairs / n_pairs
        xl = jnp.where(act, st.x, 1.0)
        xu = jnp.where(act, upper - st.x, 1.0)
        theta_x = jnp.where(act, st.v_lo / xl + st.v_hi / xu, 0.0)
        theta_g = jnp.where(p.lo_on, st.y_lo / jnp.where(p.lo_on, st.s_lo, 1.0), 0.0) + jnp.where(
            p.hi_on, st.y_hi / jnp.where(p.hi_on, st.s_hi, 1.0), 0.0
        )
        k = factor(theta_x, theta_g, reg)
        # predictor (affine scaling)
        base_rhs = (r_d, r_p, r_lo, r_hi)
        c_aff = (
            jnp.where(p.lo_on, -st.s_lo * st.y_lo, 0.0),
            jnp.where(p.hi_on, -st.s_hi * st.y_hi, 0.0),
            jnp.where(act, -st.x * st.v_lo, 0.0),
            jnp.where(act, -(upper - st.x) * st.v_hi, 0.0),
        )
        d_aff = newton(st, k, (*base_rhs, *c_aff))
        dz_aff, _ = ravel_pytree(d_aff)
        alpha_aff = jnp.minimum(1.0, max_step(z, dz_aff))
        trial = unpack(z + alpha_aff * dz_aff)
        mu_aff = complementarity(trial)[0] / n_pairs
        sigma = jnp.clip((mu_aff / jnp.maximum(mu, jnp.finfo(dtype).tiny)) ** 3, 0.0, 1.0)
        # centre at least halfway while the dual residual lags the complementarity (each
        # relative to its tolerance's size) by more than 10x: near a degenerate solution
        # Mehrotra's sigma drove the pairs to 4e-12 with the dual residual at 4e-6 (case300,
        # float64), which the Newton steps could no longer reduce, and the solve ended
        # unconverged (tests/dispatch/test_dcopf.py keeps that step)
        _, s_dual, s_pairs = scales(st)
        lagging = jnp.max(jnp.abs(r_d)) / s_dual > 10.0 * pairs / s_pairs
        sigma = jnp.where(lagging, jnp.maximum(sigma, 0.5), sigma)
        # corrector
        target = sigma * mu
        c_cor = (
            jnp.where(p.lo_on, target - st.s_lo * st.y_lo - d_aff.s_lo * d_aff.y_lo, 0.0),
            jnp.where(p.hi_on, target - st.s_hi * st.y_hi - d_aff.s_hi * d_aff.y_hi, 0.0),
            jnp.where(act, target - st.x * st.v_lo - d_aff.x * d_aff.v_lo, 0.0),
            jnp.where(act, target - (upper - st.x) * st.v_hi + d_aff.x * d_aff.v_hi, 0.0),
        )
        d = newton(st, k, (*base_rhs, *c_cor))
        dz, _ = ravel_pytree(d)
        alpha = jnp.minimum(1.0, 0.99 * max_step(z, dz))
        new = z + alpha * dz
        finite = jnp.all(jnp.isfinite(new))
        keep = done | ~finite
        new = jnp.where(keep, z, new)
        converged, passes, *measured = measures(unpack(new))
        measured = jnp.stack(measured)
        now_done = done | converged
        # the last iterate that meets the reported tolerances, in case later ones do not
        best = jnp.where(passes, new, best)
        best_measured = jnp.where(passes, measured, best_measured)
        found = found | passes
        reg = jnp.where(finite, reg, jnp.maximum(100.0 * reg, 10.0 * eps))
        count = count + jnp.where(done, 0, 1)
        return (new, now_done, count, reg, measured), (best, found, best_measured)

    # start: mid-box outputs, unit slacks and duals
    x0 = jnp.where(act, 0.5 * upper, 0.0)
    gx0 = p.rows(x0)
    one_m = jnp.ones_like(p.lo)
    start = _State(
        x=x0,
        lam=jnp.zeros((), dtype),
        s_lo=jnp.where(p.lo_on, jnp.maximum(gx0 - jnp.where(p.lo_on, p.lo, 0.0), 1.0), 1.0),
        s_hi=jnp.where(p.hi_on, jnp.maximum(jnp.where(p.hi_on, p.hi, 0.0) - gx0, 1.0), 1.0),
        y_lo=jnp.where(p.lo_on, one_m, 0.0),
        y_hi=jnp.where(p.hi_on, one_m, 0.0),
        v_lo=jnp.where(act, 1.0, 0.0),
        v_hi=jnp.where(act, 1.0, 0.0),
    )
    z0, unpack = ravel_pytree(start)
    # the start is not measured: mid-box with unit duals, its complementarity is at least
    # the active variables' ranges and one a row switched on, so every problem takes an
    # iteration. Each iterate's measures, ``(primal, dual, pairs)``, are carried with it
    # and the result is not measured again: ``tso14-v0``'s step 361 -> 347 kernels and 8 %
    # less LLVM IR for the two (``benchmarks/kernel_cost.py``'s count)
    unmeasured = jnp.full(3, jnp.inf, dtype)
    no = jnp.zeros((), bool)
    carry = (
        (z0, no, jnp.zeros((), jnp.int32), jnp.zeros((), dtype), unmeasured),
        (z0, no, unmeasured),
    )

    def running(state):
        k, ((_, done, _, _, _), _) = state
        return (k < iterations) & ~done

    def advance(state):
        k, c = state
        return k + 1, iterate(c)

    loop = jax.lax.while_loop(running, advance, (0, carry))
    _, ((last, _, count, _, last_measured), (best, found, best_measured)) = loop
    # ``best`` is the last iterate that meets the reported tolerances
    final = unpack(jnp.where(found, best, last))
    primal, dual, pairs = jnp.where(found, best_measured, last_measured)
    return _Solution(
        x=jnp.where(act, final.x, 0.0),
        lam=final.lam,
        y_lo=final.y_lo,
        y_hi=final.y_hi,
        v_lo=final.v_lo,
        v_hi=final.v_hi,
        converged=found,
        iterations=count,
        primal_residual=primal,
        dual_residual=dual,
        gap=pairs,
    )
