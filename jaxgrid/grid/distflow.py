"""DistFlow: the nonlinear branch-flow power flow of a radial feeder (Baran & Wu, 1989).

For branch ``k`` from bus ``i`` to bus ``j``, with sending-end flows ``P, Q``, squared
voltages ``v`` and squared current ``l = (P^2 + Q^2) / v_i``:

    P_k = p_j + sum of P over the branches below j + r_k l_k     (likewise Q with x, q)
    v_j = v_i - 2 (r_k P_k + x_k Q_k) + (r_k^2 + x_k^2) l_k

This module iterates these equations in matrix form for a fixed number of sweeps,
starting from LinDistFlow: subtree sums are products
with the path matrix, so every feeder in a batch does the same work and the solve
jits, vmaps and differentiates. At convergence it matches the AC power flow of a radial
feeder to solver precision. Derivatives are those of the solution (the sweep's fixed
point, by the implicit function theorem: :mod:`jaxgrid.grid.implicit`), not of the
unrolled sweeps. The last sweep's largest change is ``mismatch_pu``; a solve
that has not converged, or whose loading has no solution (voltage collapse), is
reported with ``converged=False`` and finite numbers, never silently.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.implicit import implicit_root
from jaxgrid.grid.injections import bus_injections, demand_at
from jaxgrid.grid.lindistflow import V_FLOOR
from jaxgrid.grid.result import PowerFlowResult
from jaxgrid.numerics import full_precision, inverse_index

ELL_MAX = 1e4  # cap on the squared branch current (pu) that keeps a diverging sweep finite
MAX_ITERATIONS = 100  # sweeps are unrolled: a bound keeps compilation short


def default_tolerance(dtype) -> float:
    """Convergence tolerance on the last sweep's change: 1e-8 in float64, 2e-6 in float32.

    The change is measured in pu of voltage squared and in MW/Mvar over ``base_mva``.
    """
    return 1e-8 if jnp.dtype(dtype) == jnp.float64 else 2e-6


@functools.partial(jax.jit, static_argnames=("iterations",))
@full_precision
def distflow(
    feeder: Feeder, p_mw, q_mvar, iterations: int = 10, tol: float | None = None
) -> PowerFlowResult:
    """Solve DistFlow for bus loads ``p_mw``, ``q_mvar`` ``(n_bus,)`` (positive = consumption).

    Args:
        iterations: number of sweeps (static, 1 to :data:`MAX_ITERATIONS`); 3-5 reach
            1e-6 pu on case33bw at up to 1.5x its load, 10 leave float32 round-off as the
            only error there.
        tol: convergence tolerance on the last sweep's change (pu); default
            :func:`default_tolerance` of the dtype.
    """
    if not 1 <= int(iterations) <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be in 1..{MAX_ITERATIONS}, got {iterations}")
    inj = bus_injections(feeder, p_mw, q_mvar)
    dtype = inj.dtype
    tol = default_tolerance(dtype) if tol is None else tol
    path = jnp.asarray(feeder.path, dtype)
    base = jnp.asarray(feeder.base_mva, dtype)
    r = jnp.asarray(feeder.r_pu, dtype) / base  # pu per MW: v in pu, flows in MW
    x = jnp.asarray(feeder.x_pu, dtype) / base
    z2 = r**2 + x**2
    v0 = jnp.asarray(feeder.vm_slack_pu, dtype) ** 2
    ell_max = ELL_MAX * base**2
    # branch entering each bus: a branch's loss is carried like a load at its downstream bus
    into = inverse_index(feeder.branch_to, feeder.n_bus)
    has_parent = jnp.arange(feeder.n_bus) != feeder.slack

    def sweep(v, ell):
        """New flows and voltages given bus voltages and squared currents (MVA^2/pu)."""
        p_bus, q_bus = demand_at(inj, v)
        p_bus = p_bus + jnp.where(has_parent, (r * ell)[into], 0.0)
        q_bus = q_bus + jnp.where(has_parent, (x * ell)[into], 0.0)
        p_branch = p_bus @ path.T
        q_branch = q_bus @ path.T
        drop = 2.0 * (r * p_branch + x * q_branch) - z2 * ell
        return p_branch, q_branch, v0 - drop @ path

    def current_sq(p_branch, q_branch, v):
        ell = (p_branch**2 + q_branch**2) / jnp.maximum(v[feeder.branch_from], V_FLOOR)
        return jnp.minimum(ell, ell_max)

    def body(_, carry):
        p_branch, q_branch, v = carry
        return sweep(v, current_sq(p_branch, q_branch, v))

    v_start = jnp.full(feeder.n_bus, v0, dtype)
    init = sweep(v_start, jnp.zeros(feeder.n_branch, dtype))
    # the sweeps as they are; derivatives at their fixed point (implicit function theorem)
    old = implicit_root(
        lambda z: jax.tree_util.tree_map(jnp.subtract, body(None, z), z),
        jax.lax.stop_gradient(init),
        lambda z: jax.lax.fori_loop(0, int(iterations) - 1, body, z, unroll=True),
    )
    p_branch, q_branch, v = body(None, old)
    change = jnp.maximum(
        jnp.max(jnp.abs(v - old[2])),
        jnp.maximum(jnp.max(jnp.abs(p_branch - old[0])), jnp.max(jnp.abs(q_branch - old[1])))
        / base,
    )
    ell = current_sq(p_branch, q_branch, v)
    loss_branch = r * ell
    loss = jnp.sum(loss_branch)
    p_bus, q_bus = demand_at(inj, v)
    from_slack = feeder.branch_from == feeder.slack
    converged = (
        (change < tol) & jnp.isfinite(change) & jnp.all(v > V_FLOOR) & jnp.all(ell < ell_max)
    )
    return PowerFlowResult(
        vm_pu=jnp.sqrt(jnp.maximum(v, 0.0)),
        p_branch_mw=p_branch,
        q_branch_mvar=q_branch,
        loss_branch_mw=loss_branch,
        loss_mw=loss,
        p_import_mw=p_bus[feeder.slack] + jnp.sum(jnp.where(from_slack, p_branch, 0.0)),
        q_import_mvar=q_bus[feeder.slack] + jnp.sum(jnp.where(from_slack, q_branch, 0.0)),
        converged=converged,
        mismatch_pu=change,
    )
