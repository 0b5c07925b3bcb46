"""jaxgrid: JAX-native, jittable multi-agent smart-grid environments for reinforcement learning."""

from jaxgrid import envs, grid, rewards, spaces  # envs: importing it registers the environments
from jaxgrid.env import Environment, Transition
from jaxgrid.registry import list_envs, make, register
from jaxgrid.rollout import Trajectory, rollout

__version__ = "0.1.0"

__all__ = [
    "Environment",
    "Trajectory",
    "Transition",
    "envs",
    "grid",
    "list_envs",
    "make",
    "register",
    "rewards",
    "rollout",
    "spaces",
]
