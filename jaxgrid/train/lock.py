"""One training process per run directory: an ``fcntl.flock`` on ``<run>/.lock``.

Two trainings writing one directory interleave ``metrics.jsonl`` and collide on their first
checkpoint, so :func:`jaxgrid.train.run.train_run` takes this lock before it writes anything
and holds it until it returns; a second training of the same directory is refused at start.

Why an OS lock and not a file holding a PID: the kernel releases an ``flock`` when the
process holding it ends in any way (SIGKILL, a crash, a lost machine), so a killed run never
leaves its directory locked, and nothing has to guess whether a recorded PID still runs, was
reused, or lives on another host. The lock file also names the holder (PID and host), but
only for the refusal message. POSIX only (``fcntl``); on a network file system the lock is
as good as that file system's ``flock``.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from jaxgrid.errors import UserError

LOCK_FILE = ".lock"


class RunLock:
    """The lock of run directory ``out`` (which must exist); a context manager."""

    def __init__(self, out):
        self.path = Path(out) / LOCK_FILE
        self._file = None

    def acquire(self) -> RunLock:
        """Take the lock, or raise :class:`~jaxgrid.errors.UserError` naming its holder."""
        file = self.path.open("a+")  # "a+": do not erase the holder's name before locking
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = file.read().strip() or "another process"
            file.close()
            raise UserError(
                f"{self.path.parent} is in use by another training ({holder}); "
                "wait for it to end, or choose another --out"
            ) from None
        file.truncate(0)
        file.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        file.flush()
        self._file = file
        return self

    def release(self) -> None:
        """Let the lock go (closing the file releases the ``flock``)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
