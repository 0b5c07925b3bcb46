"""Checkpoints of a training run with orbax: every runner of a sweep, by update count.

A checkpoint holds the whole :class:`~jaxgrid.train.ppo.Runner` of every sweep member —
network and optimiser state, environment states and observations, the running statistics
of observation and reward normalisation, PRNG keys and the update count — so training
resumed from it continues exactly as if it had never stopped. Empty arrays (an
environment without costs has ``(..., 0)`` cost sums) carry no data and are left out.
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
        """Write ``runners`` as the checkpoint of ``update`` (and wait until it is on disk)."""
        self.manager.save(update, args=ocp.args.StandardSave(_non_empty(runners)))
        self.manager.wait_until_finished()

    def restore(self, like: Any, update: int | None = None) -> Any:
        """The runners saved at ``update`` (default: newest), shaped and placed like ``like``."""
        update = self.latest() if update is None else update
        if update is None:
            raise FileNotFoundError(f"no checkpoint in {self.manager.directory}")
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, _non_empty(like))
        saved = self.manager.restore(update, args=ocp.args.StandardRestore(abstract))
        leaves, treedef = jax.tree_util.tree_flatten(like)
        filled = iter(jax.tree_util.tree_leaves(saved))
        return treedef.unflatten([x if x.size == 0 else next(filled) for x in leaves])

    def close(self) -> None:
        """Release the checkpoint manager."""
        self.manager.close()


def _non_empty(tree: Any) -> list:
    """The leaves of ``tree`` that hold data, in order."""
    return [x for x in jax.tree_util.tree_leaves(tree) if x.size > 0]
