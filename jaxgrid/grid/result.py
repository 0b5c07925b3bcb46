"""The result of a radial power flow, shared by ``lindistflow`` and ``distflow``."""

from __future__ import annotations

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
