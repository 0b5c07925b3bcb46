"""Voltage barrier functions of MAPDN (Wang et al., NeurIPS 2021), per bus, >= 0.

Each maps a bus voltage (pu) to a penalty; the voltage objective is minus their mean
over buses. The method is a params leaf, so one ``vmap`` compares barriers.

- ``L1``: ``|v - v_ref|``
- ``L2``: ``(v - v_ref)^2``
- ``BOWL``: ``2 |v - v_ref| - 0.095`` outside ``v_ref +- 0.05``, inside a shallow bowl
  ``0.04 - 0.01 N(v; v_ref, 0.1)`` (N the normal density) that keeps a gradient towards
  ``v_ref`` without punishing small deviations much;
- ``COURANT_BELTRAMI``: ``max(0, v - v_upper)^2 + max(0, v_lower - v)^2``, zero in the band.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.types import Array

L1, L2, BOWL, COURANT_BELTRAMI = 0, 1, 2, 3
BARRIERS = {"l1": L1, "l2": L2, "bowl": BOWL, "courant_beltrami": COURANT_BELTRAMI}


def _normal_pdf(v, loc, scale):
    return jnp.exp(-0.5 * ((v - loc) / scale) ** 2) / (jnp.sqrt(2 * jnp.pi) * scale)


def voltage_barrier(vm_pu: Array, method, v_ref=1.0, v_lower=0.95, v_upper=1.05) -> Array:
    """Penalty of each voltage in ``vm_pu`` under barrier ``method`` (see module docstring)."""
    dv = vm_pu - v_ref
    l1 = jnp.abs(dv)
    l2 = dv**2
    bowl = jnp.where(l1 > 0.05, 2.0 * l1 - 0.095, 0.04 - 0.01 * _normal_pdf(vm_pu, v_ref, 0.1))
    cb = jnp.maximum(vm_pu - v_upper, 0.0) ** 2 + jnp.maximum(v_lower - vm_pu, 0.0) ** 2
    method = jnp.asarray(method)
    return jnp.select([method == L1, method == L2, method == BOWL], [l1, l2, bowl], cb)
