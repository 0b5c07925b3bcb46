"""DC power flow on a meshed :class:`~jaxgrid.grid.network.Network`.

The lossless linear model of MATPOWER's ``makeBdc``/``dcpf``: every in-service branch
carries ``P_ft = (theta_f - theta_t - shift) / (x * tap)`` (per unit; resistance, line
charging and voltage magnitudes ignored), so bus angles solve ``B_bus theta = P - P_shift``
with the slack bus's angle fixed. A phase shifter acts as a pair of injections
``P_shift``; out-of-service branches carry nothing; bus shunt conductance ``gs_mw`` is a
load (at 1 pu voltage). The slack bus (the first ``REF`` bus) takes up whatever the
injections leave unbalanced.

Buses with no in-service branch (isolated ones) keep angle 0. A network that the
out-of-service branches split into islands without a slack bus has no DC solution where
such an island has any load or generation: ``converged`` is False there (the numbers are
then not to be used).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxgrid.grid.network import REF, Network
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array


@struct.dataclass
class DCPowerFlowResult:
    """Bus angles and branch flows of one DC power flow (leading batch axes under ``vmap``).

    Attributes:
        va_deg: ``(n_bus,)`` voltage angle, degrees (the slack bus at its data angle).
        p_branch_mw: ``(n_branch,)`` flow from ``branch_from`` to ``branch_to``, MW (the
            same at both ends: the model is lossless; 0 for an out-of-service branch).
        p_injection_mw: ``(n_bus,)`` net injection, generation minus load, MW, with the
            slack bus's balancing injection included.
        p_slack_mw: ``()`` generation the slack bus adds to its given injection to balance
            the network, MW.
        converged: ``()`` bool; False when the bus equations have no solution (an island
            without a slack bus) or the result is not finite.
        mismatch_mw: ``()`` largest bus power mismatch of the solution (slack excluded), MW.
    """

    va_deg: Array
    p_branch_mw: Array
    p_injection_mw: Array
    p_slack_mw: Array
    converged: Array
    mismatch_mw: Array


@struct.dataclass
class DCMatrices:
    """The DC model of a network (MATPOWER's ``makeBdc``), per unit on ``base_mva``.

    Attributes:
        b_bus: ``(n_bus, n_bus)`` bus susceptance matrix, pu.
        b_branch: ``(n_branch, n_bus)`` branch flow matrix, pu: ``P_ft = b_branch @ theta
            + p_branch_shift``.
        p_bus_shift: ``(n_bus,)`` injections equivalent to the phase shifters, pu.
        p_branch_shift: ``(n_branch,)`` flow offsets of the phase shifters, pu.
    """

    b_bus: Array
    b_branch: Array
    p_bus_shift: Array
    p_branch_shift: Array


def slack_index(network: Network, xp=jnp) -> Array:
    """``()`` int32 index of the slack bus: the first bus of type ``REF`` (``xp`` the
    array module: ``jax.numpy``, or ``numpy`` for a concrete network on the host)."""
    return xp.argmax(network.bus_type == REF).astype(xp.int32)


@full_precision
def dc_matrices(network: Network, xp=jnp) -> DCMatrices:
    """The DC model of ``network`` (see :class:`DCMatrices`); out-of-service branches
    contribute nothing. ``xp`` is the array module: ``jax.numpy`` (traceable), or
    ``numpy`` to compute it on the host for a concrete network."""
    on = network.branch_in_service
    x = xp.where(on, network.x_pu * network.tap, 1.0)
    b = xp.where(on, 1.0 / x, 0.0)
    incidence = _incidence(network, xp).astype(b.dtype)  # (n_branch, n_bus)
    b_branch = b[:, None] * incidence
    b_bus = incidence.T @ b_branch
    p_branch_shift = -b * xp.deg2rad(network.shift_deg)
    p_bus_shift = incidence.T @ p_branch_shift
    return DCMatrices(b_bus, b_branch, p_bus_shift, p_branch_shift)


@full_precision
def reduced_inverse(network: Network, b_bus: Array, xp=jnp) -> Array:
    """``(n_bus, n_bus)`` inverse of ``b_bus`` with the slack bus's row and column (and those
    of buses without any in-service branch) removed, padded with zeros back to full
    size: ``theta = X @ P`` are the angles, pu, for injections ``P`` with the slack at 0
    (``xp`` the array module, as in :func:`dc_matrices`)."""
    keep = _solved_buses(network, b_bus, xp)
    eye = xp.eye(network.n_bus, dtype=b_bus.dtype)
    mask = keep[:, None] & keep[None, :]
    reduced = xp.where(mask, b_bus, eye)
    inverse = xp.linalg.inv(reduced)
    return xp.where(mask, inverse, 0.0)


@jax.jit  # one program when called eagerly (docs: Physics, Solvers)
@full_precision
def dcpf(network: Network, pg_mw: Array | None = None, pd_mw: Array | None = None):
    """DC power flow for generator outputs ``pg_mw`` ``(n_gen,)`` (default the network's
    ``pg_mw``; out-of-service generators produce nothing) and bus loads ``pd_mw``
    ``(n_bus,)`` (default the network's), MW.

    Returns:
        :class:`DCPowerFlowResult`: angles in degrees, flows in MW, the slack's balancing
        generation. Matches MATPOWER's ``rundcpf`` (PYPOWER ``dcpf``).
    """
    pg = network.pg_mw if pg_mw is None else pg_mw
    pd = network.pd_mw if pd_mw is None else pd_mw
    base = network.base_mva
    m = dc_matrices(network)
    injection_mw = bus_injection_mw(network, pg, pd)
    p = injection_mw / base - m.p_bus_shift
    slack = slack_index(network)
    keep = _solved_buses(network, m.b_bus)
    theta_slack = jnp.deg2rad(jnp.asarray(network.va_deg)[slack])
    # fixed buses (slack, isolated) move to the right-hand side
    theta_fixed = jnp.where(jnp.arange(network.n_bus) == slack, theta_slack, 0.0)
    rhs = jnp.where(keep, p - m.b_bus @ theta_fixed, theta_fixed)
    matrix = jnp.where(
        keep[:, None] & keep[None, :], m.b_bus, jnp.eye(network.n_bus, dtype=m.b_bus.dtype)
    )
    theta = jnp.linalg.solve(matrix, rhs)
    flow = (m.b_branch @ theta + m.p_branch_shift) * base
    balance = (m.b_bus @ theta + m.p_bus_shift) * base  # injection each bus must have
    # every bus but the slack: a bus cut off from it with a load or a generator fails
    not_slack = jnp.arange(network.n_bus) != slack
    mismatch = jnp.max(jnp.where(not_slack, jnp.abs(balance - injection_mw), 0.0), initial=0.0)
    p_slack = balance[slack] - injection_mw[slack]
    injection = injection_mw.at[slack].add(p_slack)
    finite = jnp.all(jnp.isfinite(theta))
    scale = jnp.maximum(1.0, jnp.max(jnp.abs(injection_mw)))
    tolerance = scale * jnp.maximum(1e-6, 10.0 * jnp.sqrt(jnp.finfo(theta.dtype).eps))
    return DCPowerFlowResult(
        va_deg=jnp.rad2deg(theta),
        p_branch_mw=flow,
        p_injection_mw=injection,
        p_slack_mw=p_slack,
        converged=finite & (mismatch <= tolerance),
        mismatch_mw=mismatch,
    )


def bus_injection_mw(network: Network, pg_mw: Array, pd_mw: Array) -> Array:
    """``(n_bus,)`` net injection of generation ``pg_mw`` ``(n_gen,)`` (in-service units
    only) minus loads ``pd_mw`` ``(n_bus,)`` and the shunt conductance ``gs_mw``, MW."""
    pg = jnp.where(network.gen_in_service, pg_mw, 0.0)
    at_bus = network.gen_bus[:, None] == jnp.arange(network.n_bus)
    return pg @ at_bus.astype(pg.dtype) - pd_mw - network.gs_mw


def _incidence(network: Network, xp=jnp) -> Array:
    """``(n_branch, n_bus)`` int: +1 at each branch's from bus, -1 at its to bus."""
    buses = xp.arange(network.n_bus)
    return (network.branch_from[:, None] == buses).astype(xp.int32) - (
        network.branch_to[:, None] == buses
    ).astype(xp.int32)


def _solved_buses(network: Network, b_bus: Array, xp=jnp) -> Array:
    """``(n_bus,)`` bool: buses whose angle the DC equations solve (not the slack, not a
    bus without any in-service branch)."""
    connected = xp.diagonal(b_bus) != 0
    return connected & (xp.arange(network.n_bus) != slack_index(network, xp))
