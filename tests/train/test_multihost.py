"""Two processes on this machine, joined by jax.distributed on a localhost coordinator
(Gloo collectives on CPU), train one sharded program: the result equals one process
training over two devices."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "multihost_run.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_train_as_one_process_with_two_devices(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    port = _free_port()
    multi = tmp_path / "multi.npz"
    procs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), str(multi), str(HERE.parent), str(i), "2", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(o[-2000:] for o in outputs)
    single = tmp_path / "single.npz"
    one = {**env, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(single), str(HERE.parent), "0", "1", "0"],
        env=one,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    a, b = np.load(multi), np.load(single)
    assert int(a["processes"]) == 2 and int(a["devices"]) == 2 == int(b["devices"])
    assert int(a["state_devices"]) == 2  # the environments were split over both processes
    for name in ("episode_return", "value_loss", "kernel"):
        np.testing.assert_allclose(a[name], b[name], rtol=1e-6, atol=1e-7, err_msg=name)


def test_importing_jaxgrid_leaves_the_backend_for_jax_distributed_to_start():
    """jax.distributed.initialize must run before JAX starts its backend; a module-level
    jnp constant (jaxgrid.hashing had three) started it at import."""
    code = (
        "import jax\n"
        "from jax._src import xla_bridge\n"
        "import jaxgrid, jaxgrid.train, jaxgrid.train.multihost\n"
        "assert not xla_bridge._backends, 'import started the backend'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
