"""Training: PPO, IPPO, SAC, ISAC, APG and IAPG in one compiled program, evaluation,
checkpoints."""

from jaxgrid.train import apg, iapg, ippo, isac, ppo, sac
from jaxgrid.train.apg import APGConfig
from jaxgrid.train.gae import gae
from jaxgrid.train.ppo import PPOConfig, Runner, TrainFns
from jaxgrid.train.sac import SACConfig

__all__ = [
    "APGConfig",
    "PPOConfig",
    "Runner",
    "SACConfig",
    "TrainFns",
    "apg",
    "gae",
    "iapg",
    "ippo",
    "isac",
    "ppo",
    "sac",
]
