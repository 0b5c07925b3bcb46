"""Physics of power networks: radial feeders and meshed transmission networks.

- :class:`Feeder` and :func:`from_branch_table`, :func:`from_matpower`,
  :func:`from_pandapower` (and :func:`to_pandapower`);
- :func:`load_feeder` (a bundled name, a MATPOWER or a pandapower file);
- bundled cases :func:`case33bw`, :func:`case69`, :func:`case85`, :func:`case118zh`,
  :func:`case136ma`, :func:`case141`;
- solvers :func:`lindistflow` (linear, lossless), :func:`distflow` (nonlinear sweep),
  :func:`distflow_newton` (Newton-Raphson on the tree) and :func:`distflow_with_fallback`
  (the sweep, Newton where it did not converge), each returning a
  :class:`PowerFlowResult`;
- :func:`voltage_angles` from a result; limits :func:`voltage_violation_pu`,
  :func:`branch_loading`.

Meshed networks: :class:`Network` (buses, branches with taps and phase shifts,
generators with cost curves) from :func:`network_from_matpower` (a file, or a bundled
case of :data:`TRANSMISSION_CASES`) or :func:`network_from_pandapower` (a pandapower
network: lines, two-winding transformers, switches, gens, sgens, loads, shunts, costs),
and :func:`bus_admittance`; the AC power flow :func:`acpf` (Newton-Raphson or
fast-decoupled, fixed iterations, reactive limits; an :class:`ACPowerFlowResult` with
voltages in pu and degrees, powers in MW and Mvar); the DC model: :func:`dcpf` (angles in degrees, flows in MW,
a :class:`DCPowerFlowResult`), :func:`dc_matrices`, and its sensitivities :func:`ptdf`
(MW per MW injected), :func:`shift_flow_mw` and :func:`lodf` (with the bridges, whose
outage islands part of the network, flagged).

Unbalanced three-phase feeders (the IEEE 13, 34, 37 and 123 node feeders from OpenDSS) and
their power flow are in the subpackage :mod:`jaxgrid.grid.three_phase`.

Loads are in MW and Mvar, positive = consumption, one entry per bus in the feeder's bus
order. Nothing here knows about reinforcement learning.
"""

from jaxgrid.grid.acpf import ACPowerFlowResult, acpf, fast_decoupled_matrices
from jaxgrid.grid.angles import voltage_angles
from jaxgrid.grid.cases import (
    CASES,
    case33bw,
    case69,
    case85,
    case118zh,
    case136ma,
    case141,
    load_bundled,
    load_feeder,
)
from jaxgrid.grid.dcpf import DCMatrices, DCPowerFlowResult, dc_matrices, dcpf
from jaxgrid.grid.distflow import distflow
from jaxgrid.grid.distflow_newton import distflow_newton
from jaxgrid.grid.fallback import distflow_with_fallback
from jaxgrid.grid.feeder import Feeder, from_branch_table
from jaxgrid.grid.limits import branch_loading, voltage_violation_pu
from jaxgrid.grid.lindistflow import lindistflow
from jaxgrid.grid.matpower import from_matpower, load_case
from jaxgrid.grid.network import Network, branch_admittances, bus_admittance
from jaxgrid.grid.network_matpower import TRANSMISSION_CASES, network_from_matpower
from jaxgrid.grid.network_pandapower import network_from_pandapower
from jaxgrid.grid.pandapower_io import from_pandapower, to_pandapower
from jaxgrid.grid.result import PowerFlowResult
from jaxgrid.grid.sensitivity import lodf, ptdf, shift_flow_mw

__all__ = [
    "ACPowerFlowResult",
    "CASES",
    "DCMatrices",
    "DCPowerFlowResult",
    "Feeder",
    "Network",
    "TRANSMISSION_CASES",
    "acpf",
    "branch_admittances",
    "bus_admittance",
    "network_from_matpower",
    "network_from_pandapower",
    "PowerFlowResult",
    "branch_loading",
    "case33bw",
    "case69",
    "case85",
    "case118zh",
    "case136ma",
    "case141",
    "dc_matrices",
    "fast_decoupled_matrices",
    "dcpf",
    "distflow",
    "distflow_newton",
    "distflow_with_fallback",
    "from_branch_table",
    "from_matpower",
    "from_pandapower",
    "lindistflow",
    "lodf",
    "ptdf",
    "shift_flow_mw",
    "load_bundled",
    "load_case",
    "load_feeder",
    "to_pandapower",
    "voltage_angles",
    "voltage_violation_pu",
]
