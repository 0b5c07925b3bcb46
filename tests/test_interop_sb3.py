"""Stable-Baselines3 PPO trains through the Gymnasium adapter (``interop`` extra)."""

import numpy as np
import pytest

import jaxgrid

sb3 = pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")

from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402

from jaxgrid.interop import GymnasiumEnv  # noqa: E402


def test_stable_baselines3_ppo_trains_on_arbitrage():
    torch.set_num_threads(1)
    env, params = jaxgrid.make("arbitrage-v0")
    gym_env = GymnasiumEnv(env, params)
    model = sb3.PPO("MlpPolicy", gym_env, n_steps=512, batch_size=128, n_epochs=2, seed=0)
    model.learn(total_timesteps=2048)
    assert model.num_timesteps >= 2048
    mean, std = evaluate_policy(model, Monitor(gym_env), n_eval_episodes=3)
    assert np.isfinite(mean) and np.isfinite(std)
    action, _ = model.predict(gym_env.reset(seed=0)[0], deterministic=True)
    assert gym_env.action_space.contains(action.astype(gym_env.action_space.dtype))
