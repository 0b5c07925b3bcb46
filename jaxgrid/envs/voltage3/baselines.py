"""Reference policies for the three-phase voltage control environments:
``policy(key, obs) -> action``."""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.devices.renewable import reactive_headroom_mvar
from jaxgrid.envs.voltage.baselines import RESPONSE, no_control, volt_var_curve

__all__ = ["no_control", "volt_var_droop3"]


def volt_var_droop3(params, response: float = RESPONSE):
    """Local volt-var droop of each inverter on the voltage of its own phase(s).

    The single-phase environments' curve (:func:`jaxgrid.envs.voltage.volt_var_curve`)
    and first-order response, applied to the mean line-to-neutral voltage of the
    inverter's phases (its own phase for a single-phase inverter): the inverter moves a
    share ``response`` of the way from its last setting towards the curve value. Uses only
    the inverter's own observation (``p_pv_kw``, ``q_kvar``, ``vm_own_pu``, the last three
    entries) and rating (``params.pv_s_max_kva``).
    """
    s_max = params.pv_s_max_kva

    def policy(key, obs):
        p_pv, q_last, vm = obs[:, -3], obs[:, -2], obs[:, -1]
        headroom = reactive_headroom_mvar(p_pv, s_max.astype(obs.dtype))  # same formula, kvar
        last = jnp.clip(q_last / jnp.maximum(headroom, 1e-6), -1.0, 1.0)
        return (last + response * (volt_var_curve(vm) - last))[:, None]

    return policy
