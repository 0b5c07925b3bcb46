"""Train a small sweep and save its results; run by test_sharding in a fresh process."""

import sys

import jax
import numpy as np

sys.path.insert(0, sys.argv[2])
from toy_envs import Tanks  # noqa: E402

from jaxgrid.train import ppo, sac  # noqa: E402
from jaxgrid.train.sweep import Sweep  # noqa: E402


def main(out: str, shard_envs: bool, algo: str) -> None:
    env = Tanks(num_agents=2)
    if algo == "sac":
        config = sac.SACConfig(
            total_steps=64 + 3 * 8 * 2,
            num_envs=8,
            num_steps=2,
            gradient_steps=2,
            batch_size=16,
            buffer_size=256,
            learning_starts=64,
            hidden=(16,),
            shard_envs=shard_envs,
        )
        sweep = Sweep(sac.make_train(config, env), seeds=2)
    else:
        config = ppo.PPOConfig(
            total_steps=3 * 8 * 8, num_envs=8, num_steps=8, hidden=(16,), shard_envs=shard_envs
        )
        sweep = Sweep(ppo.make_train(config, env), seeds=2)
    runners, metrics = sweep.train(jax.random.PRNGKey(5))
    level = runners.env_state.env_state.level  # (scenarios, seeds, envs, agents)
    net = runners.actor.params if algo == "sac" else runners.train_state.params["net"]
    np.savez(
        out,
        devices=len(jax.devices()),
        state_devices=len(level.sharding.device_set),
        episode_return=np.asarray(metrics["episode_return"]),
        value_loss=np.asarray(metrics["value_loss"]),
        kernel=np.asarray(net["params"]["type_0"]["Dense_0"]["kernel"]),
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[3] == "envs", sys.argv[4])
