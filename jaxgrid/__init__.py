"""jaxgrid: JAX-native, jittable multi-agent smart-grid environments for reinforcement learning."""

from jaxgrid import grid, rewards, spaces
from jaxgrid.env import Environment, Transition
from jaxgrid.registry import list_envs, make, register

__version__ = "0.1.0"

__all__ = [
    "Environment",
    "Transition",
    "grid",
    "list_envs",
    "make",
    "register",
    "rewards",
    "spaces",
]
