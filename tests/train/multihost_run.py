"""Train a small PPO run and save its metrics; run by test_multihost in fresh processes:
``python multihost_run.py OUT TESTS_DIR PROCESS COUNT PORT`` (COUNT 1: one process)."""

import sys

import jax
import numpy as np

out, tests, process, count, port = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
if count > 1:
    from jaxgrid.train.multihost import initialize

    initialize(f"localhost:{port}", count, process)
sys.path.insert(0, tests)
from toy_envs import Tanks  # noqa: E402

from jaxgrid.train import ppo  # noqa: E402

config = ppo.PPOConfig(total_steps=3 * 8 * 8, num_envs=8, num_steps=8, hidden=(16,))
runner, metrics = jax.jit(ppo.make_train(config, Tanks(num_agents=2)).train)(jax.random.PRNGKey(5))
level = runner.env_state.env_state.level  # the environments, split over every device


def here(x):
    """This process's copy of a replicated array."""
    return np.asarray(x.addressable_shards[0].data)


if process == 0:
    np.savez(
        out,
        devices=len(jax.devices()),
        processes=jax.process_count(),
        state_devices=len(level.sharding.device_set),
        episode_return=here(metrics["episode_return"]),
        value_loss=here(metrics["value_loss"]),
        kernel=here(runner.train_state.params["net"]["params"]["type_0"]["Dense_0"]["kernel"]),
    )
