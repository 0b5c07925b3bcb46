"""Training: PPO, IPPO, SAC and ISAC in one compiled program, evaluation, checkpoints."""

from jaxgrid.train import ippo, isac, ppo, sac
from jaxgrid.train.gae import gae
from jaxgrid.train.ppo import PPOConfig, Runner, TrainFns
from jaxgrid.train.sac import SACConfig

__all__ = ["PPOConfig", "Runner", "SACConfig", "TrainFns", "gae", "ippo", "isac", "ppo", "sac"]
