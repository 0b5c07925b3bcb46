"""PV and wind inverters: available power from a profile, curtailment, reactive power.

Both are an inverter of apparent-power rating ``s_max`` in front of a source whose
available active power follows a profile (``p_rated * profile``, profile in [0, 1]).
The agent may curtail a share of the available power and set reactive power within the
headroom the active power leaves, as in MAPDN (Wang et al., NeurIPS 2021):
``q = a * sqrt(s_max^2 - p^2)`` for a normalised action ``a`` in [-1, 1], with
``s_max = 1.2 * p_rated`` so that reactive power is available even at full output.
Generation is reported positive here; on a bus it is a negative load.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxgrid.types import Array

S_MAX_RATIO = 1.2  # MAPDN: inverter rating = 1.2 x the source's rated active power


class Injection(NamedTuple):
    """Output of an inverter, each ``(n,)``: active power (MW), reactive power (Mvar,
    positive = injection) and the available active power left unused (MW)."""

    p_mw: Array
    q_mvar: Array
    curtailed_mw: Array


def reactive_headroom_mvar(p_mw: Array, s_max_mva: Array) -> Array:
    """``sqrt(s_max^2 - p^2)``, the reactive power an inverter can still give, Mvar (>= 0)."""
    return jnp.sqrt(jnp.maximum(s_max_mva**2 - p_mw**2, 0.0))


def inverter_q_mvar(action: Array, p_mw: Array, s_max_mva: Array) -> Array:
    """Reactive power for a normalised action in [-1, 1] (positive = injection), Mvar."""
    return jnp.clip(action, -1.0, 1.0) * reactive_headroom_mvar(p_mw, s_max_mva)


def inverter_output(
    available_mw: Array, curtail: Array, q_action: Array, s_max_mva: Array
) -> Injection:
    """Curtail a share ``curtail`` in [0, 1] of the available power, then set reactive power.

    Active power has priority: ``p = (1 - curtail) * min(available, s_max)`` and the
    reactive power uses the headroom left (:func:`inverter_q_mvar`).
    """
    available = jnp.minimum(jnp.maximum(available_mw, 0.0), s_max_mva)
    p = (1.0 - jnp.clip(curtail, 0.0, 1.0)) * available
    return Injection(
        p_mw=p, q_mvar=inverter_q_mvar(q_action, p, s_max_mva), curtailed_mw=available - p
    )
