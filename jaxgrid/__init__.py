"""jaxgrid: JAX-native, jittable multi-agent smart-grid environments for reinforcement learning."""

from jaxgrid._xla_flags import avoid_cpu_scheduler_hang

avoid_cpu_scheduler_hang()  # before JAX starts its backend (jaxgrid/_xla_flags.py)

# envs: importing it registers the environments
from jaxgrid import envs, grid, rewards, spaces  # noqa: E402
from jaxgrid.config import make_from_config  # noqa: E402
from jaxgrid.env import Environment, Transition  # noqa: E402
from jaxgrid.export import export_trajectory, trajectory_columns  # noqa: E402
from jaxgrid.registry import list_envs, make, register  # noqa: E402
from jaxgrid.rollout import Trajectory, rollout  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Environment",
    "Trajectory",
    "Transition",
    "envs",
    "export_trajectory",
    "grid",
    "list_envs",
    "make",
    "make_from_config",
    "register",
    "rewards",
    "rollout",
    "spaces",
    "trajectory_columns",
]
