"""State and params of the three-phase voltage control environments."""

from __future__ import annotations

from flax import struct

from jaxgrid.data.profiles import Profiles
from jaxgrid.devices.regulator import RegControlSettings
from jaxgrid.grid.three_phase import Feeder3, PortZbus
from jaxgrid.rewards.scalarise import Scalarisation
from jaxgrid.types import Array


@struct.dataclass
class Voltage3State:
    """Attributes:
    time: ``()`` int32 steps since the episode started.
    start: ``()`` int32 profile row of the episode's first step.
    vm_pu: ``(n_node,)`` line-to-neutral voltage of every node of the last power flow, pu.
    q_kvar: ``(n_pv,)`` reactive power each inverter gave in the last step (all its
        phases together), kvar.
    tap_pu: ``(n_reg,)`` the regulators' taps for the next step, pu.
    start_failed: ``()`` bool: the power flow of the episode's first operating point (the
        reset's) did not converge; ``vm_pu`` holds 1.0 pu in its place and the first
        step is reported failed.
    """

    time: Array
    start: Array
    vm_pu: Array
    q_kvar: Array
    tap_pu: Array
    start_failed: Array


@struct.dataclass
class Voltage3Params:
    """Everything a scenario may vary.

    Attributes:
        feeder: the unbalanced feeder (its ``tap_pu`` are the regulators' taps at reset).
        zbus: ``feeder``'s port Z-bus with a generator on every inverter node
            (:func:`~jaxgrid.grid.three_phase.build_port_zbus`): loads, taps and
            injections may vary, the network (lines, transformers, capacitors) is
            ``feeder``'s at the build.
        regcontrol: the feeder's regulator controls (OpenDSS's ``RegControl`` settings).
        tap_control: ``()`` bool: after each step's power flow every regulator control
            acts once (:func:`~jaxgrid.devices.regulator.tap_step`, OpenDSS's law); False:
            the taps stay at ``feeder.tap_pu``.
        profiles: load multipliers and PV availability per time step, with the days
            episodes start on.
        load_profile: ``(n_lp,)`` int32 column of ``profiles.load`` driving each load phase.
        load_scale: ``()`` multiplier of every load phase's nominal power.
        pv_nodes: ``(n_pv, 3)`` int32 node of phase a, b, c of each inverter (0 where
            ``pv_phases`` is False).
        pv_phases: ``(n_pv, 3)`` bool phases each inverter is connected to (wye, to ground);
            its power is shared equally among them.
        pv_profile: ``(n_pv,)`` int32 column of ``profiles.pv`` of each inverter.
        pv_p_max_kw: ``(n_pv,)`` installed PV peak of each inverter (all phases), kW.
        pv_s_max_kva: ``(n_pv,)`` inverter rating (all phases), kVA (1.2 x peak).
        monitored: ``(n_node,)`` bool nodes whose voltage the objective and the band
            cost count (the distribution nodes; not the transmission source).
        v_ref, v_lower, v_upper: ``()`` reference voltage and band, pu.
        vuf_limit: ``()`` voltage unbalance factor above which the unbalance cost counts
            (EN 50160: 0.02).
        barrier: ``()`` int32 voltage barrier (:mod:`jaxgrid.rewards.voltage_barrier`).
        power_flow_penalty: ``()`` reward lost per agent, on a step whose power flow
            fails, for that step and each step the episode loses.
        scalarisation: how the objectives become the reward.
        pv_q_smoothing_kvar: ``()`` width of the smooth surrogate of the inverters'
            reactive headroom, kvar (:mod:`jaxgrid.devices.renewable`, in this
            environment's kW and kvar); 0 (the default): the exact model.
        tap_smoothing_steps: ``()`` width of the smooth surrogate of a regulator
            agent's tap move, tap steps (:func:`~jaxgrid.devices.regulator.move_taps`;
            ``voltage123-reg-v0``, where agents set the taps); 0 (the default): whole
            steps, the exact model.
    """

    feeder: Feeder3
    zbus: PortZbus
    regcontrol: RegControlSettings
    tap_control: Array
    profiles: Profiles
    load_profile: Array
    load_scale: Array
    pv_nodes: Array
    pv_phases: Array
    pv_profile: Array
    pv_p_max_kw: Array
    pv_s_max_kva: Array
    monitored: Array
    v_ref: Array
    v_lower: Array
    v_upper: Array
    vuf_limit: Array
    barrier: Array
    power_flow_penalty: Array
    scalarisation: Scalarisation
    pv_q_smoothing_kvar: Array = 0.0
    tap_smoothing_steps: Array = 0.0
