"""Controllable devices as pure functions of small arrays (MW, Mvar, MWh, pu).

- :mod:`.battery`: storage with power, energy and apparent-power limits;
- :mod:`.ev`: a battery plugged in between arrival and departure, with a target, and
  overnight charging sessions sampled for a fleet;
- :mod:`.renewable`: PV and wind inverters (curtailment, reactive power);
- :mod:`.flexload`: curtailment and deferral within a window;
- :mod:`.prosumer`: the EthicalSmartGrid building;
- :mod:`.datacentre`: an AI data centre (GPU work queue, IT power, hall cooling);
- :mod:`.diesel`: a diesel generator (start-up, minimum load, ramps, fuel curve);
- :mod:`.regulator`: automatic tap control of a three-phase feeder's voltage regulators
  (OpenDSS's ``RegControl``: PT, line-drop compensation, band, static-mode steps).
"""

from jaxgrid.devices.battery import BatteryParams, BatteryStep, battery_step, power_limits
from jaxgrid.devices.datacentre import (
    DataCentreParams,
    DataCentreState,
    DataCentreStep,
    datacentre_step,
)
from jaxgrid.devices.diesel import DieselParams, DieselState, DieselStep, diesel_off, diesel_step
from jaxgrid.devices.ev import (
    EVParams,
    EVStep,
    connected,
    ev_step,
    overnight_sessions,
    sample_schedule,
    schedule_from_bits,
    served_share,
)
from jaxgrid.devices.flexload import FlexLoadParams, FlexLoadStep, flexload_step
from jaxgrid.devices.regulator import (
    RegControlSettings,
    RegulatedPowerFlow,
    TapStep,
    load_regcontrols,
    move_taps,
    regcontrols_from_master,
    regulator_voltage,
    solve_with_regulators,
    tap_step,
)
from jaxgrid.devices.renewable import (
    S_MAX_RATIO,
    Injection,
    inverter_output,
    inverter_q_mvar,
    reactive_headroom_mvar,
)

__all__ = [
    "S_MAX_RATIO",
    "BatteryParams",
    "BatteryStep",
    "DataCentreParams",
    "DataCentreState",
    "DataCentreStep",
    "DieselParams",
    "DieselState",
    "DieselStep",
    "EVParams",
    "EVStep",
    "FlexLoadParams",
    "FlexLoadStep",
    "Injection",
    "RegControlSettings",
    "RegulatedPowerFlow",
    "TapStep",
    "battery_step",
    "connected",
    "datacentre_step",
    "diesel_off",
    "diesel_step",
    "ev_step",
    "flexload_step",
    "inverter_output",
    "inverter_q_mvar",
    "load_regcontrols",
    "power_limits",
    "reactive_headroom_mvar",
    "move_taps",
    "regcontrols_from_master",
    "regulator_voltage",
    "overnight_sessions",
    "sample_schedule",
    "schedule_from_bits",
    "served_share",
    "solve_with_regulators",
    "tap_step",
]
