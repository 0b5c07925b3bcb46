"""The result of a radial power flow, shared by ``lindistflow`` and ``distflow``."""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from jaxgrid.types import Array


@struct.dataclass
class PowerFlowResult:
    """Bus voltages and branch flows of one solve (leading batch axes under ``vmap``).

    Attributes:
        vm_pu: ``(n_bus,)`` voltage magnitude, pu.
        p_branch_mw, q_branch_mvar: ``(n_branch,)`` flow entering each branch at its
            upstream (``branch_from``) end, MW and Mvar.
        loss_branch_mw: ``(n_branch,)`` active loss of each branch, MW.
        loss_mw: ``()`` total active loss, MW.
        p_import_mw, q_import_mvar: ``()`` power drawn from the substation (slack), MW, Mvar.
        converged: ``()`` bool; False when the solve did not reach its tolerance or the
            loading has no physical solution (voltage collapse).
        mismatch_pu: ``()`` largest change of the last iteration (0 for LinDistFlow).
    """

    vm_pu: Array
    p_branch_mw: Array
    q_branch_mvar: Array
    loss_branch_mw: Array
    loss_mw: Array
    p_import_mw: Array
    q_import_mvar: Array
    converged: Array
    mismatch_pu: Array


def assemble(feeder, inj, p, q, v, ell, p_import, q_import, converged, mismatch):
    """A :class:`PowerFlowResult` from branch flows ``p``, ``q`` (pu), squared voltages ``v``
    and squared branch currents ``ell`` (pu), with the import given in pu."""
    dtype = inj.dtype
    base = jnp.asarray(feeder.base_mva, dtype)
    r = jnp.asarray(feeder.r_pu, dtype)
    loss_branch = r * ell * base
    return PowerFlowResult(
        vm_pu=jnp.sqrt(jnp.maximum(v, 0.0)),
        p_branch_mw=p * base,
        q_branch_mvar=q * base,
        loss_branch_mw=loss_branch,
        loss_mw=jnp.sum(loss_branch),
        p_import_mw=p_import * base,
        q_import_mvar=q_import * base,
        converged=converged,
        mismatch_pu=mismatch,
    )
