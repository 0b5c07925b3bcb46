"""Linear sensitivities of the DC model: PTDF and LODF (MATPOWER's ``makePTDF``,
``makeLODF``).

The power transfer distribution factor ``PTDF[l, i]`` is the change of the flow on branch
``l`` (MW) per MW injected at bus ``i`` and withdrawn at the slack bus, so the slack's
column is 0, and with injections ``p`` (MW) and phase shifters the DC flows are
``PTDF @ p + shift_flow_mw``. The line outage distribution factor ``LODF[l, k]`` is the
change of the flow on ``l`` per MW that flowed on ``k`` before ``k`` was taken out
(``LODF[k, k] = -1``).

Taking out a bridge (a branch whose loss splits the network in two, a radial line for
instance) leaves no path for its flow: its LODF would be infinite. :func:`lodf` reports
such branches in a mask and gives their columns as 0 (with -1 on the diagonal) instead of
inf or NaN. A branch counts as a bridge where the share of its own flow that a
transfer between its ends sends through it is 1 to within the square root of the machine
epsilon (2e-3 from 1 was the closest of any other branch on the bundled cases).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.grid.dcpf import _incidence, dc_matrices, reduced_inverse
from jaxgrid.grid.network import Network
from jaxgrid.numerics import full_precision
from jaxgrid.types import Array


@full_precision
def ptdf(network: Network, xp=jnp) -> Array:
    """``(n_branch, n_bus)`` PTDF, MW of branch flow (from -> to) per MW injected at a bus
    and withdrawn at the slack bus (whose column is 0); rows of out-of-service branches
    are 0, as are the columns of buses without any in-service branch. ``xp`` is the array
    module: ``jax.numpy`` (traceable), or ``numpy`` for a concrete network on the host."""
    m = dc_matrices(network, xp)
    return m.b_branch @ reduced_inverse(network, m.b_bus, xp)


@full_precision
def shift_flow_mw(network: Network, ptdf_matrix: Array | None = None) -> Array:
    """``(n_branch,)`` flows of the phase shifters alone (no injection), MW: DC flows are
    ``ptdf @ p_injection_mw + shift_flow_mw``."""
    m = dc_matrices(network)
    h = ptdf(network) if ptdf_matrix is None else ptdf_matrix
    return (m.p_branch_shift - h @ m.p_bus_shift) * network.base_mva


@full_precision
def lodf(network: Network, ptdf_matrix: Array | None = None) -> tuple[Array, Array]:
    """Line outage distribution factors.

    Args:
        network: the network.
        ptdf_matrix: ``(n_branch, n_bus)`` its PTDF when already computed.

    Returns:
        ``(lodf, bridge)``: ``lodf`` ``(n_branch, n_branch)``, MW change of the flow on
        the row branch per MW that flowed on the column branch before its outage (-1 on
        the diagonal); ``bridge`` ``(n_branch,)`` bool, True for an in-service branch
        whose outage islands part of the network, where the factors are undefined and
        its column is 0 off the diagonal. Columns of out-of-service branches are the PTDF
        of a transfer between their ends (as MATPOWER's).
    """
    h_bus = ptdf(network) if ptdf_matrix is None else ptdf_matrix
    incidence = _incidence(network).astype(h_bus.dtype)  # (n_branch, n_bus)
    h = h_bus @ incidence.T  # (n_branch, n_branch): flow on l per MW sent from f_k to t_k
    self_share = jnp.diagonal(h)
    # 1 - h is 0 to rounding (measured <= 2e-5 in float32, 2e-14 in float64 on the bundled
    # cases) for a bridge and >= 2e-3 for every other branch of them
    tolerance = jnp.sqrt(jnp.finfo(h.dtype).eps)
    bridge = network.branch_in_service & (jnp.abs(1.0 - self_share) <= tolerance)
    denominator = jnp.where(bridge, 1.0, 1.0 - self_share)
    factors = jnp.where(bridge[None, :], 0.0, h / denominator[None, :])
    eye = jnp.eye(network.n_branch, dtype=h.dtype)
    return factors * (1.0 - eye) - eye, bridge
