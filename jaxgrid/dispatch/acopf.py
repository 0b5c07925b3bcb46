"""AC optimal power flow on a meshed :class:`~jaxgrid.grid.network.Network`, solved by a
primal-dual interior point method with derivatives from JAX, and differentiable at its
solution.

**The problem** (MATPOWER's AC-OPF in polar coordinates). Variables: bus voltage angles
``Va`` (rad; fixed at the data's angle at the slack buses) and magnitudes ``Vm`` (pu),
the active and reactive output ``Pg``, ``Qg`` of every generator (pu of ``base_mva``),
and, for generators with a piecewise-linear cost, one cost variable ``y`` each
(MATPOWER's constrained cost variables, "CCV"). Minimise

    sum over in-service generators of  c2 Pg^2 + c1 Pg + c0   (Pg in MW)  +  sum of y

subject to

- nodal balance, ``S_bus(V) = C_g (Pg + j Qg) - (P_d + j Q_d)`` at every bus, with
  ``S_bus = V conj(Y_bus V)`` (computed branch by branch: the end flows of
  :func:`~jaxgrid.grid.network.branch_admittances` summed at their buses, plus the bus
  shunts);
- ``Vmin <= Vm <= Vmax``, ``Pmin <= Pg <= Pmax``, ``Qmin <= Qg <= Qmax``;
- ``|S_f|^2 <= rate^2`` and ``|S_t|^2 <= rate^2`` at both ends of every in-service branch
  with a rating (``rate_mva`` infinite means none; the MATPOWER reader maps a RATE_A of 0
  to infinity);
- ``angmin <= Va_f - Va_t <= angmax`` where those are finite (``angle_limits=True``);
- ``y >= c_k + m_k (Pg - x_k)`` for every segment ``k`` of a piecewise-linear cost (so a
  non-convex curve is replaced by the largest of its segments' lines, as in MATPOWER).

A variable whose lower and upper bounds are equal is fixed at that value (MATPOWER turns
such bounds into equations); so are the generators that are out of service (at 0) and
the voltages of isolated buses (whose balance equations are dropped).

**The solver.** The primal-dual interior point method of MATPOWER's MIPS (Wang, Murillo-
Sanchez, Zimmerman and Thomas, 2007; PYPOWER's ``pips``): every inequality ``h(x) <= 0``
gets a slack ``z > 0`` and a multiplier ``mu > 0``, and each iteration takes one Newton
step on the perturbed KKT conditions ``mu z = gamma`` with the barrier ``gamma`` set to
a tenth of the average complementarity of the last iterate, and steps that keep ``z`` and
``mu`` positive (99.995 % of the way to the boundary at most). The gradient of the cost,
the Jacobians of the constraints (``jax.jacfwd``) and the Hessian of the Lagrangian
(``jax.hessian``) are exact, from JAX; the Newton system, reduced to ``(dx, dlam)``,
is solved densely (LU) - fine up to a few hundred buses. Variable bounds are kept as
diagonal terms, not as rows. The cost is scaled by ``cost_scale`` (MATPOWER's
``cost_mult``, 1e-4) so that the multipliers are of order one.

The iteration stops when MIPS's four conditions hold (feasibility, gradient of the
Lagrangian, complementarity and change of the cost, each relative as in MIPS, below
``tol``) or after ``iterations``: a bounded ``jax.lax.while_loop``, so a single solve
stops when it has converged and a ``vmap``-ped batch runs in lockstep until its last
member has (those that converged earlier keep their solution). Nothing is a Python loop
over buses or branches; the problem has the same shapes for every load, so one compiled
program serves a whole batch of load scenarios.

**Failure is reported, never hidden.** ``converged`` is False when the budget ran out
(an infeasible problem: too much load, voltage limits too tight), or when a step was not
finite or became vanishingly short (MIPS's "numerically failed"); the result then holds
the last finite iterate, with the violations that say how far it is from feasible.

**Accuracy** (``tests/dispatch/test_acopf.py``, ``benchmarks/transmission_acopf.py``). In
float64 the solution is that of PYPOWER's ``opf`` - the solver inside pandapower's
``runopp`` - on the same MATPOWER tables, to round-off, in as many iterations: on case5
to case118 the cost agrees to 3e-15 relative, the LMPs to 4e-10 currency/MWh, and the
power balance holds to 2e-10 MW/Mvar. In float32 (with the looser
:func:`default_tolerance`) it converges in 9-13 iterations with the cost within 2e-6
relative, the LMPs within 0.01 currency/MWh (0.06 on case30, where flow limits bind),
the voltages within 2e-3 pu and the balance within 3e-3 MW/Mvar.

**Derivatives.** ``jax.grad``, ``jax.jvp`` and their ``vmap`` are taken at the solution,
not through the iterations (a ``while_loop``, which reverse mode cannot differentiate),
as for the DC-OPF (:mod:`jaxgrid.dispatch.dcopf`): the primal-dual point the interior
point returns is the root of the KKT conditions (the gradient of the Lagrangian for the
free variables, the power balance, and ``min(mu, slack) = 0`` for every inequality and
bound, :func:`~jaxgrid.grid.implicit.active_set_complementarity`), and
``jax.lax.custom_root`` (:mod:`jaxgrid.grid.implicit`) differentiates that root by the
implicit function theorem with one dense LU solve of the conditions' Jacobian (``3 n_x
+ 2 n_bus + n_ineq`` unknowns, ``n_x`` the variables: 108 on case9, 358 on case30).
With ``min`` the tangent system is that of the active set: a limit the solver left
binding stays binding, any other keeps a zero multiplier. Where the active set does not
change within a step the derivatives of voltages, dispatch, flows, cost, LMPs and the
other prices with respect to the loads and the network's float arrays are those of the
exact solution (tested: loads, cost coefficients, ratings, voltage limits; generator
limits and branch parameters enter the problem the same way), and the cost's
derivatives in ``p_mw``, ``q_mvar`` and ``rate_mva`` are ``lmp``, ``q_price`` and
``-(mu_flow_from + mu_flow_to)`` (envelope theorem; measured within 6e-10 of the
largest LMP on case9 and 1.4e-7 on case30 at the default tolerance). ``converged``
and ``iterations`` are not differentiated, nor are the mismatches, violations,
``optimality`` and ``complementarity`` (diagnostics, whose derivative at a solution is
0). At a kink (a limit at its bound with a zero
multiplier) the derivative is one side's; where the Jacobian is singular (the
multipliers are not unique: measured on case9 with branch 8-2 rated at 115 MVA, where
both of its ends' flows bind while both of its voltages sit at ``vmax``, two limits on
one angle difference) every derivative is 0
(:func:`~jaxgrid.grid.implicit.guarded_tangent_solve`). Accuracy and cost, measured by
``python benchmarks/acopf_gradient.py`` (float64, the instances of
``tests/dispatch/test_acopf_gradients.py``: a random weighting of every differentiated
output; relative error of a directional derivative against central differences at the
solver's tolerance 1e-12; one jitted ``jax.value_and_grad`` at the default tolerance;
2-core CPU shared with other jobs)::

    case     err d/d pd  err d/d cost_poly  value+grad  value alone  compile
    case9    1.2e-09     7.4e-08            1.38 ms     1.07 ms      9.5 s
    case30   6.1e-07     1.5e-07            22.5 ms     12.1 ms      12.6 s

The test's other inputs agree as closely (case9: 4.8e-9 in ``q_mvar``, 1.8e-8 in
``rate_mva``, 1.6e-7 in ``vmax_pu``). The forward results are bit for bit those of the
solver alone (checked on case9 and case30); its program traces about 0.5 s longer (the
KKT conditions are traced with it) and compiles in the same time. In float32 the
derivatives hold too: on case30 ``d cost / d p_mw`` is within 0.013 currency/MWh of the
float64 LMPs (the float32 solve's own LMPs within 0.064).

**Structure from data.** Rows that a network leaves unconstrained (branches without a
rating or an angle limit, generators without a piecewise-linear cost) are left out of
the problem when the network's arrays are concrete - a network closed over by the
function that is jitted or vmapped, as in the examples. When the network itself is a
traced argument every branch and generator keeps its rows, masked, which gives the same
solution at a higher cost per iteration.

```python
import jax
from jaxgrid.dispatch import acopf
from jaxgrid.grid import network_from_matpower

jax.config.update("jax_enable_x64", True)  # float64, the reference
net = network_from_matpower("case9")
result = jax.jit(lambda p, q: acopf(net, p, q))(net.pd_mw, net.qd_mvar)
# result.cost 5296.69 currency/h, result.lmp (9,) currency/MWh, result.converged True
scale = jax.numpy.linspace(0.8, 1.1, 64)[:, None]  # 64 load levels, one program
batch = jax.jit(jax.vmap(lambda p, q: acopf(net, p, q)))(scale * net.pd_mw, scale * net.qd_mvar)
```
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxgrid.grid.implicit import (
    active_set_complementarity,
    guarded_tangent_solve,
    implicit_root,
)
from jaxgrid.grid.network import ISOLATED, PIECEWISE_LINEAR, POLYNOMIAL, REF, Network
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array, float_dtype

DEFAULT_ITERATIONS = 60
STEP_FRACTION = 0.99995  # MIPS's xi: how far towards the boundary of z, mu > 0 a step goes
CENTERING = 0.1  # MIPS's sigma: the next barrier is this share of the mean complementarity
MIN_STEP = 1e-8  # a shorter step length means the iteration is stuck (MIPS's alpha_min)


def default_tolerance(dtype) -> tuple[float, float, float, float]:
    """Tolerances on MIPS's four relative convergence conditions ``(feasibility, gradient,
    complementarity, cost change)``.

    float64: 1e-9 on each (the power balance errors at the solution then stay below 1e-6
    MW and Mvar on MATPOWER's cases up to 300 buses). float32: 1e-5, 1e-3, 1e-5, 1e-5:
    the round-off of ``Vm`` (1.2e-7 pu) times admittances of several hundred pu leaves
    the gradient of the Lagrangian at 1e-5-1e-4 of the multipliers, never at 1e-5, and
    iterating on with an ever smaller barrier then only makes the Newton system worse.
    """
    if jnp.dtype(dtype) == jnp.float64:
        return (1e-9, 1e-9, 1e-9, 1e-9)
    return (1e-5, 1e-3, 1e-5, 1e-5)


@struct.dataclass
class ACOPFResult:
    """One AC optimal power flow (leading batch axes under ``vmap``).

    Attributes:
        vm_pu, va_deg: ``(n_bus,)`` voltage magnitude (pu) and angle (degrees).
        pg_mw, qg_mvar: ``(n_gen,)`` generator dispatch, MW and Mvar (0 when out of
            service).
        p_from_mw, q_from_mvar, p_to_mw, q_to_mvar: ``(n_branch,)`` power entering each
            branch at its from and at its to end, MW and Mvar.
        cost: ``()`` generation cost of the dispatch, currency/h
            (:meth:`~jaxgrid.grid.network.Network.generation_cost` summed).
        lmp: ``(n_bus,)`` locational marginal price of active power, currency/MWh: the
            multiplier of the bus's active power balance, the cost of serving one more
            MW of load there (0 at isolated buses).
        q_price: ``(n_bus,)`` marginal price of reactive power, currency/Mvarh.
        mu_flow_from, mu_flow_to: ``(n_branch,)`` shadow price of each branch's rating at
            its from and to end, currency/MVAh: the cost saved per MVA more rating (0
            where the limit does not bind or the branch has none).
        p_mismatch_mw, q_mismatch_mvar: ``()`` largest active and reactive power balance
            error over the buses, MW and Mvar.
        voltage_violation_pu: ``()`` largest excursion of ``vm_pu`` beyond its limits, pu
            (0 when within).
        flow_violation_mva: ``()`` largest apparent power flow above a branch's rating,
            MVA.
        pg_violation_mw, qg_violation_mvar: ``()`` largest excursion of a generator
            beyond its active (MW) and reactive (Mvar) limits.
        angle_violation_deg: ``()`` largest excursion of a branch's angle difference
            beyond its limits, degrees (0 with ``angle_limits=False``).
        optimality: ``()`` MIPS's gradient condition: the largest entry of the gradient
            of the Lagrangian relative to ``1 +`` the largest multiplier.
        complementarity: ``()`` MIPS's complementarity condition, ``z'mu / (1 + |x|)``.
        converged: ``()`` bool, True when all four conditions were met within the budget.
        iterations: ``()`` int32 Newton iterations taken.

    The fields from ``vm_pu`` to ``mu_flow_to`` are differentiable with respect to the
    loads and the network's float arrays (at the solution: the module docstring,
    "Derivatives"); the mismatches, violations, ``optimality`` and ``complementarity``
    are diagnostics with a zero derivative.
    """

    vm_pu: Array
    va_deg: Array
    pg_mw: Array
    qg_mvar: Array
    p_from_mw: Array
    q_from_mvar: Array
    p_to_mw: Array
    q_to_mvar: Array
    cost: Array
    lmp: Array
    q_price: Array
    mu_flow_from: Array
    mu_flow_to: Array
    p_mismatch_mw: Array
    q_mismatch_mvar: Array
    voltage_violation_pu: Array
    flow_violation_mva: Array
    pg_violation_mw: Array
    qg_violation_mvar: Array
    angle_violation_deg: Array
    optimality: Array
    complementarity: Array
    converged: Array
    iterations: Array


class _Layout(NamedTuple):
    """Which rows the problem has (static: they fix its shapes)."""

    flow_rows: np.ndarray  # (n_flow,) branches with a flow limit
    angle_rows: np.ndarray  # (n_angle,) branches with an angle-difference limit
    pwl_gens: np.ndarray  # (n_pwl,) generators with a cost variable y
    n_segments: int  # segments per piecewise-linear cost


class _Solution(NamedTuple):
    """The interior point's primal-dual point and its report."""

    x: Array  # (n_x,) [va, vm, pg, qg, y]
    lam: Array  # (n_eq,) multipliers of the balance equations
    mu: Array  # (n_ineq,) multipliers of the general inequalities
    mu_lo: Array  # (n_x,) multipliers of the lower bounds
    mu_hi: Array  # (n_x,) multipliers of the upper bounds
    optimality: Array  # () MIPS's gradient condition
    complementarity: Array  # () MIPS's complementarity condition
    converged: Array  # () bool
    iterations: Array  # () int32


class _State(NamedTuple):
    """One iterate of the interior point method and what was evaluated at it."""

    x: Array  # (n_x,) [va, vm, pg, qg, y]
    lam: Array  # (n_eq,) multipliers of the balance equations
    z: Array  # (n_ineq,) slacks of the general inequalities h(x) <= 0
    mu: Array  # (n_ineq,) their multipliers
    z_lo: Array  # (n_x,) slacks of the lower bounds l - x <= 0
    mu_lo: Array
    z_hi: Array  # (n_x,) slacks of the upper bounds x - u <= 0
    mu_hi: Array
    gamma: Array  # () barrier
    f: Array  # () scaled cost
    df: Array  # (n_x,)
    g: Array  # (n_eq,)
    h: Array  # (n_ineq,)
    jac_g: Array  # (n_eq, n_x)
    jac_h: Array  # (n_ineq, n_x)
    conditions: Array  # (4,) feasibility, gradient, complementarity, cost change
    iteration: Array  # () int32
    converged: Array  # () bool
    failed: Array  # () bool


@full_precision
def acopf(
    network: Network,
    p_mw=None,
    q_mvar=None,
    iterations: int = DEFAULT_ITERATIONS,
    tol: float | tuple[float, float, float, float] | None = None,
    angle_limits: bool = True,
    cost_scale: float = 1e-4,
) -> ACOPFResult:
    """The AC optimal power flow of ``network`` for bus loads ``p_mw``, ``q_mvar``.

    Args:
        network: the network (one, not a batch: ``vmap`` over loads or networks).
        p_mw, q_mvar: ``(n_bus,)`` loads, MW and Mvar, positive = consumption; default
            the network's ``pd_mw`` and ``qd_mvar``.
        iterations: the most interior point iterations (static). MIPS needs 13-25 on
            MATPOWER's cases from 5 to 300 buses.
        tol: tolerance on MIPS's four relative convergence conditions (feasibility,
            gradient of the Lagrangian, complementarity, cost change): one number for
            all four or a tuple of four; default :func:`default_tolerance` of the dtype.
        angle_limits: honour the branches' angle-difference limits (static).
        cost_scale: factor on the cost inside the solver (MATPOWER's ``cost_mult``),
            so that costs of 1e3-1e6 currency/h give multipliers of order one; results
            are in unscaled units.

    Returns:
        An :class:`ACOPFResult` in the dtype of the loads (float32 unless
        ``jax_enable_x64``; float64 is the reference, see :func:`default_tolerance`).

    Raises:
        ValueError: ``iterations`` is not positive, or a load vector has the wrong shape.
    """
    if int(iterations) < 1:
        raise ValueError(f"iterations must be positive, got {iterations}")
    n_bus = network.n_bus
    p_mw = network.pd_mw if p_mw is None else p_mw
    q_mvar = network.qd_mvar if q_mvar is None else q_mvar
    for name, value in (("p_mw", p_mw), ("q_mvar", q_mvar)):
        if jnp.shape(value) != (n_bus,):
            raise ValueError(f"{name} must have shape ({n_bus},), got {jnp.shape(value)}")
    dtype = _dtype(p_mw, q_mvar)
    tol = default_tolerance(dtype) if tol is None else tol
    tol = tuple(float(t) for t in np.broadcast_to(np.asarray(tol, float), (4,)))
    layout = _layout(network, angle_limits)
    problem = _Problem(
        network, layout, jnp.asarray(p_mw, dtype), jnp.asarray(q_mvar, dtype), cost_scale
    )

    return _result(problem, _at_solution(problem, int(iterations), tol))


# --- the problem --------------------------------------------------------------------------


def _dtype(*arrays):
    given = [jnp.asarray(a).dtype for a in arrays]
    given = [d for d in given if jnp.issubdtype(d, jnp.floating)]
    return jnp.result_type(*given) if given else float_dtype()


def _concrete(*arrays):
    """The arrays as numpy arrays, or None when one of them is traced."""
    try:
        return [np.asarray(a) for a in arrays]
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _layout(network: Network, angle_limits: bool) -> _Layout:
    """The rows of the problem: only the constrained ones when the network is concrete."""
    n_branch, n_gen = network.n_branch, network.n_gen
    n_segments = max(network.cost_pwl_mw.shape[-1] - 1, 1)
    every_branch = np.arange(n_branch)
    concrete = _concrete(
        network.branch_in_service,
        network.rate_mva,
        network.angmin_deg,
        network.angmax_deg,
        network.gen_in_service,
        network.cost_model,
        network.cost_pwl_mw,
    )
    if concrete is None:
        angles = every_branch if angle_limits else every_branch[:0]
        return _Layout(every_branch, angles, np.arange(n_gen), n_segments)
    on, rate, angmin, angmax, gen_on, model, pwl_mw = concrete
    flow = np.flatnonzero(on & np.isfinite(rate) & (rate > 0))
    angles = np.flatnonzero(on & (np.isfinite(angmin) | np.isfinite(angmax)))
    pwl = np.flatnonzero(gen_on & (model == PIECEWISE_LINEAR))
    if pwl.size:
        n_segments = max(int(np.max(np.sum(np.diff(pwl_mw[pwl], axis=-1) > 0, axis=-1))), 1)
    return _Layout(flow, angles if angle_limits else angles[:0], pwl, n_segments)


class _Problem:
    """The AC-OPF of one network and load, in the solve's dtype: cost, constraints and
    bounds as functions of the flat variable vector ``x = [va, vm, pg, qg, y]``."""

    def __init__(
        self, network: Network, layout: _Layout, p_mw: Array, q_mvar: Array, cost_scale: float
    ):
        dt = p_mw.dtype
        self.cost_scale = float(cost_scale)
        self.network, self.layout, self.dtype = network, layout, dt
        n_bus, n_gen = network.n_bus, network.n_gen
        self.n_bus, self.n_gen, self.n_pwl = n_bus, n_gen, len(layout.pwl_gens)
        self.n_x = 2 * n_bus + 2 * n_gen + self.n_pwl
        self.base = jnp.asarray(network.base_mva, dt)
        self.p_load, self.q_load = p_mw / self.base, q_mvar / self.base  # pu

        # branches: the two-port admittances in real arithmetic
        on = jnp.asarray(network.branch_in_service)
        z2 = jnp.asarray(network.r_pu, dt) ** 2 + jnp.asarray(network.x_pu, dt) ** 2
        z2 = jnp.where(on, z2, 1.0)
        self.g_series = jnp.where(on, jnp.asarray(network.r_pu, dt) / z2, 0.0)
        self.b_series = jnp.where(on, -jnp.asarray(network.x_pu, dt) / z2, 0.0)
        self.b_half = jnp.where(on, 0.5 * jnp.asarray(network.b_pu, dt), 0.0)
        self.tap = jnp.asarray(network.tap, dt)
        self.shift = jnp.deg2rad(jnp.asarray(network.shift_deg, dt))
        self.f, self.t = jnp.asarray(network.branch_from), jnp.asarray(network.branch_to)
        self.gs = jnp.asarray(network.gs_mw, dt) / self.base
        self.bs = jnp.asarray(network.bs_mvar, dt) / self.base

        # buses and generators
        bus_type = jnp.asarray(network.bus_type)
        self.bus_on = bus_type != ISOLATED
        self.gen_on = jnp.asarray(network.gen_in_service)
        self.gen_bus = jnp.asarray(network.gen_bus)
        self.va0 = jnp.deg2rad(jnp.asarray(network.va_deg, dt))
        self.vm0 = jnp.asarray(network.vm_pu, dt)
        self.ref = (bus_type == REF) & self.bus_on
        cost_poly = jnp.asarray(network.cost_poly, dt)
        polynomial = self.gen_on & (jnp.asarray(network.cost_model) == POLYNOMIAL)
        self.c2 = jnp.where(polynomial, cost_poly[:, 0], 0.0)
        self.c1 = jnp.where(polynomial, cost_poly[:, 1], 0.0)
        self.c0 = jnp.where(polynomial, cost_poly[:, 2], 0.0)

        # flow limits: (rate / base)^2, pu
        rows = jnp.asarray(layout.flow_rows, jnp.int32)
        rate = jnp.asarray(network.rate_mva, dt)[rows] / self.base
        self.flow_rows = rows
        self.flow_on = on[rows] & jnp.isfinite(rate) & (rate > 0)
        self.rate2 = jnp.where(self.flow_on, rate, 1.0) ** 2
        # angle-difference limits, rad
        rows = jnp.asarray(layout.angle_rows, jnp.int32)
        amin = jnp.deg2rad(jnp.asarray(network.angmin_deg, dt)[rows])
        amax = jnp.deg2rad(jnp.asarray(network.angmax_deg, dt)[rows])
        self.angle_rows = rows
        self.angle_lo_on, self.angle_hi_on = (
            on[rows] & jnp.isfinite(amin),
            on[rows] & jnp.isfinite(amax),
        )
        self.angle_min = jnp.where(self.angle_lo_on, amin, 0.0)
        self.angle_max = jnp.where(self.angle_hi_on, amax, 0.0)
        # piecewise-linear costs: segment k of generator i is y >= c_k + m_k (p - x_k)
        gens = jnp.asarray(layout.pwl_gens, jnp.int32)
        k = layout.n_segments
        x_mw = jnp.asarray(network.cost_pwl_mw, dt)[gens]
        c = jnp.asarray(network.cost_pwl_cost, dt)[gens]
        x_mw, c = _pad_points(x_mw, k + 1), _pad_points(c, k + 1)
        width = x_mw[:, 1:] - x_mw[:, :-1]
        self.pwl_gens = gens
        self.pwl_on = (
            (width > 0)
            & self.gen_on[gens][:, None]
            & (jnp.asarray(network.cost_model)[gens] == PIECEWISE_LINEAR)[:, None]
        )  # (n_pwl, k)
        self.pwl_slope = jnp.where(
            self.pwl_on, (c[:, 1:] - c[:, :-1]) / jnp.where(width > 0, width, 1.0), 0.0
        )
        self.pwl_x, self.pwl_c = x_mw[:, :-1], c[:, :-1]
        self.pwl_var_on = jnp.any(self.pwl_on, axis=-1)  # (n_pwl,) a y that is a variable

        # bounds on x and the variables that are fixed
        inf = jnp.full(n_bus, jnp.inf, dt)
        va_fixed = self.ref | ~self.bus_on
        va_lo = jnp.where(va_fixed, self.va0, -inf)
        va_hi = jnp.where(va_fixed, self.va0, inf)
        vm_lo = jnp.where(self.bus_on, jnp.asarray(network.vmin_pu, dt), self.vm0)
        vm_hi = jnp.where(self.bus_on, jnp.asarray(network.vmax_pu, dt), self.vm0)
        zero = jnp.zeros(n_gen, dt)
        pg_lo = jnp.where(self.gen_on, jnp.asarray(network.pmin_mw, dt) / self.base, zero)
        pg_hi = jnp.where(self.gen_on, jnp.asarray(network.pmax_mw, dt) / self.base, zero)
        qg_lo = jnp.where(self.gen_on, jnp.asarray(network.qmin_mvar, dt) / self.base, zero)
        qg_hi = jnp.where(self.gen_on, jnp.asarray(network.qmax_mvar, dt) / self.base, zero)
        y_lo = jnp.where(self.pwl_var_on, -jnp.inf, 0.0).astype(dt)
        y_hi = jnp.where(self.pwl_var_on, jnp.inf, 0.0).astype(dt)
        self.lower = jnp.concatenate([va_lo, vm_lo, pg_lo, qg_lo, y_lo])
        self.upper = jnp.concatenate([va_hi, vm_hi, pg_hi, qg_hi, y_hi])
        self.fixed = self.lower == self.upper
        self.lower_on = jnp.isfinite(self.lower) & ~self.fixed
        self.upper_on = jnp.isfinite(self.upper) & ~self.fixed
        self.eq_on = jnp.concatenate([self.bus_on, self.bus_on])
        self.ineq_on = jnp.concatenate(
            [self.flow_on, self.flow_on, self.angle_lo_on, self.angle_hi_on, self.pwl_on.ravel()]
        )

    # variables
    def split(self, x: Array):
        """``(va, vm, pg, qg, y)`` of ``x``."""
        n, g = self.n_bus, self.n_gen
        return (
            x[:n],
            x[n : 2 * n],
            x[2 * n : 2 * n + g],
            x[2 * n + g : 2 * n + 2 * g],
            x[2 * n + 2 * g :],
        )

    def start(self) -> Array:
        """MATPOWER's start: angles at the first slack's, every other variable at the
        middle of its bounds (0 clipped into its bounds where it has not two finite
        ones), each cost variable a little above its cost lines."""
        lo, hi = self.lower, self.upper
        middle = jnp.where(
            jnp.isfinite(lo) & jnp.isfinite(hi),
            0.5 * (lo + hi),
            jnp.clip(jnp.zeros_like(lo), lo, hi),
        )
        va_ref = jnp.sum(jnp.where(jnp.cumsum(self.ref) == 1, self.ref * self.va0, 0.0))
        n = self.n_bus
        va = jnp.where(self.fixed[:n], lo[:n], va_ref)
        x = jnp.concatenate([va, middle[n:]])
        _, _, pg, _, _ = self.split(x)
        y = self.cost_scale * jnp.max(self._pwl_lines(pg), axis=-1, initial=-jnp.inf)
        y = jnp.where(self.pwl_var_on, y + 0.1 * (1.0 + jnp.abs(y)), 0.0)
        return jnp.concatenate([x[: self.n_x - self.n_pwl], y])

    # physics
    def branch_flows(self, va: Array, vm: Array):
        """``(p_f, q_f, p_t, q_t)`` ``(n_branch,)`` pu: power entering each branch at its
        from and to end (MATPOWER's ``Sf = V_f conj(Yf V)``, ``St = V_t conj(Yt V)``).

        Written with the voltage differences ``v_f/tap - v_t cos(delta)`` as
        ``(v_f/tap - v_t) + 2 v_t sin^2(delta/2)`` (and likewise at the to end): the
        textbook form subtracts terms of size ``|y| v^2`` (hundreds of pu) to get flows
        of a few pu, which costs float32 four digits.
        """
        vf, vt = vm[self.f], vm[self.t]
        delta = va[self.f] - va[self.t] - self.shift
        sin = jnp.sin(delta)
        versine = 2.0 * jnp.sin(0.5 * delta) ** 2  # 1 - cos(delta)
        g, b, bc = self.g_series, self.b_series, self.b_half
        vf_tap = vf / self.tap
        drop_f = (vf_tap - vt) + vt * versine  # vf_tap - vt cos(delta)
        drop_t = (vt - vf_tap) + vf_tap * versine  # vt - vf_tap cos(delta)
        p_f = vf_tap * (g * drop_f - b * vt * sin)
        q_f = -bc * vf_tap**2 - vf_tap * (b * drop_f + g * vt * sin)
        p_t = vt * (g * drop_t + b * vf_tap * sin)
        q_t = -bc * vt**2 - vt * (b * drop_t - g * vf_tap * sin)
        return p_f, q_f, p_t, q_t

    def injections(self, va: Array, vm: Array):
        """``(p, q)`` ``(n_bus,)`` pu: power flowing out of each bus into the network
        (the real and imaginary parts of ``V conj(Y_bus V)``)."""
        p_f, q_f, p_t, q_t = self.branch_flows(va, vm)
        zeros = jnp.zeros(self.n_bus, va.dtype)
        p = zeros.at[self.f].add(p_f).at[self.t].add(p_t) + self.gs * vm**2
        q = zeros.at[self.f].add(q_f).at[self.t].add(q_t) - self.bs * vm**2
        return p, q

    def generation(self, pg: Array, qg: Array):
        """``(p, q)`` ``(n_bus,)`` pu injected by the generators at each bus."""
        zeros = jnp.zeros(self.n_bus, pg.dtype)
        on = self.gen_on
        return (
            zeros.at[self.gen_bus].add(jnp.where(on, pg, 0.0)),
            zeros.at[self.gen_bus].add(jnp.where(on, qg, 0.0)),
        )

    def _pwl_lines(self, pg: Array) -> Array:
        """``(n_pwl, n_segments)`` the cost lines of each segment at ``pg`` (pu), currency/h."""
        p = pg[self.pwl_gens][:, None] * self.base
        return jnp.where(self.pwl_on, self.pwl_c + self.pwl_slope * (p - self.pwl_x), -jnp.inf)

    # the optimisation problem
    def cost(self, x: Array) -> Array:
        """``()`` scaled cost: polynomial costs plus the cost variables."""
        _, _, pg, _, y = self.split(x)
        p = pg * self.base
        poly = jnp.sum((self.c2 * p + self.c1) * p + self.c0)
        return self.cost_scale * poly + jnp.sum(jnp.where(self.pwl_var_on, y, 0.0))

    def equalities(self, x: Array) -> Array:
        """``(2 n_bus,)`` pu: active then reactive power balance (0 at isolated buses)."""
        va, vm, pg, qg, _ = self.split(x)
        p, q = self.injections(va, vm)
        p_gen, q_gen = self.generation(pg, qg)
        g = jnp.concatenate([p + self.p_load - p_gen, q + self.q_load - q_gen])
        return jnp.where(self.eq_on, g, 0.0)

    def inequalities(self, x: Array) -> Array:
        """``(n_ineq,)`` the general inequalities ``h(x) <= 0``: squared flows at the from
        and to ends (pu), angle differences (rad), cost lines (scaled); 0 where masked."""
        va, vm, pg, _, y = self.split(x)
        p_f, q_f, p_t, q_t = self.branch_flows(va, vm)
        rows = self.flow_rows
        s_f = p_f[rows] ** 2 + q_f[rows] ** 2 - self.rate2
        s_t = p_t[rows] ** 2 + q_t[rows] ** 2 - self.rate2
        delta = va[self.f[self.angle_rows]] - va[self.t[self.angle_rows]]
        lines = self.cost_scale * self._pwl_lines(pg) - y[:, None]
        h = jnp.concatenate(
            [s_f, s_t, self.angle_min - delta, delta - self.angle_max, lines.ravel()]
        )
        return jnp.where(self.ineq_on, h, 0.0)

    def constraints(self, x: Array):
        gh = jnp.concatenate([self.equalities(x), self.inequalities(x)])
        return gh, gh

    def lagrangian(self, x: Array, lam: Array, mu: Array) -> Array:
        return self.cost(x) + lam @ self.equalities(x) + mu @ self.inequalities(x)


def _pad_points(values: Array, n: int) -> Array:
    """``values`` ``(k, m)`` with the last column repeated to ``n >= m`` columns, or cut."""
    if values.shape[-1] >= n:
        return values[..., :n]
    pad = jnp.repeat(values[..., -1:], n - values.shape[-1], axis=-1)
    return jnp.concatenate([values, pad], axis=-1)


# --- the interior point method ------------------------------------------------------------


def _at_solution(problem: _Problem, iterations: int, tol: tuple) -> _Solution:
    """:func:`_interior_point`, its solution bit for bit, differentiated at that solution
    by the implicit function theorem on the KKT conditions, not through its iterations
    (see the module docstring, "Derivatives").

    The unknowns are the primal-dual point ``(x, lam, mu, mu_lo, mu_hi)`` (the slacks of
    the inequalities are ``-h(x)``, ``x - lower`` and ``upper - x``); the equations are
    the gradient of the Lagrangian for the free variables (``x = lower`` for the fixed
    ones), the power balance at the buses that are not isolated (``lam = 0`` at those),
    and :func:`~jaxgrid.grid.implicit.active_set_complementarity` for every inequality
    and bound, so that the tangent system is that of the active set. The problem's data
    (loads, costs, limits, admittances) are the closed-over arrays of ``problem``."""
    grad_lagrangian = jax.grad(problem.lagrangian)

    def residual(point):
        x, lam, mu, mu_lo, mu_hi = point
        stationarity = grad_lagrangian(x, lam, mu) - mu_lo + mu_hi
        return (
            jnp.where(problem.fixed, x - problem.lower, stationarity),
            jnp.where(problem.eq_on, problem.equalities(x), lam),
            active_set_complementarity(mu, -problem.inequalities(x), problem.ineq_on),
            active_set_complementarity(mu_lo, x - problem.lower, problem.lower_on),
            active_set_complementarity(mu_hi, problem.upper - x, problem.upper_on),
        )

    def iterate(_):
        s = _interior_point(problem, iterations, tol)
        report = (s.conditions[1], s.conditions[2], s.converged, s.iteration)
        return (s.x, s.lam, s.mu, s.mu_lo, s.mu_hi), report

    dt = problem.dtype
    n_x, n_eq, n_ineq = problem.n_x, 2 * problem.n_bus, problem.ineq_on.shape[0]
    initial = tuple(jnp.zeros(n, dt) for n in (n_x, n_eq, n_ineq, n_x, n_x))
    point, report = implicit_root(
        residual, initial, iterate, has_aux=True, tangent_solve=guarded_tangent_solve
    )
    return _Solution(*point, *report)


def _interior_point(problem: _Problem, iterations: int, tol: tuple) -> _State:
    """MIPS from :func:`_start`, :func:`_step` until converged, failed or ``iterations``."""
    cond = lambda s: ~s.converged & ~s.failed & (s.iteration < iterations)  # noqa: E731
    return jax.lax.while_loop(cond, lambda s: _step(problem, s, tol), _start(problem))


def _evaluate(problem: _Problem, x: Array):
    """``(f, df, g, h, jac_g, jac_h)`` at ``x``."""
    f, df = jax.value_and_grad(problem.cost)(x)
    jac, gh = jax.jacfwd(problem.constraints, has_aux=True)(x)
    n_eq = 2 * problem.n_bus
    return f, df, gh[:n_eq], gh[n_eq:], jac[:n_eq], jac[n_eq:]


def _conditions(problem: _Problem, s: _State, f_before: Array) -> Array:
    """MIPS's convergence conditions ``(feasibility, gradient, complementarity, cost
    change)`` of the state, each relative as in MIPS."""
    ineq_on, lo_on, hi_on = problem.ineq_on, problem.lower_on, problem.upper_on
    h_lo, h_hi = problem.lower - s.x, s.x - problem.upper
    max_h = jnp.max(
        jnp.concatenate(
            [
                jnp.where(ineq_on, s.h, -jnp.inf),
                jnp.where(lo_on, h_lo, -jnp.inf),
                jnp.where(hi_on, h_hi, -jnp.inf),
                jnp.zeros(1, s.x.dtype),
            ]
        )
    )
    norm_x = jnp.max(jnp.abs(s.x))
    norm_z = jnp.max(
        jnp.concatenate(
            [
                jnp.where(ineq_on, s.z, 0.0),
                jnp.where(lo_on, s.z_lo, 0.0),
                jnp.where(hi_on, s.z_hi, 0.0),
                jnp.zeros(1, s.x.dtype),
            ]
        )
    )
    feasibility = jnp.maximum(jnp.max(jnp.abs(s.g), initial=0.0), max_h) / (
        1.0 + jnp.maximum(norm_x, norm_z)
    )
    lx = _lagrangian_gradient(s)
    norm_mult = jnp.max(
        jnp.concatenate([jnp.abs(s.lam), s.mu, s.mu_lo, s.mu_hi, jnp.zeros(1, s.x.dtype)])
    )
    gradient = jnp.max(jnp.abs(jnp.where(problem.fixed, 0.0, lx))) / (1.0 + norm_mult)
    complementarity = _gap(s) / (1.0 + norm_x)
    cost_change = jnp.abs(s.f - f_before) / (1.0 + jnp.abs(f_before))
    return jnp.stack([feasibility, gradient, complementarity, cost_change])


def _lagrangian_gradient(s: _State) -> Array:
    """``(n_x,)`` gradient of the Lagrangian: ``df + J_g' lam + J_h' mu - mu_lo + mu_hi``."""
    return s.df + s.jac_g.T @ s.lam + s.jac_h.T @ s.mu - s.mu_lo + s.mu_hi


def _gap(s: _State) -> Array:
    """``()`` total complementarity ``z'mu`` over the active inequalities."""
    return s.z @ s.mu + s.z_lo @ s.mu_lo + s.z_hi @ s.mu_hi


def _start(problem: _Problem) -> _State:
    """MIPS's start: ``z = max(1, -h)``, ``mu = 1`` on every active inequality (0 and 1
    on masked ones, which never move), ``lam = 0``, barrier 1."""
    x = problem.start()
    f, df, g, h, jac_g, jac_h = _evaluate(problem, x)
    dt = x.dtype

    def slack(h_value, on):
        return jnp.where(on, jnp.maximum(1.0, -h_value), 1.0), jnp.where(on, 1.0, 0.0).astype(dt)

    z, mu = slack(h, problem.ineq_on)
    z_lo, mu_lo = slack(problem.lower - x, problem.lower_on)
    z_hi, mu_hi = slack(x - problem.upper, problem.upper_on)
    state = _State(
        x=x,
        lam=jnp.zeros_like(g),
        z=z,
        mu=mu,
        z_lo=z_lo,
        mu_lo=mu_lo,
        z_hi=z_hi,
        mu_hi=mu_hi,
        gamma=jnp.ones((), dt),
        f=f,
        df=df,
        g=g,
        h=h,
        jac_g=jac_g,
        jac_h=jac_h,
        conditions=jnp.zeros(4, dt),
        iteration=jnp.zeros((), jnp.int32),
        converged=jnp.zeros((), bool),
        failed=jnp.zeros((), bool),
    )
    return state._replace(conditions=_conditions(problem, state, f))


def _step(problem: _Problem, s: _State, tol: tuple) -> _State:
    """One Newton step on the perturbed KKT conditions, then the new iterate's
    derivatives and convergence conditions."""
    fixed, eq_on = problem.fixed, problem.eq_on
    ineq_on, lo_on, hi_on = problem.ineq_on, problem.lower_on, problem.upper_on
    gamma = s.gamma
    h_lo, h_hi = problem.lower - s.x, s.x - problem.upper

    # the reduced Newton system [[M, J_g'], [J_g, 0]] [dx; dlam] = [-N; -g]
    hess = jax.hessian(problem.lagrangian)(s.x, s.lam, s.mu)
    w = jnp.where(ineq_on, s.mu / s.z, 0.0)
    w_lo = jnp.where(lo_on, s.mu_lo / s.z_lo, 0.0)
    w_hi = jnp.where(hi_on, s.mu_hi / s.z_hi, 0.0)
    m = hess + (s.jac_h.T * w) @ s.jac_h + jnp.diag(w_lo + w_hi)
    n = (
        _lagrangian_gradient(s)
        + s.jac_h.T @ jnp.where(ineq_on, (s.mu * s.h + gamma) / s.z, 0.0)
        - jnp.where(lo_on, (s.mu_lo * h_lo + gamma) / s.z_lo, 0.0)
        + jnp.where(hi_on, (s.mu_hi * h_hi + gamma) / s.z_hi, 0.0)
    )
    # a fixed variable does not move; a dropped equation keeps its multiplier at 0
    keep = ~fixed
    m = jnp.where(keep[:, None] & keep[None, :], m, jnp.diag(fixed.astype(m.dtype)))
    n = jnp.where(keep, n, 0.0)
    jac_g = jnp.where(eq_on[:, None] & keep[None, :], s.jac_g, 0.0)
    g = jnp.where(eq_on, s.g, 0.0)
    kkt = jnp.block([[m, jac_g.T], [jac_g, jnp.diag((~eq_on).astype(m.dtype))]])
    step = jnp.linalg.solve(kkt, -jnp.concatenate([n, g]))
    dx, dlam = step[: problem.n_x], step[problem.n_x :]

    # slacks and multipliers of the inequalities
    def dual(z, mu, dz, on):
        dz = jnp.where(on, dz, 0.0)
        dmu = jnp.where(on, -mu + (gamma - mu * dz) / z, 0.0)
        return dz, dmu

    dz, dmu = dual(s.z, s.mu, -s.h - s.z - s.jac_h @ dx, ineq_on)
    dz_lo, dmu_lo = dual(s.z_lo, s.mu_lo, -h_lo - s.z_lo + dx, lo_on)
    dz_hi, dmu_hi = dual(s.z_hi, s.mu_hi, -h_hi - s.z_hi - dx, hi_on)

    def longest(values, changes):
        ratio = jnp.where(changes < 0.0, values / jnp.where(changes < 0.0, -changes, 1.0), jnp.inf)
        return jnp.minimum(1.0, STEP_FRACTION * jnp.min(ratio, initial=jnp.inf))

    alpha_p = jnp.minimum(
        longest(s.z, dz), jnp.minimum(longest(s.z_lo, dz_lo), longest(s.z_hi, dz_hi))
    )
    alpha_d = jnp.minimum(
        longest(s.mu, dmu), jnp.minimum(longest(s.mu_lo, dmu_lo), longest(s.mu_hi, dmu_hi))
    )
    x = s.x + alpha_p * dx
    f, df, g_new, h, jac_g_new, jac_h = _evaluate(problem, x)
    new = s._replace(
        x=x,
        z=s.z + alpha_p * dz,
        z_lo=s.z_lo + alpha_p * dz_lo,
        z_hi=s.z_hi + alpha_p * dz_hi,
        lam=s.lam + alpha_d * dlam,
        mu=s.mu + alpha_d * dmu,
        mu_lo=s.mu_lo + alpha_d * dmu_lo,
        mu_hi=s.mu_hi + alpha_d * dmu_hi,
        f=f,
        df=df,
        g=g_new,
        h=h,
        jac_g=jac_g_new,
        jac_h=jac_h,
        iteration=s.iteration + 1,
    )
    n_active = jnp.sum(ineq_on) + jnp.sum(lo_on) + jnp.sum(hi_on)
    new = new._replace(gamma=CENTERING * _gap(new) / jnp.maximum(n_active, 1))
    conditions = _conditions(problem, new, s.f)
    new = new._replace(conditions=conditions)
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(new)]))
    converged = finite & jnp.all(conditions < jnp.asarray(tol, conditions.dtype))
    stuck = (alpha_p < MIN_STEP) | (alpha_d < MIN_STEP)
    # a step that is not finite is not taken, and ends the iteration
    new = jax.tree_util.tree_map(lambda a, b: jnp.where(finite, a, b), new, s)
    return new._replace(converged=converged, failed=~finite | (stuck & ~converged))


# --- the result ---------------------------------------------------------------------------


def _result(problem: _Problem, s: _Solution) -> ACOPFResult:
    network, base, scale = problem.network, problem.base, problem.cost_scale
    va, vm, pg, qg, _ = problem.split(s.x)
    dt = s.x.dtype
    p_f, q_f, p_t, q_t = problem.branch_flows(va, vm)
    p_inj, q_inj = problem.injections(va, vm)
    p_gen, q_gen = problem.generation(pg, qg)
    bus_on, gen_on = problem.bus_on, problem.gen_on

    def largest(values, on):
        """The largest of ``values`` where ``on`` (at least 0); a diagnostic of the
        solution, not differentiated."""
        return jax.lax.stop_gradient(jnp.max(jnp.where(on, values, 0.0), initial=0.0))

    p_mismatch = largest(jnp.abs(p_inj + problem.p_load - p_gen), bus_on) * base
    q_mismatch = largest(jnp.abs(q_inj + problem.q_load - q_gen), bus_on) * base
    vmin, vmax = jnp.asarray(network.vmin_pu, dt), jnp.asarray(network.vmax_pu, dt)
    voltage = largest(jnp.maximum(vm - vmax, vmin - vm), bus_on)
    rate = jnp.asarray(network.rate_mva, dt)
    s_max = jnp.maximum(jnp.hypot(p_f, q_f), jnp.hypot(p_t, q_t)) * base
    limited = jnp.asarray(network.branch_in_service) & jnp.isfinite(rate) & (rate > 0)
    flow = largest(s_max - jnp.where(limited, rate, 0.0), limited)
    pg_mw, qg_mvar = jnp.where(gen_on, pg * base, 0.0), jnp.where(gen_on, qg * base, 0.0)
    pg_violation = largest(
        jnp.maximum(
            pg_mw - jnp.asarray(network.pmax_mw, dt), jnp.asarray(network.pmin_mw, dt) - pg_mw
        ),
        gen_on,
    )
    qg_violation = largest(
        jnp.maximum(
            qg_mvar - jnp.asarray(network.qmax_mvar, dt),
            jnp.asarray(network.qmin_mvar, dt) - qg_mvar,
        ),
        gen_on,
    )
    delta = va[problem.f[problem.angle_rows]] - va[problem.t[problem.angle_rows]]
    angle = jnp.maximum(
        jnp.where(problem.angle_lo_on, problem.angle_min - delta, 0.0),
        jnp.where(problem.angle_hi_on, delta - problem.angle_max, 0.0),
    )
    angle = jnp.rad2deg(largest(angle, True))

    # multipliers in currency: the cost was scaled and powers are in pu
    n = problem.n_bus
    lmp = jnp.where(bus_on, s.lam[:n], 0.0) / (scale * base)
    q_price = jnp.where(bus_on, s.lam[n:], 0.0) / (scale * base)
    n_flow = len(problem.layout.flow_rows)
    rate_pu = jnp.sqrt(problem.rate2)
    mu_f = jnp.where(problem.flow_on, 2.0 * s.mu[:n_flow] * rate_pu, 0.0) / (scale * base)
    mu_t = jnp.where(problem.flow_on, 2.0 * s.mu[n_flow : 2 * n_flow] * rate_pu, 0.0) / (
        scale * base
    )
    zeros = jnp.zeros(network.n_branch, dt)
    return ACOPFResult(
        vm_pu=vm,
        va_deg=jnp.rad2deg(va),
        pg_mw=pg_mw,
        qg_mvar=qg_mvar,
        p_from_mw=p_f * base,
        q_from_mvar=q_f * base,
        p_to_mw=p_t * base,
        q_to_mvar=q_t * base,
        cost=jnp.sum(network.generation_cost(pg_mw.astype(dt))).astype(dt),
        lmp=lmp,
        q_price=q_price,
        mu_flow_from=zeros.at[problem.flow_rows].set(mu_f),
        mu_flow_to=zeros.at[problem.flow_rows].set(mu_t),
        p_mismatch_mw=p_mismatch,
        q_mismatch_mvar=q_mismatch,
        voltage_violation_pu=voltage,
        flow_violation_mva=flow,
        pg_violation_mw=pg_violation,
        qg_violation_mvar=qg_violation,
        angle_violation_deg=angle,
        optimality=s.optimality,
        complementarity=s.complementarity,
        converged=s.converged,
        iterations=s.iterations,
    )
