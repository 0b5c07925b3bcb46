"""Optimisation over a network: the layer between the physics of :mod:`jaxgrid.grid` and
the environments.

- :func:`acopf`: AC optimal power flow on a meshed
  :class:`~jaxgrid.grid.network.Network` (an interior point method with JAX
  derivatives, jittable and vmappable), returning an :class:`ACOPFResult` with the
  dispatch, locational marginal prices and constraint violations.

Nothing here knows about reinforcement learning.
"""

from jaxgrid.dispatch.acopf import ACOPFResult, acopf

__all__ = ["ACOPFResult", "acopf"]
