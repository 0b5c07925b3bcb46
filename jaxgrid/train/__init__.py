"""Training: PPO and IPPO in one compiled program, evaluation, checkpoints."""

from jaxgrid.train import ippo, ppo
from jaxgrid.train.gae import gae
from jaxgrid.train.ppo import PPOConfig, Runner, TrainFns

__all__ = ["PPOConfig", "Runner", "TrainFns", "gae", "ippo", "ppo"]
