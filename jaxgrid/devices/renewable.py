"""PV and wind inverters: available power from a profile, curtailment, reactive power.

Both are an inverter of apparent-power rating ``s_max`` in front of a source whose
available active power follows a profile (``p_rated * profile``, profile in [0, 1]).
The agent may curtail a share of the available power and set reactive power within the
headroom the active power leaves, as in MAPDN (Wang et al., NeurIPS 2021):
``q = a * sqrt(s_max^2 - p^2)`` for a normalised action ``a`` in [-1, 1], with
``s_max = 1.2 * p_rated`` so that reactive power is available even at full output.
Generation is reported positive here; on a bus it is a negative load.

The headroom saturates where the active power reaches the rating: ``sqrt`` of a
quantity clipped at 0, whose derivative is infinite at ``p = s_max`` and 0 beyond. With
``smoothing_mvar > 0`` it is the smooth surrogate ``sqrt(w^2 softplus((s_max^2 - p^2) /
w^2))`` (:func:`jaxgrid.smooth.soft_sqrt_positive`, ``w = smoothing_mvar``): finite
derivatives everywhere, ``0.83 w`` Mvar of headroom at ``p = s_max`` where the exact model
has none, and within ``w^2 exp(-h^2 / w^2) / (2 h)`` Mvar of the exact headroom ``h``
where ``h >> w``. The default, 0, is the exact model.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxgrid.smooth import soft_sqrt_positive
from jaxgrid.types import Array

S_MAX_RATIO = 1.2  # MAPDN: inverter rating = 1.2 x the source's rated active power


class Injection(NamedTuple):
    """Output of an inverter, each ``(n,)``: active power (MW), reactive power (Mvar,
    positive = injection) and the available active power left unused (MW)."""

    p_mw: Array
    q_mvar: Array
    curtailed_mw: Array


def reactive_headroom_mvar(p_mw: Array, s_max_mva: Array, smoothing_mvar: Array = 0.0) -> Array:
    """``sqrt(s_max^2 - p^2)``, the reactive power an inverter can still give, Mvar (>= 0);
    rounded near ``p = s_max`` over ``smoothing_mvar`` (module docstring)."""
    return soft_sqrt_positive(s_max_mva**2 - p_mw**2, smoothing_mvar)


def inverter_q_mvar(
    action: Array, p_mw: Array, s_max_mva: Array, smoothing_mvar: Array = 0.0
) -> Array:
    """Reactive power for a normalised action in [-1, 1] (positive = injection), Mvar."""
    headroom = reactive_headroom_mvar(p_mw, s_max_mva, smoothing_mvar)
    return jnp.clip(action, -1.0, 1.0) * headroom


def inverter_output(
    available_mw: Array,
    curtail: Array,
    q_action: Array,
    s_max_mva: Array,
    smoothing_mvar: Array = 0.0,
) -> Injection:
    """Curtail a share ``curtail`` in [0, 1] of the available power, then set reactive power.

    Active power has priority: ``p = (1 - curtail) * min(available, s_max)`` and the
    reactive power uses the headroom left (:func:`inverter_q_mvar`).
    """
    available = jnp.minimum(jnp.maximum(available_mw, 0.0), s_max_mva)
    p = (1.0 - jnp.clip(curtail, 0.0, 1.0)) * available
    return Injection(
        p_mw=p,
        q_mvar=inverter_q_mvar(q_action, p, s_max_mva, smoothing_mvar),
        curtailed_mw=available - p,
    )
