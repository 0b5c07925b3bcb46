"""Photovoltaic inverter: available power, curtailment and reactive power within its rating.

The inverter's apparent-power rating ``s_max`` bounds ``p^2 + q^2``; reactive power uses
whatever headroom the active power leaves, as in MAPDN (Wang et al., NeurIPS 2021):
``q = a * sqrt(s_max^2 - p^2)`` for a normalised action ``a`` in [-1, 1], with
``s_max = 1.2 * max p`` so that reactive power is available even at full sun.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.types import Array

S_MAX_RATIO = 1.2  # MAPDN: inverter rating = 1.2 x the PV's peak active power


def reactive_headroom_mvar(p_mw: Array, s_max_mva: Array) -> Array:
    """``sqrt(s_max^2 - p^2)``, the reactive power an inverter can still give, Mvar (>= 0)."""
    return jnp.sqrt(jnp.maximum(s_max_mva**2 - p_mw**2, 0.0))


def inverter_q_mvar(action: Array, p_mw: Array, s_max_mva: Array) -> Array:
    """Reactive power for a normalised action in [-1, 1] (positive = injection), Mvar."""
    return jnp.clip(action, -1.0, 1.0) * reactive_headroom_mvar(p_mw, s_max_mva)
