"""Checkpoints of a training run with orbax: every runner of a sweep, by update count.

A checkpoint holds the whole :class:`~jaxgrid.train.ppo.Runner` (or
:class:`~jaxgrid.train.sac.Runner`, with its replay buffer and target networks) of every
sweep member — network and optimiser state, environment states and observations, the
running statistics of observation and reward normalisation, PRNG keys and the update
count — so training
resumed from it continues exactly as if it had never stopped. Empty arrays (an
environment without costs has ``(..., 0)`` cost sums) carry no data and are left out.

The newest ``keep`` checkpoints stay on disk (orbax's ``max_to_keep``), so a damaged newest
one (a truncated data file or ``_METADATA``, a full disk, a machine lost mid-write) costs
only the updates since the one before: :meth:`Checkpoints.restore_newest` falls back to the
newest checkpoint that restores and warns once, naming the ones it skipped.
"""

from __future__ import annotations

import gc
import inspect
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from jaxgrid.errors import UserError


class CheckpointWarning(UserWarning):
    """A checkpoint was skipped because it did not restore."""


class Checkpoints:
    """The checkpoints under ``directory``, keeping the newest ``keep``."""

    def __init__(self, directory, keep: int = 3):
        self.manager = ocp.CheckpointManager(
            Path(directory).absolute(),
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True),
        )

    def updates(self) -> list[int]:
        """The update counts of the checkpoints on disk, oldest first."""
        return sorted(self.manager.all_steps())

    def save(self, update: int, runners: Any) -> None:
        """Write ``runners`` as the checkpoint of ``update`` (and wait until it is on disk)."""
        self.manager.save(update, args=ocp.args.StandardSave(_non_empty(runners)))
        self.manager.wait_until_finished()

    def restore(self, like: Any, update: int) -> Any:
        """The runners saved at ``update``, shaped and placed like ``like``."""
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, _non_empty(like))
        saved = self.manager.restore(update, args=ocp.args.StandardRestore(abstract))
        leaves, treedef = jax.tree_util.tree_flatten(like)
        filled = iter(jax.tree_util.tree_leaves(saved))
        return treedef.unflatten([x if x.size == 0 else next(filled) for x in leaves])

    def restore_newest(self, like: Any) -> tuple[int, Any]:
        """``(update, runners)`` of the newest checkpoint that restores.

        Newer checkpoints that do not restore are skipped with one
        :class:`CheckpointWarning` naming them and why; when none restores, or there is
        none, :class:`~jaxgrid.errors.UserError` says so.
        """
        skipped = []
        for update in reversed(self.updates()):
            try:
                runners = self.restore(like, update)
            except Exception as e:  # orbax and tensorstore raise many types for damaged files
                _silence_abandoned_reads()
                skipped.append(f"{update} ({_reason(e)})")
                continue
            if skipped:
                warnings.warn(
                    f"skipped damaged checkpoint(s) {'; '.join(skipped)}; "
                    f"using checkpoint {update}",
                    CheckpointWarning,
                    stacklevel=2,
                )
            return update, runners
        if skipped:
            raise UserError(
                f"no intact checkpoint in {self.manager.directory}: {'; '.join(skipped)}"
            )
        raise UserError(f"no checkpoint in {self.manager.directory}")

    def drop_after(self, update: int) -> None:
        """Delete the checkpoints newer than ``update`` (a run resumed from ``update`` writes
        them again; orbax writes no checkpoint older than its newest)."""
        for newer in self.updates():
            if newer > update:
                self.manager.delete(newer)

    def close(self) -> None:
        """Release the checkpoint manager."""
        self.manager.close()


def _non_empty(tree: Any) -> list:
    """The leaves of ``tree`` that hold data, in order."""
    return [x for x in jax.tree_util.tree_leaves(tree) if x.size > 0]


def _reason(error: BaseException) -> str:
    """The type and the first line of the message of ``error``'s root cause (orbax wraps
    tensorstore's precise complaint in a generic one)."""
    while error.__cause__ is not None:
        error = error.__cause__
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _silence_abandoned_reads() -> None:
    """Keep the reports of array reads that a failed orbax restore abandoned from the user.

    When one array of a checkpoint fails to read, orbax closes its event loop and abandons
    the other reads. Each leaves up to three reports, some of them only when its
    tensorstore read completes, which may be after the restore has returned: an
    "Exception ignored in: <coroutine ...>" traceback when the coroutine is collected, an
    "Exception ignored in: None ... RuntimeError: Event loop is closed" one when the read
    wakes the closed loop, and asyncio's "Task was destroyed but it is pending!" log. So
    once a restore has failed, those three (and nothing else) are dropped for the rest of
    the process; the restore's own exception says what was wrong.
    """
    hook = sys.unraisablehook
    if getattr(hook, "drops_abandoned_reads", False):
        return

    def drop_abandoned_reads(unraisable):
        closed_loop = (
            unraisable.object is None
            and isinstance(unraisable.exc_value, RuntimeError)
            and str(unraisable.exc_value) == "Event loop is closed"
        )
        if not (closed_loop or inspect.iscoroutine(unraisable.object)):
            hook(unraisable)

    drop_abandoned_reads.drops_abandoned_reads = True
    sys.unraisablehook = drop_abandoned_reads
    logging.getLogger("asyncio").addFilter(_PendingTaskDestroyed())
    gc.collect()


class _PendingTaskDestroyed(logging.Filter):
    """Drops asyncio's log of a task destroyed while pending (an abandoned read)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Task was destroyed but it is pending")
