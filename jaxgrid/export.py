"""A trajectory as a table: one column per named variable and agent (ETA Ctrl's state log).

Columns, for a trajectory of one environment (leading axis = time):

- ``step`` and ``episode`` (counted from 0; a new episode starts after a step that ended one);
- ``reward[agent]``, ``terminated``, ``truncated``;
- ``action[agent][j]`` (``j`` the action component, or its name where the environment
  names them in ``action_names``);
- ``objective.<name>[agent]`` and ``cost.<name>[agent]`` from the reward vector and costs;
- every other array in ``info``: a scalar per step as ``name``, one value per agent as
  ``name[agent]``, any other vector as ``name[i]`` (e.g. ``vm_pu[17]``, bus 17), and a
  per-agent matrix as ``name[agent][j]``;
- with ``observations=True``, ``obs[agent][name]`` (the environment's
  ``observation_names``; ``obs[agent][j]`` where it does not name them).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from jaxgrid.env import Environment
from jaxgrid.rollout import Trajectory

_SKIPPED_INFO = {"reward_vector", "objective_mask", "costs", "final_observation"}


def trajectory_columns(
    env: Environment, trajectory: Trajectory, observations: bool = False, params=None
) -> dict[str, np.ndarray]:
    """The columns of ``trajectory`` (see the module docstring), each ``(steps,)``;
    ``params`` (default: the environment's) name the observation entries."""
    reward = np.asarray(trajectory.reward)
    if reward.ndim != 2:
        raise ValueError(
            f"trajectory_columns takes one environment's trajectory (steps, agents); got "
            f"rewards of shape {reward.shape} — index a vmapped trajectory first"
        )
    agents = env.agents
    done = np.asarray(trajectory.terminated) | np.asarray(trajectory.truncated)
    columns = {
        "step": np.arange(len(reward)),
        "episode": np.concatenate([[0], np.cumsum(done[:-1])]).astype(int),
    }
    columns |= _per_agent("reward", reward, agents)
    columns["terminated"] = np.asarray(trajectory.terminated)
    columns["truncated"] = np.asarray(trajectory.truncated)
    action = np.asarray(trajectory.action)
    columns |= _per_agent("action", action, agents, getattr(env, "action_names", None))
    info = trajectory.info
    for kind, key, names in (
        ("objective", "reward_vector", env.objective_names),
        ("cost", "costs", env.cost_names),
    ):
        values = np.asarray(info[key])
        for k, name in enumerate(names):
            columns |= _per_agent(f"{kind}.{name}", values[:, :, k], agents)
    for key, value in info.items():
        if key in _SKIPPED_INFO or not hasattr(value, "shape"):
            continue
        value = np.asarray(value)
        if value.ndim == 1:
            columns[key] = value
        elif value.ndim == 2 and value.shape[1] == len(agents):
            columns |= _per_agent(key, value, agents)
        elif value.ndim == 2:
            columns |= {f"{key}[{i}]": value[:, i] for i in range(value.shape[1])}
        elif value.ndim == 3 and value.shape[1] == len(agents):
            columns |= _per_agent(key, value, agents)
    if observations and not isinstance(trajectory.obs, dict):
        try:
            names = env.observation_names(env.default_params() if params is None else params)
        except NotImplementedError:
            names = None
        columns |= _per_agent("obs", np.asarray(trajectory.obs), agents, names)
    return columns


def _per_agent(name, values, agents, component_names=None) -> dict[str, np.ndarray]:
    """``name[agent]`` columns of a ``(steps, agents)`` array, ``name[agent][j]`` of a
    ``(steps, agents, m)`` one."""
    if values.ndim == 2:
        return {f"{name}[{a}]": values[:, i] for i, a in enumerate(agents)}
    flat = values.reshape(values.shape[0], len(agents), -1)
    labels = component_names or range(flat.shape[2])
    return {
        f"{name}[{a}][{label}]": flat[:, i, j]
        for i, a in enumerate(agents)
        for j, label in enumerate(labels)
    }


def export_trajectory(
    env: Environment,
    trajectory: Trajectory,
    path: str | Path,
    observations: bool = False,
    params=None,
) -> Path:
    """Write :func:`trajectory_columns` to ``path``: CSV (``.csv``) or Parquet (``.parquet``,
    needs ``pyarrow``). Returns the path."""
    path = Path(path)
    columns = trajectory_columns(env, trajectory, observations, params)
    if path.suffix == ".csv":
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(columns)
            writer.writerows(zip(*(c.tolist() for c in columns.values())))
    elif path.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as err:
            raise ImportError(f"writing {path} needs pyarrow: pip install pyarrow") from err
        pq.write_table(pa.table(columns), path)
    else:
        raise ValueError(f"export_trajectory writes .csv or .parquet files, not {path.name!r}")
    return path
