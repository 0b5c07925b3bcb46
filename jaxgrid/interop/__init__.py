"""Adapters to other RL ecosystems: Gymnasium, PettingZoo and the JaxMARL dict API.

``JaxMARLEnv`` stays pure JAX. ``GymnasiumEnv`` and ``PettingZooEnv`` step a jitted
environment from Python (NumPy in, NumPy out) and need the ``gym`` extra
(``pip install jaxgrid[gym]``); they are imported on first use.
"""

from jaxgrid.interop.jaxmarl import JaxMARLEnv

_LAZY = {
    "GymnasiumEnv": "jaxgrid.interop.gymnasium_env",
    "PettingZooEnv": "jaxgrid.interop.pettingzoo_env",
    "aec_env": "jaxgrid.interop.pettingzoo_env",
}

__all__ = ["GymnasiumEnv", "JaxMARLEnv", "PettingZooEnv", "aec_env"]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'jaxgrid.interop' has no attribute {name!r}")
