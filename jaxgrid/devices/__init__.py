"""Controllable devices as pure functions of small arrays (MW, Mvar, MWh, pu)."""

from jaxgrid.devices.pv import S_MAX_RATIO, inverter_q_mvar, reactive_headroom_mvar

__all__ = ["S_MAX_RATIO", "inverter_q_mvar", "reactive_headroom_mvar"]
