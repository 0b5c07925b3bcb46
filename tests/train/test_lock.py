"""One training per run directory: a second is refused at start; a killed one frees it."""

import os
import signal
import socket
import subprocess
import sys

import pytest

from jaxgrid.cli import main
from jaxgrid.errors import UserError
from jaxgrid.train.lock import RunLock

HOLD = (
    "import sys, time\n"
    "from jaxgrid.train.lock import RunLock\n"
    "lock = RunLock(sys.argv[1]).acquire()\n"
    "print('locked', flush=True)\n"
    "time.sleep(600)\n"
)


@pytest.fixture
def holder(tmp_path):
    """Another process that holds the lock of ``tmp_path``; killed at the end."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "locked"
    yield process
    process.kill()
    process.wait()


def test_a_held_lock_refuses_naming_the_holder_and_a_killed_holder_frees_it(tmp_path, holder):
    expected = f"in use by another training \\(pid {holder.pid} on {socket.gethostname()}\\)"
    with pytest.raises(UserError, match=expected):
        RunLock(tmp_path).acquire()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with RunLock(tmp_path):  # the kernel released the killed holder's lock
        assert (tmp_path / ".lock").read_text() == f"pid {os.getpid()} on {socket.gethostname()}\n"
    with RunLock(tmp_path):  # and ours, when we let it go
        pass


def test_a_second_training_into_one_directory_is_refused_at_start(tmp_path, holder, capsys):
    args = ["train", "--env", "arbitrage-v0", "--total-steps", "192", "--set", "num_envs=8"]
    assert main([*args, "--no-progress", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"jaxgrid: error: {tmp_path} is in use by another training (pid ")
    assert err.count("\n") == 1
    assert not (tmp_path / "config.json").exists()  # refused before writing anything
