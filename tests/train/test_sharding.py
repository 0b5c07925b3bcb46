"""Training split over two (simulated) CPU devices equals the single-device run."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import sampled

HERE = Path(__file__).parent


def run(tmp_path, devices: int, mode: str, algo: str):
    out = tmp_path / f"{algo}_{mode}_{devices}.npz"
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    script = HERE / "sharded_run.py"
    done = subprocess.run(
        [sys.executable, str(script), str(out), str(HERE.parent), mode, algo],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(out))


# each case trains in two fresh processes, on one device and on two (about 65 s each on a
# cold 2-core machine): the default suite keeps one case, the validation command all three
@pytest.mark.parametrize(
    "algo, mode",
    sampled([("ppo", "envs"), ("ppo", "seeds"), ("sac", "envs")], keep=(("ppo", "envs"),)),
)
def test_two_devices_give_the_single_device_result(tmp_path, algo, mode):
    one = run(tmp_path, 1, mode, algo)
    two = run(tmp_path, 2, mode, algo)
    assert int(one["devices"]) == 1 and int(two["devices"]) == 2
    assert int(two["state_devices"]) == 2  # the environments (or seeds) really are split
    for name in ("episode_return", "value_loss", "kernel"):
        np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)
