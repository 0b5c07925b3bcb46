"""Control on the environment's own differentiable model: receding-horizon MPC."""

from jaxgrid.control import mpc
from jaxgrid.control.mpc import MPC, MPCConfig, mpc_controller

__all__ = ["MPC", "MPCConfig", "mpc", "mpc_controller"]
