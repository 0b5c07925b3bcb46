"""Checkpoints of a training run with orbax: every runner of a sweep, by update count.

A checkpoint holds the whole :class:`~jaxgrid.train.ppo.Runner` of every sweep member —
network and optimiser state, environment states and observations, the running statistics
of observation and reward normalisation, PRNG keys and the update count — so training
resumed from it continues exactly as if it had never stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp


class Checkpoints:
    """The checkpoints under ``directory``, keeping the newest ``keep``."""

    def __init__(self, directory, keep: int = 2):
        self.manager = ocp.CheckpointManager(
            Path(directory).absolute(),
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True),
        )

    def latest(self) -> int | None:
        """The update count of the newest checkpoint, or ``None``."""
        return self.manager.latest_step()

    def save(self, update: int, runners: Any) -> None:
        self.manager.save(update, args=ocp.args.StandardSave(runners))
        self.manager.wait_until_finished()

    def restore(self, like: Any, update: int | None = None) -> Any:
        """The runners saved at ``update`` (default: newest), shaped and placed like ``like``."""
        update = self.latest() if update is None else update
        if update is None:
            raise FileNotFoundError(f"no checkpoint in {self.manager.directory}")
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, like)
        return self.manager.restore(update, args=ocp.args.StandardRestore(abstract))

    def close(self) -> None:
        self.manager.close()
