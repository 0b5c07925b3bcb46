"""Unbalanced three-phase distribution feeders (OpenDSS models) and their power flow.

- :class:`Feeder3`, the node-based feeder pytree (:mod:`.feeder3`), and
  :func:`check_feeder3`;
- :func:`from_opendss` (compiles an OpenDSS master with ``dss-python``),
  :func:`load_feeder3` (the bundled IEEE 13, 34, 37 and 123 node feeders, no
  ``dss-python`` needed), :func:`save_feeder3`;
- :func:`regcontrols_from_opendss` and :func:`load_regcontrol_arrays`: the settings of the
  feeder's regulator controls (the controller itself is
  :mod:`jaxgrid.devices.regulator`);
- :func:`unbalanced_power_flow` (Z-bus fixed point, OpenDSS's load models) returning an
  :class:`UnbalancedPowerFlowResult` with per-phase voltages, line-to-line voltages,
  voltage unbalance (IEC and NEMA), line currents against ratings and losses;
- :func:`lindist3flow_model` and :func:`lindist3flow` (:mod:`.lindist3flow`): the linear,
  lossless LinDist3Flow model (balanced-angle assumption, constant-power loads), an
  affine map from per-phase injections to squared voltage magnitudes.
"""

from jaxgrid.grid.three_phase.feeder3 import Feeder3, check_feeder3
from jaxgrid.grid.three_phase.lindist3flow import (
    LinDist3Flow,
    LinDist3FlowResult,
    constant_power_loads,
    lindist3flow,
    lindist3flow_model,
)
from jaxgrid.grid.three_phase.opendss import (
    BUNDLED,
    PUBLISHED_TAP_STEPS,
    bundled_master,
    from_opendss,
    load_feeder3,
    load_regcontrol_arrays,
    published_taps,
    regcontrols_from_opendss,
    save_feeder3,
    tap_commands,
    write_bundled,
)
from jaxgrid.grid.three_phase.port_zbus import PortZbus, build_port_zbus, port_power_flow
from jaxgrid.grid.three_phase.upf import (
    UnbalancedPowerFlowResult,
    element_admittances,
    load_admittance,
    nodal_admittance,
    unbalanced_power_flow,
)

__all__ = [
    "BUNDLED",
    "Feeder3",
    "LinDist3Flow",
    "LinDist3FlowResult",
    "PUBLISHED_TAP_STEPS",
    "PortZbus",
    "UnbalancedPowerFlowResult",
    "build_port_zbus",
    "bundled_master",
    "check_feeder3",
    "constant_power_loads",
    "element_admittances",
    "from_opendss",
    "lindist3flow",
    "lindist3flow_model",
    "load_admittance",
    "load_feeder3",
    "load_regcontrol_arrays",
    "nodal_admittance",
    "port_power_flow",
    "published_taps",
    "regcontrols_from_opendss",
    "tap_commands",
    "save_feeder3",
    "write_bundled",
    "unbalanced_power_flow",
]
