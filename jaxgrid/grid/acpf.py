"""AC power flow on a meshed :class:`~jaxgrid.grid.network.Network`.

The polar power-flow equations of MATPOWER's ``runpf``: unknown voltage angles at PV
and PQ buses and magnitudes at PQ buses, such that the power injected into the network,
``S_i = V_i conj(sum_j Y_ij V_j)``, equals the scheduled generation minus load at every
bus (active power at PV and PQ buses, reactive power at PQ buses). Loads default to
``network.pd_mw``/``qd_mvar``; generators inject their dispatch ``pg_mw`` and hold their
bus at ``vg_pu``; the slack bus keeps its angle from the data and takes the balance.

**Bus types as MATPOWER assigns them.** A bus is PV (or slack) only while an in-service
generator is connected to it; otherwise it is PQ. With no slack bus left, the first PV
bus becomes the slack. Out-of-service branches and generators are left out; an isolated
bus (type 4), and every branch and generator at one, is out of the solve and reported
at 0 pu.

**Fixed work.** A solve runs exactly ``iterations`` iterations, so every solve of a
``vmap`` batch does the same work in lockstep (no ``while_loop``); a solve that has
converged stops changing (its updates are masked). ``converged`` says whether the
largest mismatch (pu: MW/Mvar over ``base_mva``, MATPOWER's infinity norm over the
active equations) is below ``tol``. A loading without a solution ends with
``converged=False`` and finite numbers: an iterate that is not finite (or leaves 0 <
|V| < 100 pu, |angle| < 1000 rad) is never taken and stops the solve.

**Two methods.** ``"fast_decoupled"`` (the default) is MATPOWER's fast-decoupled
power flow, XB version (``fdpf`` with ``makeB``): alternate angle and magnitude updates
with the constant matrices ``B'`` (series reactances only) and ``B''`` (no phase
shifts), whose inverses are computed once per network and shared by a whole batch.
``"newton"`` is full Newton-Raphson with the dense polar Jacobian (MATPOWER's
``newtonpf``): quadratic convergence and the more robust near the nose of the PV curve,
but one dense factorisation per solve and iteration.

**Why fast-decoupled.** Measured on this project's 2-core CPU, batch of 1024 solves in
``vmap``: a dense Newton step factorises a ``2 n x 2 n`` Jacobian per solve (case118:
about 9 MFLOP; case300: 140 MFLOP), and Newton ran 359 solves/s on case118 where
fast-decoupled ran 5600 (float64, both converged to 1e-10 pu). A chord method (the
Newton Jacobian at the starting point, factorised once) needed as many iterations as
fast-decoupled on the small cases and did not converge on case300. A fast-decoupled
iteration costs two products with the shared dense inverses (a matrix-matrix product
over the batch) and two evaluations of the mismatch, and needs more iterations than
Newton (6-17 to reach 1e-10 pu on the bundled cases at 0.7-1.3 times their load and
dispatch; 43 on case300 at 1.3, where angles across a weak corridor are large).
Explicit inverses beat ``lu_factor`` and triangular solves 2-20x at equal accuracy
(the inverse only shapes each correction; the mismatch is evaluated exactly). The
inverses are stored in float32 even in a float64 solve (12-25 % faster, the same
iteration counts: the fixed point does not depend on them).

**Accuracy in float32.** Powers are evaluated branch by branch from voltage
differences (``V_f / a - V_t``), never from ``Y_bus V``, whose large diagonal cancels in
float32. Even so a float32 voltage is known to about 6e-8, so a branch of admittance
``|y|`` carries a current error of about ``6e-8 |y|``: the mismatch floor is about
``eps |y|_max`` (measured: 1.2e-5 pu on case118, ``|y|_max`` = 246 pu; 2e-4 pu on case300,
2156 pu). The float32 tolerance therefore scales with the network (see
:func:`default_tolerance`); voltages are then within about 1e-6 pu of float64.

**Derivatives** are those of the solution, not of the iterations: every solve (the
first and each reactive-limit round) is the root of the power-flow equations for
``jax.lax.custom_root`` (:mod:`jaxgrid.grid.implicit`), so ``jax.grad`` and
``jax.jvp`` with respect to loads, dispatch, setpoints and branch data cost one dense
``2 n x 2 n`` solve at the solution, and do not move with the iteration count once the
solve has converged. (The fast-decoupled iterations' batching rule, ``custom_vmap``,
has no reverse mode: differentiating through them failed.) The switching of generators
at reactive limits is a discrete event and carries no derivative. Tested against
central differences in ``tests/grid/test_acpf_gradients.py``.

**Batching.** Under ``jax.vmap`` over loads or dispatch (one network), the
fast-decoupled iterations run on ``(n_bus, batch)`` arrays (a custom batching rule),
so that gathers and scatter-adds over branches move whole rows: measured 2x faster
than the per-solve layout ``vmap`` chooses. ``vmap`` over networks of equal size (or over
a batch of Q-limit states) runs the plain per-solve code.

**Reactive limits** (``enforce_q_limits=True``) as MATPOWER's and pandapower's
``enforce_q_lims`` (all violations at once): after a solve, every generator at a PV
bus whose reactive output (shared among a bus's generators as MATPOWER's ``pfsoln``
shares it) exceeds its limit by more than ``tol * base_mva`` is fixed at that limit and
its bus becomes PQ; the power flow is solved again from the last solution. This is
done ``q_rounds`` times (fixed work again, one ``lax.scan``); a switched generator never
returns to voltage control, and slack generators are never switched (as in pandapower).
A round whose solve did not converge has reactive outputs that mean little: then only
its largest violation is switched (MATPOWER's one-at-a-time rule) and the next solve
starts from the last converged solution. Without this, case39 at 1.3 times its load and
dispatch pinned a generator that pandapower leaves free, at a solution 0.04 pu away
(``tests/grid/test_acpf.py``). With violations left after the last round, ``converged``
is False.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct
from jax.custom_batching import custom_vmap

from jaxgrid.grid.implicit import implicit_root
from jaxgrid.grid.network import ISOLATED, PV, REF, Network
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array, float_dtype

METHODS = ("fast_decoupled", "newton")
VM_LIMIT_PU = 100.0  # an iterate with a larger |V| (pu) has diverged
VA_LIMIT_RAD = 1000.0  # likewise an angle (rad)


@struct.dataclass
class ACPowerFlowResult:
    """One AC power flow (leading batch axes under ``vmap``).

    Powers are in MW and Mvar; injections are generation minus load (positive =
    into the network). Out-of-service branches and generators report 0, isolated buses
    0 pu.

    Attributes:
        vm_pu, va_deg: ``(n_bus,)`` voltage magnitude (pu) and angle (degrees).
        p_mw, q_mvar: ``(n_bus,)`` net power injected into the network at each bus
            (generation minus load; bus shunts count as network, as in ``Y_bus``).
        gen_p_mw: ``(n_gen,)`` active output: the dispatch, except the first in-service
            generator at each slack bus, which takes the balance (MATPOWER's rule).
        gen_q_mvar: ``(n_gen,)`` reactive output; several generators at one bus share
            it in proportion to their reactive ranges (MATPOWER's ``pfsoln``).
        gen_at_q_limit: ``(n_gen,)`` bool, generators held at a reactive limit (only
            with ``enforce_q_limits``).
        p_from_mw, q_from_mvar: ``(n_branch,)`` power entering each branch at its
            ``branch_from`` end; ``p_to_mw``, ``q_to_mvar`` at its ``branch_to`` end.
        loss_mw: ``()`` active losses of all branches, ``sum(p_from + p_to)``.
        converged: ``()`` bool: the mismatch is below the tolerance (and, with
            ``enforce_q_limits``, no reactive limit is violated).
        iterations: ``()`` int32 iterations that changed the solution (all rounds).
        mismatch_pu: ``()`` largest power mismatch of the active equations, pu.
    """

    vm_pu: Array
    va_deg: Array
    p_mw: Array
    q_mvar: Array
    gen_p_mw: Array
    gen_q_mvar: Array
    gen_at_q_limit: Array
    p_from_mw: Array
    q_from_mvar: Array
    p_to_mw: Array
    q_to_mvar: Array
    loss_mw: Array
    converged: Array
    iterations: Array
    mismatch_pu: Array


@struct.dataclass
class FastDecoupledMatrices:
    """The inverses of the fast-decoupled matrices of one network, float32, pu.

    Attributes:
        bp_inv: ``(n_bus, n_bus)`` inverse of ``B'`` on the PV and PQ buses (the identity
            elsewhere).
        bpp_inv: ``(n_bus, n_bus)`` inverse of ``B''`` on the PQ buses (the identity
            elsewhere).
    """

    bp_inv: Array
    bpp_inv: Array


@functools.partial(jax.jit, static_argnames=("dtype",))
@full_precision
def fast_decoupled_matrices(network: Network, dtype=None) -> FastDecoupledMatrices:
    """The inverses of ``B'`` and ``B''`` of ``network`` (MATPOWER's ``makeB``, XB), for
    :func:`acpf`'s ``matrices``: computing them once saves two dense inversions per call
    (on case300 about 3 ms of a 4 ms single solve). They hold for the network's branch
    statuses and bus types (which in-service generators make PV): recompute them when
    those change. ``dtype`` (default float64 with ``jax_enable_x64``, else float32) is
    the precision they are inverted in; they are stored in float32. Jitted: one program
    instead of op by op (case118's 2.5 s against 6 s, most of ``opf118-v0``'s ``make``)."""
    case = _case(network, float_dtype() if dtype is None else dtype)
    b_p, b_pp = _fdlf_matrices(case)
    return FastDecoupledMatrices(
        bp_inv=_inverse(b_p, case.pv | case.pq), bpp_inv=_inverse(b_pp, case.pq)
    )


def default_iterations(method: str, dtype) -> int:
    """Iterations of a solve when none are given: fast-decoupled 30 in float64 (the
    bundled cases at 0.7-1.3 times their load reach 1e-10 pu in 6-17, case300 at 1.3 in
    43) and 12 in float32 (the float32 floor in 4-8); Newton 10 and 6."""
    wide = jnp.dtype(dtype) == jnp.float64
    if method == "newton":
        return 10 if wide else 6
    return 30 if wide else 12


def default_tolerance(network: Network, dtype, factor: float = 8.0):
    """Largest mismatch (pu) of a converged solve: 1e-10 in float64. In float32, one per
    bus, ``max(1e-5, factor eps y_i)`` with ``eps`` float32's machine epsilon and ``y_i``
    the sum of the series admittances (pu) of the in-service branches at bus ``i``: the
    scale of the float32 mismatch floor there (module docstring)."""
    if jnp.dtype(dtype) == jnp.float64:
        return 1e-10
    case = _case(network, dtype)
    y = jnp.abs(case.y_series)
    y_bus = jnp.zeros(case.y_shunt.shape, dtype).at[case.f].add(y).at[case.t].add(y)
    return jnp.maximum(1e-5, factor * jnp.finfo(jnp.float32).eps * y_bus)


@functools.partial(
    jax.jit, static_argnames=("method", "iterations", "enforce_q_limits", "q_rounds")
)
@full_precision
def acpf(
    network: Network,
    p_mw=None,
    q_mvar=None,
    *,
    pg_mw=None,
    vg_pu=None,
    method: str = "fast_decoupled",
    iterations: int | None = None,
    tol=None,
    enforce_q_limits: bool = False,
    q_rounds: int = 6,
    start: ACPowerFlowResult | None = None,
    matrices: FastDecoupledMatrices | None = None,
) -> ACPowerFlowResult:
    """Solve the AC power flow of ``network`` (see the module docstring).

    Args:
        p_mw, q_mvar: ``(n_bus,)`` bus loads, MW and Mvar (positive = consumption);
            default ``network.pd_mw``, ``network.qd_mvar``.
        pg_mw: ``(n_gen,)`` generator dispatch, MW (default ``network.pg_mw``); the slack
            generator's entry is replaced by the balance.
        vg_pu: ``(n_gen,)`` voltage setpoints, pu (default ``network.vg_pu``); where
            several in-service generators share a bus, the last one's counts.
        method: ``"fast_decoupled"`` or ``"newton"`` (static).
        iterations: iterations per solve (static); default :func:`default_iterations`.
        tol: convergence tolerance on the largest mismatch, pu; default
            :func:`default_tolerance`.
        enforce_q_limits: switch generators at their reactive limits from PV to PQ
            (static), in ``q_rounds`` further solves.
        start: a solution to start from (its ``vm_pu`` and ``va_deg`` at PQ buses, its
            angles at PV buses); default the network's ``vm_pu``/``va_deg`` with the
            generator setpoints, as MATPOWER starts.
        matrices: :func:`fast_decoupled_matrices` of this network, precomputed
            (fast-decoupled only); default computed here.

    The dtype of the solve is that of the floating inputs given (float32 unless
    ``jax_enable_x64`` is on or float64 arrays are passed with it on). Jittable and
    vmappable over every input, the network included.

    Raises:
        ValueError: an unknown ``method``, fewer than one iteration, or an input of the
            wrong shape.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    n, n_gen = network.n_bus, network.n_gen
    dtype = _dtype(p_mw, q_mvar, pg_mw, vg_pu)
    iterations = default_iterations(method, dtype) if iterations is None else int(iterations)
    if iterations < 1 or int(q_rounds) < 0:
        raise ValueError(f"need iterations >= 1 and q_rounds >= 0, got {iterations}, {q_rounds}")
    tol = default_tolerance(network, dtype) if tol is None else tol
    inputs = {
        "p_mw": (network.pd_mw if p_mw is None else p_mw, n),
        "q_mvar": (network.qd_mvar if q_mvar is None else q_mvar, n),
        "pg_mw": (network.pg_mw if pg_mw is None else pg_mw, n_gen),
        "vg_pu": (network.vg_pu if vg_pu is None else vg_pu, n_gen),
    }
    for name, (value, size) in inputs.items():
        if jnp.shape(value) != (size,):
            raise ValueError(
                f"{name} must have shape ({size},), got {jnp.shape(value)}; use jax.vmap for batches"
            )
    p_mw, q_mvar, pg_mw, vg_pu = (jnp.asarray(v, dtype) for v, _ in inputs.values())

    case = _case(network, dtype)
    cdtype = case.y_shunt.dtype
    base = jnp.asarray(network.base_mva, dtype)
    load = jnp.where(case.bus_on, p_mw + 1j * q_mvar, 0.0).astype(cdtype)
    gen_index = jnp.arange(n_gen, dtype=jnp.int32)
    last_gen = (
        jnp.full(n, -1, jnp.int32).at[case.gen_bus].max(jnp.where(case.gen_on, gen_index, -1))
    )
    v_set = jnp.where(last_gen >= 0, vg_pu[jnp.maximum(last_gen, 0)], 1.0)
    regulated = case.ref | case.pv
    va = jnp.deg2rad(jnp.asarray(network.va_deg, dtype))
    vm = jnp.asarray(network.vm_pu, dtype)
    if start is not None:
        va = jnp.where(case.ref, va, jnp.deg2rad(jnp.asarray(start.va_deg, dtype)))
        vm = jnp.asarray(start.vm_pu, dtype)
    vm = jnp.where(regulated, v_set, jnp.where(case.bus_on, vm, 0.0))
    va = jnp.where(case.bus_on, va, 0.0)

    def sbus_of(q_gen):
        gen = jnp.where(case.gen_on, pg_mw + 1j * q_gen, 0.0).astype(cdtype)
        return (jnp.zeros(n, cdtype).at[case.gen_bus].add(gen) - load) / base

    tol = jnp.asarray(tol, dtype)
    if method == "fast_decoupled":
        b_p, b_pp = _fdlf_matrices(case)  # dead code (pruned) when not needed
        if matrices is None:
            matrices = FastDecoupledMatrices(
                bp_inv=_inverse(b_p, case.pv | case.pq), bpp_inv=_inverse(b_pp, case.pq)
            )

        def iterations_of(sbus, va, vm, pv, pq, first: bool):
            bpp_inv = matrices.bpp_inv if first else _inverse(b_pp, pq)
            return _fdlf(iterations)(case, sbus, va, vm, pv | pq, pq, matrices.bp_inv, bpp_inv, tol)

    else:
        y_bus = _dense_admittance(case)

        def iterations_of(sbus, va, vm, pv, pq, first: bool):
            return _newton(case, y_bus, sbus, va, vm, pv | pq, pq, tol, iterations)

    def solve(sbus, va, vm, pv, pq, first: bool):
        """The iterations as they are, differentiated at their solution (module docstring)."""
        return _at_solution(case, iterations_of, sbus, va, vm, pv, pq, first)

    qg_data = jnp.asarray(network.qg_mvar, dtype)
    qmin = jnp.asarray(network.qmin_mvar, dtype)
    qmax = jnp.asarray(network.qmax_mvar, dtype)
    slack_mvar = jnp.broadcast_to(tol, (n,))[case.gen_bus] * base

    def bus_types(held):
        bus_held = jnp.zeros(n, bool).at[case.gen_bus].max(held)
        return case.pv & ~bus_held, case.pq | (case.pv & bus_held), bus_held

    def excess(gen_q, held):
        """``(n_gen,)`` Mvar beyond a reactive limit of generators still controlling
        voltage (0 where within, or where the generator is not at a PV bus)."""
        at_pv = case.gen_on & bus_types(held)[0][case.gen_bus]
        beyond = jnp.maximum(gen_q - qmax, qmin - gen_q)
        return jnp.where(at_pv & (beyond > slack_mvar), beyond, 0.0)

    def round_(carry, _):
        """Switch violating generators to PQ and solve again (module docstring)."""
        va, vm, converged, held, q_fixed, at_limit, good_va, good_vm, count = carry
        good_va = jnp.where(converged, va, good_va)
        good_vm = jnp.where(converged, vm, good_vm)
        gen_q = _gen_q(case, network, dtype, _injection(case, va, vm) * base, q_mvar, held, q_fixed)
        beyond = excess(gen_q, held)
        largest = jnp.zeros(n_gen, bool).at[jnp.argmax(beyond)].set(True)
        limited = (beyond > 0) & (converged | largest)
        switched_bus = jnp.zeros(n, bool).at[case.gen_bus].max(limited)
        switched = case.gen_on & switched_bus[case.gen_bus] & ~held
        limit = jnp.where(gen_q > qmax, qmax, qmin)
        q_fixed = jnp.where(limited, limit, jnp.where(switched, gen_q, q_fixed))
        held = held | switched
        at_limit = at_limit | limited
        pv, pq, bus_held = bus_types(held)
        sbus = sbus_of(jnp.where(bus_held[case.gen_bus], q_fixed, qg_data))
        va, vm, mis, converged, more = solve(sbus, good_va, good_vm, pv, pq, False)
        carry = (va, vm, converged, held, q_fixed, at_limit, good_va, good_vm, count + more)
        return carry, mis

    held = jnp.zeros(n_gen, bool)  # reactive output fixed: every generator at a switched bus
    at_limit = jnp.zeros(n_gen, bool)  # ... of which these violated a limit
    q_fixed = qg_data
    va, vm, mis, converged, count = solve(sbus_of(qg_data), va, vm, case.pv, case.pq, True)
    if enforce_q_limits and int(q_rounds) > 0:
        carry = (va, vm, converged, held, q_fixed, at_limit, va, vm, count)
        carry, mis = jax.lax.scan(round_, carry, None, length=int(q_rounds))
        va, vm, converged, held, q_fixed, at_limit, _, _, count = carry
        mis = mis[-1]
    pv, pq, _ = bus_types(held)
    s_mva = _injection(case, va, vm) * base
    gen_q = _gen_q(case, network, dtype, s_mva, q_mvar, held, q_fixed)
    if enforce_q_limits:
        converged = converged & ~jnp.any(excess(gen_q, held) > 0)
    mismatch = _norm(mis, pv | pq, pq)
    return _solution(
        case,
        network,
        dtype,
        va,
        vm,
        s_mva,
        gen_q,
        pg_mw,
        p_mw,
        at_limit,
        converged,
        count,
        mismatch,
    )


def _dtype(*arrays):
    given = [jnp.asarray(a).dtype for a in arrays if a is not None]
    given = [d for d in given if jnp.issubdtype(d, jnp.floating)]
    return jnp.result_type(*given) if given else float_dtype()


class _Case(NamedTuple):
    """The network in the solve's dtype, as the iterations need it: per branch the
    coefficients of the end currents in terms of ``d = V_f / a - V_t`` (``a`` the complex
    ratio): ``i_from = y_from d + j b_from V_f``, ``i_to = -y_series d + j b_half V_t``."""

    f: Array  # (n_branch,) int32 from-bus
    t: Array  # (n_branch,) int32 to-bus
    y_series: Array  # (n_branch,) complex series admittance (0 out of service), pu
    inv_ratio: Array  # (n_branch,) complex 1 / (tap exp(j shift))
    y_from: Array  # (n_branch,) complex y_series / conj(ratio)
    b_from: Array  # (n_branch,) real half charging / tap^2
    b_half: Array  # (n_branch,) real half charging (0 out of service)
    tap: Array  # (n_branch,) real
    x_pu: Array  # (n_branch,) real series reactance
    shift: Array  # (n_branch,) real phase shift, rad
    y_shunt: Array  # (n_bus,) complex bus shunt, pu
    bus_on: Array  # (n_bus,) bool
    ref: Array  # (n_bus,) bool slack buses
    pv: Array  # (n_bus,) bool
    pq: Array  # (n_bus,) bool
    gen_on: Array  # (n_gen,) bool
    gen_bus: Array  # (n_gen,) int32


def _case(network: Network, dtype) -> _Case:
    cdtype = jnp.result_type(dtype, jnp.complex64)
    bus_type = jnp.asarray(network.bus_type)
    n = network.n_bus
    bus_on = bus_type != ISOLATED
    f, t = jnp.asarray(network.branch_from), jnp.asarray(network.branch_to)
    on = jnp.asarray(network.branch_in_service) & bus_on[f] & bus_on[t]
    r, x = jnp.asarray(network.r_pu, dtype), jnp.asarray(network.x_pu, dtype)
    z = jax.lax.complex(r, x)
    y_series = jnp.where(on, 1.0 / jnp.where(on, z, 1.0), 0.0).astype(cdtype)
    tap = jnp.asarray(network.tap, dtype)
    shift = jnp.deg2rad(jnp.asarray(network.shift_deg, dtype))
    ratio = tap * jax.lax.complex(jnp.cos(shift), jnp.sin(shift))
    b_half = jnp.where(on, 0.5 * jnp.asarray(network.b_pu, dtype), 0.0)
    base = jnp.asarray(network.base_mva, dtype)
    shunt = jax.lax.complex(jnp.asarray(network.gs_mw, dtype), jnp.asarray(network.bs_mvar, dtype))
    gen_bus = jnp.asarray(network.gen_bus)
    gen_on = jnp.asarray(network.gen_in_service) & bus_on[gen_bus]
    has_gen = jnp.zeros(n, jnp.int32).at[gen_bus].add(gen_on.astype(jnp.int32)) > 0
    ref = (bus_type == REF) & has_gen
    pv = (bus_type == PV) & has_gen
    ref = ref | (~jnp.any(ref) & pv & (jnp.arange(n) == jnp.argmax(pv)))
    pv = pv & ~ref
    return _Case(
        f=f,
        t=t,
        y_series=y_series,
        inv_ratio=(1.0 / ratio).astype(cdtype),
        y_from=(y_series / jnp.conj(ratio)).astype(cdtype),
        b_from=b_half / tap**2,
        b_half=b_half,
        tap=jnp.where(on, tap, 1.0),
        x_pu=jnp.where(on, x, jnp.inf),
        shift=shift,
        y_shunt=jnp.where(bus_on, shunt / base, 0.0).astype(cdtype),
        bus_on=bus_on,
        ref=ref,
        pv=pv,
        pq=bus_on & ~ref & ~pv,
        gen_on=gen_on,
        gen_bus=gen_bus,
    )


def _col(x, ndim: int):
    """``x`` with trailing unit axes up to ``ndim`` (a per-bus or per-branch constant
    against ``(n, *batch)`` arrays)."""
    return x.reshape(x.shape + (1,) * (ndim - x.ndim))


def _currents(case: _Case, v):
    """``(i_from, i_to)``, ``(n_branch, *batch)`` complex pu, for voltages ``v`` ``(n_bus, *batch)``."""
    col = functools.partial(_col, ndim=v.ndim)
    vf, vt = v[case.f], v[case.t]
    d = vf * col(case.inv_ratio) - vt
    i_from = col(case.y_from) * d + 1j * col(case.b_from) * vf
    i_to = -col(case.y_series) * d + 1j * col(case.b_half) * vt
    return i_from, i_to


def _power(case: _Case, v):
    """``(S, I)``, ``(n_bus, *batch)`` complex pu: power and current injected into the
    network at each bus, summed over the branch ends and the bus shunt."""
    i_from, i_to = _currents(case, v)
    i_bus = _col(case.y_shunt, v.ndim) * v + (
        jnp.zeros_like(v).at[case.f].add(i_from).at[case.t].add(i_to)
    )
    return v * jnp.conj(i_bus), i_bus


def _phasor(va):
    return jax.lax.complex(jnp.cos(va), jnp.sin(va))


def _injection(case: _Case, va, vm):
    return _power(case, vm * _phasor(va))[0]


def _within(mis, pvpq, pq, tol):
    """``(*batch,)`` bool: every active mismatch is at most ``tol`` (a scalar or one per
    bus, against the bus axis 0)."""
    return jnp.all(
        (~pvpq | (jnp.abs(jnp.real(mis)) <= tol)) & (~pq | (jnp.abs(jnp.imag(mis)) <= tol)),
        axis=0,
    )


def _norm(mis, pvpq, pq):
    """Largest active mismatch over the bus axis (0): ``(*batch,)``."""
    return jnp.maximum(
        jnp.max(jnp.where(pvpq, jnp.abs(jnp.real(mis)), 0.0), axis=0),
        jnp.max(jnp.where(pq, jnp.abs(jnp.imag(mis)), 0.0), axis=0),
    )


def _sane(va, vm, mis):
    """``(*batch,)``: the iterate is finite and has not run away."""
    return (
        jnp.all(jnp.isfinite(mis), axis=0)
        & jnp.all(jnp.abs(vm) < VM_LIMIT_PU, axis=0)
        & jnp.all(jnp.abs(va) < VA_LIMIT_RAD, axis=0)
    )


def _admittance(case: _Case, y_series, ratio, b_half, y_shunt):
    """Dense ``(n_bus, n_bus)`` complex admittance matrix of the given branch data."""
    n = case.y_shunt.shape[-1]
    y_tt = y_series + 1j * b_half
    y_ff = y_tt / (ratio * jnp.conj(ratio))
    y_ft = -y_series / jnp.conj(ratio)
    y_tf = -y_series / ratio
    f, t = case.f, case.t
    y = jnp.zeros((n, n), y_series.dtype)
    y = y.at[f, f].add(y_ff).at[f, t].add(y_ft).at[t, f].add(y_tf).at[t, t].add(y_tt)
    return y + jnp.diag(y_shunt)


def _dense_admittance(case: _Case):
    """``Y_bus`` (MATPOWER ``makeYbus``), for the Newton Jacobian."""
    ratio = 1.0 / case.inv_ratio
    return _admittance(case, case.y_series, ratio, case.b_half, case.y_shunt)


def _fdlf_matrices(case: _Case):
    """``(B', B'')``, ``(n_bus, n_bus)`` real: MATPOWER's ``makeB`` for the XB method.
    ``B'`` from series reactances alone (no resistance, charging, shunts or taps; phase
    shifts kept), ``B''`` from the full branches without phase shifts."""
    dtype = case.tap.dtype
    on = jnp.isfinite(case.x_pu)
    y_x = jnp.where(on, 1.0 / (1j * jnp.where(on, case.x_pu, 1.0)), 0.0).astype(case.y_series.dtype)
    shift = _phasor(case.shift).astype(y_x.dtype)
    b_p = -jnp.imag(
        _admittance(case, y_x, shift, jnp.zeros_like(case.b_half), jnp.zeros_like(case.y_shunt))
    )
    ratio = case.tap.astype(y_x.dtype)
    b_pp = -jnp.imag(_admittance(case, case.y_series, ratio, case.b_half, case.y_shunt))
    return b_p.astype(dtype), b_pp.astype(dtype)


def _masked(matrix, rows, cols):
    """``matrix`` on the ``rows`` x ``cols`` block, the identity elsewhere."""
    keep = rows[:, None] & cols[None, :]
    return jnp.where(keep, matrix, jnp.eye(matrix.shape[-1], dtype=matrix.dtype))


def _inverse(matrix, mask):
    """The float32 inverse of ``matrix`` restricted to ``mask`` (identity elsewhere)."""
    return jnp.linalg.inv(_masked(matrix, mask, mask)).astype(jnp.float32)


@functools.cache
def _fdlf(iterations: int):
    """The fast-decoupled iterations as a function with its own batching rule."""

    @custom_vmap
    def solve(case, sbus, va, vm, pvpq, pq, bp_inv, bpp_inv, tol):
        return _fdlf_loop(case, sbus, va, vm, pvpq, pq, bp_inv, bpp_inv, tol, iterations)

    @solve.def_vmap
    def batched(axis_size, in_batched, case, sbus, va, vm, pvpq, pq, bp_inv, bpp_inv, tol):
        case_b, sbus_b, va_b, vm_b, pvpq_b, pq_b, bp_b, bpp_b, tol_b = in_batched
        args = (case, sbus, va, vm, pvpq, pq, bp_inv, bpp_inv, tol)
        if any(jax.tree_util.tree_leaves(case_b)) or bp_b or bpp_b or tol_b:
            axes = jax.tree_util.tree_map(lambda b: 0 if b else None, tuple(in_batched))
            loop = functools.partial(_fdlf_loop, iterations=iterations)
            out = jax.vmap(loop, in_axes=axes)(*args)
        else:  # one network: iterate on (n_bus, batch) arrays
            last = [jnp.moveaxis(x, 0, -1) if b else x for x, b in zip(args[1:6], in_batched[1:6])]
            out = _fdlf_loop(case, *last, bp_inv, bpp_inv, tol, iterations)
            out = tuple(jnp.moveaxis(x, -1, 0) for x in out)
        return out, (True,) * len(out)

    return solve


def _fdlf_loop(case, sbus, va, vm, pvpq, pq, bp_inv, bpp_inv, tol, iterations):
    """Fast-decoupled iterations on ``(n_bus, *batch)`` arrays (masks may lack the batch
    axes). Returns ``(va, vm, mismatch (complex, pu), converged, iterations)``."""
    ndim = max(x.ndim for x in (sbus, va, vm, pvpq, pq))
    sbus, va, vm, pvpq, pq = (_col(x, ndim) for x in (sbus, va, vm, pvpq, pq))
    tol = _col(tol, ndim) if tol.ndim else tol
    shape = jnp.broadcast_shapes(sbus.shape, va.shape, vm.shape, pvpq.shape, pq.shape)
    dtype = va.dtype

    def correction(inv, rhs):
        return jnp.tensordot(inv, rhs.astype(inv.dtype), axes=1).astype(dtype)

    def half(state, inv, mask, angle: bool):
        va, vm, u, mis, done, ok = state
        part = jnp.real(mis) if angle else jnp.imag(mis)
        dx = -correction(inv, jnp.where(mask, part / jnp.where(mask, vm, 1.0), 0.0))
        step = jnp.where(mask & ~done, dx, 0.0)
        va_new, vm_new = (va + step, vm) if angle else (va, vm + step)
        u_new = _phasor(va_new) if angle else u
        mis_new = _power(case, vm_new * u_new)[0] - sbus
        sane = _sane(va_new, vm_new, mis_new)
        take = sane & ~done
        va, vm, u, mis = (
            jnp.where(take, new, old)
            for new, old in ((va_new, va), (vm_new, vm), (u_new, u), (mis_new, mis))
        )
        ok = ok & (sane | done)
        done = done | ~sane | _within(mis, pvpq, pq, tol)
        return va, vm, u, mis, done, ok

    def step(carry, _):
        state, count = carry
        count = count + (~state[4][0]).astype(jnp.int32)
        state = half(state, bp_inv, pvpq, True)
        state = half(state, bpp_inv, pq, False)
        return (state, count), None

    u = _phasor(va)
    mis = jnp.broadcast_to(_power(case, vm * u)[0] - sbus, shape)  # before broadcasting va, vm
    va, vm, u = (jnp.broadcast_to(x, shape) for x in (va, vm, u))
    done = _within(mis, pvpq, pq, tol)[None]
    ok = jnp.ones_like(done)
    count = jnp.zeros(shape[1:], jnp.int32)
    init = ((va, vm, u, mis, done, ok), count)
    ((va, vm, _, mis, done, ok), count), _ = jax.lax.scan(step, init, None, length=iterations)
    converged = ok[0] & _within(mis, pvpq, pq, tol)
    return va, vm, mis, converged, count


def _at_solution(case: _Case, iterations_of, sbus, va, vm, pv, pq, first: bool):
    """``iterations_of(sbus, va, vm, pv, pq, first)`` (returns as :func:`_fdlf_loop`),
    differentiated as the root of the power-flow equations at its solution.

    The unknowns are all angles and magnitudes; the equations are the active-power
    mismatch at PV and PQ buses, the reactive one at PQ buses, and ``x = start`` for the
    rest (the slack's angle, the regulated magnitudes ``vg_pu``, isolated buses), so the
    derivatives with respect to loads, dispatch, setpoints and branch data come from the
    implicit function theorem (:mod:`jaxgrid.grid.implicit`), not from the iterations.
    """
    pvpq = pv | pq

    def residual(unknowns):
        va_x, vm_x = unknowns
        mis = _injection(case, va_x, vm_x) - sbus
        return (
            jnp.where(pvpq, jnp.real(mis), va_x - va),
            jnp.where(pq, jnp.imag(mis), vm_x - vm),
        )

    def iterate(unknowns):
        va_x, vm_x, mis, converged, count = iterations_of(sbus, *unknowns, pv, pq, first)
        return (va_x, vm_x), (mis, converged, count)

    (va, vm), (mis, converged, count) = implicit_root(
        residual, jax.lax.stop_gradient((va, vm)), iterate, has_aux=True
    )
    return va, vm, mis, converged, count


def _jacobian(y_bus, v, u, i_bus, rows):
    """The polar power-flow Jacobian ``d[P; Q] / d[va; vm]`` (MATPOWER ``dSbus_dV``),
    ``(2 n, 2 n)``, the identity outside the active ``rows`` and columns."""
    n = v.shape[-1]
    eye = jnp.eye(n, dtype=y_bus.dtype)
    ds_dva = 1j * v[:, None] * (jnp.conj(i_bus)[:, None] * eye - jnp.conj(y_bus * v[None, :]))
    ds_dvm = v[:, None] * jnp.conj(y_bus * u[None, :]) + eye * (jnp.conj(i_bus) * u)[:, None]
    jac = jnp.block([[jnp.real(ds_dva), jnp.real(ds_dvm)], [jnp.imag(ds_dva), jnp.imag(ds_dvm)]])
    return _masked(jac, rows, rows)


def _newton(case, y_bus, sbus, va, vm, pvpq, pq, tol, iterations):
    """Newton-Raphson iterations of one solve; returns as :func:`_fdlf_loop`."""
    n = va.shape[-1]
    rows = jnp.concatenate([pvpq, pq])

    def evaluate(va, vm):
        u = _phasor(va)
        v = vm * u
        s, i_bus = _power(case, v)
        return s - sbus, v, u, i_bus

    def step(carry, _):
        va, vm, mis, v, u, i_bus, done, ok, count = carry
        count = count + (~done).astype(jnp.int32)
        jac = _jacobian(y_bus, v, u, i_bus, rows)
        rhs = jnp.where(rows, -jnp.concatenate([jnp.real(mis), jnp.imag(mis)]), 0.0)
        dx = jnp.linalg.solve(jac, rhs)
        va_new = va + jnp.where(done, 0.0, dx[:n])
        vm_new = vm + jnp.where(done, 0.0, dx[n:])
        new = (va_new, vm_new, *evaluate(va_new, vm_new))
        sane = _sane(va_new, vm_new, new[2]) & jnp.all(jnp.isfinite(dx))
        take = sane & ~done
        va, vm, mis, v, u, i_bus = (
            jnp.where(take, a, b) for a, b in zip(new, (va, vm, mis, v, u, i_bus))
        )
        ok = ok & (sane | done)
        done = done | ~sane | _within(mis, pvpq, pq, tol)
        return (va, vm, mis, v, u, i_bus, done, ok, count), None

    mis, v, u, i_bus = evaluate(va, vm)
    done = _within(mis, pvpq, pq, tol)
    init = (va, vm, mis, v, u, i_bus, done, jnp.ones((), bool), jnp.zeros((), jnp.int32))
    (va, vm, mis, *_, ok, count), _ = jax.lax.scan(step, init, None, length=iterations)
    return va, vm, mis, ok & _within(mis, pvpq, pq, tol), count


def _gen_q(case: _Case, network: Network, dtype, s_mva, q_load, held, q_fixed):
    """``(n_gen,)`` Mvar: each bus's reactive generation (injection plus load) shared among
    its free generators as MATPOWER's ``pfsoln`` shares it (in proportion to their
    reactive ranges, equally where a range is empty or infinite); ``held`` generators
    keep ``q_fixed``."""
    n = case.y_shunt.shape[-1]
    gb = case.gen_bus
    free = case.gen_on & ~held
    q_held = jnp.zeros(n, dtype).at[gb].add(jnp.where(case.gen_on & held, q_fixed, 0.0))
    q_free = jnp.imag(s_mva) + jnp.where(case.bus_on, q_load, 0.0) - q_held
    count = jnp.zeros(n, dtype).at[gb].add(free.astype(dtype))
    qmin = jnp.asarray(network.qmin_mvar, dtype)
    qmax = jnp.asarray(network.qmax_mvar, dtype)
    qmin_bus = jnp.zeros(n, dtype).at[gb].add(jnp.where(free, qmin, 0.0))[gb]
    span = jnp.zeros(n, dtype).at[gb].add(jnp.where(free, qmax - qmin, 0.0))[gb]
    proportional = (count[gb] > 1) & jnp.isfinite(span) & (span > 0)
    share = (q_free[gb] - qmin_bus) / jnp.where(proportional, span, 1.0)
    in_range = jnp.where(proportional, qmin + share * (qmax - qmin), 0.0)
    q = jnp.where(proportional, in_range, q_free[gb] / jnp.maximum(count[gb], 1.0))
    return jnp.where(case.gen_on, jnp.where(held, q_fixed, q), 0.0)


def _solution(
    case, network, dtype, va, vm, s_mva, gen_q, pg_mw, p_load, limited, converged, count, mismatch
):
    """The result pytree: branch flows from the voltages, the slack's balance."""
    base = jnp.asarray(network.base_mva, dtype)
    v = vm * _phasor(va)
    i_from, i_to = _currents(case, v)
    s_from = v[case.f] * jnp.conj(i_from) * base
    s_to = v[case.t] * jnp.conj(i_to) * base
    n = case.y_shunt.shape[-1]
    gb = case.gen_bus
    n_gen = gb.shape[-1]
    gen_index = jnp.arange(n_gen, dtype=jnp.int32)
    first = jnp.full(n, n_gen, jnp.int32).at[gb].min(jnp.where(case.gen_on, gen_index, n_gen))
    pg_on = jnp.where(case.gen_on, pg_mw, 0.0)
    others = jnp.zeros(n, dtype).at[gb].add(pg_on)[gb] - pg_on
    balance = jnp.real(s_mva)[gb] + jnp.where(case.bus_on, p_load, 0.0)[gb] - others
    slack_gen = case.gen_on & case.ref[gb] & (gen_index == first[gb])
    return ACPowerFlowResult(
        vm_pu=vm,
        va_deg=jnp.rad2deg(va),
        p_mw=jnp.real(s_mva),
        q_mvar=jnp.imag(s_mva),
        gen_p_mw=jnp.where(slack_gen, balance, pg_on),
        gen_q_mvar=gen_q,
        gen_at_q_limit=limited,
        p_from_mw=jnp.real(s_from),
        q_from_mvar=jnp.imag(s_from),
        p_to_mw=jnp.real(s_to),
        q_to_mvar=jnp.imag(s_to),
        loss_mw=jnp.sum(jnp.real(s_from + s_to)),
        converged=converged,
        iterations=count,
        mismatch_pu=mismatch,
    )
