"""The environments; importing this package registers them."""

from jaxgrid.envs import (
    arbitrage,
    ders,
    dso,
    gardeners,
    gencos,
    opf,
    smartgrid,
    tso,
    voltage,
    voltage3,
)

__all__ = [
    "arbitrage",
    "ders",
    "dso",
    "gardeners",
    "gencos",
    "opf",
    "smartgrid",
    "tso",
    "voltage",
    "voltage3",
]
