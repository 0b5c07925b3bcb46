"""Optimisation over a network: the layer between the physics of :mod:`jaxgrid.grid` and
the environments.

- :func:`dcopf`: economic dispatch / DC optimal power flow: the generators' dispatch at
  least cost within their limits, the branch ratings and a reserve requirement, with
  shed load, spilled generation and reserve shortfall priced rather than infeasible;
  returns a :class:`DispatchResult` (dispatch in MW, cost in currency/h, LMPs in
  currency/MWh split into energy and congestion, flows, binding limits, convergence);
- :func:`copper_plate_dispatch`: the same problem without line limits, solved exactly
  (one price), with ``converged`` saying whether it is also the DC-OPF's solution;
- :func:`binding_lines_dispatch`: the DC-OPF where a few lines bind, by Newton's method
  on the prices of the balance and of those lines, with ``converged`` a certificate of
  optimality;
- :func:`dcopf_with_fallback`: the DC-OPF by the copper plate where no line binds, by
  the binding lines' prices where their certificate holds, and by :func:`dcopf`'s
  interior point only for the rest (gathered under ``vmap``);
- :class:`DCOPFParams`: the value of lost load and the other prices of infeasibility;
- :func:`monitored_branches`: the branches whose limits can bind (host side), which
  keeps the solver's linear algebra small;
- :func:`acopf`: AC optimal power flow (an interior point method with JAX derivatives,
  jittable and vmappable), returning an :class:`ACOPFResult` with the dispatch, LMPs and
  constraint violations.

Built on :mod:`jaxgrid.grid` (the :class:`~jaxgrid.grid.Network`, its PTDF and
admittances); nothing here knows about reinforcement learning.
"""

from jaxgrid.dispatch.acopf import ACOPFResult, acopf
from jaxgrid.dispatch.binding_lines import binding_lines_dispatch
from jaxgrid.dispatch.copper_plate import copper_plate_dispatch
from jaxgrid.dispatch.dcopf import DCOPFParams, DispatchResult, dcopf, monitored_branches
from jaxgrid.dispatch.fallback import dcopf_with_fallback

__all__ = [
    "ACOPFResult",
    "DCOPFParams",
    "DispatchResult",
    "acopf",
    "binding_lines_dispatch",
    "copper_plate_dispatch",
    "dcopf",
    "dcopf_with_fallback",
    "monitored_branches",
]
