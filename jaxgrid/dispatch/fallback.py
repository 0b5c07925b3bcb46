"""The DC-OPF by the copper plate where no line binds, by the binding lines' prices where
a few do, and by the interior point for the rest.

Most dispatches of a day leave every line below its rating; for them the DC-OPF's
solution is the economic dispatch on a copper plate (:mod:`.copper_plate`), found
exactly without iterating. Where a few lines bind, Newton's method on the prices of the
balance and of those lines (:mod:`.binding_lines`) finds it for a fraction of the
interior point's work, with a certificate of optimality. The interior point
(:func:`~jaxgrid.dispatch.dcopf`) spends ``iterations`` factorisations on each problem.
:func:`dcopf_with_fallback` therefore solves the copper plate for every problem, the
binding lines where the copper plate's flows exceed a monitored rating, and the interior
point only where neither is certified (load shed or output spilled behind a binding
line, more binding lines than the search holds, a reserve held at exactly its
requirement, whose price lies between 0 and the shortfall's),
and where the interior point ends
unconverged, the binding lines' Newton steps again, started from its prices and its
binding lines (a polish, taken where it certifies the optimum), each through
:func:`~jaxgrid.masked.masked_apply`: under ``jax.vmap`` a stage runs only when some
member of the batch needs it, and each gathers the problems that need it a share of the
batch at a time (:func:`lines_capacity`, ``capacity``; on a CPU one problem a round for
the interior point and at most 64 for the binding lines); unbatched each is a
``lax.cond``. The result is each stage's where it is
certified; where the optimum is not unique (load shed or output spilled at several
buses at one price) the stages may split it differently at the same cost, unless
:attr:`~jaxgrid.dispatch.DCOPFParams.slack_price_rise` makes it unique.

Measured on ``tso118-v0`` (2-core CPU, ``jax.vmap(env.step)``, 48-step days, one XLA
device): the interior point ran on 6 % of the steps of random commitments and 10 % of
the merit order's (``benchmarks/dispatch_failures.py``); a later session, 8 held-out
days each, 7 % and 23 % before the binding lines' exact step lengths and 2 % and 21 %
after (the merit order's congested steps shed or hold the reserve behind a binding
line, which the binding lines do not certify); with the binding lines' two directions
(:mod:`.binding_lines`, a later session) 1 % and 22 %, no dispatch failing. The binding lines' search
(``slots``, ``rounds``, ``newton_steps``) trades its own cost against the interior
point's: 8 rounds of 4 Newton steps left the interior point fewer steps but ran
1.1e3 env-steps/s at 64 and 256 environments, 4 rounds of 2 steps 1.7e3 and 2.0e3 (its
defaults), at 6.5 % of the steps left to the interior point; with the binding lines'
exact step lengths (:mod:`.binding_lines`) 1.4 %, more rounds or steps certifying a
few tenths of a per cent more for more than they saved. The shares gathered: about a
quarter of random commitments' problems need the binding lines and one or two in a
hundred the interior point, at any batch, so each stage takes a share of the batch a
round: the interior point a sixty-fourth (one problem at 64 environments, four at
256), the binding lines a quarter until their later rounds ran only where the first two
do not certify, and an eighth since (:mod:`.binding_lines`, a later session:
``tso118-v0``'s ``jax.vmap(env.step)``
1.07x at 64 and at 256 environments, the merit order's days at 256 the same; each
variant compiled ahead of time in one process, runs alternated, medians of 11-15
per-round ratios). Those later rounds are a stage of their own, between the binding
lines' first rounds and the interior point, gathered a sixty-fourth of the batch a
round (one problem at 64 environments, 4 at 256, 16 at 1024; on a CPU now one a round,
:func:`later_capacity`, below), where they had run inside each gathered round of the first: the same comparison, 1.07x
at 64 environments, 1.09x at 256, 1.11x at 1024 (a sixteenth 1.05x and 1.00x at 64
and 256, a thirty-second 1.09x, 1.05x and 1.04x; medians of 5-11). Once those rounds
stopped where they certify (up to 12), a round of them runs in lockstep until its
slowest problem certifies or has taken all 12, and the problems the search cannot
certify (prices that diverge, slots full) take all 12: on a CPU one problem a round
(:data:`CPU_LATER`) ran ``tso118-v0``'s step 1.12x at 1024 environments against a
sixty-fourth (16; 4 and 2 a round 1.07x and 1.04x in another run) and 1.03x at 256
(the same comparison, medians of 7-9; at 64 environments a sixty-fourth is one). With
the stages cut in turn at 1024 environments (the same way, a day each): the copper
plate and the rest of the step 12.3 ms a step, with the binding lines' first rounds
27.4, with their later rounds (16 a round) 42.9, with the interior point the same.
Measured on one day of ``tso118-v0``'s random-commitment problems (the dispatch alone,
``jax.vmap`` in a jitted scan, one process, median of 7), ms a step of 64 problems: the
binding lines on the whole batch and the interior point 4 a round (before) 24.7, with
the exact steps 18.6, gathered a quarter and one a round 10.4, the interior point 4 a
round 14.0, the lines half a batch 12.4; of 256 problems: a quarter and four a round
27.5, one a round 27.8, the lines an eighth 29.4.

On a CPU two limits on those shares paid (:func:`interior_capacity`,
:func:`lines_capacity`, a later session): the interior point one problem a round after
the binding lines, since a round of several runs in lockstep until the slowest has
converged or the budget is spent (on a day of random commitments, 5 of 132 interior
point problems stalled at the budget of 30 where the others took 11-16 iterations) and
a CPU's work grows with the round's size anyway; and the binding lines at most 64
problems a round, so that the polish, which takes a round for the one or two problems
the interior point left, is not a round of a quarter of a large batch. Measured on
``tso118-v0``'s ``jax.vmap(env.step)`` (random actions, 48-step days, each variant
compiled in one process and alternated, medians of 9-11; a slow, noisy day): at 256
environments 24.4 -> 19.9 ms a step (the interior point 4 -> 1 a round; 2 a round
23.5), at 1024 the lines 256 -> 64 a round 129 -> 111 ms, then (other runs) the
interior point 16, 8 and 4 a round 104, 98 and 89 ms, and 4, 2 and 1 a round 90, 86 and
79 ms; at 64 environments unchanged (the lines 8 a round the same, 32 slower),
``tso14-v0`` at 256 the same (2.00 and 2.05 ms); the merit order's days at 256, where
the interior point takes a fifth of the problems, 254 -> 221 ms. Elsewhere (a GPU, a
TPU) a round is a sequence of kernel launches, and many small rounds would cost latency
for nothing: the shares stand there (not measured here; the platform is JAX's default
backend when the program is traced). The interior point's budget at 24 instead of 30
changed neither the step's time nor the problems certified after the polish (131 of 132
random commitments' interior point problems, 975-976 of 985 of the merit order's). On
case5
(``gencos5-v0``: 6 lines, a 5-node interior point) the middle stage costs more than the
interior point it saves: 1.3e4 and 9.3e3 env-steps/s at 64 and 256 environments with it,
2.5e4 and 4.0e4 without (``binding_lines=False``, which that market uses).

The polish: in float32 the interior point can stall within reach of the optimum where
load is shed behind a binding line (prices near the value of lost load, dual residuals
of 10-60 currency/MWh); from its prices, the binding lines' Newton steps on its binding
lines certify most of them. On 32 held-out days of ``tso118-v0``'s merit order (1,536
steps, float32) 9 steps ended unconverged without it and 2 with it (one round of 4
steps; 1 with the stage's 4 rounds of 2, on another CPU, ``benchmarks/dispatch_failures.py``), the polished prices equal float64's to 0.1 currency/MWh. The binding
lines' stage and the polish are two passes of one loop, so that the program holds the
search once (the polish takes the stage's rounds of 2 steps): ``tso118-v0``'s
``jax.vmap(env.step)`` compiled in 15.6-16.3 s against 18.5 s with two copies (1,015-1,089
fusions against 1,139; a slow day on this machine, ``benchmarks/compile_time.py``), the
merit order's day at 64 and 256 environments gave the same rewards at the same speed (664
and 675 against 652 and 667 env-steps/s, one process).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from jaxgrid.dispatch.binding_lines import (
    LinesSearch,
    positional_first_rounds,
    positional_later_rounds,
)
from jaxgrid.dispatch.copper_plate import copper_plate_dispatch
from jaxgrid.dispatch.dcopf import (
    DEFAULT_ITERATIONS,
    DCOPFParams,
    DispatchResult,
    dcopf,
    network_ptdf,
    solve_positional,
    static_sets,
)
from jaxgrid.grid.network import Network
from jaxgrid.masked import masked_apply, round_size
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array

CAPACITY = 1 / 64  # share of a batch the interior point takes per round (see interior_capacity)
CPU_CAPACITY = 1  # problems the interior point takes per round on a CPU after the binding lines
LINES_CAPACITY = 1 / 8  # share of a batch the binding lines take per round
CPU_LINES_MOST = 64  # problems the binding lines take per round on a CPU, at most
LATER_CAPACITY = 1 / 64  # share of a batch the binding lines' later rounds take per round
CPU_LATER = 1  # problems the binding lines' later rounds take per round on a CPU


def interior_capacity(binding_lines: bool) -> int | float:
    """The interior point's problems a round by default: :data:`CPU_CAPACITY` where
    JAX's default backend is a CPU and the binding lines ran first (a round of several
    runs until its slowest has converged), else a share of the batch, :data:`CAPACITY`
    (the module docstring)."""
    if binding_lines and jax.default_backend() == "cpu":
        return CPU_CAPACITY
    return CAPACITY


@functools.cache
def capped_capacity(most: int) -> Callable[[int], int]:
    """The interior point's problems a round for a network where few problems of a batch
    need it: :data:`CAPACITY` of the batch, at most ``most`` on a CPU (one function per
    ``most``, so that a traced program keeps the same static argument). XLA compiles
    each of the round's kernels for its width, and a wider round compiles longer:
    ``tso14-v0``'s step at 1024 environments, where 1.2 % of random actions' problems
    reach the interior point (12.7 a step), compiled in 5.4-5.8 s with 4 a round against
    6.6-6.9 s with 16 (a sixty-fourth; three rounds of fresh processes, a slow hour), and
    stepped at 0.99x at 1024 environments and 0.93-0.95x at 4096 (alternated in one
    process). Not for a market that clears most of its problems by the interior point:
    ``gencos5-v0`` stepped at 0.50x with 4 a round at 1024 environments."""

    def capacity(n: int) -> int:
        share = round_size(CAPACITY, n)
        return min(share, int(most)) if jax.default_backend() == "cpu" else share

    return capacity


def lines_capacity(n: int) -> int:
    """The binding lines' problems a round in a batch of ``n``: :data:`LINES_CAPACITY`
    of it, at most :data:`CPU_LINES_MOST` on a CPU (the module docstring)."""
    share = round_size(LINES_CAPACITY, n)
    return min(share, CPU_LINES_MOST) if jax.default_backend() == "cpu" else share


def later_capacity(n: int) -> int:
    """The binding lines' later rounds' problems a round in a batch of ``n``:
    :data:`LATER_CAPACITY` of it, :data:`CPU_LATER` on a CPU (their rounds run in
    lockstep until the slowest problem certifies or has taken them all: the module
    docstring)."""
    return CPU_LATER if jax.default_backend() == "cpu" else round_size(LATER_CAPACITY, n)


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
    capacity: int | float | None = None,
    binding_lines: bool = True,
) -> DispatchResult:
    """:func:`~jaxgrid.dispatch.dcopf`'s solution of the same arguments (see the module
    docstring), with ``capacity`` the problems of a batch solved by the interior point
    per round (an ``int``, or a ``float`` in (0, 1], that share of the batch:
    :func:`~jaxgrid.masked.masked_apply`); ``binding_lines=False`` leaves out the middle stage (cheaper where the
    interior point is: a network of a few buses)."""
    params = DCOPFParams() if params is None else params
    monitored, shed_at, spill_at = static_sets(
        network, pd_mw, rate_mva, monitored, shed_at, spill_at
    )
    pd = network.pd_mw if pd_mw is None else pd_mw
    poly = network.cost_poly if cost_poly is None else cost_poly
    on = network.gen_in_service if commitment is None else commitment
    rate = network.rate_mva if rate_mva is None else rate_mva
    args = (network, jnp.asarray(pd), jnp.asarray(poly), jnp.asarray(on), jnp.asarray(rate))
    # the PTDF once for every stage, outside their loops (a constant where the network's
    # branch data are: network_ptdf)
    args = args + (jnp.asarray(reserve_mw), params, network_ptdf(network))
    sets = (
        ("monitored", tuple(monitored)),
        ("shed_at", tuple(shed_at)),
        ("spill_at", tuple(spill_at)),
    )
    return _stages(
        *args,
        sets=sets,
        iterations=int(iterations),
        capacity=interior_capacity(bool(binding_lines)) if capacity is None else capacity,
        binding_lines=bool(binding_lines),
    )


@functools.partial(jax.jit, static_argnames=("sets", "iterations", "capacity", "binding_lines"))
def _stages(*args, sets, iterations, capacity, binding_lines) -> DispatchResult:
    """The stages (module docstring). Jitted, so that calls outside ``jit`` (an
    environment stepped eagerly) reuse one compiled program: each eager call of
    :func:`~jaxgrid.masked.masked_apply` would compile its stages anew, and an eagerly
    stepped ``tso14-v0`` ran out of the JIT's memory within two days of steps."""
    sets = dict(sets)
    plate = solve_positional(copper_plate_dispatch, sets, *args)  # every problem
    interior = functools.partial(
        solve_positional, functools.partial(dcopf, iterations=iterations), sets
    )
    if not binding_lines:
        return masked_apply(interior, ~plate.converged, plate, *args, capacity=capacity)
    lines = functools.partial(positional_first_rounds, sets)
    rest = functools.partial(positional_later_rounds, sets)
    idle = LinesSearch.empty(len(sets["monitored"]), dtype=plate.lmp.dtype)

    def stage(start, first):
        """The binding lines from ``start`` where it is not certified, their later rounds
        where the first do not certify, kept where they certify; then, on the first
        pass, the interior point where they do not."""
        tried = ~start.converged
        found = masked_apply(lines, tried, (start, idle), start, *args, capacity=lines_capacity)
        if sets["monitored"]:  # else no line can bind: the first rounds return the plate
            found = masked_apply(
                rest,
                tried & ~found[0].converged,
                found,
                found[1],
                *args,
                capacity=later_capacity,
            )
        found = found[0]
        found = jax.tree_util.tree_map(lambda a, b: jnp.where(found.converged, a, b), found, start)
        need = ~found.converged & first
        return masked_apply(interior, need, found, *args, capacity=capacity), None

    # the binding lines from the copper plate, the interior point, the polish: two passes
    # of one loop, so that the program holds the binding lines' search once
    result, _ = jax.lax.scan(stage, plate, jnp.asarray([True, False]))
    return result
