"""The environments; importing this package registers them."""

from jaxgrid.envs import (
    arbitrage,
    dcmg,
    ders,
    dso,
    evfleet,
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
    "dcmg",
    "ders",
    "dso",
    "evfleet",
    "gardeners",
    "gencos",
    "opf",
    "smartgrid",
    "tso",
    "voltage",
    "voltage3",
]
