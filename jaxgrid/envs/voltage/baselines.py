"""Reference policies for the voltage control environments: ``policy(key, obs) -> action``."""

from __future__ import annotations

import jax.numpy as jnp

from jaxgrid.devices.renewable import reactive_headroom_mvar

DEADBAND_PU = 0.01  # no reactive power within 1 +- 0.01 pu
SLOPE_PU = 0.04  # full injection at 0.95 pu and full absorption at 1.05 pu
RESPONSE = 0.15  # share of the gap to the curve closed per step (first-order response)


def no_control(key, obs):
    """Inverters give no reactive power."""
    return jnp.zeros((obs.shape[0], 1), obs.dtype)


def volt_var_curve(vm_pu):
    """Normalised reactive power of the volt-var curve: inject below ``1 - DEADBAND_PU``,
    absorb above ``1 + DEADBAND_PU``, linearly up to the full headroom ``SLOPE_PU`` further."""
    inject = jnp.clip((1.0 - DEADBAND_PU - vm_pu) / SLOPE_PU, 0.0, 1.0)
    absorb = jnp.clip((vm_pu - 1.0 - DEADBAND_PU) / SLOPE_PU, 0.0, 1.0)
    return inject - absorb


def volt_var_droop(params, response: float = RESPONSE):
    """Local volt-var droop with a first-order response, as IEEE 1547 inverters implement it.

    Each inverter moves its reactive power a share ``response`` of the way from its last
    setting towards the curve value at its own-bus voltage. Applying the static curve in
    one step would oscillate: with reactive headroom this large, the voltage an inverter
    sees responds more strongly to its own reactive power than the curve's slope allows.
    Uses only the inverter's own observation and rating (``params.pv_s_max_mva``).
    """
    s_max = params.pv_s_max_mva

    def policy(key, obs):
        p_pv, q_last, vm = obs[:, -3], obs[:, -2], obs[:, -1]
        headroom = reactive_headroom_mvar(p_pv, s_max.astype(obs.dtype))
        last = jnp.clip(q_last / jnp.maximum(headroom, 1e-9), -1.0, 1.0)
        return (last + response * (volt_var_curve(vm) - last))[:, None]

    return policy
