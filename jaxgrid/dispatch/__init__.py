"""Optimisation over a network: economic dispatch / DC optimal power flow with LMPs.

- :func:`dcopf`: the dispatch of the generators at least cost within their limits, the
  branch ratings and a reserve requirement, with shed load, spilled generation and
  reserve shortfall priced rather than infeasible; returns a :class:`DispatchResult`
  (dispatch in MW, cost in currency/h, LMPs in currency/MWh split into energy and
  congestion, flows, binding limits, convergence);
- :class:`DCOPFParams`: the value of lost load and the other prices of infeasibility;
- :func:`monitored_branches`: the branches whose limits can bind (host side), which
  keeps the solver's linear algebra small.

Built on :mod:`jaxgrid.grid` (the :class:`~jaxgrid.grid.Network`, its PTDF); nothing here
knows about reinforcement learning.
"""

from jaxgrid.dispatch.dcopf import DCOPFParams, DispatchResult, dcopf, monitored_branches

__all__ = ["DCOPFParams", "DispatchResult", "dcopf", "monitored_branches"]
